"""Elementwise numba kernels for numpy rules whose numpy form costs several calls on small
arrays (scg/numpy/rules.py takes them through SMALL_PASSES, filled here).

The logistic sigmoid in numpy is four ufunc calls inside an error-state change (exp(-x)
overflows, harmlessly, for x < -709): about 2 us on ten entries, against a fraction of
that for one compiled loop. Large arrays stay with numpy's vectorized exp.
"""

import math

import numpy as np
from numba import njit

from ..numpy import rules as R

SMALL = 4096  # entries below which one compiled loop beats numpy's calls


@njit("void(float64[::1], float64[::1])", cache=True, error_model="numpy")
def _sigmoid_loop(x, out):
    for i in range(x.shape[0]):
        xi = x[i]
        if xi >= 0.0:
            out[i] = 1.0 / (1.0 + math.exp(-xi))
        else:  # (exp(xi) does not overflow here; 1 / (1 + exp(-xi)) would for xi < -709)
            e = math.exp(xi)
            out[i] = e / (1.0 + e)


def _entry(kernel):
    # (the compiled function without the dispatcher's typing: see primitives._entry_point)
    try:
        (result,) = kernel.overloads.values()
        return result.entry_point
    except (AttributeError, ValueError):  # pragma: no cover - another numba's internals
        return kernel


_SIGMOID = _entry(_sigmoid_loop)


def sigmoid(x):
    """1 / (1 + exp(-x)) of a small C-contiguous float64 array; None for other input."""
    if type(x) is not np.ndarray or x.dtype is not _F64 or not x.ndim or \
            x.size >= SMALL or not x.flags.c_contiguous:
        return None
    out = np.empty(x.shape)
    _SIGMOID(x.reshape(-1), out.reshape(-1))
    return out


_F64 = np.dtype(np.float64)

R.SMALL_PASSES.update(sigmoid=sigmoid)  # (see scg/numpy/rules.py)
