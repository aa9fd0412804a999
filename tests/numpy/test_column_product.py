"""The cotangent of a factor whose product was summed over rows: a repeated column times a
matrix is one product with the column (BLAS), equal to the product and the sum."""

import numpy as np
import pytest

import scg
from scg.numpy.rules import _column_product, _sum

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("rows,cols", [(1024, 10), (3, 2), (700, 1)])
def test_column_product_is_the_sum_of_the_product(rows, cols):
    column = RNG.normal(size=(rows, 1))
    g = np.broadcast_to(column, (rows, cols))
    c = RNG.normal(size=(rows, cols))
    expected = np.sum(np.array(g) * c, axis=0)
    assert np.allclose(_column_product(g, c), expected, rtol=1e-13, atol=1e-13)
    full = np.array(g)  # (no repeated column: the product and the sum themselves)
    assert np.array_equal(_column_product(full, c), _sum(full * c, axis=0))


def test_sum_of_a_repeated_column_over_rows():
    column = RNG.normal(size=(1024, 1))
    g = np.broadcast_to(column, (1024, 10))
    for keepdims in (False, True):
        got = _sum(g, axis=0, keepdims=keepdims)
        assert got.shape == ((1, 10) if keepdims else (10,))
        assert np.allclose(got, np.full(got.shape, column.sum()), rtol=1e-13)


def test_gradient_through_the_product_of_a_state_matrix():
    # the pattern of enumerated log-probabilities: states (K, d) times logits (d,), summed
    # over d; its gradient against finite differences, and the same under scg.jit
    states = ((np.arange(64)[:, None] >> np.arange(6)) & 1).astype(float)
    w = RNG.normal(size=64)

    def f(theta):
        log_p = np.sum(states * theta - np.logaddexp(0.0, theta), axis=1)
        return np.sum(w * np.exp(log_p))

    theta = RNG.normal(size=6)
    g = scg.grad(f)(theta)
    eps = 1e-6
    fd = np.array([(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in np.eye(6)])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-8)
    jitted = scg.jit(scg.grad(f))
    for _ in range(4):
        assert np.array_equal(jitted(theta), g)
    assert jitted.stats["replays"] >= 1
