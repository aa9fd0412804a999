"""scg.GumbelSoftmax(): the gradient of the relaxed objective, against quadrature over the
noise (Bernoulli) and against the same estimator written by hand in numpy."""

import warnings

import numpy as np
import pytest

import scg

from .exact import numeric_grad, numeric_hessian

U = (np.arange(200_000) + 0.5) / 200_000  # midpoint rule over u in (0, 1)
LOGISTIC = np.log(U) - np.log1p(-U)


def sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))  # (no overflow)


def f(y):
    return (y - 0.3) ** 2 * (2.0 + y)


def f_prime(y):
    return 2.0 * (y - 0.3) * (2.0 + y) + (y - 0.3) ** 2


def relaxed(a, T):
    """E_u[f(sigmoid((a + logit(u)) / T))] by quadrature over u."""
    return np.mean(f(sig((a + LOGISTIC) / T)))


def straight_through(a, T):
    """E_u[f'(hard(u)) dy/da], y = sigmoid((a + logit(u)) / T), hard(u) = 1[y > 1/2],
    dy/da = y (1 - y) / T: the expectation of the straight-through estimate."""
    y = sig((a + LOGISTIC) / T)
    return np.mean(f_prime((y > 0.5).astype(float)) * y * (1.0 - y) / T)


def true_value(a):
    p = sig(a)
    return p * f(1.0) + (1.0 - p) * f(0.0)


def bernoulli_model(T, hard=False, probs=False):
    def model(a):
        p = dict(probs=scg.sigmoid(a)) if probs else dict(logits=a)
        b = scg.sample("b", scg.Bernoulli(**p), estimator=scg.GumbelSoftmax(T, hard=hard))
        return f(b)
    return model


@pytest.mark.parametrize("T, probs", [(0.5, False), (2.0, True)])
def test_bernoulli_soft_is_the_gradient_of_the_relaxed_objective(T, probs):
    a = 0.4
    gs = scg.grad_samples(scg.expectation(bernoulli_model(T, probs=probs), n=100_000,
                                          seed=0))(a)
    z = (gs.mean - numeric_grad(lambda t: relaxed(t, T), a, h=1e-5)) / gs.stderr
    assert abs(z) < 4.5, z
    if T == 2.0:  # biased for the true objective (here by far more than the sampling error)
        assert abs(gs.mean - numeric_grad(true_value, a)) > 20 * gs.stderr


def test_bernoulli_hard_is_straight_through_with_exact_values():
    a, T, n = -0.3, 0.5, 100_000
    E = scg.expectation(bernoulli_model(T, hard=True), n=n, seed=1)
    gs = scg.grad_samples(E)(a)
    z = (gs.mean - straight_through(a, T)) / gs.stderr
    assert abs(z) < 4.5, z
    # the values are exact Bernoulli draws: E(a) is the true objective's
    p = sig(a)
    stderr = np.sqrt(p * (1 - p) * (f(1.0) - f(0.0)) ** 2 / n)
    assert abs(E(a) - true_value(a)) < 4.5 * stderr
    draws = scg.trace(bernoulli_model(T, hard=True), a, n=1000, seed=2).sites["b"].value
    assert set(np.unique(draws)) <= {0.0, 1.0}


def test_hessian_of_the_relaxed_objective():
    a, T = 0.2, 0.7
    exact = numeric_hessian(lambda t: relaxed(t, T), a, h=1e-3)
    values = np.array([scg.hessian(scg.expectation(bernoulli_model(T), n=50_000, seed=s))(a)
                       for s in range(8)])
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean() - exact) < 4.5 * se, (values.mean(), exact, se)


def test_small_temperature_approaches_the_true_objective():
    a, n = 0.4, 100_000
    values = [scg.expectation(bernoulli_model(T), n=n, seed=3)(a) for T in (1.0, 0.1, 0.01)]
    for T, v in zip((1.0, 0.1, 0.01), values):  # each the relaxed objective (se < 0.003)
        assert abs(v - relaxed(a, T)) < 0.015, (T, v, relaxed(a, T))
    gaps = [abs(v - true_value(a)) for v in values]
    assert gaps[0] > gaps[1] > gaps[2]
    # the bias is O(T): 0.52 at T = 1, within 0.02 of the true objective (2%) at T = 0.01
    assert gaps[2] < 0.02, (values, true_value(a))


# ---------------------------------------------------------------- OneHotCategorical
W = np.array([0.5, -1.0, 2.0])
V = np.array([1.0, -0.5, 0.3])
THETA = np.array([0.2, -0.4, 0.1])


def g(y):
    return y @ W + (y @ V) ** 2


def categorical_by_hand(theta, T, hard, n, seed):
    """The Gumbel-softmax estimate per draw in numpy: J^T f'(value), with the softmax
    Jacobian J = (diag(y) - y y^T) / T of the relaxed y."""
    G = -np.log(-np.log(np.random.default_rng(seed).random((n, 3))))
    s = (theta + G) / T
    y = np.exp(s - s.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)
    value = np.eye(3)[np.argmax(y, axis=1)] if hard else y
    fp = W + 2.0 * (value @ V)[:, None] * V
    return (y * fp - y * np.sum(y * fp, axis=1, keepdims=True)) / T


@pytest.mark.parametrize("hard, probs", [(False, False), (True, True)])
def test_one_hot_categorical_against_numpy_by_hand(hard, probs):
    T = 0.6

    def model(theta):
        p = dict(probs=scg.softmax(theta)) if probs else dict(logits=theta)
        y = scg.sample("y", scg.OneHotCategorical(**p),
                       estimator=scg.GumbelSoftmax(T, hard=hard))
        return g(y)

    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=4))(THETA)
    hand = categorical_by_hand(THETA, T, hard, 400_000, 5)
    se = np.hypot(gs.stderr, hand.std(0, ddof=1) / np.sqrt(len(hand)))
    z = (gs.mean - hand.mean(0)) / se
    assert np.all(np.abs(z) < 4.5), z
    if hard:
        draws = scg.trace(model, THETA, n=500, seed=6).sites["y"].value
        assert np.all(np.sum(draws == 1.0, axis=-1) == 1) and np.all(draws.sum(-1) == 1)


# ---------------------------------------------------------------- plates, upstream sites
def test_plate_of_bernoulli_sites():
    th, T, c = np.array([-1.0, -0.2, 0.5, 1.2]), 0.5, np.array([1.0, -0.5, 2.0, 0.7])

    def model(th):
        with scg.plate("p", 4):
            b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.GumbelSoftmax(T))
            return c * f(b)

    gs = scg.grad_samples(scg.expectation(model, n=50_000, seed=7))(th)
    exact = c * np.array([numeric_grad(lambda t: relaxed(t, T), a, h=1e-5) for a in th])
    z = (gs.mean - exact) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z


@pytest.mark.parametrize("hard", [False, True])
def test_upstream_pathwise_site_in_a_plate(hard):
    T, c = 0.7, np.array([1.0, -0.5, 2.0])
    th = np.array([0.3, -0.6, 0.1, 0.8])

    def model(th):
        x = scg.sample("x", scg.Normal(th[0], 1.0))
        with scg.plate("p", 3):
            b = scg.sample("b", scg.Bernoulli(logits=x + th[1:]),
                           estimator=scg.GumbelSoftmax(T, hard=hard))
            scg.cost("f", c * f(b))
        return 0.1 * x ** 2

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scg.trace(model, th, n=4).sites["x"].kind == "pathwise"
        gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=8))(th)

    # by hand: x = th0 + eps, y_i = sigmoid((x + th_i + logistic noise) / T)
    rng = np.random.default_rng(9)
    n = 400_000
    x = th[0] + rng.standard_normal((n, 1))
    y = sig((x + th[1:] + np.log(u := rng.random((n, 3))) - np.log1p(-u)) / T)
    value = (y > 0.5).astype(float) if hard else y
    dy = c * f_prime(value) * y * (1 - y) / T  # d cost / d logits, per element
    hand = np.concatenate([dy.sum(1, keepdims=True) + 0.2 * x, dy], axis=1)
    se = np.hypot(gs.stderr, hand.std(0, ddof=1) / np.sqrt(n))
    z = (gs.mean - hand.mean(0)) / se
    assert np.all(np.abs(z) < 4.5), z


# ---------------------------------------------------------------- errors and explanation
def test_errors_repr_and_explain():
    def categorical(theta):
        return scg.sample("k", scg.Categorical(logits=theta), estimator=scg.GumbelSoftmax())

    def normal(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.GumbelSoftmax())

    with pytest.raises(scg.EstimatorError, match="OneHotCategorical"):
        scg.expectation(categorical, n=2)(THETA)
    with pytest.raises(scg.EstimatorError, match="declares a concrete relaxation"):
        scg.expectation(normal, n=2)(0.0)
    for bad in (0, 0.0, -1.0, float("nan"), "1", True):
        with pytest.raises(ValueError, match="temperature"):
            scg.GumbelSoftmax(temperature=bad)
    assert repr(scg.GumbelSoftmax(temperature=0.5, hard=True)) == \
        "GumbelSoftmax(temperature=0.5, hard=True)"
    text = scg.trace(bernoulli_model(0.5), 0.1, n=2).explain()
    assert "biased: the gradient of the relaxed objective at temperature T = 0.5" in text
    assert "gumbel" in text.lower()


def test_a_hessian_through_straight_through_gumbel_softmax_is_refused():
    def coins(t):
        b = scg.sample("b", scg.Bernoulli(logits=t), estimator=scg.GumbelSoftmax(0.5, hard=True))
        return np.sum(b * t)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(coins, n=4, seed=0))(np.array([0.1, 0.2]))


def test_hard_is_a_bool():
    with pytest.raises(TypeError, match="hard must be True or False"):
        scg.GumbelSoftmax(hard="False")
