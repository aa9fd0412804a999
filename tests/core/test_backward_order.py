"""The backward pass on graphs of every shape, and operators on float64 scalars.

The backward pass visits a box straight after the one that gave it its first cotangent
when nothing older waits (a chain), and otherwise through a heap: random graphs with fan-out,
fan-in and repeated arguments check that every box is visited after all its users.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scg
from scg.core.tape import Primitive, defvjp
from scg.numpy import rules as R

from .gradcheck import check_grads

# sin whose rule records which value it was called for: every box is visited once
visits = []
counted_sin = Primitive("counted_sin", np.sin)
defvjp(counted_sin, lambda g, ans, x: (visits.append(id(ans)), R.multiply(g, R.cos(x)))[1])

UNARY = [np.sin, np.tanh, lambda a: a * 0.7, scg.softplus, lambda a: np.sum(a) * a,
         counted_sin]
BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - 0.5 * b,
          lambda a, b: a @ np.ones((3, 3)) * 0.3 + b]


def random_graph(plan):
    """A function of x (3,) whose graph follows `plan`: each step applies a unary or binary
    operation to earlier values (chosen by index), and the output sums some of them."""
    steps, outputs = plan

    def f(x):
        values = [x]
        for unary, op, i, j in steps:
            a, b = values[i % len(values)], values[j % len(values)]
            values.append(UNARY[op % len(UNARY)](a) if unary else BINARY[op % len(BINARY)](a, b))
        return sum(np.sum(values[k % len(values)]) for k in outputs)

    return f


step = st.tuples(st.booleans(), st.integers(0, 10), st.integers(0, 40), st.integers(0, 40))
plans = st.tuples(st.lists(step, min_size=1, max_size=12),
                  st.lists(st.integers(0, 40), min_size=1, max_size=4))


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(plan=plans)
def test_random_graphs_match_finite_differences(plan):
    check_grads(random_graph(plan), [np.array([0.3, -0.2, 0.1])], order=2)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(plan=plans)
def test_random_graphs_visit_every_box_once(plan):
    # a box visited before all its users would be visited again for the late cotangents:
    # the gradient would still be right, at twice the cost (and exponentially in a ladder)
    visits.clear()
    scg.grad(random_graph(plan))(np.array([0.3, -0.2, 0.1]))
    assert len(visits) == len(set(visits))


def test_diamond_and_repeated_argument():
    # y feeds three branches that meet again; y * y gives one box two parents that are one
    def f(x):
        y = counted_sin(x)
        return np.sum(np.tanh(y) * (y * y) + y)

    check_grads(f, [np.array([0.4, -1.1])], order=2)
    visits.clear()
    scg.grad(f)(np.array([0.4, -1.1]))
    assert len(visits) == 1


def test_scalar_operators_give_numpy_results():
    def f(x):
        s = np.sum(x)  # a float64 scalar inside its box
        return (s / 2 + 1) * s - 3 ** s + s ** 2 - 1.5 / s

    x = np.array([0.5, 0.25])
    value, g = scg.value_and_grad(f)(x)
    s = 0.75
    assert value == pytest.approx((s / 2 + 1) * s - 3 ** s + s ** 2 - 1.5 / s)
    expected = (s + 1) - np.log(3) * 3 ** s + 2 * s + 1.5 / s ** 2
    np.testing.assert_allclose(g, [expected, expected], rtol=1e-12)
    check_grads(f, [x], order=2)


def test_scalar_operators_keep_numpy_warnings():
    # the fast path for float64 scalars behaves as the ufunc: inf with a RuntimeWarning,
    # not Python's ZeroDivisionError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = scg.value_and_grad(lambda x: np.sum(x) / 0.0)(np.array([1.0]))[0]
    assert value == np.inf
    assert any(issubclass(w.category, RuntimeWarning) for w in caught)


def test_power_and_matmul_of_scalars_stay_with_the_ufunc():
    # numpy's scalar ** can differ from np.power in the last bit and at the edges
    x = np.array([-18.944944419442237])
    assert scg.value_and_grad(lambda x: np.sum(x) ** 2)(x)[0] == np.power(x[0], 2)
    assert scg.value_and_grad(lambda x: 2 ** np.sum(x))(x)[0] == np.power(2, x[0])
    with pytest.warns(RuntimeWarning, match="invalid"):
        value = scg.value_and_grad(lambda x: np.sum(x) ** 0.5)(np.array([-np.inf]))[0]
    assert np.isnan(value)
    with pytest.raises(ValueError, match="matmul"):
        scg.grad(lambda x: np.sum(x) @ 2.0)(np.array([1.0]))
