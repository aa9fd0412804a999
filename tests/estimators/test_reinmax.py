"""scg.ReinMax(): its gradient is its formula (by hand in numpy on the same draws), its bias
measured by scg.compare is the exact bias by enumeration of the draw, on Bernoulli and
OneHotCategorical sites, in plates; temperature >= 1 enforced."""

import warnings

import numpy as np
import pytest

import scg

from .straight_through import TABLE, THETA, W, choice, f_prime, jac, sig, softmax, true_grad


def reinmax_by_hand(theta, k, T):
    """The ReinMax gradient per draw: (2 J(pi1) - J(pi0) / 2) f'(k)."""
    pi0 = softmax(theta)
    pi1 = 0.5 * (softmax(theta / T) + k)
    g = f_prime(k)
    return np.einsum("nij,nj->ni", 2 * jac(pi1) - 0.5 * jac(pi0)[None], g)


def exact_value(theta):
    return softmax(theta) @ (np.sin(TABLE) + TABLE ** 3)


@pytest.mark.parametrize("T", [1.0, 2.5])
def test_the_gradient_is_the_formula_on_the_same_draws(T):
    E = scg.expectation(choice(scg.ReinMax(T)), n=500, seed=0)
    gs = scg.grad_samples(E)(THETA)
    k = np.asarray(E.last_trace.sites["k"].value)
    assert set(np.unique(k)) <= {0.0, 1.0} and np.all(k.sum(axis=-1) == 1)
    np.testing.assert_allclose(gs.samples, reinmax_by_hand(THETA, k, T), rtol=1e-12,
                               atol=1e-12)


def test_the_measured_bias_is_the_exact_bias():
    """E[ReinMax] = sum_k p_k (its formula at e_k): the exact bias, which scg.compare finds."""
    T = 1.0
    eye = np.eye(4)
    expected = softmax(THETA) @ reinmax_by_hand(THETA, eye, T)
    exact_bias = expected - true_grad(THETA)
    assert np.max(np.abs(exact_bias)) > 0.05  # (a bias to measure)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        cmp = scg.compare(choice(scg.ReinMax(T)), THETA, estimators={"reinmax": scg.ReinMax(T)},
                          n=40_000, seed=1, reference=true_grad(THETA))
    row = cmp["reinmax"]
    z = (row.bias - exact_bias) / row.stderr
    assert np.all(np.abs(z) < 5), (row.bias, exact_bias, z)


def test_quadratic_costs_get_the_exact_gradient_at_temperature_one():
    """Heun's method is exact for a quadratic: E[ReinMax(1)] is the true gradient there."""
    def f(k):
        return (k @ TABLE) ** 2
    p = softmax(THETA)
    eye = np.eye(4)
    g = 2 * (eye @ TABLE)[:, None] * TABLE
    pi1 = 0.5 * (p + eye)
    expected = p @ np.einsum("nij,nj->ni", 2 * jac(pi1) - 0.5 * jac(p)[None], g)
    fv = TABLE ** 2
    np.testing.assert_allclose(expected, p * (fv - p @ fv), atol=1e-12)


def test_a_coin_is_two_categories():
    """Bernoulli(logits=a) as OneHotCategorical(logits=(0, a)): the same gradient in a, per
    draw, 2 q (1 - q) - p (1 - p) / 2 times f'(b), q = (sigmoid(a / T) + b) / 2."""
    a, T = np.array([0.3, -1.2, 0.8]), 1.5

    def coins(a):
        b = scg.sample("b", scg.Bernoulli(logits=a), estimator=scg.ReinMax(T))
        return (b @ W - 0.5) ** 2
    E = scg.expectation(coins, n=300, seed=2)
    gs = scg.grad_samples(E)(a)
    b = np.asarray(E.last_trace.sites["b"].value)
    p, q = sig(a), 0.5 * (sig(a / T) + b)
    by_hand = (2 * q * (1 - q) - 0.5 * p * (1 - p)) * 2 * (b @ W - 0.5)[:, None] * W
    np.testing.assert_allclose(gs.samples, by_hand, rtol=1e-12, atol=1e-12)


def test_in_a_plate_with_probs():
    """Each element of a plate its own draw; probs given (logits log p), the gradient flows
    through them."""
    P = softmax(np.array([[0.1, 0.5, -0.3], [1.0, 0.0, 0.2]]))
    V = np.array([0.5, -1.0, 2.0])

    def model(probs):
        with scg.plate("items", 2):
            k = scg.sample("k", scg.OneHotCategorical(probs=probs), estimator=scg.ReinMax())
        return np.sum((k @ V) ** 2)
    E = scg.expectation(model, n=200, seed=3)
    gs = scg.grad_samples(E)(P)
    k = np.asarray(E.last_trace.sites["k"].value)  # (n, 2, 3)
    g = 2 * (k @ V)[..., None] * V
    pi1 = 0.5 * (P + k)
    d_logits = np.einsum("...ij,...j->...i", 2 * jac(pi1) - 0.5 * jac(P), g)
    np.testing.assert_allclose(gs.samples, d_logits / P, rtol=1e-10, atol=1e-12)


def test_errors_and_explain():
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 1"):
        scg.ReinMax(0.5)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(choice(scg.ReinMax()), n=8, seed=0))(THETA)

    def normal(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.ReinMax()) ** 2
    with pytest.raises(scg.EstimatorError, match="site 'x'.*declares a concrete relaxation"):
        scg.grad(scg.expectation(normal, n=4, seed=0))(0.0)
    assert scg.ReinMax.biased
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        text = scg.trace(choice(scg.ReinMax(2.0)), THETA, n=4, seed=0).explain()
    assert "biased" in text and "ReinMax at temperature 2" in text


def test_jit_replays_the_eager_numbers():
    E, Ej = (scg.expectation(choice(scg.ReinMax(1.5)), n=32, seed=4) for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    for i in range(4):
        np.testing.assert_array_equal(step(THETA + 0.1 * i), scg.grad(E)(THETA + 0.1 * i))
    assert step.stats["replays"] >= 2


def test_jit_replays_the_eager_numbers_on_a_coin():
    """A coin's logits reach ReinMax's Jacobian as a broadcast view eagerly and as a copy
    under scg.jit's recording: the sigmoid must not round differently by layout (found by
    the differential tester: 1e-17 apart from the recording call on)."""
    def coin(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta[0]), estimator=scg.ReinMax(1.5))
        scg.cost("c", 0.5 * x ** 2)

    theta = np.array([-0.5])
    E, Ej = (scg.expectation(coin, n=64, seed=0) for _ in range(2))
    step = scg.jit(scg.value_and_grad(Ej))
    for i in range(4):
        (v1, g1), (v2, g2) = step(theta + 0.1 * i), scg.value_and_grad(E)(theta + 0.1 * i)
        assert v1 == v2
        np.testing.assert_array_equal(g1, g2)
    assert step.stats["replays"] >= 2
