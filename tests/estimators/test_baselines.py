"""Baselines: leave-one-out and moving averages are unbiased; the batch mean is biased by
exactly (n - 1) / n."""

import re

import numpy as np
import pytest

import scg

THETA = 0.4
F1, F0 = 3.0, 1.0                       # f(1), f(0)


def coin_model(baseline):
    def model(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline))
        return np.where(a == 1, F1, F0) + 2.0
    return model


def exact_grad(theta=THETA):
    p = 1 / (1 + np.exp(-theta))
    return p * (1 - p) * (F1 - F0)


def test_leave_one_out_is_unbiased():
    gs = scg.grad_samples(scg.expectation(coin_model("loo"), n=100_000, seed=0))(THETA)
    assert abs(gs.mean - exact_grad()) < 5 * gs.stderr


def test_leave_one_out_reduces_variance():
    plain = scg.grad_samples(scg.expectation(coin_model(None), n=100_000, seed=0))(THETA)
    loo = scg.grad_samples(scg.expectation(coin_model("loo"), n=100_000, seed=0))(THETA)
    assert loo.var < plain.var / 3


@pytest.mark.parametrize("n", [2, 4, 16])
def test_batch_mean_is_biased_by_exactly_n_minus_1_over_n(n):
    """For the same draws, f_i - mean(f) = (n-1)/n (f_i - mean of the others)."""
    g_loo = scg.grad(scg.expectation(coin_model("loo"), n=n, seed=7))(THETA)
    with pytest.warns(scg.BiasWarning, match="n - 1"):
        g_mean = scg.grad(scg.expectation(coin_model("mean"), n=n, seed=7))(THETA)
    assert g_mean == pytest.approx((n - 1) / n * g_loo, rel=1e-12, abs=1e-15)


def test_moving_average_is_unbiased_at_n_1():
    """A moving average built inline in the model keeps its state inside the expectation."""
    def model(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta),
                       estimator=scg.Score(scg.baselines.MovingAverage(0.9)))
        return np.where(a == 1, F1, F0) + 10.0
    E = scg.expectation(model, n=1, seed=1)
    g = scg.grad(E)
    est = np.array([g(THETA) for _ in range(4000)])
    se = est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - exact_grad()) < 5 * se
    # the baseline learned the mean cost (about 12), so the estimates are no longer
    # dominated by the offset 10: compare with no baseline
    plain = scg.expectation(coin_model(None), n=1, seed=1)
    assert est[100:].var() < 0.2 * np.var([scg.grad(plain)(THETA) for _ in range(500)])
    state = E.states["a"].baseline
    assert state["avg"] / (1 - 0.9 ** state["count"]) == pytest.approx(
        12.0 + (F1 - F0) * (1 / (1 + np.exp(-THETA)) - 0.5), abs=0.5)


def test_moving_average_never_includes_the_current_draw():
    b = scg.baselines.MovingAverage(0.5)
    state = {}
    q = np.array([[4.0], [8.0]])
    assert b.value(q, state) == 0.0         # nothing seen yet
    b.update(q, state)
    assert np.allclose(b.value(np.array([[100.0]]), state), 6.0)


def test_custom_baseline_through_the_interface():
    class Half(scg.baselines.Baseline):
        def value(self, q, state):
            return 0.5

    g_custom = scg.grad(scg.expectation(coin_model(Half()), n=50, seed=3))(THETA)
    g_const = scg.grad(scg.expectation(coin_model(0.5), n=50, seed=3))(THETA)
    assert g_custom == pytest.approx(g_const)


def test_leave_one_out_needs_two_draws():
    with pytest.raises(scg.EstimatorError, match="n > 1"):
        scg.grad(scg.expectation(coin_model("loo"), n=1, seed=0))(THETA)


def test_auto_uses_leave_one_out_only_when_n_exceeds_1():
    def model(theta):
        return scg.sample("a", scg.Bernoulli(logits=theta))
    for n, expected in ((1, None), (8, scg.baselines.LeaveOneOut)):
        E = scg.expectation(model, n=n, seed=0)
        scg.grad(E)(THETA)
        b = E.last_trace.sites["a"].baseline
        assert (b is None) if expected is None else isinstance(b, expected)


def test_a_subclass_of_a_checked_baseline_is_checked_again():
    import warnings

    class OwnDraw(scg.baselines.LeaveOneOut):
        def advantage(self, q, state):
            return q - np.mean(q, axis=0, keepdims=True)

    def model(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(OwnDraw()))
        return a * 2.0

    with pytest.warns(scg.BiasWarning, match="uses each draw's own cost"):
        scg.grad(scg.expectation(model, n=8, seed=0))(0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scg.grad(scg.expectation(model, n=8, seed=0, estimators=scg.Score("loo")))(0.3)


class _UpdatedFirst(scg.baselines.Baseline):
    """The reference program's mistake: the baseline updated with the current cost before
    it is used."""
    stateful = True

    def value(self, q, state):
        state["b"] = 0.5 * state.get("b", 0.0) + 0.5 * float(np.mean(q))
        return state["b"]


def test_a_baseline_that_uses_its_own_draw_is_caught_at_n_1_and_explain_says_biased():
    def bandit(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(_UpdatedFirst()))
        return np.where(a == 1, 3.0, 1.0)
    E = scg.expectation(bandit, n=1, seed=0)
    with pytest.warns(scg.BiasWarning, match="uses each draw's own cost"):
        scg.grad(E)(0.3)
    scg.grad(E)(0.3)  # (checked once; the verdict stays)
    assert "biased;" in E.last_trace.explain()
    good = scg.expectation(bandit, n=1, seed=0,
                           estimators={"a": scg.Score(scg.baselines.MovingAverage(0.9))})
    scg.grad(good)(0.3)
    assert "unbiased;" in good.last_trace.explain()


def test_explain_of_a_trace_does_not_call_an_unchecked_baseline_unbiased():
    # scg.trace runs no gradient, so nothing has checked a user's baseline yet: explain()
    # says on what condition it is unbiased, not "unbiased" outright
    def bandit(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(_UpdatedFirst()))
        return np.where(a == 1, 3.0, 1.0)
    text = scg.trace(bandit, 0.3, n=1).explain()
    assert "unbiased;" not in text
    assert "unbiased if its baseline does not use each draw's own cost" in text

    def checked(theta):  # (scg's own baselines are known not to use their own draw)
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
        return np.where(a == 1, 3.0, 1.0)
    assert "unbiased;" in scg.trace(checked, 0.3, n=2).explain()


def test_grad_samples_names_the_sites_whose_baseline_couples_the_draws():
    def model(theta, baseline):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline))
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.Score(0.5))
        return a + 2 * b

    gs = scg.grad_samples(scg.expectation(model, n=50, seed=0))(0.1, "loo")
    assert gs.coupled == ("a",)
    gs = scg.grad_samples(scg.expectation(model, n=50, seed=0))(
        0.1, scg.baselines.MovingAverage())
    assert gs.coupled == ()


def test_the_stderr_of_leave_one_out_is_calibrated_for_large_n():
    """stderr = sqrt(var / n) is the leading term of the U-statistic's variance: the spread
    of independent estimates matches it to within a few percent at n = 2,000."""
    def model(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
        return (a - 0.2) ** 2 + 0.5 * a

    means, errors = [], []
    for seed in range(300):
        gs = scg.grad_samples(scg.expectation(model, n=2_000, seed=seed))(0.7)
        means.append(gs.mean)
        errors.append(gs.stderr)
    spread, stated = np.std(means, ddof=1), np.mean(errors)
    # (300 replicates: the spread's own relative error is about 1 / sqrt(600) = 4 %)
    assert abs(spread / stated - 1) < 0.15
@pytest.mark.parametrize("spec,error,text", [
    (np.nan, ValueError, r"baseline=nan: a constant baseline is a finite number"),
    (float("-inf"), ValueError, r"baseline=-inf: a constant baseline is a finite number"),
    ("median", ValueError, r"unknown baseline 'median'; a baseline is None, a finite number"),
    (object(), TypeError, r"\(object\) is not a baseline; a baseline is None"),
    ([1.0, 2.0], TypeError, r"\(list\) is not a baseline"),
    (True, TypeError, r"baseline=True is not a baseline"),
    (scg.baselines.LeaveOneOut, TypeError, r"is the class; pass an object of it: "
                                           r"baseline=LeaveOneOut\(\)"),
])
def test_a_bad_baseline_spec_is_refused_when_the_estimator_is_made(spec, error, text):
    with pytest.raises(error, match=text):
        scg.Score(spec)


def test_a_constant_baseline_object_is_finite():
    with pytest.raises(ValueError, match=r"Constant: the baseline is nan"):
        scg.baselines.Constant(np.nan)
    assert scg.Score(np.float32(2.0)).baseline.b == 2.0


class _Shaped(scg.baselines.Baseline):
    checked = True

    def __init__(self, shape):
        self.shape = shape

    def value(self, q, state):
        return np.zeros(self.shape)


class _ShapedAdvantage(_Shaped):
    checked = True

    def advantage(self, q, state):
        return np.zeros(self.shape)


def _plated(baseline):
    def model(theta):
        with scg.plate("p", 3):
            x = scg.sample("x", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline))
        return x
    return model


@pytest.mark.parametrize("cls", [_Shaped, _ShapedAdvantage])
def test_a_baseline_of_the_wrong_shape_names_the_baseline_the_site_and_the_shapes(cls):
    what = "value" if cls is _Shaped else "advantage"
    for bad in [(5,), (8,), (2, 3), (8, 3, 1)]:
        E = scg.expectation(_plated(cls(bad)), n=8, seed=0)
        with pytest.raises(scg.EstimatorError, match=(
                rf"site 'x': the baseline {cls.__name__}\(shape=.*\) gave an? {what} of shape "
                rf"{re.escape(str(bad))} for the costs q of shape \(8, 3\).*"
                rf"{cls.__name__}.{what}\(q, state\)")):
            scg.grad(E)(np.zeros(3))
    for good in [(), (3,), (1, 3), (8, 3), (8, 1)]:
        E = scg.expectation(_plated(cls(good)), n=8, seed=0)
        assert np.all(np.isfinite(scg.grad(E)(np.zeros(3))))
