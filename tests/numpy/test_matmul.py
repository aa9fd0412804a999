"""The matmul rule: products of vectors and matrices computed by .dot.

For 1-D and 2-D operands of every dtype pair (floats, integers, bools, complex numbers,
objects) and layout (contiguous, transposed, strided), including empty products, the rule
gives np.matmul's type, shape, dtype and values within the rounding bound of the result's
dtype, and raises ValueError where np.matmul does; gradients and Hessians through @ agree
with central differences, and scg.jit replays the eager gradient.
"""

import numpy as np
import pytest

import scg
from scg.numpy.rules import _matmul
from tests.tolerances import assert_close_ulps, assert_product_close


_KINDS = ["f8", "f4", "i8", "i1", "bool", "c16", "object"]


def _array(rng, shape, kind, layout):
    if kind == "bool":
        a = rng.random(shape) < 0.5
    elif kind in ("i8", "i1"):
        a = rng.integers(-9, 9, shape).astype(kind)
    elif kind == "c16":
        a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    elif kind == "object":
        a = rng.integers(-9, 9, shape).astype(object)
    else:
        a = rng.normal(size=shape).astype(kind)
    if layout == "T" and a.ndim == 2:
        a = np.ascontiguousarray(a.T).T
    elif layout == "strided":
        a = np.repeat(a[..., None], 2, axis=-1)[..., 1]
    return a


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((0,), (0,)), ((4, 3), (3,)), ((4, 0), (0,)),
                                   ((3,), (3, 5)), ((0,), (0, 5)), ((4, 3), (3, 5)),
                                   ((0, 3), (3, 0))])
def test_matmul_by_dot_is_np_matmul_for_vectors_and_matrices(sa, sb):
    """Same type (a numpy scalar for vector . vector), shape, dtype and values (within the
    rounding bound of the result's dtype: which BLAS kernel runs depends on the machine) for every
    dtype pair and layout; mismatched shapes and 0-d operands still raise ValueError."""
    rng = np.random.default_rng(0)
    for ka in _KINDS:
        for kb in _KINDS:
            for la in ("c", "T", "strided"):
                for lb in ("c", "T", "strided"):
                    a, b = _array(rng, sa, ka, la), _array(rng, sb, kb, lb)
                    want, got = np.matmul(a, b), _matmul(a, b)
                    assert type(got) is type(want)
                    assert np.shape(got) == np.shape(want)
                    assert np.asarray(got).dtype == np.asarray(want).dtype
                    assert_product_close(got, want, a, b)
    for a, b in [(np.array(2.0), np.ones(3)), (np.ones(3), np.array(2.0)),
                 (np.array(1.0), np.array(1.0)), (np.ones(3), np.ones(4)),
                 (np.ones((2, 3)), np.ones(4)), (np.ones(3), np.ones((4, 2)))]:
        with pytest.raises(ValueError):
            np.matmul(a, b)
        with pytest.raises(ValueError):
            _matmul(a, b)


def _fd(f, x, h=1e-6):
    x = np.array(x, dtype=float)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    out = np.array(cols).reshape(x.shape + np.shape(cols[0]))
    k = np.ndim(cols[0])
    return np.moveaxis(out, list(range(x.ndim)), list(range(k, k + x.ndim)))


def test_matmul_gradients_and_hessians_through_vectors_and_matrices():
    """Gradients and Hessians through @ for vector.vector, matrix.vector (integer, bool
    and strided constants), vector.matrix, matrix.matrix and empty products, against
    central differences; scg.jit replays the eager gradient."""
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(3, 5))
    v3, v4 = rng.normal(size=3), rng.normal(size=4)
    Ai, Ab = rng.integers(-3, 4, (4, 3)), rng.random((4, 3)) < 0.5
    cases = [
        (lambda x: np.sin(x @ v3), 0.3 * v3),
        (lambda x: x @ x, v3),
        (lambda x: np.sum(np.sin(A @ x)), v3),
        (lambda x: np.sum(np.sin(Ai @ x)), v3),
        (lambda x: np.sum(np.sin(Ab @ x)), v3),
        (lambda x: np.sum(np.sin(A.T[:, ::2] @ x[::2])), v4),
        (lambda x: np.sum(np.cos(x @ B)), v3),
        (lambda x: np.sum(np.cos(x @ v3)), A),
        (lambda x: np.sum(np.cos(v4 @ x)), A),
        (lambda x: np.sum(np.cos(x @ x.T)), A),
        (lambda x: np.sum(np.zeros((0, 3)) @ x) + np.sum(x ** 2), v3),
    ]
    # Eager and jit may form a product with different kernels (GEMV, GEMM). An entry of a
    # gradient sums at most K products of a cotangent (|.| <= 2) and an operand (|.| <= M);
    # the cotangent carries the rounding of a forward product (at most K^2 M^2 eps, through
    # sin or cos): each route is within 2 K^2 M (1 + K M^2) eps of the exact value.
    K = 5
    for f, x in cases:
        M = max(np.max(np.abs(c)) for c in (A, B, v3, v4, Ai, x))
        g = scg.grad(f)(x)
        np.testing.assert_allclose(g, _fd(f, x), atol=1e-6)
        np.testing.assert_allclose(scg.hessian(f)(x), _fd(scg.grad(f), x), atol=1e-5)
        jitted = scg.jit(scg.grad(f))
        for _ in range(3):
            assert_close_ulps(jitted(x), g, 2 * 2 * K ** 2, scale=M * (1 + K * M ** 2))
