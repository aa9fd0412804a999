"""What the contract of scg.jit (docs/performance.md, "The contract") promises, one test
per way a replay could give another number than a fresh run: outside state the function
reads, identities it compares, tables indexed by discrete draws, the pathwise families
whose derivative checks their concentrations, and what a replay leaves in `E.last_trace`.
"""

import numpy as np
import pytest

import scg
from scg.core.tape import strip


def _pair(model, n=8, seed=3):
    """An expectation run eagerly and the same one (same seed) under scg.jit."""
    eager = scg.expectation(model, n=n, seed=seed)
    jitted = scg.expectation(model, n=n, seed=seed)
    return (lambda p: scg.grad(eager)(p)), scg.jit(lambda p: scg.grad(jitted)(p)), jitted


def _lockstep(model, params, n=8):
    eager, step, E = _pair(model, n)
    for p in params:
        want, got = eager(p), step(p)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    return step, E


# ---------------------------------------------------------------- discrete indices
def _table_by_index(p):
    z = scg.sample("z", scg.Categorical(logits=np.zeros(3)))
    return (p[z] - 1.0) ** 2


def _table_by_take(p):
    z = scg.sample("z", scg.Categorical(logits=np.array([0.0, 0.5, -0.5])))
    return (scg.take(p, z, axis=0) - 1.0) ** 2


@pytest.mark.parametrize("model", [_table_by_index, _table_by_take])
def test_a_learned_table_indexed_by_a_discrete_draw_replays(model):
    params = [np.array([0.1, 0.2, 0.3]) + 0.01 * k for k in range(6)]
    step, _ = _lockstep(model, params)
    assert step.stats["replays"] >= 3, step.explain()


def _mixture_means(means):
    with scg.plate("data", 4):
        z = scg.sample("z", scg.Categorical(logits=np.zeros(2)))
        scg.cost("fit", (means[z] - np.array([0.0, 1.0, 2.0, 3.0])) ** 2)


def test_mixture_means_under_jit():
    params = [np.array([0.5, 1.5]) + 0.01 * k for k in range(6)]
    step, _ = _lockstep(_mixture_means, params)
    assert step.stats["replays"] >= 3, step.explain()


# ---------------------------------------------------------------- concentrations
def _beta(a):
    x = scg.sample("x", scg.Beta(np.exp(a), 2.0), estimator="pathwise")
    return (x - 0.3) ** 2


def _gamma(a):
    x = scg.sample("x", scg.Gamma(np.exp(a), 1.0), estimator="pathwise")
    return (x - 0.3) ** 2


def _dirichlet(a):
    x = scg.sample("x", scg.Dirichlet(np.exp(a)), estimator="pathwise")
    return (x[0] - 0.3) ** 2


@pytest.mark.parametrize("model, start", [(_beta, np.array([0.2])), (_gamma, np.array([0.2])),
                                          (_dirichlet, np.array([0.2, 0.1]))])
def test_learned_concentrations_replay(model, start):
    # (the parameter moves on every call, as in training: the check that the draws are
    # not too rare is a condition the replays check, not a value they must see again)
    params = [start + 0.01 * k for k in range(8)]
    step, _ = _lockstep(model, params)
    assert step.stats["replays"] >= 5, step.explain()


def test_rare_draws_still_warn_under_jit():
    params = [np.array([0.2])] * 4 + [np.array([-5.0])]
    eager, step, _ = _pair(_gamma)
    for p in params[:-1]:
        step(p)
    with pytest.warns(scg.VarianceWarning, match="concentration"):
        step(params[-1])


# ---------------------------------------------------------------- E.last_trace
def _monitored(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0), estimator="score")
    scg.cost("fit", (x - 1.0) ** 2)


def test_last_trace_after_a_replay_holds_its_values():
    eager = scg.expectation(_monitored, n=8, seed=5)
    jitted = scg.expectation(_monitored, n=8, seed=5)
    step = scg.jit(lambda p: scg.grad(jitted)(p))
    for k in range(6):
        mu = np.array(0.1 * k)
        scg.grad(eager)(mu)
        step(mu)
        want, got = eager.last_trace, jitted.last_trace
        np.testing.assert_array_equal(got.sites["x"].value, want.sites["x"].value)
        np.testing.assert_allclose(got.costs["fit"], want.costs["fit"], rtol=1e-15)
        np.testing.assert_allclose(strip(got.sites["x"].log_prob()),
                                   strip(want.sites["x"].log_prob()), rtol=1e-15)
    assert step.stats["replays"] >= 3, step.explain()
