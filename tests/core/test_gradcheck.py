"""The checker itself: it passes correct rules and catches wrong ones at each order."""

import numpy as np
import pytest

import scg
from scg.core.tape import Primitive, defvjp
from scg.numpy import rules as R

from .gradcheck import check_grads


def cube_with(rule):
    p = Primitive("cube", lambda x: x ** 3)
    defvjp(p, rule)
    return p


def test_correct_rule_passes_to_third_order():
    cube = cube_with(lambda g, ans, x: R.multiply(g, R.multiply(3.0, R.square(x))))
    check_grads(cube, [np.array([0.5, -1.5])], order=3)


def test_wrong_first_order_rule_fails():
    cube = cube_with(lambda g, ans, x: R.multiply(g, R.multiply(3.0, x)))
    with pytest.raises(AssertionError, match="order 1"):
        check_grads(cube, [np.array([0.5, 2.0])])


def test_rule_that_is_not_traced_fails_at_second_order():
    cube = cube_with(lambda g, ans, x: R.multiply(g, 3.0 * scg.stop_gradient(x) ** 2))
    with pytest.raises(AssertionError, match="order 2"):
        check_grads(cube, [np.array([0.5, 2.0])])


def test_several_arguments_and_array_output():
    check_grads(lambda a, b: np.tanh(a @ b), [np.ones((2, 3)) * 0.1, np.arange(3.0)], order=2)
