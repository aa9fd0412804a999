"""The compiled passes of scg/kernels/layers.py against their numpy twins.

log-softmax and its cotangent agree with the twins to rounding (the kernels sum each row
in order, numpy pairwise), also on rows with infinities and NaNs, where they must give
the same infinities and NaNs; tanh's cotangent is the twin's to the bit. Input the
kernels do not take (another axis, strided, float32, broadcast cotangents) gives None,
and the rules then run the twins. Through the rules, first-order gradients of
log_softmax and tanh match central differences.
"""

import numpy as np
import pytest

import scg
from scg.kernels import layers
from scg.numpy import rules as R


def _twin_log_softmax(x):
    return x - R._logsumexp(x, axis=-1, keepdims=True)


def _twin_log_softmax_vjp(g, ans):
    return g - np.exp(ans) * np.sum(g, axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(7,), (4096, 16), (64, 8, 33), (3, 1)])
def test_log_softmax_and_its_cotangent_agree_with_the_twins(shape):
    rng = np.random.default_rng(1)
    x = rng.normal(scale=5.0, size=shape)
    got = layers.log_softmax(x, -1)
    np.testing.assert_allclose(got, _twin_log_softmax(x), rtol=1e-14, atol=1e-13)
    g = rng.normal(size=shape)
    np.testing.assert_allclose(layers.log_softmax_vjp(g, got, -1),
                               _twin_log_softmax_vjp(g, got), rtol=1e-13, atol=1e-13)


def test_log_softmax_rows_with_infinities_and_nans_match_the_twin():
    inf, nan = np.inf, np.nan
    x = np.array([[0.0, -inf, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0], [nan, 0.0, 1.0],
                  [0.0, nan, -inf], [1e308, -1e308, 0.0]])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        want = _twin_log_softmax(x)
        got = layers.log_softmax(x, -1)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-14, atol=0)


def test_tanh_cotangent_is_the_twins_to_the_bit():
    rng = np.random.default_rng(2)
    ans = np.tanh(rng.normal(size=(512, 8, 64)))
    g = rng.normal(size=ans.shape)
    assert layers.tanh_vjp(g, ans).tobytes() == (g * (1.0 - ans * ans)).tobytes()


def test_the_kernels_write_into_the_array_given():
    rng = np.random.default_rng(3)
    x, g = rng.normal(size=(50, 16)), rng.normal(size=(50, 16))
    out = np.empty_like(x)
    assert layers.log_softmax(x, -1, out) is out
    assert out.tobytes() == layers.log_softmax(x, -1).tobytes()
    assert layers.log_softmax_vjp(g, x, 1, out) is out
    assert out.tobytes() == layers.log_softmax_vjp(g, x, 1).tobytes()
    assert layers.tanh_vjp(g, x, out) is out
    assert out.tobytes() == layers.tanh_vjp(g, x).tobytes()


def test_input_the_kernels_do_not_take_gives_none():
    x = np.ones((6, 4))
    assert layers.log_softmax(x, 0) is None
    assert layers.log_softmax(x[:, ::2], -1) is None
    assert layers.log_softmax(x.astype(np.float32), -1) is None
    assert layers.log_softmax(np.ones((3, 0)), -1) is None
    assert layers.log_softmax_vjp(np.broadcast_to(1.0, x.shape), x, -1) is None
    assert layers.tanh_vjp(np.broadcast_to(1.0, x.shape), x) is None
    assert layers.tanh_vjp(np.ones(4), x) is None


def _central_difference(f, x, eps=1e-6):
    out = np.empty_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        out[i] = (f(up) - f(down)) / (2 * eps)
    return out


@pytest.mark.parametrize("axis", [-1, 0])
def test_first_order_gradients_through_the_rules_match_central_differences(axis):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 6))
    w = rng.normal(size=(5, 6))

    def f(z):
        return np.sum(w * scg.log_softmax(np.tanh(z), axis=axis))

    got = scg.grad(f)(x)
    np.testing.assert_allclose(got, _central_difference(f, x), rtol=1e-7, atol=1e-8)
