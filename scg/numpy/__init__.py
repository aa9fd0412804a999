"""Reverse-mode rules for numpy: primitives, their VJPs and numpy dispatch."""

import numpy as np

from ..core.tape import Box, box_operator
from . import rules as R
from . import plain_rules  # noqa: F401  (registers the first-order twins)
from .dispatch import install_array_methods

Box.shape = property(lambda b: R.shape(b.value))
Box.dtype = property(lambda b: np.result_type(b.value))
install_array_methods(Box)
for _name, _prim in [("add", R.add), ("sub", R.subtract), ("mul", R.multiply),
                     ("truediv", R.divide), ("pow", R.power), ("matmul", R.matmul)]:
    setattr(Box, f"__{_name}__", box_operator(_prim))
    setattr(Box, f"__r{_name}__", box_operator(_prim, reflected=True))
