"""scg.GappedST(T): its gradient is its formula (the deterministic perturbation by hand in
numpy on the same draws), its bias measured by scg.compare is the exact bias by
enumeration of the draw; Bernoulli as two categories; in a plate; under scg.jit."""

import warnings

import numpy as np
import pytest

import scg

from .straight_through import THETA, W, choice, f_prime, sig, softmax, true_grad


def gapped_by_hand(theta, k, T, gap=1.0):
    """Fan et al.'s perturbation: the chosen logit up to the max, every other down to at
    most max - gap; the estimate J(y) f'(k) / T at y = softmax((theta + m) / T)."""
    top = theta.max()
    m = (top - theta) * k - np.maximum(theta - top + gap, 0.0) * (1 - k)
    y = softmax((theta + m) / T)
    assert np.all(np.argmax(y, axis=-1) == np.argmax(k, axis=-1))  # (b wins, by the gap)
    g = f_prime(k)
    return (y * g - y * np.sum(y * g, axis=-1, keepdims=True)) / T


@pytest.mark.parametrize("T, gap", [(0.5, 1.0), (1.0, 2.0)])
def test_the_gradient_is_the_formula_on_the_same_draws(T, gap):
    E = scg.expectation(choice(scg.GappedST(T, gap=gap)), n=500, seed=0)
    gs = scg.grad_samples(E)(THETA)
    k = np.asarray(E.last_trace.sites["k"].value)
    np.testing.assert_allclose(gs.samples, gapped_by_hand(THETA, k, T, gap), rtol=1e-12,
                               atol=1e-12)


def test_the_measured_bias_is_the_exact_bias():
    T = 0.5
    exact_bias = softmax(THETA) @ gapped_by_hand(THETA, np.eye(4), T) - true_grad(THETA)
    assert np.max(np.abs(exact_bias)) > 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        cmp = scg.compare(choice(scg.GappedST(T)), THETA, estimators={"gst": scg.GappedST(T)},
                          n=40_000, seed=1, reference=true_grad(THETA))
    row = cmp["gst"]
    z = (row.bias - exact_bias) / row.stderr
    assert np.all(np.abs(z) < 5), (row.bias, exact_bias, z)


def test_a_coin_moves_to_the_gap():
    """A coin's logit a moves to max(a, gap) for b = 1, min(a, -gap) for b = 0 (two
    categories (0, a)); the estimate y (1 - y) / T f'(b) at y = sigmoid(moved / T)."""
    a, T = np.array([0.3, -1.2, 2.5]), 0.5

    def coins(a):
        with scg.plate("coins", 3):
            b = scg.sample("b", scg.Bernoulli(logits=a), estimator=scg.GappedST(T))
        return (b @ W - 0.5) ** 2
    E = scg.expectation(coins, n=300, seed=2)
    gs = scg.grad_samples(E)(a)
    b = np.asarray(E.last_trace.sites["b"].value)
    moved = np.where(b == 1, np.maximum(a, 1.0), np.minimum(a, -1.0))
    y = sig(moved / T)
    by_hand = y * (1 - y) / T * 2 * (b @ W - 0.5)[:, None] * W
    np.testing.assert_allclose(gs.samples, by_hand, rtol=1e-12, atol=1e-12)
    # the two-category form gives the same
    for bi, ai in ((1.0, 0.3), (0.0, 0.3), (1.0, -1.2), (0.0, 2.5)):
        k = np.array([1 - bi, bi])
        th = np.array([0.0, ai])
        top = th.max()
        m = (top - th) * k - np.maximum(th - top + 1.0, 0.0) * (1 - k)
        np.testing.assert_allclose((th + m)[1] - (th + m)[0],
                                   max(ai, 1.0) if bi else min(ai, -1.0))


def test_errors_and_explain():
    with pytest.raises(ValueError, match="gap must be a positive finite number"):
        scg.GappedST(1.0, gap=0.0)
    with pytest.raises(ValueError, match="temperature"):
        scg.GappedST(-1.0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(choice(scg.GappedST()), n=8, seed=0))(THETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        text = scg.trace(choice(scg.GappedST(0.5)), THETA, n=4, seed=0).explain()
    assert "biased" in text and "gap of 1" in text


def test_jit_replays_the_eager_numbers():
    E, Ej = (scg.expectation(choice(scg.GappedST(0.5)), n=32, seed=4) for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    for i in range(4):
        np.testing.assert_array_equal(step(THETA + 0.1 * i), scg.grad(E)(THETA + 0.1 * i))
    assert step.stats["replays"] >= 2
