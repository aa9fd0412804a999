"""Reverse-mode rules for numpy: primitives, their VJPs and numpy dispatch."""

import operator

import numpy as np

from ..core.tape import Box, Tracer, box_operator, register_array_methods
from . import rules as R
from . import plain_rules  # noqa: F401  (registers the first-order twins)
from .dispatch import UFUNCS, array_methods

register_array_methods(array_methods())
_box_methods = {
    "shape": property(lambda b: R.shape(b.value)),
    "dtype": property(lambda b: b.value.dtype if isinstance(b.value, Tracer)
                      else np.result_type(b.value))}


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
# For + - * / of a float64 scalar and a number the Python operator gives the ufunc's value;
# for ** numpy's scalar power differs from np.power in the last bit and at the edges, and
# @ is no scalar operation: those two always call the ufunc.
for _ufunc, _name, _prim, _scalar_op in [
        (np.add, "add", R.add, operator.add), (np.subtract, "sub", R.subtract, operator.sub),
        (np.multiply, "mul", R.multiply, operator.mul),
        (np.true_divide, "truediv", R.divide, operator.truediv),
        (np.power, "pow", R.power, None), (np.matmul, "matmul", R.matmul, None)]:
    _forward = box_operator(_prim, _scalar_op)
    _reflected = box_operator(_prim, _scalar_op, reflected=True)
    _box_methods[f"__{_name}__"] = _forward
    _box_methods[f"__r{_name}__"] = _reflected
    UFUNCS[_ufunc] = _either_order(_prim, _forward, _reflected)
register_array_methods(_box_methods, cls=Box)
