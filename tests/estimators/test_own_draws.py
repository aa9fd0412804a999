"""The support test of log_prob is skipped for an estimator's own draws, and only there."""

import numpy as np
import pytest

import scg

THETA = np.array([-1.0, 0.3, 2.0])


class _Halves(scg.Score):
    """A misuse on purpose: values of another law (1/2, outside {0, 1}) scored as draws."""
    own_draws = False

    def draw(self, d):
        return np.full(np.shape(d.sample()), 0.5)


class _TrustedHalves(_Halves):
    own_draws = True


def _model(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
        return np.sum(b)
    return model


def test_values_of_another_law_still_meet_the_support_test():
    grad = scg.grad(scg.expectation(_model(_Halves()), n=4, seed=0))
    with pytest.raises(FloatingPointError, match="outside the support"):
        grad(THETA)


def test_own_draws_skip_it():
    # (the flag is the estimator's promise: given values outside the support, the formula's
    # value is used, which is why only the estimators that draw from the site's law set it)
    assert scg.Score.own_draws and scg.Pathwise.own_draws and scg.Enumerate.own_draws
    assert not scg.GumbelSoftmax.own_draws
    g = scg.grad(scg.expectation(_model(_TrustedHalves()), n=4, seed=0))(THETA)
    assert np.all(np.isfinite(g))


def test_replays_of_own_draws_check_no_support():
    grad = scg.jit(scg.grad(scg.expectation(_model(scg.Score(baseline="loo")), n=8, seed=1)))
    eager = scg.grad(scg.expectation(_model(scg.Score(baseline="loo")), n=8, seed=1))
    for _ in range(4):
        np.testing.assert_array_equal(grad(THETA), eager(THETA))
    assert grad.stats["replays"] >= 1
    assert "support" not in grad.explain()
