"""Reverse-mode rules for numpy: primitives, their VJPs and numpy dispatch."""

import operator

import numpy as np

from ..core.tape import Box, box_operator
from . import rules as R
from . import plain_rules  # noqa: F401  (registers the first-order twins)
from .dispatch import UFUNCS, install_array_methods

Box.shape = property(lambda b: R.shape(b.value))
Box.dtype = property(lambda b: np.result_type(b.value))
install_array_methods(Box)


def _either_order(prim, forward, reflected):
    """prim(a, b) through a box's operator methods when either operand is a box."""
    def call(a, b):
        if type(a) is Box:
            return forward(a, b)
        if type(b) is Box:
            return reflected(b, a)
        return prim(a, b)
    return call


# Python operators on boxes, and the same ufuncs called by numpy (`array @ box`), take
# the direct recording path of `box_operator`.
for _ufunc, _name, _prim in [
        (np.add, "add", R.add), (np.subtract, "sub", R.subtract),
        (np.multiply, "mul", R.multiply), (np.true_divide, "truediv", R.divide),
        (np.power, "pow", R.power), (np.matmul, "matmul", R.matmul)]:
    _operator = getattr(operator, _name)
    _forward = box_operator(_prim, _operator)
    _reflected = box_operator(_prim, _operator, reflected=True)
    setattr(Box, f"__{_name}__", _forward)
    setattr(Box, f"__r{_name}__", _reflected)
    UFUNCS[_ufunc] = _either_order(_prim, _forward, _reflected)
