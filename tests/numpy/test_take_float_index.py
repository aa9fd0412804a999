"""A float index with a fractional part is refused, never truncated: truncation is a jump
whose derivative scg would silently take as zero."""

import math

import numpy as np
import pytest

import scg

TABLE = np.array([0.0, 1.0, 3.17, 4.0])
ADVICE = ("scg.take", "float", "jump", "np.floor", "np.round", "Categorical")


def _check_message(excinfo):
    message = str(excinfo.value)
    for word in ADVICE:
        assert word in message, f"{word!r} missing from: {message}"


def test_float_index_computed_from_a_draw_is_refused():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 0.3))
        return scg.take(TABLE, np.clip(x, 0.0, 3.0), axis=0) + x

    # (truncated, the gradient was 1.0: the jumps of the table were silently dropped)
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(scg.expectation(model, n=100, seed=0))(1.5)
    _check_message(excinfo)


def test_explicit_floor_estimates_across_the_jumps():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 0.3))
        return scg.take(TABLE, np.floor(np.clip(x, 0.0, 3.0)), axis=0) + x

    theta, sigma = 1.5, 0.3
    # d/dtheta E[TABLE[floor(x)]] = sum over the jumps j of (jump at j) * density of x at j
    density = [math.exp(-0.5 * ((j - theta) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
               for j in (1, 2, 3)]
    exact = 1.0 + float(np.diff(TABLE) @ density)
    gs = scg.grad_samples(scg.expectation(model, n=20_000, seed=0))(theta)
    assert abs(float(gs.mean) - exact) < 5 * float(gs.stderr)
    assert abs(float(gs.mean) - 1.0) > 10 * float(gs.stderr)


def test_integer_draws_still_index():
    def model(theta):
        k = scg.sample("k", scg.Categorical(probs=np.ones(4) / 4))
        return scg.take(TABLE, k, axis=0) * theta + np.take_along_axis(
            TABLE * theta, np.reshape(k, (1,)), axis=0)[0]

    t = scg.trace(model, 2.0, n=6, seed=0)
    k = np.asarray(t.sites["k"].value).astype(int)
    assert np.allclose(t.costs["return"], 4.0 * TABLE[k])


def test_per_draw_float_index_into_take_along_axis_is_refused():
    def model(theta):
        x = scg.sample("x", scg.Normal(1.5, 0.3))
        return np.take_along_axis(theta, np.reshape(x, (1,)), axis=0)[0]

    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(scg.expectation(model, n=10, seed=0))(TABLE)
    _check_message(excinfo)


def test_plain_float_indices_into_traced_tables():
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(lambda t: np.sum(np.take_along_axis(t, np.array([0.5, 2.0]), 0)))(TABLE)
    _check_message(excinfo)
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(lambda t: t[np.array([1.5])].sum())(TABLE)
    _check_message(excinfo)
    # the index itself differentiated: a float index is a jump
    with pytest.raises(scg.TracingError) as excinfo:
        scg.grad(lambda k: scg.take(TABLE, k))(1.5)
    _check_message(excinfo)
    # floats holding integers (the draws of discrete distributions) index as before
    g = scg.grad(lambda t: np.sum(np.take_along_axis(t, np.array([1.0, 1.0]), 0)))(TABLE)
    assert np.array_equal(g, [0.0, 2.0, 0.0, 0.0])


def test_nan_index_is_refused():
    with pytest.raises(scg.TracingError, match="nan"):
        scg.grad(lambda t: np.sum(np.take_along_axis(t, np.array([np.nan]), 0)))(TABLE)
