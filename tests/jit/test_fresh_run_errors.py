"""scg.jit: errors raised in a jitted call are the eager errors, and leave the eager state.

A user's exception, an invalid distribution parameter (also one that breaks its
constraint only in a replay), a non-finite gradient, an out-of-bounds index in code whose
value is unused, np.errstate set inside the function: the jitted call raises what the
eager call raises, side effects of a recording that cannot be kept happen as often as
eagerly, and later calls agree with eager ones.
"""

import warnings

import numpy as np
import pytest

import scg

from .compare import assert_same, check_values as check, pair, same_values as same


def test_user_error_is_raised_under_jit():
    def f(x):
        if np.sum(x) < 0:
            raise ValueError("the total is negative")
        return np.sqrt(x)
    jf = scg.jit(f)
    with pytest.raises(ValueError, match="the total is negative"):
        jf(np.array([-1.0, -2.0]))  # (on the first call)
    assert "raised ValueError" in jf.explain()
    x = np.array([1.0, 4.0])
    for _ in range(4):
        assert_same(f(x), jf(x))
    with pytest.raises(ValueError, match="the total is negative"):
        jf(np.array([-3.0, 1.0]))  # (after replays were possible)
    assert_same(f(x), jf(x))

    g = scg.jit(f)
    for _ in range(4):
        assert_same(f(x), g(x))
    assert g.stats["replays"] > 0
    with pytest.raises(ValueError, match="the total is negative"):
        g(np.array([-3.0, 1.0]))  # (a guard misses in a replay; the record raises)
    assert_same(f(x), g(x))


def test_invalid_parameter_error_is_the_eager_error():
    def model(mu, sigma):
        x = scg.sample("x", scg.Normal(mu, sigma))
        return (x - 1.0) ** 2
    E, Ej = pair(model, n=4, seed=31)
    step = scg.jit(lambda mu, sigma: scg.grad(Ej)(mu, sigma))
    for _ in range(4):
        assert_same(scg.grad(E)(0.2, 1.0), step(0.2, 1.0))
    assert step.stats["replays"] > 0
    with pytest.raises(ValueError) as eager_error:
        scg.grad(E)(0.2, -1.0)
    with pytest.raises(ValueError) as jit_error:
        step(0.2, -1.0)
    assert str(jit_error.value) == str(eager_error.value)
    assert "scale" in str(jit_error.value)


def test_model_error_then_later_calls_match_eager():
    """The recorded call raises: the eager run that raises the error again draws what an
    eager call would have drawn, and later calls stay in step with eager ones."""
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator="pathwise")
        if np.sum(mu) > 10:
            raise ValueError("mu too large")
        return x ** 2
    E, Ej = pair(model, n=4, seed=0)
    jE = scg.jit(Ej)
    with pytest.raises(ValueError, match="mu too large"):
        E(np.array(20.0))
    with pytest.raises(ValueError, match="mu too large"):
        jE(np.array(20.0))
    for m in [0.5, 0.6, 0.7]:
        assert_same(E(np.array(m)), jE(np.array(m)))


@pytest.fixture
def quiet_numpy():
    """0 * inf in a gradient rule, without numpy's RuntimeWarning (an error in pytest's
    configuration): the error under test is scg's FloatingPointError."""
    with np.errstate(divide="ignore", invalid="ignore"):
        yield


def nan_gradient_model(estimator):
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
        # the value is finite everywhere; the gradient is 0 * inf = nan at mu = 0
        return x ** 2 + 0.0 * np.sqrt(np.abs(mu))
    return model


def test_error_after_a_baseline_update_leaves_the_eager_state(quiet_numpy):
    model = nan_gradient_model(scg.Score(scg.baselines.MovingAverage(0.9)))
    E, Ej = pair(model, n=4, seed=0)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    with pytest.raises(FloatingPointError) as eager_error:
        scg.value_and_grad(E)(np.array(0.0))
    with pytest.raises(FloatingPointError) as jit_error:
        step(np.array(0.0))
    assert str(jit_error.value) == str(eager_error.value)
    assert Ej.states["x"].baseline["count"] == E.states["x"].baseline["count"]
    for _ in range(4):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))


def test_an_error_in_a_replay_is_the_eager_error_and_later_calls_match(quiet_numpy):
    model = nan_gradient_model("pathwise")
    E, Ej = pair(model, n=4, seed=0)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for _ in range(4):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))
    assert step.stats["replays"] > 0
    with pytest.raises(FloatingPointError) as eager_error:
        scg.value_and_grad(E)(np.array(0.0))
    with pytest.raises(FloatingPointError) as jit_error:
        step(np.array(0.0))
    assert str(jit_error.value) == str(eager_error.value)
    for _ in range(3):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("family", ["logits", "scale"])
def test_a_parameter_that_breaks_its_constraint_in_a_replay_raises_the_eager_error(bad, family):
    """Constraints are checked on every replay (finiteness with the other finiteness
    checks, in one pass); a replay that fails one runs afresh and raises the error."""
    def model(theta):
        if family == "logits":
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline="loo"))
        else:
            b = scg.sample("b", scg.Normal(0.0, theta))
        return np.sum(b ** 2)

    grad = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
    eager = scg.grad(scg.expectation(model, n=4, seed=0))  # (in step with it)
    theta = np.array([0.5, 1.0, 2.0])
    for _ in range(4):
        np.testing.assert_array_equal(grad(theta), eager(theta))
    assert grad.stats["replays"] >= 1
    broken = theta.copy()
    broken[1] = bad if family == "logits" else -bad
    for fn in (grad, eager):
        with pytest.raises(ValueError, match="parameter '(logits|scale)' must be"):
            fn(broken)
    np.testing.assert_array_equal(grad(theta), eager(theta))


def test_failed_recording_repeats_side_effects():
    calls = []

    def f(x, rng):
        calls.append(1)
        return np.sort(x + rng.normal(size=2))  # np.sort: no rule, the recording fails
    r_eager, r_jit = np.random.default_rng(0), np.random.default_rng(0)
    jf = scg.jit(f)
    x = np.zeros(2)
    want = [f(x, r_eager) for _ in range(3)]
    n_eager = len(calls)
    got = [jf(x, r_jit) for _ in range(3)]
    assert len(calls) - n_eager == n_eager
    assert same(want, got)


def test_dead_code_that_raises_is_dropped():
    table = np.array([1.0, 2.0, 3.0])

    def f(x, k):
        scg.take(table, k, axis=0)  # (a bounds check: its value is not used)
        return x * 2.0
    check(f, [(np.ones(2), np.array([0]))] * 3 + [(np.ones(2), np.array([7]))])


def test_errstate_raise_inside_function():
    def f(x):
        with np.errstate(divide="raise"):
            return np.log(x)
    jf = scg.jit(f)
    for _ in range(3):
        jf(np.array([1.0, 2.0]))
    with pytest.raises(FloatingPointError):
        f(np.array([0.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(FloatingPointError):
            jf(np.array([0.0, 1.0]))


def test_errstate_ignore_inside_function():
    def f(x):
        with np.errstate(divide="ignore"):
            return np.log(x)
    jf = scg.jit(f)
    for _ in range(3):
        jf(np.array([1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert same(f(np.array([0.0, 1.0])), jf(np.array([0.0, 1.0])))


def test_grad_samples_under_jit_replays_the_eager_draws():
    # (its result, a GradSamples, is a dataclass of its fields: scg.jit replays it. It
    # once ran afresh, and before that recording it raised AttributeError on the recorded
    # gradients' `.flags`)
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        z = scg.sample("z", scg.Bernoulli(logits=theta[1]), estimator=scg.Score("loo"))
        return (x - 1.0) ** 2 * theta[1] + z * theta[0]

    theta = np.array([0.3, 2.0])
    jitted = scg.jit(scg.grad_samples(scg.expectation(model, n=8, seed=0)))
    eager = scg.grad_samples(scg.expectation(model, n=8, seed=0))
    for _ in range(5):
        got, want = jitted(theta), eager(theta)
        assert type(got) is type(want)
        np.testing.assert_array_equal(got.samples, want.samples)
        np.testing.assert_array_equal(got.mean, want.mean)
        np.testing.assert_array_equal(got.stderr, want.stderr)
        assert got.n == want.n == 8 and got.coupled == want.coupled == ("z",)
        got.samples[0, 0] = 5.0  # (writable, as eager's)
    assert jitted.stats["replays"] >= 3, jitted.explain()
