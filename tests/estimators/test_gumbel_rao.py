"""scg.GumbelRao(T, k): the mean of straight-through Gumbel-softmax (a z-test in standard
errors, and both against the expected straight-through gradient computed in numpy from
many Gumbel draws), with a lower per-draw variance (the ratio measured and printed), on
OneHotCategorical and Bernoulli sites. (The conditional noise it averages over:
tests/distributions/test_relaxed.py.)"""

import warnings

import numpy as np
import pytest

import scg

from .straight_through import THETA, W, choice, f_prime, softmax, true_grad


def straight_through_mean(theta, T, n=2_000_000, seed=0):
    """E[J(softmax((theta + G) / T)) f'(argmax) / T] over Gumbel noise G, by n draws."""
    G = np.random.default_rng(seed).gumbel(size=(n, len(theta)))
    y = softmax((theta + G) / T)
    k = np.eye(len(theta))[np.argmax(y, axis=1)]
    g = f_prime(k)
    per = (y * g - y * np.sum(y * g, axis=1, keepdims=True)) / T
    return per.mean(axis=0), per.std(axis=0, ddof=1) / np.sqrt(n)


def _compare(model, theta, estimators, n, seed, reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        return scg.compare(model, theta, estimators=estimators, n=n, seed=seed,
                           reference=reference)


@pytest.mark.parametrize("T", [0.5, 1.0])
def test_the_mean_of_straight_through_gumbel_softmax_with_less_variance(T):
    st, gr = scg.GumbelSoftmax(T, hard=True), scg.GumbelRao(T, k=10)
    cmp = _compare(choice(st), THETA, {"st": st, "gumbel_rao": gr}, n=40_000, seed=0,
                   reference=true_grad(THETA))
    a, b = cmp["st"], cmp["gumbel_rao"]
    z = (a.mean - b.mean) / np.sqrt(a.stderr ** 2 + b.stderr ** 2)
    assert np.all(np.abs(z) < 5), z
    # the measured bias is straight-through's, computed from many Gumbel draws
    mean, se = straight_through_mean(THETA, T)
    z = (b.bias - (mean - true_grad(THETA))) / np.sqrt(b.stderr ** 2 + se ** 2)
    assert np.all(np.abs(z) < 5), z
    ratio = np.sum(b.var) / np.sum(a.var)
    print(f"T = {T}: per-draw variance of Gumbel-Rao(k=10) / straight-through = {ratio:.3f}")
    assert ratio < 0.8, ratio


def test_coins_mean_and_variance():
    a = np.array([0.3, -1.2, 0.8])

    def coins(estimator):
        def model(a):
            b = scg.sample("b", scg.Bernoulli(logits=a), estimator=estimator)
            return (b @ W - 0.5) ** 2
        return model
    st, gr = scg.GumbelSoftmax(0.5, hard=True), scg.GumbelRao(0.5, k=20)
    cmp = _compare(coins(st), a, {"st": st, "gumbel_rao": gr}, n=40_000, seed=2,
                   reference=None)
    x, y = cmp["st"], cmp["gumbel_rao"]
    z = (x.mean - y.mean) / np.sqrt(x.stderr ** 2 + y.stderr ** 2)
    assert np.all(np.abs(z) < 5), z
    assert np.sum(y.var) < np.sum(x.var)


def test_errors_and_explain():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive int"):
            scg.GumbelRao(1.0, k=bad)
    with pytest.raises(ValueError, match="temperature"):
        scg.GumbelRao(0.0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(choice(scg.GumbelRao(0.5, 2)), n=8, seed=0))(THETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        text = scg.trace(choice(scg.GumbelRao(0.5, 3)), THETA, n=4, seed=0).explain()
    assert "biased" in text and "k = 3" in text


def test_jit_replays_the_eager_numbers():
    E, Ej = (scg.expectation(choice(scg.GumbelRao(0.5, 3)), n=32, seed=4) for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    for i in range(4):
        np.testing.assert_array_equal(step(THETA + 0.1 * i), scg.grad(E)(THETA + 0.1 * i))
    assert step.stats["replays"] >= 2
    assert Ej.rng.bit_generator.state == E.rng.bit_generator.state
