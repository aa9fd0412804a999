"""Coins, counts and waiting times at probs 0 or 1: the exact derivative (measure-valued) or
EstimatorError, never the plausible 0 of a score function that never sees the outcome the
derivative needs."""

import numpy as np
import pytest

import scg


def _cost(x):
    return (x - 0.3) ** 2


# d/dp E[(x - 0.3)^2] at the boundary, from each family's closed form
EXACT = {
    ("bernoulli", 0.0): _cost(1) - _cost(0), ("bernoulli", 1.0): _cost(1) - _cost(0),
    # E = 10 p (1 - p) + (10 p - 0.3)^2, derivative 4 + 180 p
    ("binomial", 0.0): 4.0, ("binomial", 1.0): 184.0,
    # P(G = k) = (1 - p)^k p: at p = 1 the derivative is f(0) - f(1)
    ("geometric", 1.0): _cost(0) - _cost(1),
}


def _dist(family, p):
    if family == "bernoulli":
        return scg.Bernoulli(probs=p)
    if family == "binomial":
        return scg.Binomial(10, probs=p)
    return scg.Geometric(p)


def _model(family, estimator):
    def model(p):
        return _cost(scg.sample("x", _dist(family, p), estimator=estimator))
    return model


@pytest.mark.parametrize("family, p", list(EXACT))
def test_measure_valued_is_exact_at_the_boundary(family, p):
    g = scg.grad(scg.expectation(_model(family, scg.MeasureValued()), n=2_000, seed=0))(p)
    assert g == pytest.approx(EXACT[family, p], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("family, p", list(EXACT))
@pytest.mark.parametrize("estimator", ["auto", "score", "loo"])
def test_the_score_function_raises_at_the_boundary(family, p, estimator):
    # (Binomial and Geometric gave 0 where the derivative is 184 or -0.4)
    est = scg.Score("loo") if estimator == "loo" else estimator
    with pytest.raises(scg.EstimatorError, match="site 'x'.*scg.MeasureValued()"):
        scg.grad(scg.expectation(_model(family, est), n=100, seed=0))(p)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_enumerating_a_count_at_the_boundary_raises_naming_the_fix(p):
    with pytest.raises(scg.EstimatorError, match="site 'x'.*every value of the count.*"
                                                 "MeasureValued"):
        scg.grad(scg.expectation(_model("binomial", scg.Enumerate()), n=2, seed=0))(p)


def _expectation(family, p):
    if family == "binomial":
        return 10 * p * (1 - p) + (10 * p - 0.3) ** 2
    mean = (1 - p) / p   # failures before the first success
    return (1 - p) / p ** 2 + (mean - 0.3) ** 2


@pytest.mark.parametrize("family", ["binomial", "geometric"])
@pytest.mark.parametrize("label", ["score_loo", "measure_valued"])
def test_inside_the_boundary_the_estimators_are_unbiased(family, label):
    p, h = 0.35, 1e-6
    exact = (_expectation(family, p + h) - _expectation(family, p - h)) / (2 * h)
    est = scg.Score("loo") if label == "score_loo" else scg.MeasureValued()
    gs = scg.grad_samples(scg.expectation(_model(family, est), n=100_000, seed=1))(p)
    assert abs(gs.mean - exact) < 5 * gs.stderr
