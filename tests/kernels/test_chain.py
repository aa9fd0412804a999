"""The forward algorithm's primitives against brute force over every joint value."""

import itertools

import numpy as np
import pytest

import scg
from scg.kernels.chain import (_twin_log_partition, chain_log_partition, chain_marginals,
                               chain_pairwise_marginals, chain_unary_marginals)
from tests.estimators.exact import numeric_grad


def brute(u, p):
    m, k = u.shape
    values = [sum(u[i, z[i]] for i in range(m)) + sum(p[i, z[i], z[i + 1]] for i in range(m - 1))
              for z in itertools.product(range(k), repeat=m)]
    return np.logaddexp.reduce(values)


@pytest.mark.parametrize("m, k", [(2, 2), (4, 3), (5, 1)])
def test_log_partition_and_marginals_equal_the_sum_over_every_joint_value(m, k):
    rng = np.random.default_rng(m * 10 + k)
    u, p = rng.normal(size=(3, m, k)), rng.normal(size=(3, m - 1, k, k))
    np.testing.assert_allclose(chain_log_partition(u, p), [brute(u[b], p[b]) for b in range(3)],
                               rtol=1e-13)
    for b in range(3):
        fu = numeric_grad(lambda x: brute(x, p[b]), u[b])
        fp = numeric_grad(lambda x: brute(u[b], x), p[b])
        np.testing.assert_allclose(chain_unary_marginals(u, p)[b], fu, atol=1e-8)
        np.testing.assert_allclose(chain_pairwise_marginals(u, p)[b], fp, atol=1e-8)


def test_impossible_values_are_zeros_of_the_sum():
    u = np.array([[0.0, -np.inf], [0.3, 0.1], [-np.inf, 0.0]])
    p = np.zeros((2, 2, 2))
    p[0, 0, 1] = -np.inf
    assert chain_log_partition(u, p) == pytest.approx(brute(u, p), rel=1e-13)
    assert np.all(np.isfinite(chain_unary_marginals(u, p)))


def test_second_derivatives_through_the_twins():
    rng = np.random.default_rng(2)
    u, p = rng.normal(size=(4, 3)), rng.normal(size=(3, 3, 3))
    for f in (lambda x: chain_log_partition(x, p), lambda x: _twin_log_partition(x, p)):
        assert np.isfinite(scg.hessian(f)(u)).all()
    np.testing.assert_allclose(scg.hessian(lambda x: chain_log_partition(x, p))(u),
                               scg.hessian(lambda x: _twin_log_partition(x, p))(u), atol=1e-12)
    np.testing.assert_allclose(scg.hessian(lambda x: chain_log_partition(u, x))(p),
                               scg.hessian(lambda x: _twin_log_partition(u, x))(p), atol=1e-12)


def test_batches_broadcast():
    rng = np.random.default_rng(4)
    u, p = rng.normal(size=(2, 1, 4, 3)), rng.normal(size=(5, 3, 3, 3))
    out = chain_log_partition(u, p)
    assert out.shape == (2, 5)
    assert out[1, 3] == pytest.approx(brute(u[1, 0], p[3]), rel=1e-13)


def test_both_marginals_from_one_pass():
    """chain_marginals (the one call the derivative of the log-partition makes) joins the
    unary and the pairwise marginals, flattened, bit for bit."""
    rng = np.random.default_rng(6)
    u, p = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 4, 3, 3))
    joined = chain_marginals(u, p)
    assert joined.shape == (2, 5 * 3 + 4 * 3 * 3)
    np.testing.assert_array_equal(joined[:, :15].reshape(2, 5, 3), chain_unary_marginals(u, p))
    np.testing.assert_array_equal(joined[:, 15:].reshape(2, 4, 3, 3),
                                  chain_pairwise_marginals(u, p))
    # the gradient of the log-partition in both arguments, as the two marginals
    gu, gp = scg.grad(lambda u, p: np.sum(chain_log_partition(u, p)), argnums=(0, 1))(u, p)
    np.testing.assert_array_equal(gu, chain_unary_marginals(u, p))
    np.testing.assert_array_equal(gp, chain_pairwise_marginals(u, p))
