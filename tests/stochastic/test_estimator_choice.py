"""When each estimator is valid: "auto" avoids the classic pitfalls, forced choices warn."""

import warnings

import numpy as np
import pytest
from scipy import stats

import scg

MU = 0.3


def indicator_model(estimator):
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
        return (x > 1.0) * 1.0          # "rain above 1": a jump
    return model


def test_indicator_cost_auto_uses_the_score_function_and_is_unbiased():
    E = scg.expectation(indicator_model("auto"), n=200_000, seed=0)
    gs = scg.grad_samples(E)(MU)
    exact = stats.norm.pdf(1.0 - MU)    # d/dmu P(x > 1)
    assert abs(gs.mean - exact) < 5 * gs.stderr
    assert E.last_trace.sites["x"].kind == "score"
    assert "jump" in E.last_trace.sites["x"].reason


def test_forced_pathwise_across_a_jump_warns_and_is_zero():
    E = scg.expectation(indicator_model("pathwise"), n=1000, seed=0)
    with pytest.warns(scg.BiasWarning, match="jump"):
        g = scg.grad(E, allow_unused=True)(MU)
    assert g == 0.0


def test_round_inside_a_blackbox_is_estimated_by_the_score_function():
    simulate = scg.blackbox(lambda x: np.round(x))

    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return simulate(x)

    E = scg.expectation(model, n=200_000, seed=1)
    gs = scg.grad_samples(E)(MU)
    exact = sum(stats.norm.pdf(k + 0.5 - MU) for k in range(-10, 10))
    assert abs(gs.mean - exact) < 5 * gs.stderr
    assert E.last_trace.sites["x"].kind == "score"


def test_kinks_are_fine_for_the_pathwise_estimator():
    def model(mu):
        return np.abs(scg.sample("x", scg.Normal(mu, 1.0)))

    E = scg.expectation(model, n=200_000, seed=2)
    gs = scg.grad_samples(E)(MU)
    assert E.last_trace.sites["x"].kind == "pathwise"
    assert abs(gs.mean - (2 * stats.norm.cdf(MU) - 1)) < 5 * gs.stderr


@pytest.mark.parametrize("k", [3.0, 5.0])
def test_cos_kx_where_the_score_function_beats_the_pathwise_estimator(k):
    """f = cos(kx): F = cos(k mu) exp(-k^2/2). Pathwise variance ~ k^2/2, score ~ 1/2."""
    exact = -k * np.sin(k * MU) * np.exp(-k ** 2 / 2)
    out = {}
    for est in ("pathwise", "score"):
        def model(mu, est=est):
            return np.cos(k * scg.sample("x", scg.Normal(mu, 1.0), estimator=est))
        gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=3))(MU)
        assert abs(gs.mean - exact) < 5 * gs.stderr
        out[est] = gs.var
    # exact variances by Gauss-Hermite quadrature
    e, w = np.polynomial.hermite_e.hermegauss(120)
    w = w / w.sum()
    x = MU + e
    var_path = w @ (k * np.sin(k * x)) ** 2 - exact ** 2
    var_score = w @ (np.cos(k * x) * e) ** 2 - exact ** 2
    assert out["pathwise"] == pytest.approx(var_path, rel=0.05)
    assert out["score"] == pytest.approx(var_score, rel=0.05)
    assert out["score"] < out["pathwise"] / (0.8 * k ** 2)  # about 1/2 against k^2 / 2


def test_pathwise_on_a_discrete_site_raises_estimator_error():
    def model(p):
        return scg.sample("a", scg.Bernoulli(probs=p), estimator="pathwise")

    with pytest.raises(scg.EstimatorError, match="'a'.*no reparameterization path"):
        scg.expectation(model, n=10)(0.3)


def test_a_jump_into_a_later_distribution_makes_auto_choose_score():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        a = scg.sample("a", scg.Bernoulli(probs=np.where(x > 0, 0.8, 0.2)))
        return a

    E = scg.expectation(model, n=200_000, seed=4)
    gs = scg.grad_samples(E)(MU)
    exact = 0.6 * stats.norm.pdf(MU)    # d/dmu [0.2 + 0.6 P(x > 0)]
    assert E.last_trace.sites["x"].kind == "score"
    assert abs(gs.mean - exact) < 5 * gs.stderr


def test_a_discrete_site_between_keeps_the_upstream_site_pathwise():
    """x -> a (score) -> round(a): the jump after a does not touch x's path."""
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        a = scg.sample("a", scg.Bernoulli(probs=scg.sigmoid(x)))
        return np.round(a * 3.0)

    E = scg.expectation(model, n=50_000, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.BiasWarning)
        gs = scg.grad_samples(E)(MU)
    assert E.last_trace.sites["x"].kind == "pathwise"
    e, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    exact = 3.0 * w @ (stats.logistic.pdf(MU + e))
    assert abs(gs.mean - exact) < 5 * gs.stderr


def test_uniform_with_a_moving_support():
    """x ~ Uniform(0, theta), f = x: dF/dtheta = 1/2. The score misses the boundary term."""
    def model(theta, est):
        return scg.sample("x", scg.Uniform(0.0, theta), estimator=est)

    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=6))(1.0, "auto")
    assert abs(gs.mean - 0.5) < 5 * gs.stderr
    with pytest.warns(scg.BiasWarning, match="support.*moves"):
        g = scg.grad(scg.expectation(model, n=100_000, seed=6))(1.0, "score")
    assert g == pytest.approx(-0.5, abs=0.01)      # -1/theta times E[x]: biased


def test_exponential_score_variance_is_13_times_the_pathwise():
    """x ~ Exp(lambda), f = x: pathwise variance 1/lambda^4, score 13/lambda^4."""
    lam = 2.0
    out = {}
    for est in ("pathwise", "score"):
        def model(rate, est=est):
            return scg.sample("x", scg.Exponential(rate), estimator=est)
        gs = scg.grad_samples(scg.expectation(model, n=400_000, seed=7))(lam)
        assert abs(gs.mean - (-1 / lam ** 2)) < 5 * gs.stderr
        out[est] = gs.var
    assert out["pathwise"] == pytest.approx(1 / lam ** 4, rel=0.05)
    assert out["score"] == pytest.approx(13 / lam ** 4, rel=0.1)   # heavy tails: 10%
