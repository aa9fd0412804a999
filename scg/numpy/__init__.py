"""Reverse-mode rules for numpy: primitives, their VJPs and numpy dispatch."""

import numpy as np

from ..core.tape import Box
from . import plain_rules  # noqa: F401  (registers the first-order twins)
from .dispatch import install_array_methods

Box.shape = property(lambda b: np.shape(b.value))
Box.dtype = property(lambda b: np.result_type(b.value))
install_array_methods(Box)
