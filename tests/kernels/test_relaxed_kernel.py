"""The straight-through Jacobians of a categorical (scg/kernels/relaxed.py): Gumbel-Rao's
averaged Jacobian and ReinMax's, each numba kernel against its numpy twin and against the
relaxation's own formulas (conditional scores, softmax, the Jacobians), at several
temperatures, with impossible categories, and broadcast logits."""

import numpy as np
import pytest

import scg
from scg.distributions.relaxed import _Concrete
from scg.kernels.relaxed import (conditional_softmax_jacobian,
                                 conditional_softmax_jacobian_twin, reinmax_softmax_jacobian,
                                 reinmax_softmax_jacobian_twin)


def by_the_formulas(logits, b, v, T):
    """The mean Jacobian as the relaxation composes it (what the kernel replaces)."""
    r = scg.RelaxedOneHotCategorical(1.0, logits=logits)
    y = r.soft(r.conditional(b, v) / T)
    return r.soft_jacobian(y, mean_axis=0) / T


def draws(seed, shape, k, K):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=shape + (K,)) * 2.0
    b = np.eye(K)[rng.integers(0, K, shape)]
    return logits, b, rng.random((k,) + shape + (K,))


@pytest.mark.parametrize("T", [1.0, 0.5, 2.0, 0.1])
def test_kernel_twin_and_formulas_agree(T):
    logits, b, v = draws(0, (6, 3), 7, 5)
    got = conditional_softmax_jacobian(logits, b, v, T)
    assert got.shape == (6, 3, 5, 5)
    np.testing.assert_allclose(got, conditional_softmax_jacobian_twin(logits, b, v, T),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, by_the_formulas(logits, b, v, T), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, np.swapaxes(got, -1, -2), atol=1e-15)  # (symmetric)
    np.testing.assert_allclose(got.sum(axis=-1), 0.0, atol=1e-14)  # (softmax sums to 1)


def test_impossible_categories_and_uniforms_at_the_ends():
    logits, b, v = draws(1, (4,), 3, 4)
    logits[:, 2] = -np.inf  # (never drawn: the draws b avoid it)
    b = np.eye(4)[[0, 1, 3, 0]]
    v[0, 0] = [0.0, 1.0, 0.5, 1.0 - 1e-17]  # (clipped into (0, 1), as numpy's formula)
    got = conditional_softmax_jacobian(logits, b, v, 1.0)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got[:, 2], 0.0)
    np.testing.assert_allclose(got, conditional_softmax_jacobian_twin(logits, b, v, 1.0),
                               rtol=1e-12, atol=1e-14)


def test_broadcast_logits_and_the_relaxations_method():
    logits, b, v = draws(2, (8,), 4, 3)
    shared = logits[0]  # (one row of logits for every draw)
    got = conditional_softmax_jacobian(shared, b, v, 0.7)
    np.testing.assert_allclose(got, conditional_softmax_jacobian_twin(shared, b, v, 0.7),
                               rtol=1e-12, atol=1e-14)
    r = scg.RelaxedOneHotCategorical(1.0, logits=logits)
    np.testing.assert_allclose(r.conditional_jacobian(b, v, 0.7),
                               _Concrete.conditional_jacobian(r, b, v, 0.7),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("T", [1.0, 1.5, 4.0])
def test_reinmax_kernel_twin_and_formulas_agree(T):
    logits, b, _ = draws(3, (6, 3), 1, 5)
    got = reinmax_softmax_jacobian(logits, b, T)
    assert got.shape == (6, 3, 5, 5)
    np.testing.assert_allclose(got, reinmax_softmax_jacobian_twin(logits, b, T),
                               rtol=1e-12, atol=1e-14)
    r = scg.RelaxedOneHotCategorical(1.0, logits=logits)
    by_the_formulas = _Concrete.reinmax_jacobian(r, logits, b, T)
    np.testing.assert_allclose(got, by_the_formulas, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r.reinmax_jacobian(logits, b, T), got, rtol=0, atol=0)
    np.testing.assert_allclose(got, np.swapaxes(got, -1, -2), atol=1e-15)  # (symmetric)
    np.testing.assert_allclose(got.sum(axis=-1), 0.0, atol=1e-14)  # (softmax sums to 1)


def test_reinmax_kernel_impossible_categories_and_broadcast_logits():
    logits, b, _ = draws(4, (8,), 1, 4)
    logits[:, 2] = -np.inf  # (never drawn)
    b = np.eye(4)[[0, 1, 3, 0, 1, 1, 3, 0]]
    got = reinmax_softmax_jacobian(logits, b, 2.0)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got[:, 2], 0.0)
    np.testing.assert_allclose(got, reinmax_softmax_jacobian_twin(logits, b, 2.0),
                               rtol=1e-12, atol=1e-14)
    shared = logits[0]  # (one row of logits for every draw)
    np.testing.assert_allclose(reinmax_softmax_jacobian(shared, b, 1.0),
                               reinmax_softmax_jacobian_twin(shared, b, 1.0),
                               rtol=1e-12, atol=1e-14)
