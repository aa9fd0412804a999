"""Compiled loops for small arrays, where numpy's cost per call outweighs the work.

- The logistic sigmoid, which numpy computes in four ufunc calls inside an error-state
  change (exp(-x) overflows, harmlessly, for x < -709): about 2 us on ten entries against
  a fraction of that in one loop. The numpy rules take it through scg/core/rewrites.py
  (registered here: this layer sits above them).
- The leave-one-out advantage of a few draws' costs (four numpy calls), for
  `scg.baselines.LeaveOneOut`.

Large arrays stay with numpy's vectorized passes and the threaded ones of parallel.py.
"""

import math

import numpy as np
from numba import njit

from ..core import rewrites
from .primitives import entry_point

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


_SIGMOID = entry_point(_sigmoid_loop) or _sigmoid_loop


def sigmoid(x):
    """1 / (1 + exp(-x)) of a small float64 array, whatever its memory layout; None for
    other input. (Its exp rounds otherwise than numpy's in the last bit: the choice must
    not depend on the layout, which differs between an eager call and scg.jit's recording
    of it, a broadcast view in one and a copy in the other.)"""
    if type(x) is not np.ndarray or x.dtype is not _F64 or not x.ndim or x.size >= SMALL:
        return None
    out = np.empty(x.shape)
    _SIGMOID(np.ascontiguousarray(x).reshape(-1), out.reshape(-1))
    return out


_F64 = np.dtype(np.float64)

@njit("void(float64[:, ::1], float64[:, ::1], float64, float64)", cache=True,
      error_model="numpy")
def _loo_loop(out, q, k, d):
    n, m = q.shape
    for j in range(m):
        total = 0.0
        for i in range(n):
            total += q[i, j]
        t = total / d
        for i in range(n):
            out[i, j] = q[i, j] * k - t


_LOO = entry_point(_loo_loop) or _loo_loop


def loo_advantage(q):
    """q - (the sum of the other draws) / (n - 1) = q * n / (n - 1) - sum / (n - 1) of a
    small C-contiguous float64 q of shape (n, *elements), n >= 2; None for other input."""
    if type(q) is not np.ndarray or q.dtype is not _F64 or not q.ndim or \
            not 0 < q.size < SMALL or not q.flags.c_contiguous or q.shape[0] < 2:
        return None
    n = q.shape[0]
    out = np.empty(q.shape)
    _LOO(out.reshape(n, -1), q.reshape(n, -1), n / (n - 1), float(n - 1))
    return out


rewrites.register("sigmoid", sigmoid)  # (for the numpy rules: scg/core/rewrites.py)
