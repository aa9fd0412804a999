"""The small-array loops the numpy rules take instead of several numpy calls."""

import warnings

import numpy as np
import pytest

import scg
from scg.kernels import small as elementwise
from scg.numpy import rules as R
from tests.tolerances import unit_roundoff


def _exact_sigmoid(x):
    x = x.astype(np.longdouble)
    return (1 / (1 + np.exp(-x))).astype(float)


@pytest.mark.parametrize("x", [
    np.array([-2.0, -1.3, -0.7, 0.0, 0.2, 2.1]),
    np.linspace(-800.0, 800.0, 4001),            # both tails, past exp's overflow
    np.array([[-745.5, -709.5], [36.0, 40.0]]),   # subnormal results, 1 - 2^-53
])
def test_sigmoid_loop_is_correctly_rounded_nearly_everywhere_and_quiet(x):
    if np.finfo(np.longdouble).eps == np.finfo(float).eps:
        pytest.skip("np.longdouble is float64 here: no extended precision to check against")
    assert elementwise.sigmoid(x) is not None  # (the loop, not numpy, is measured here)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no overflow warning in either tail)
        got = R.sigmoid(x)
    expected = _exact_sigmoid(x)
    assert got.shape == x.shape
    tiny = np.finfo(float).tiny
    rel = np.abs(got - expected) / np.maximum(expected, tiny)
    assert rel.max() <= 3 * unit_roundoff(float)  # (libm's exp, an add and a divide)
    assert np.all(got[expected > 0] > 0)  # (the negative tail keeps its relative precision)


def test_sigmoid_leaves_other_inputs_to_numpy():
    # (a small float64 array of any layout takes the loop: see the layout test below)
    for x in (np.float64(0.3), np.array(0.3), np.ones(5000), np.ones(3, dtype=np.float32)):
        assert elementwise.sigmoid(x) is None
        np.testing.assert_allclose(R.sigmoid(x), 1 / (1 + np.exp(-np.asarray(x, float))),
                                   rtol=1e-7)
    assert type(R.sigmoid(np.float64(0.3))) is np.float64


def test_sigmoid_gradient_to_second_order_on_small_arrays():
    x = np.array([-3.0, -0.5, 0.25, 4.0])
    f = lambda v: np.sum(scg.sigmoid(v) ** 2)  # noqa: E731
    g, h = scg.grad(f)(x), scg.hessian(f)(x)
    s = _exact_sigmoid(x)
    ds = s * (1 - s)
    np.testing.assert_allclose(g, 2 * s * ds, rtol=1e-13)
    np.testing.assert_allclose(np.diag(h), 2 * ds * ds + 2 * s * ds * (1 - 2 * s), rtol=1e-12)


@pytest.mark.parametrize("shape", [(2,), (8,), (100,), (8, 3), (5, 2, 4)])
def test_leave_one_out_loop_is_the_mean_of_the_other_draws(shape):
    from scg.kernels import small
    q = np.random.default_rng(1).normal(3.0, 2.0, shape)
    got = small.loo_advantage(q)
    n = shape[0]
    others = (q.sum(axis=0, keepdims=True) - q) / (n - 1)
    np.testing.assert_allclose(got, q - others, rtol=1e-13, atol=1e-13)
    assert got.shape == q.shape


def test_leave_one_out_loop_leaves_other_inputs_to_numpy():
    from scg.kernels import small
    for q in (np.ones(1), np.ones((1, 3)), np.ones((0, 2)), np.ones(8, dtype=np.float32),
              np.ones((8, 4))[:, ::2], np.ones(5000), np.float64(2.0)):
        assert small.loo_advantage(q) is None
    baseline = scg.baselines.LeaveOneOut()
    q = np.ones((8, 4))[:, ::2] * np.arange(8.0)[:, None]
    np.testing.assert_allclose(baseline.advantage(q, {}),
                               q - (q.sum(0) - q) / 7, rtol=1e-13, atol=1e-13)


def test_sigmoid_does_not_depend_on_the_memory_layout():
    """A broadcast view, a strided slice and a Fortran-order array get the numbers of their
    C-contiguous copies (an eager call and scg.jit's recording of it may lay a value out
    differently; they must round alike)."""
    rng = np.random.default_rng(1)
    base = rng.normal(size=(6, 5)) * 4
    for x in (np.broadcast_to(base[0], (6, 5)), base[:, ::2], np.asfortranarray(base)):
        np.testing.assert_array_equal(R.sigmoid(x), R.sigmoid(np.ascontiguousarray(x)))
