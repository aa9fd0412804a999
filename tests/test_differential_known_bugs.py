"""Minimal models of the bugs the differential tester found, one test each.

A bug still open is marked xfail(strict=True): it passes when the bug is fixed, which
strict xfail reports as a failure, so that the test loses its mark and the matching entry
of tests/differential/known_bugs.py (which keeps generated models away from the bug) is
removed. The tests without a mark are the bugs fixed since: they stay, as regressions.
"""

import warnings

import numpy as np
import pytest

import scg

from tests.differential.known_bugs import KNOWN_BUGS

THETA = np.array([0.3])


def _reason(name):
    bug = next(b for b in KNOWN_BUGS if b.name == name)
    return f"{bug.name}: {bug.description}"


def _jit_equals_eager(model, n, seed, calls):
    """scg.jit of value_and_grad against eager calls, from the same seed: the value and the
    gradient bit for bit on every call; the jitted function, for its stats."""
    eager = scg.value_and_grad(scg.expectation(model, n=n, seed=seed))
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=n, seed=seed)))
    for _ in range(calls):
        (v1, g1), (v2, g2) = eager(THETA), jitted(THETA)
        assert v1 == v2 and np.array_equal(g1, g2), (v1, v2, g1, g2)
    return jitted


def test_explain_of_an_antithetic_score_site_without_baseline():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0), estimator=scg.Score(antithetic=True))
        scg.cost("c", x ** 2)

    E = scg.expectation(model, n=100, seed=0)
    scg.grad(E)(THETA)
    assert "antithetic" in E.last_trace.explain()


def test_jit_of_a_traced_table_indexed_by_a_draw():
    def model(theta):
        k = scg.sample("k", scg.Categorical(logits=np.array([0.2, -0.1, 0.0])))
        scg.cost("c", (theta[0] * np.array([1.0, -0.5, 2.0]))[k])

    E1 = scg.expectation(model, n=8, seed=0)
    E2 = scg.expectation(model, n=8, seed=0)
    eager, jitted = scg.grad(E1), scg.jit(scg.grad(E2))
    for _ in range(4):
        np.testing.assert_array_equal(jitted(THETA), eager(THETA))
    assert jitted.stats["replays"] >= 1


def test_jit_replays_gumbel_softmax_with_probs():
    def model(theta):
        x = scg.sample("x", scg.Bernoulli(probs=scg.sigmoid(theta[0])),
                       estimator=scg.GumbelSoftmax(temperature=0.5))
        scg.cost("c", x ** 2)

    jitted = scg.jit(scg.grad(scg.expectation(model, n=64, seed=0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        for _ in range(5):
            jitted(THETA)
    assert jitted.stats["replays"] >= 1, jitted.explain()


def test_rebar_learning_beside_a_disarm_site():
    def model(theta):
        y = scg.sample("y", scg.Bernoulli(logits=theta[0]), estimator=scg.DisARM())
        scg.sample("x", scg.Bernoulli(logits=theta[0]), estimator=scg.REBAR())
        scg.cost("c", y)

    # the REBAR site has no cost downstream: the gradient is DisARM's alone (as with
    # learn=False), or scg.EstimatorError says the combination is not supported
    try:
        g = scg.grad(scg.expectation(model, n=64, seed=0))(THETA)
    except scg.EstimatorError:
        return
    want = scg.grad(scg.expectation(
        lambda th: scg.cost("c", scg.sample("y", scg.Bernoulli(logits=th[0]),
                                            estimator=scg.DisARM())), n=64, seed=0))(THETA)
    assert np.all(np.isfinite(g)) and g.shape == want.shape


def test_jit_replays_a_measure_valued_site_upstream_of_another_site():
    def model(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta[0]), estimator=scg.MeasureValued())
        y = scg.sample("y", scg.Normal(theta[0] + 0.5 * x, 1.0))
        scg.cost("c", x + y)

    jitted = _jit_equals_eager(model, n=64, seed=0, calls=6)
    assert jitted.stats["replays"] >= 1, jitted.explain()


def test_jit_of_a_pathwise_gamma_site_is_bit_for_bit():
    def model(theta):
        x = scg.sample("x", scg.Gamma(2.0, np.exp(theta[0])), estimator="pathwise")
        scg.cost("c", x ** 2)

    for seed in range(4):
        _jit_equals_eager(model, n=64, seed=seed, calls=6)


def test_jit_replays_unordered_set_with_probs():
    def model(theta):
        probs = scg.softmax(theta[0] * np.array([0.0, 1.0, -0.5]), axis=-1)
        k = scg.sample("k", scg.Categorical(probs=probs), estimator=scg.UnorderedSet(2))
        scg.cost("c", 1.0 * k)

    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=64, seed=0)))
    for _ in range(6):
        jitted(THETA)
    assert jitted.stats["replays"] >= 1, jitted.explain()


def test_jit_of_rebar_learning_in_a_plate_is_bit_for_bit():
    def model(theta):
        with scg.plate("p", 2):
            x = scg.sample("x", scg.Bernoulli(logits=theta[0] + np.array([0.2, -0.3])),
                           estimator=scg.REBAR(lr=0.05))
            scg.cost("c", x + theta[0])

    for seed in range(6):
        _jit_equals_eager(model, n=64, seed=seed, calls=8)


def test_log_prob_of_a_gumbel_softmax_relaxed_value():
    def model(theta):
        q = scg.Bernoulli(logits=theta[0])
        x = scg.sample("x", q, estimator=scg.GumbelSoftmax(temperature=0.5))
        scg.cost("c", q.log_prob(x))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        g = scg.grad(scg.expectation(model, n=64, seed=0))(THETA)
    assert np.all(np.isfinite(g))


def test_explain_agrees_with_a_bias_warning_of_rebar_across_a_jump():
    def model(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta[0]),
                       estimator=scg.REBAR(temperature=0.5, scale=1.0, learn=False))
        scg.cost("c", np.where(x > 0.5, theta[0], 0.5 * theta[0]))

    E = scg.expectation(model, n=100, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scg.grad(E)(THETA)
    assert any(issubclass(w.category, scg.BiasWarning) for w in caught)
    site = [line for line in E.last_trace.explain().splitlines()
            if line.strip().startswith(("unbiased", "biased"))]
    assert site and site[0].strip().startswith("biased"), site


def test_vimco_for_particles_in_an_outer_plate():
    def model(theta):
        with scg.plate("particles", 2, dim=-2):
            x = scg.sample("x", scg.Bernoulli(logits=theta[0] + np.array([[0.2], [-0.3]])),
                           estimator=scg.VIMCO())
            log_w = x + theta[0]
        scg.cost("bound", -scg.logmeanexp(log_w, plate="particles"))

    g = scg.grad(scg.expectation(model, n=64, seed=0))(THETA)
    assert np.all(np.isfinite(g))


def test_grpo_second_order_error_names_the_site():
    def model(theta):
        x = scg.sample("coin", scg.Bernoulli(logits=theta[0]),
                       estimator=scg.Score(scg.baselines.GRPO()))
        scg.cost("c", x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        with pytest.raises(scg.EstimatorError, match="'coin'"):
            scg.hessian(scg.expectation(model, n=64, seed=0))(THETA)


def test_log_prob_of_a_categorical_with_probs_is_no_jump():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0), estimator="pathwise")
        q = scg.Categorical(probs=scg.softmax(x * np.array([0.0, 1.0, -0.5]), axis=-1))
        scg.cost("c", q.log_prob(1))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scg.grad(scg.expectation(model, n=64, seed=0))(THETA)
    assert not [w for w in caught if issubclass(w.category, scg.BiasWarning)], \
        [str(w.message) for w in caught]


def test_jit_of_a_marginalized_one_hot_times_a_matrix():
    def model(theta):
        scg.sample("x", scg.Bernoulli(logits=1.5 * theta[0]))
        z = scg.sample("z", scg.OneHotCategorical(logits=np.array([0.0, 1.0, -0.5])),
                       estimator=scg.Marginalize())
        emission = theta[0] * np.array([[1.0, -0.5, 0.3], [-0.4, 0.8, 0.0], [0.2, 0.5, -1.0]])
        scg.sample("o", scg.Categorical(logits=z @ emission), obs=2)

    theta = np.array([-0.5])
    E1 = scg.expectation(model, n=64, seed=0)
    E2 = scg.expectation(model, n=64, seed=0)
    eager, jitted = scg.value_and_grad(E1), scg.jit(scg.value_and_grad(E2))
    for _ in range(4):
        want, got = eager(theta), jitted(theta)
        # (seen, before the recorded backward pass called the plain twins of the rules:
        # the value bit for bit, the gradient 0.09656294... 7 units in the last place off)
        assert want[0] == got[0] and np.array_equal(want[1], got[1]), (want, got)
    assert jitted.stats["replays"] >= 1


def test_jit_of_a_table_per_draw_indexed_by_a_draw_downstream_of_copies():
    """A table that differs per draw (theta lifted to the rows of RELAX's copies) indexed by
    a categorical draw: under scg.jit the draws (floats holding integers) became indices
    only outside recordings, and the recorded call raised IndexError."""
    def model(theta):
        x1 = scg.sample("x1", scg.OneHotCategorical(logits=theta[0] * np.array([0.0, 1.0, -0.5])),
                        estimator=scg.RELAX(lr=0.05))
        k = scg.sample("k", scg.Categorical(logits=theta[0] * np.array([0.0, 1.0, -0.5])),
                       estimator=scg.Score("loo"))
        scg.cost("c", (theta[0] * np.array([1.0, -0.5, 2.0]))[k] ** 2)
        scg.cost("d", 0.5 * (x1 @ np.array([0.0, 1.0, -0.5])) ** 2)

    jitted = _jit_equals_eager(model, n=16, seed=3, calls=6)
    assert jitted.stats["replays"] >= 1, jitted.explain()


def test_jit_of_marginalized_categoricals_beside_rebar_learning_in_a_minibatch():
    # (a marginalized Categorical's own factor taken as its normalized log-probabilities,
    # transposed, rounded otherwise under scg.jit than eagerly from the fourth call: that
    # factor is log_prob at each value again. Then, with OpenBLAS's Prescott kernels, the
    # gradient from the second call on: REBAR's tuning after the first summed a cotangent
    # of another memory layout, the tape having copied a small constant in C order where
    # the recording kept the array as it was; the copy now keeps the layout)
    def model(theta):
        with scg.plate("p", 2, dim=-2, subsample_size=1) as idx:
            dp = np.array([0.2, -0.3])[idx][:, None]
            scg.sample("x1", scg.Bernoulli(logits=0.0 + theta[0] + dp), estimator="auto")
            z3 = scg.sample("z3", scg.Categorical(
                logits=(0.0 + theta[0] + dp)[..., None] * np.array([0.0, 1.0, -0.5]) +
                np.array([0.2, -0.1, 0.0])), estimator=scg.Marginalize())
            with scg.plate("q", 2):
                dq = np.array([0.4, -0.3])
                x2 = scg.sample("x2", scg.Bernoulli(logits=0.0 + theta[0] + dp + dq),
                                estimator=scg.REBAR(temperature=0.5, scale=1.0, lr=0.05))
                z4 = scg.sample("z4", scg.OneHotCategorical(
                    logits=(0.0 + theta[0] + dp + dq + 0.5 * x2 + 0.5 * (0.5 * z3))[..., None] *
                    np.array([0.0, 1.0, -0.5]) + np.array([0.2, -0.1, 0.0])),
                    estimator=scg.Marginalize())
                scg.sample("z5", scg.Categorical(
                    logits=(0.0 + theta[0] + dp + dq + 0.5 * (0.5 * z3) + 0.5 * (z4 @ np.array(
                        [0.0, 1.0, -0.5])))[..., None] * np.array([0.0, 1.0, -0.5, 0.7]) +
                    np.array([0.2, -0.1, 0.0, 0.3])), estimator=scg.Marginalize())
                scg.sample("o6", scg.Normal(0.0 + theta[0] + dp + dq + 0.5 * (z4 @ np.array(
                    [0.0, 1.0, -0.5])), 1.0), obs=0.4 + dp + dq)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _jit_equals_eager(model, n=64, seed=2, calls=5)
