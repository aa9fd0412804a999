"""scg.IndeCateR(): per element, the exact sum over its values with the others at their
draw. Unbiased against enumeration, its per-draw variance equal to the one computed by
enumeration (the variance over the draw of the other elements), in plates, for a user's
own family, under scg.jit and in scg.compare; first derivatives only."""

import itertools

import numpy as np
import pytest

import scg

from tests.distributions.test_capabilities import ThreeLevels
from .exact import numeric_grad

D, K = 3, 4
TABLE = np.array([[1.0, -0.5, 2.0, 0.3], [0.4, 1.5, -1.0, 0.0], [-0.7, 0.2, 0.9, 1.1]])
THETA = np.array([[0.2, -0.3, 0.5, 0.0], [1.0, -0.5, 0.1, 0.3], [-0.4, 0.6, 0.0, -0.2]])
STATES = np.array(list(itertools.product(range(K), repeat=D)))


def cost(x):
    """A cost that couples the D categorical latents (indices x, shape (..., D))."""
    s = np.sum(TABLE[np.arange(D), x], axis=-1)
    return (s - 0.8) ** 2


def model(theta):
    x = scg.sample("x", scg.Categorical(logits=theta).to_event(1), estimator=scg.IndeCateR())
    s = 0.0
    for d in range(D):
        s = s + scg.take(TABLE[d], x[..., d])
    return (s - 0.8) ** 2


def probs(theta):
    p = np.exp(theta - theta.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def exact_moments(theta):
    """The mean and per-coordinate variance of one draw's IndeCateR estimate, and the
    fourth central moment (for the standard error of a measured variance), by enumerating
    the K^D draws."""
    p = probs(theta)
    weights = np.prod(p[np.arange(D), STATES], axis=1)
    estimates = []
    for x in STATES:
        g = np.zeros((D, K))
        for d in range(D):
            f = np.empty(K)
            for k in range(K):
                y = x.copy()
                y[d] = k
                f[k] = cost(y)
            g[d] = p[d] * (f - p[d] @ f)  # (sum_k grad_logits p_d(k) f(k))
        estimates.append(g)
    estimates = np.array(estimates)
    mean = np.einsum("s,s...->...", weights, estimates)
    dev = estimates - mean
    return mean, np.einsum("s,s...->...", weights, dev ** 2), \
        np.einsum("s,s...->...", weights, dev ** 4)


def exact_value(theta):
    p = probs(theta)
    return np.prod(p[np.arange(D), STATES], axis=1) @ cost(STATES)


def test_unbiased_and_its_variance_is_the_variance_over_the_others():
    n = 40_000
    gs = scg.grad_samples(scg.expectation(model, n=n, seed=0))(THETA)
    mean, var, m4 = exact_moments(THETA)
    np.testing.assert_allclose(mean, numeric_grad(exact_value, THETA), atol=1e-7)
    z = (gs.mean - mean) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    # the measured per-draw variance against the exact one: the standard error of a
    # sample variance is sqrt((m4 - var^2) / n)
    z = (gs.var - var) / np.sqrt((m4 - var ** 2) / n)
    assert np.all(np.abs(z) < 5), z
    assert np.all(var > 0)  # (D > 1: the others' draw leaves variance)


def test_evaluations_and_explain():
    E = scg.expectation(model, n=10, seed=0)
    scg.grad(E)(THETA)
    assert E.last_trace.copies.count == 1 + D * K
    text = E.last_trace.explain()
    assert "IndeCateR" in text and f"{1 + D * K} evaluations" in text, text


def test_one_element_is_the_exact_gradient():
    def one(theta):
        c = scg.sample("c", scg.OneHotCategorical(logits=theta), estimator=scg.IndeCateR())
        return (c @ TABLE[0] - 0.2) ** 2
    g = scg.grad(scg.expectation(one, n=3, seed=0))(THETA[0])
    p = probs(THETA[0])
    f = (TABLE[0] - 0.2) ** 2
    np.testing.assert_allclose(g, p * (f - p @ f), rtol=1e-10, atol=1e-13)


def test_in_a_plate_per_element():
    targets = np.array([0.5, -0.3, 1.2])

    def plated(theta):
        with scg.plate("items", D):
            x = scg.sample("x", scg.Categorical(logits=theta), estimator=scg.IndeCateR())
            return (scg.take(TABLE[0], x) - targets) ** 2

    E = scg.expectation(plated, n=4, seed=0)
    g = scg.grad(E)(THETA)
    # each element meets its own cost only: the sum over its values is exact
    for row in range(D):
        p = probs(THETA[row])
        f = (TABLE[0] - targets[row]) ** 2
        np.testing.assert_allclose(g[row], p * (f - p @ f), rtol=1e-10, atol=1e-13)
    assert E.last_trace.copies.count == 1 + K  # (the plate's elements together)

    def mixing(theta):
        with scg.plate("items", D):
            x = scg.sample("x", scg.Categorical(logits=theta), estimator=scg.IndeCateR())
        return np.sum(scg.take(TABLE[0], x)) ** 2
    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate items"):
        scg.grad(scg.expectation(mixing, n=4, seed=0))(THETA)


class BatchedThreeLevels(ThreeLevels):
    """tests/distributions/test_capabilities.py's user family, drawn with a batch of
    logits (Gumbel-max)."""

    def _sample(self, rng, shape):
        logits = np.broadcast_to(self.logits, self._extended_shape(shape) + (3,))
        return self.LEVELS[np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)]


def test_a_users_family_that_declares_its_support():
    theta = np.array([[0.3, -0.2, 0.5], [0.0, 0.4, -0.6]])
    levels = ThreeLevels.LEVELS

    def users(theta):
        x = scg.sample("x", BatchedThreeLevels(theta).to_event(1), estimator=scg.IndeCateR())
        return (x[..., 0] * x[..., 1] - 0.5) ** 2

    def exact(theta):
        p = probs(theta)
        pairs = itertools.product(range(3), repeat=2)
        return sum(p[0, a] * p[1, b] * (levels[a] * levels[b] - 0.5) ** 2 for a, b in pairs)

    gs = scg.grad_samples(scg.expectation(users, n=20_000, seed=1))(theta)
    z = (gs.mean - numeric_grad(exact, theta)) / gs.stderr
    assert np.all(np.abs(z) < 5), z


def test_jit_replays_the_eager_numbers_bit_for_bit():
    E = scg.expectation(model, n=50, seed=3)
    eager = [scg.value_and_grad(E)(THETA + 0.1 * i) for i in range(5)]
    E = scg.expectation(model, n=50, seed=3)
    fn = scg.jit(scg.value_and_grad(E))
    jitted = [fn(THETA + 0.1 * i) for i in range(5)]
    assert fn.stats["replays"] >= 2, fn.explain()  # (copies settle in two calls)
    for (v0, g0), (v1, g1) in zip(eager, jitted):
        assert v0 == v1
        np.testing.assert_array_equal(g0, g1)


def test_in_compare_against_the_exact_gradient():
    cmp = scg.compare(model, THETA, estimators={"indecater": {"x": scg.IndeCateR()},
                                                "loo": {"x": scg.Score("loo")}},
                      n=4_000, seed=0, reference=numeric_grad(exact_value, THETA))
    row = cmp["indecater"]
    assert row.evals_per_draw == 1 + D * K
    assert np.all(np.abs(row.z) < 5), row.z


def test_errors():
    def normal(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.IndeCateR()) ** 2
    with pytest.raises(scg.EstimatorError, match="site 'x'.*Normal declares none"):
        scg.grad(scg.expectation(normal, n=4, seed=0))(0.3)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(model, n=4, seed=0))(THETA)


def test_the_branches_are_evaluated_but_not_differentiated():
    """The copies' costs enter the terms as numbers: the model downstream of the site is
    evaluated on every branch's rows (1 + D K per draw) and differentiated on the draw's
    rows only (scg/core/tape.py, Rows), with the gradient of the whole computation."""
    from scg.core.tape import Primitive, defvjp
    from scg.numpy import rules as R

    seen = []
    smooth = Primitive("smooth_square", np.square, batch="elementwise")
    smooth.rows = R.rows_elementwise
    defvjp(smooth, lambda g, ans, x: (seen.append(np.shape(g)), R.multiply(g, 2.0 * x))[1])

    def with_weights(theta, w):
        x = scg.sample("x", scg.Categorical(logits=theta).to_event(1),
                       estimator=scg.IndeCateR())
        s = 0.0
        for d in range(D):
            s = s + scg.take(TABLE[d], x[..., d])
        return smooth(s * w - 0.8)

    n = 5
    E = scg.expectation(with_weights, n=n, seed=2)
    g_theta, g_w = scg.grad(E, argnums=(0, 1))(THETA, 1.3)
    assert seen and all(shape[0] == n for shape in seen)  # (not n (1 + D K) rows)
    # the same numbers as with the derivative taken on every row
    squared = scg.expectation(lambda theta, w: with_weights(theta, w) + 0.0, n=n, seed=2)
    smooth.rows = None
    seen.clear()
    h_theta, h_w = scg.grad(squared, argnums=(0, 1))(THETA, 1.3)
    assert seen and all(shape[0] == n * (1 + D * K) for shape in seen)
    np.testing.assert_allclose(g_theta, h_theta, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g_w, h_w, rtol=1e-13)


@pytest.mark.parametrize("other", [scg.DisARM(), scg.Enumerate()], ids=["disarm", "enumerate"])
def test_the_branches_are_cut_beside_sites_whose_estimator_weighs_its_copies(other):
    """A cost downstream of IndeCateR's site and of a site whose estimator computes its
    copies' weights (DisARM's halves, Enumerate's probabilities, traced): the rows cut
    are those the layout leaves weighted (IndeCateR's branches weigh zero whatever the
    other weights are), with the gradient of the whole computation."""
    from scg.core.tape import Primitive, defvjp
    from scg.numpy import rules as R

    seen = []
    smooth = Primitive("smooth_square_beside", np.square, batch="elementwise")
    smooth.rows = R.rows_elementwise
    defvjp(smooth, lambda g, ans, x: (seen.append(np.shape(g)), R.multiply(g, 2.0 * x))[1])

    def model(theta, logit):
        b = scg.sample("b", scg.Bernoulli(logits=logit), estimator=other)
        x = scg.sample("x", scg.Categorical(logits=theta).to_event(1),
                       estimator=scg.IndeCateR())
        s = 0.0
        for d in range(D):
            s = s + scg.take(TABLE[d], x[..., d])
        return smooth(s * (1.0 + b * logit) - 0.8)

    n = 5
    grads = []
    for rows in (R.rows_elementwise, None):
        smooth.rows = rows
        seen.clear()
        E = scg.expectation(model, n=n, seed=2)
        grads.append(scg.grad(E, argnums=(0, 1))(THETA, 0.4))
        total = E.last_trace.rows
        # (cut: the draw's rows and those of the other site's second copy or value, 2 n of
        # n (2 + D K) with DisARM's pairs, of 2 n (1 + D K) with Enumerate's two values)
        assert total == (n * (2 + D * K) if isinstance(other, scg.DisARM) else
                         2 * n * (1 + D * K))
        assert seen and all(shape[0] == (total if rows is None else 2 * n) for shape in seen)
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
