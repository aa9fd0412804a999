"""The contract, every estimator and baseline replays; so do tables indexed by discrete
draws (`params[z]`, `scg.take`) and every family's pathwise derivative (Beta, Gamma and
Dirichlet included). (tests/estimators/test_every_estimator.py checks every entry of the
registry against eager calls.)

Score-function estimators with moving-average and leave-one-out baselines, enumeration,
DisARM, measure-valued derivatives, Gumbel-softmax, antithetic draws and one-hot and
binomial families: the jitted gradients equal the eager ones, the baselines' state and the
generators' positions after the calls are the eager ones (also when a call raises or
when a recording cannot be kept), and non-finite costs or draws on the edge of the
support raise as they do eagerly.
"""

import numpy as np
import pytest

import scg

from .compare import (RTOL, agree_values as agree, assert_same, compare_loop,
                      lockstep_calls as lockstep, pair, same_values as same)
from .models import bernoulli_loop, bernoulli_normal_model, bernoulli_plate, categorical_model, normal_model


def make_moving_average_model(inline):
    shared = scg.Score(scg.baselines.MovingAverage(0.9))

    def model(mu):
        est = scg.Score(scg.baselines.MovingAverage(0.9)) if inline else shared
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator=est)
        return (x - 2.0) ** 2 + 5.0  # (an offset: the baseline has work to do)
    return model


@pytest.mark.parametrize("inline", [False, True], ids=["estimator-built-once", "inline"])
def test_moving_average_baseline_state_evolves_like_eager(inline):
    model = make_moving_average_model(inline)
    E, Ej = pair(model, n=4, seed=5)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for k in range(40):
        mu = np.array(0.05 * k)
        assert_same(scg.value_and_grad(E)(mu), step(mu))
        # the baseline's state (kept between calls) is updated identically, replay or not
        assert set(Ej.states.baselines()) == set(E.states.baselines()) == {"x"}
        se, sj = E.states["x"].baseline, Ej.states["x"].baseline
        assert sj["count"] == se["count"] == k + 1
        np.testing.assert_allclose(sj["avg"], se["avg"], rtol=RTOL)
    assert step.stats["replays"] > 0


@pytest.mark.parametrize("model", [bernoulli_loop, bernoulli_plate], ids=["loop", "plate"])
def test_ten_bernoulli_sites_leave_one_out_matches_eager(model):
    rng = np.random.default_rng(0)
    E, Ej = pair(model, n=8, seed=1)
    step = scg.jit(lambda logits: scg.value_and_grad(Ej)(logits))
    compare_loop(lambda logits: scg.value_and_grad(E)(logits), step,
                 [(rng.normal(size=10),) for _ in range(8)])
    assert step.stats["replays"] > 0


def moving_average_model(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0),
                   estimator=scg.Score(scg.baselines.MovingAverage(0.9)))
    return (x - 2.0) ** 2 + 5.0


def test_immediate_effects_then_failed_recording_update_baseline_twice():
    def make(E):
        def step(mu):
            g1 = scg.grad(E)(mu)
            g2 = scg.grad(E)(mu)
            return np.sort(np.stack([g1, g2]))  # no rule for np.sort: the recording fails
        return step
    E, Ej = pair(moving_average_model)
    eager, jitted = make(E), scg.jit(make(Ej))
    for _ in range(3):
        assert same(eager(np.array(0.3)), jitted(np.array(0.3)))
    assert Ej.states["x"].baseline["count"] == E.states["x"].baseline["count"]


def test_error_in_replay_skips_baseline_update():
    table = np.array([1.0, 2.0, 3.0])

    def make(E):
        def step(mu, k):
            v, g = scg.value_and_grad(E)(mu)
            return g + scg.take(table, k, axis=0)
        return step
    E, Ej = pair(moving_average_model)
    eager, jitted = make(E), scg.jit(make(Ej))
    mu = np.array(0.3)
    for k in [[0]] * 4 + [[7]] + [[0]] * 3:  # [7]: IndexError in both
        k = np.array(k)
        assert agree(eager, jitted, [(mu, k)]) == []
    assert jitted.stats["replays"] > 0
    assert Ej.states["x"].baseline["count"] == E.states["x"].baseline["count"]


def test_jitted_expectation_value_updates_the_baseline():
    E, Ej = pair(moving_average_model)
    jE = scg.jit(Ej)
    mu = np.array(0.3)
    for _ in range(4):
        np.testing.assert_array_equal(jE(mu), E(mu))  # (the values agree)
    assert Ej.states.baselines() == E.states.baselines()
    assert same(scg.grad(E)(mu), scg.grad(Ej)(mu))


ESTIMATOR_CASES = {
    "enumerate": (bernoulli_normal_model, {"a": scg.Enumerate()}),
    "disarm": (bernoulli_normal_model, {"a": scg.DisARM()}),
    "measure-valued": (bernoulli_normal_model, {"a": scg.MeasureValued()}),
    "gumbel-soft": (bernoulli_normal_model, {"a": scg.GumbelSoftmax(0.5)}),
    "gumbel-hard": (bernoulli_normal_model, {"a": scg.GumbelSoftmax(0.5, hard=True)}),
    "score-moving-average": (bernoulli_normal_model,
                             {"a": scg.Score(scg.baselines.MovingAverage(0.9))}),
    "antithetic-pathwise": (normal_model, scg.Pathwise(antithetic=True)),
    "antithetic-score": (normal_model, scg.Score(antithetic=True)),
    "categorical-enumerate": (categorical_model, scg.Enumerate()),
    "categorical-measure-valued": (categorical_model, scg.MeasureValued()),
}


@pytest.mark.parametrize("case", list(ESTIMATOR_CASES))
def test_estimators_bit_exact_with_generator_and_baseline_state(case):
    model, estimators = ESTIMATOR_CASES[case]
    E, Ej = pair(model, n=4, seed=3, estimators=estimators)
    step = scg.jit(lambda t: scg.value_and_grad(Ej)(t))
    args = [np.array(0.1 * k) for k in range(6)] if model is not categorical_model else \
        [np.array([0.1 * k, 0.0, -0.1]) for k in range(6)]
    for a in args:
        assert same(scg.value_and_grad(E)(a), step(a))
    assert E.rng.bit_generator.state == Ej.rng.bit_generator.state
    assert repr(E.states.baselines()) == repr(Ej.states.baselines())


@pytest.mark.parametrize("n,plate", [(2, None), (2, 3), (3, 3), (10, None)])
def test_leave_one_out_loop_agrees(n, plate):
    def model(theta):
        if plate:
            with scg.plate("p", plate):
                b = scg.sample("b", scg.Bernoulli(logits=theta),
                               estimator=scg.Score(baseline="loo"))
            return (b - 0.3) ** 2 * np.arange(1.0, 4.0)
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline="loo"))
        return np.sum((b - 0.3) ** 2 * np.arange(1.0, 4.0))

    theta = np.array([0.2, -0.5, 1.0])
    eager = scg.grad(scg.expectation(model, n=n, seed=2))
    jitted = scg.jit(scg.grad(scg.expectation(model, n=n, seed=2)))
    assert lockstep(eager, jitted, [(theta,)] * 5) == []
    assert jitted.stats["replays"] >= 1


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("n", [2, 4])
def test_leave_one_out_with_non_finite_costs_raises_as_eager(bad, n):
    def model(theta, shift):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline="loo"))
        return np.sum((b - 0.3) ** 2 * shift)

    theta, shift = np.array([0.2, -0.5, 1.0]), np.ones(3)
    broken = shift.copy()
    broken[1] = bad
    eager = scg.grad(scg.expectation(model, n=n, seed=2))
    jitted = scg.jit(scg.grad(scg.expectation(model, n=n, seed=2)))
    calls = [(theta, shift)] * 4 + [(theta, broken), (theta, shift)]
    assert lockstep(eager, jitted, calls) == []


def test_draws_on_the_edge_of_the_support_raise_as_eager():
    """Beta(0.01, 0.01) draws round to exactly 0 and 1: with the support test skipped for
    own draws, the formulas still give a non-finite log-probability and the site's error,
    eagerly and in a replay (which then runs afresh)."""
    def model(a):
        x = scg.sample("x", scg.Beta(a, a), estimator=scg.Score(baseline="loo"))
        return np.sum(x ** 2)

    eager = scg.grad(scg.expectation(model, n=8, seed=0))
    jitted = scg.jit(scg.grad(scg.expectation(model, n=8, seed=0)))
    calls = [(np.array(0.5),)] * 4 + [(np.array(0.01),)] + [(np.array(0.5),)] * 2
    assert lockstep(eager, jitted, calls) == []
    with pytest.raises(FloatingPointError):
        eager(np.array(0.01))


# ---------------------------------------------------------------- tables and concentrations
def _grad_pair(model, n=8, seed=3):
    """An expectation's gradient run eagerly and the same one (same seed) under scg.jit."""
    eager = scg.expectation(model, n=n, seed=seed)
    jitted = scg.expectation(model, n=n, seed=seed)
    return (lambda p: scg.grad(eager)(p)), scg.jit(lambda p: scg.grad(jitted)(p))


def _lockstep(model, params):
    eager, step = _grad_pair(model)
    for p in params:
        np.testing.assert_allclose(step(p), eager(p), rtol=1e-12, atol=1e-15)
    return step


def _table_by_index(p):
    z = scg.sample("z", scg.Categorical(logits=np.zeros(3)))
    return (p[z] - 1.0) ** 2


def _table_by_take(p):
    z = scg.sample("z", scg.Categorical(logits=np.array([0.0, 0.5, -0.5])))
    return (scg.take(p, z, axis=0) - 1.0) ** 2


def _mixture_means(means):
    with scg.plate("data", 4):
        z = scg.sample("z", scg.Categorical(logits=np.zeros(2)))
        scg.cost("fit", (means[z] - np.array([0.0, 1.0, 2.0, 3.0])) ** 2)


@pytest.mark.parametrize("model, start", [
    (_table_by_index, np.array([0.1, 0.2, 0.3])), (_table_by_take, np.array([0.1, 0.2, 0.3])),
    (_mixture_means, np.array([0.5, 1.5]))], ids=["params[z]", "scg.take", "mixture means"])
def test_a_learned_table_indexed_by_a_discrete_draw_replays(model, start):
    step = _lockstep(model, [start + 0.01 * k for k in range(6)])
    assert step.stats["replays"] >= 3, step.explain()


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
                                          (_dirichlet, np.array([0.2, 0.1]))],
                         ids=["Beta", "Gamma", "Dirichlet"])
def test_learned_concentrations_replay(model, start):
    # (the parameter moves on every call, as in training: the check that the draws are
    # not too rare is a condition the replays check, not a value they must see again)
    step = _lockstep(model, [start + 0.01 * k for k in range(8)])
    assert step.stats["replays"] >= 5, step.explain()


def test_take_of_a_plain_table_by_a_draw_replays():
    """The getting-started bandit: scg.take of a plain table by a categorical draw."""
    rewards = np.array([1.0, 4.0, 9.0])

    def model(logits):
        arm = scg.sample("arm", scg.Categorical(logits=logits))
        return -scg.take(rewards, arm)

    E, E2 = (scg.expectation(model, n=200, seed=4) for _ in range(2))
    step = scg.jit(scg.grad(E))
    logits = np.array([0.1, -0.2, 0.3])
    for _ in range(5):
        assert_same(step(logits), scg.grad(E2)(logits))
    assert step.stats["replays"] > 0, step.explain()
