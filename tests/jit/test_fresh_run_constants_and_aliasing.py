"""scg.jit: constants of a recording, and returned arrays that never alias.

Non-finite float and complex constants (infinities and NaNs written into the replay
program) give the eager results; gradients that are constants of the recording are new
arrays on every call, distinct within a call and between calls, and keep their values
when the caller changes an earlier result in place; returned gradients never share
memory with each other or with the arguments.
"""

import math

import numpy as np
import pytest

import scg

from .compare import check_repeated as check, same_bits as same


def test_a_constant_gradient_is_the_same_array_on_every_replay():
    """A gradient that does not depend on the call's arguments (b enters linearly with a
    constant coefficient) is a constant of the recording; every replay returns a new array,
    as eager calls do, so an in-place update of one call's gradient (clipping, scaling by a
    learning rate) does not change what the next calls return."""
    C = np.array([1.0, 2.0, 3.0])

    def loss(w, b):
        return np.sum(w ** 2) + np.sum(b * C)

    g = scg.grad(loss, argnums=(0, 1))
    jitted = scg.jit(g)
    w, b = np.ones(3), np.ones(3)
    for _ in range(4):
        assert same(jitted(w, b), g(w, b))
    assert jitted.stats["replays"] >= 1
    _, grad_b = jitted(w, b)
    grad_b *= -0.5  # (an optimizer scaling its gradient in place)
    _, again = jitted(w, b)
    np.testing.assert_array_equal(again, g(w, b)[1])  # (eager: C itself)


def test_returned_gradients_do_not_share_memory():
    def sum_of_both(x, y):
        return np.sum(x + y)  # (both cotangents are the same array)

    def squared(x, y):
        return np.sum((x + y) ** 2)

    def layer(W, bias, x):
        return np.sum(np.tanh(x @ W + bias))

    for fn, args in ((sum_of_both, (np.ones(3), np.ones(3))),
                     (squared, (np.ones(3), np.ones(3))),
                     (layer, (np.ones((3, 2)), np.ones(2), np.ones((1, 3))))):
        g = scg.grad(fn, argnums=(0, 1))
        jitted = scg.jit(g)
        for _ in range(4):
            a, b = jitted(*args)
            assert same((a, b), g(*args))
            assert not np.shares_memory(a, b)
            assert not any(np.shares_memory(a, x) or np.shares_memory(b, x) for x in args)
        assert jitted.stats["replays"] >= 1


def test_a_non_finite_complex_constant_is_never_replayed():
    """Non-finite complex constants (complex(inf, 0)) are written into the replay program as
    defined values: the call is replayed, with the eager results."""
    x = np.array([1.0, -2.0, 0.5])
    with np.errstate(invalid="ignore"):
        check(lambda x: x * complex(math.inf, 0), x)


@pytest.mark.parametrize("name", [
    "clip", "maximum", "where_nan", "full_like_nan", "power_nan", "tuple_of_infs",
    "float64_nan", "nan_to_num"])
def test_non_finite_float_constants_are_replayed(name):
    fns = {
        "clip": lambda x: np.clip(x, -math.inf, 0.5),
        "maximum": lambda x: np.maximum(x, -math.inf),
        "where_nan": lambda x: np.where(x > 0, x, math.nan),
        "full_like_nan": lambda x: x + np.full_like(x, math.nan),
        "power_nan": lambda x: x ** math.nan,
        "tuple_of_infs": lambda x: np.clip(x, *(-math.inf, math.inf)),
        "float64_nan": lambda x: x * np.float64("nan"),
        "nan_to_num": lambda x: np.nan_to_num(x / 0.0, posinf=math.inf, neginf=-math.inf),
    }
    with np.errstate(all="ignore"):
        check(fns[name], np.array([1.0, -2.0, 0.0]))


def test_constant_gradients_returned_twice_are_distinct_and_kept():
    """Gradients that are constants of the recording (x * c: the cotangent is c), one of
    them next to a traced one, returned twice in a structure: distinct arrays within a
    call and between calls, values kept after the next call."""
    c = np.array([1.5, -0.0, 2.0])

    def f(x, y):
        return np.sum(x * c) + np.sum(y * y) + np.sum(x * math.inf * 0.0 + x)

    g = scg.grad(f, argnums=(0, 1))

    def h(x, y):
        gx, gy = g(x, y)
        return {"a": gx, "b": gx, "c": gy}

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.0, 1.0])
    with np.errstate(invalid="ignore"):
        jitted = check(h, x, y)
        first = jitted(x, y)
        kept = {k: v.copy() for k, v in first.items()}
        second = jitted(x, y)
    for k in first:
        assert same(first[k], kept[k])
        for k2 in second:
            assert not np.shares_memory(first[k], second[k2])


def _centered_squares(x):
    return np.sum((x - np.mean(x, axis=-1, keepdims=True)) ** 2)


def test_a_constant_keeps_its_layout_so_a_replay_sums_in_the_eager_order():
    """The cotangent of a sum is a broadcast of one number, a constant of the recording;
    multiplied by a Fortran-order value it gives a Fortran-order product, whose sums along
    an axis add in that memory order. Kept as a C-order copy, it gave a C-order product in
    the replay, summed in another order: gradients off in their last bits."""
    rng = np.random.default_rng(4)
    g = scg.grad(_centered_squares)
    jitted = scg.jit(g)
    for _ in range(4):
        x = np.asfortranarray(rng.normal(size=(16, 64, 64)))
        assert same(jitted(x), g(x))
    assert jitted.stats["replays"] >= 2
