"""Specific behaviour of the numpy rules: ties, forward values, shapes, stability."""

import warnings

import numpy as np
import pytest

import scg


# ---------------------------------------------------------------- forward values agree with numpy
@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("...i,...i->...", [(3, 1, 4), (5, 4)]),
    ("...ij,jk", [(5, 2, 3), (3, 2)]), ("i,i", [(3,), (3,)]), ("ij,k->i", [(2, 3), (5,)]),
])
def test_einsum_value_and_gradient_shapes(subscripts, shapes):
    rng = np.random.default_rng(0)
    ops = [rng.normal(size=s) for s in shapes]
    value, grads = scg.value_and_grad(lambda *xs: np.sum(np.einsum(subscripts, *xs) ** 2),
                                      argnums=tuple(range(len(ops))))(*ops)
    assert np.isclose(value, np.sum(np.einsum(subscripts, *ops) ** 2))
    assert [g.shape for g in grads] == [o.shape for o in ops]


def test_einsum_trace_differentiates():
    # d trace(x) / dx is the identity (a repeated index in one operand)
    x = np.arange(4.0).reshape(2, 2)
    np.testing.assert_array_equal(scg.grad(lambda x: np.einsum("ii->", x))(x), np.eye(2))


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((6, 2, 3), (3,)), ((3,), (6, 3, 2)),
    ((6, 2, 3), (6, 3, 4)), ((1, 2, 3), (5, 3, 4)),
])
def test_matmul_gradients_match_explicit_sums(a_shape, b_shape):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=a_shape), rng.normal(size=b_shape)
    w = rng.normal(size=np.shape(a @ b))
    ga, gb = scg.grad(lambda a, b: np.sum((a @ b) * w), argnums=(0, 1))(a, b)
    eps = 1e-6
    for x, g, which in ((a, ga, 0), (b, gb, 1)):
        assert g.shape == x.shape
        k = rng.integers(x.size)
        dx = np.zeros(x.size)
        dx[k] = eps
        dx = dx.reshape(x.shape)
        args_p = (a + dx, b) if which == 0 else (a, b + dx)
        args_m = (a - dx, b) if which == 0 else (a, b - dx)
        fd = (np.sum((args_p[0] @ args_p[1]) * w) - np.sum((args_m[0] @ args_m[1]) * w)) / (2 * eps)
        assert np.isclose(g.ravel()[k], fd, rtol=1e-6)


def test_getitem_gradients_accumulate_repeated_indices():
    x = np.arange(5.0)
    g = scg.grad(lambda x: np.sum(x[np.array([0, 0, 3])] * np.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_allclose(g, [3.0, 0.0, 0.0, 3.0, 0.0])
    g = scg.grad(lambda x: np.sum(x[x > 1.5] ** 2))(x)          # boolean mask
    np.testing.assert_allclose(g, [0.0, 0.0, 4.0, 6.0, 8.0])
    g = scg.grad(lambda x: x[-1] + np.sum(x[1:4:2]))(x)        # int and strided slice
    np.testing.assert_allclose(g, [0.0, 1.0, 0.0, 1.0, 1.0])


def test_concatenate_and_stack_route_gradients_to_pieces():
    a, b = np.ones(2), np.full((3,), 2.0)
    w = np.arange(5.0)
    ga, gb = scg.grad(lambda a, b: np.concatenate([a, b]) @ w, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, [0.0, 1.0])
    np.testing.assert_allclose(gb, [2.0, 3.0, 4.0])
    ga, gb = scg.grad(lambda a, b: np.sum(np.stack([a, a * b], axis=1) * np.array([1.0, 10.0])),
                      argnums=(0, 1))(a, 3.0)
    np.testing.assert_allclose(ga, [31.0, 31.0])
    assert gb == 20.0


# ---------------------------------------------------------------- ties and kinks
def test_max_min_ties_share_the_gradient():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    np.testing.assert_allclose(scg.grad(np.max)(x), [[0, 0.5, 0.5], [0, 0, 0]])
    np.testing.assert_allclose(scg.grad(lambda x: np.sum(np.max(x, axis=1)))(x),
                               [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    np.testing.assert_allclose(scg.grad(lambda x: np.sum(np.min(x, axis=0, keepdims=True)))(x),
                               [[1, 0, 0], [0, 1, 1]])
    np.testing.assert_allclose(scg.grad(lambda x: np.sum(x.max(axis=-1, keepdims=True) * 2))(x),
                               [[0, 1, 1], [1, 0, 1]])


def test_maximum_minimum_ties_split_evenly():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 4.0])
    ga, gb = scg.grad(lambda a, b: np.sum(np.maximum(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, [0.5, 1, 0])
    np.testing.assert_allclose(gb, [0.5, 0, 1])
    ga, gb = scg.grad(lambda a, b: np.sum(np.minimum(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, [0.5, 0, 1])
    np.testing.assert_allclose(gb, [0.5, 1, 0])
    g = scg.grad(lambda a: np.sum(np.maximum(a, 2.0)))(a)   # broadcast constant
    np.testing.assert_allclose(g, [0, 0.5, 1])


def test_where_and_clip():
    x = np.array([-2.0, 0.0, 0.5, 3.0])
    g = scg.grad(lambda x: np.sum(np.where(x > 0, x ** 2, -x)))(x)
    np.testing.assert_allclose(g, [-1, -1, 1, 6])
    g = scg.grad(lambda x: np.sum(np.clip(x, -1.0, 1.0)))(x)
    np.testing.assert_allclose(g, [0, 1, 1, 0])
    g = scg.grad(lambda x: np.sum(np.clip(x, 0.0, 0.5)))(x)   # at the bounds: passes through
    np.testing.assert_allclose(g, [0, 1, 1, 0])
    lo = scg.grad(lambda lo: np.sum(np.clip(x, lo, 1.0)))(np.array(-1.0))
    assert lo == 1.0


def test_var_and_std():
    x = np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]])
    for ddof in (0, 1):
        for axis in (None, 0, 1, (0, 1)):
            v = scg.value_and_grad(lambda x: np.sum(np.var(x, axis=axis, ddof=ddof)))(x)[0]
            s = scg.value_and_grad(lambda x: np.sum(x.std(axis=axis, ddof=ddof)))(x)[0]
            assert np.isclose(v, np.sum(np.var(x, axis=axis, ddof=ddof)))
            assert np.isclose(s, np.sum(np.std(x, axis=axis, ddof=ddof)))
    n = x.size
    np.testing.assert_allclose(scg.grad(np.var)(x), 2 * (x - x.mean()) / n)


def test_relu_derivative_at_zero_is_zero():
    np.testing.assert_allclose(scg.grad(lambda x: np.sum(scg.relu(x)))(np.array([-1.0, 0.0, 2.0])),
                               [0, 0, 1])


# ---------------------------------------------------------------- stability of the helpers
EXTREMES = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])


@pytest.mark.parametrize("helper", [scg.sigmoid, scg.softplus, scg.relu, scg.logsumexp,
                                    scg.softmax, scg.log_softmax])
def test_helpers_finite_at_extremes_without_warnings(helper):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            value = helper(EXTREMES)
            g = scg.grad(lambda x: np.sum(helper(x) * np.arange(1.0, 6.0)))(EXTREMES)
            h = scg.grad(lambda x: np.sum(scg.grad(lambda y: np.sum(helper(y) ** 2))(x)))(EXTREMES)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))


def test_helper_values_at_extremes():
    np.testing.assert_allclose(scg.sigmoid(EXTREMES), [0, 1 / (1 + np.exp(50)), 0.5,
                                                       1 / (1 + np.exp(-50)), 1])
    assert scg.sigmoid(-50.0) > 0  # the lower tail keeps relative precision
    np.testing.assert_allclose(scg.softplus(EXTREMES), [0, np.log1p(np.exp(-50)), np.log(2),
                                                        50 + np.log1p(np.exp(-50)), 1000])
    np.testing.assert_allclose(scg.logsumexp(EXTREMES), 1000.0)
    np.testing.assert_allclose(scg.softmax(EXTREMES), [0, 0, 0, 0, 1])
    np.testing.assert_allclose(scg.log_softmax(EXTREMES)[-1], 0.0, atol=1e-12)
    np.testing.assert_allclose(scg.grad(scg.softplus)(1000.0), 1.0)
    np.testing.assert_allclose(scg.grad(scg.sigmoid)(-1000.0), 0.0)


def test_logsumexp_axis_keepdims_and_infinities():
    x = np.array([[0.0, -np.inf], [1.0, 2.0]])
    np.testing.assert_allclose(scg.logsumexp(x, axis=1), [0.0, np.logaddexp(1.0, 2.0)])
    assert scg.logsumexp(x, axis=0, keepdims=True).shape == (1, 2)
    assert scg.logsumexp(np.array([-np.inf, -np.inf])) == -np.inf  # and no warning
    g = scg.grad(lambda x: np.sum(scg.logsumexp(x, axis=1)))(x)
    np.testing.assert_allclose(g, [[1, 0], scg.softmax(np.array([1.0, 2.0]))])


def test_reductions_take_numpy_integer_axes():
    """An axis given as a numpy integer (np.int64(-1), a shape's entry), alone or in a
    tuple, as numpy takes it: the same gradient as with a Python int."""
    x = np.arange(6.0).reshape(2, 3)
    for axis, same in ((np.int64(-1), -1), ((np.int64(0), 1), (0, 1)), (np.int32(1), 1)):
        for f in (np.sum, np.mean, np.max, scg.logsumexp):
            got = scg.grad(lambda v: np.sum(f(v, axis=axis) ** 2))(x)
            want = scg.grad(lambda v: np.sum(f(v, axis=same) ** 2))(x)
            np.testing.assert_array_equal(got, want)
