"""scg.ARMS(k): k coin draws coupled by a Dirichlet copula. Unbiased against enumeration
(logits, probs, a plate, a user's own coin), its per-draw variance below that of
leave-one-out REINFORCE with n = k independent draws (computed exactly by enumeration)
at the same k evaluations, DisARM at k = 2, jit, and clear errors. Categorical sites:
test_carms.py."""

import itertools

import numpy as np
import pytest

import scg
from scg.distributions import constraints
from scg.distributions.base import Distribution, broadcast_shape

from .exact import numeric_grad, sig

W = np.array([1.0, -0.7, 0.4])
TH = np.array([-0.4, 0.3, 1.1])
STATES = np.array(list(itertools.product([0.0, 1.0], repeat=3)))


def cost(b):
    return (b @ W - 0.5) ** 2


def exact(th):
    p = sig(th)
    return np.prod(np.where(STATES == 1, p, 1 - p), axis=1) @ cost(STATES)


def model_for(estimator, probs=False):
    def model(th):
        law = scg.Bernoulli(probs=scg.sigmoid(th)) if probs else scg.Bernoulli(logits=th)
        b = scg.sample("b", law.to_event(1), estimator=estimator)
        return cost(b)
    return model


def loo_moments(th, k):
    """The mean and per-coordinate variance of leave-one-out REINFORCE (the gradient of
    scg.Score('loo') with n = k), by enumerating the 2^(3k) draws of k independent
    coin triples."""
    p = sig(th)
    draws = np.array(list(itertools.product(range(len(STATES)), repeat=k)))
    b = STATES[draws]  # (S, k, 3)
    weight = np.prod(np.where(b == 1, p, 1 - p), axis=(1, 2))
    f = cost(b)  # (S, k)
    loo = f - (f.sum(axis=1, keepdims=True) - f) / (k - 1)
    g = np.einsum("sk,skd->sd", loo, b - p) / k
    mean = weight @ g
    return mean, weight @ (g - mean) ** 2


@pytest.mark.parametrize("k", [2, 3, 5])
def test_unbiased_against_enumeration(k):
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(k)), n=40_000, seed=k))(TH)
    z = (gs.mean - numeric_grad(exact, TH)) / gs.stderr
    assert np.all(np.abs(z) < 5), z


def test_probs_and_the_value():
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(3), probs=True), n=40_000,
                                          seed=1))(TH)
    z = (gs.mean - numeric_grad(exact, TH)) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    E = scg.expectation(model_for(scg.ARMS(3)), n=20_000, seed=2)
    values = np.array([E(TH) for _ in range(10)])
    assert abs(values.mean() - exact(TH)) < 5 * values.std(ddof=1) / np.sqrt(10)
    assert E.last_trace.copies.count == 3


@pytest.mark.parametrize("k", [2, 4])
def test_below_leave_one_out_at_equal_evaluations(k):
    """One draw of ARMS(k) and scg.Score('loo') with n = k both cost k evaluations: the
    per-draw variance of ARMS (measured) against LOO's (exact), summed over coordinates,
    below it by more than 5 standard errors of the measured one."""
    n = 40_000
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(k)), n=n, seed=10 + k))(TH)
    mean, loo_var = loo_moments(TH, k)
    np.testing.assert_allclose(mean, numeric_grad(exact, TH), atol=1e-7)
    total = np.sum((gs.samples - gs.mean) ** 2, axis=1)  # (the summed variance's terms)
    arms, stderr = total.mean(), total.std(ddof=1) / np.sqrt(n)
    assert arms + 5 * stderr < loo_var.sum(), (arms, stderr, loo_var.sum())


def test_loo_by_enumeration_is_scg_score_loo():
    """The exact leave-one-out variance above is that of scg.Score('loo') with n = k."""
    E = scg.expectation(model_for(scg.Score("loo")), n=2, seed=0)
    grads = np.array([scg.grad(E)(TH) for _ in range(3000)])
    mean, var = loo_moments(TH, 2)
    assert np.all(np.abs(grads.mean(0) - mean) < 5 * np.sqrt(var / 3000))
    np.testing.assert_allclose(grads.var(0, ddof=1), var, rtol=0.15)


def test_k_2_has_the_variance_of_disarm():
    a = scg.grad_samples(scg.expectation(model_for(scg.ARMS(2)), n=40_000, seed=3))(TH)
    d = scg.grad_samples(scg.expectation(model_for(scg.DisARM()), n=40_000, seed=4))(TH)
    np.testing.assert_allclose(a.var, d.var, rtol=0.06)


def test_in_a_plate_per_element():
    targets = np.array([0.2, 0.9, 0.4])

    def plated(th):
        with scg.plate("p", 3):
            b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.ARMS(4))
            return (b - targets) ** 2

    def value(th):
        p = sig(th)
        return np.sum(p * (1 - targets) ** 2 + (1 - p) * targets ** 2)
    gs = scg.grad_samples(scg.expectation(plated, n=20_000, seed=5))(TH)
    z = (gs.mean - numeric_grad(value, TH)) / gs.stderr
    assert np.all(np.abs(z) < 5), z


class Coin(Distribution):
    """A user's own coin: the values -1 and 2, p(2) = sigmoid(logits)."""

    arg_constraints = {"logits": constraints.real}
    support = constraints.real
    LEVELS = np.array([-1.0, 2.0])

    def __init__(self, logits, validate_args=None):
        self.logits = logits
        super().__init__({"logits": logits}, broadcast_shape(logits),
                         validate_args=validate_args)

    def log_prob(self, value):
        up = np.equal(value, 2.0)
        return np.where(up, self.logits, 0.0) - scg.softplus(self.logits)

    def _sample(self, rng, shape):
        p = 1.0 / (1.0 + np.exp(-np.asarray(self.logits)))
        return np.where(rng.random(self._extended_shape(shape)) < p, 2.0, -1.0)

    def enumerate_support(self, expand=True):
        return self.LEVELS if not expand else np.broadcast_to(
            self.LEVELS.reshape((2,) + (1,) * len(self.batch_shape)), (2,) + self.batch_shape)


@pytest.mark.parametrize("estimator", [scg.ARMS(3), scg.DisARM(), scg.IndeCateR(),
                                       scg.UnorderedSet(2)], ids=repr)
def test_a_users_coin(estimator):
    def users(th):
        x = scg.sample("x", Coin(th).to_event(1), estimator=estimator)
        return (x @ W - 0.5) ** 2

    values = np.where(STATES == 1, 2.0, -1.0)

    def value(th):
        p = sig(th)
        return np.prod(np.where(STATES == 1, p, 1 - p), axis=1) @ (values @ W - 0.5) ** 2
    if isinstance(estimator, scg.UnorderedSet):  # (a set per element: one coin, a plate)
        with pytest.raises(scg.EstimatorError, match="outside every scg.plate"):
            scg.grad(scg.expectation(users, n=4, seed=0))(TH)
        return
    gs = scg.grad_samples(scg.expectation(users, n=20_000, seed=6))(TH)
    z = (gs.mean - numeric_grad(value, TH)) / gs.stderr
    assert np.all(np.abs(z) < 5), z


def test_jit_replays_the_eager_numbers_bit_for_bit():
    E = scg.expectation(model_for(scg.ARMS(4)), n=50, seed=3)
    eager = [scg.value_and_grad(E)(TH + 0.1 * i) for i in range(5)]
    E = scg.expectation(model_for(scg.ARMS(4)), n=50, seed=3)
    fn = scg.jit(scg.value_and_grad(E))
    jitted = [fn(TH + 0.1 * i) for i in range(5)]
    assert fn.stats["replays"] >= 2, fn.explain()
    for (v0, g0), (v1, g1) in zip(eager, jitted):
        assert v0 == v1
        np.testing.assert_array_equal(g0, g1)


def test_errors_and_explain():
    with pytest.raises(ValueError, match="k must be an int from 2"):
        scg.ARMS(1)

    def normal(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.ARMS(3)) ** 2
    with pytest.raises(scg.EstimatorError, match="site 'x'.*finite support.*not Normal"):
        scg.grad(scg.expectation(normal, n=4, seed=0))(0.0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(model_for(scg.ARMS(3)), n=4, seed=0))(TH)
    text = scg.trace(model_for(scg.ARMS(3)), TH, n=2).explain()
    assert "ARMS" in text and "3 evaluations of the model downstream per draw" in text, text
