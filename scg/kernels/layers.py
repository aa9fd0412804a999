"""Compiled passes of a network's layers: log-softmax along the last axis and its
cotangent, and the cotangent of tanh from its output.

numpy computes a log-softmax in seven passes over the logits (the maximum, a test that it
is finite, the shift, exp, the sum, log, the difference) and its cotangent g - exp(ans) *
sum(g) in four, each writing an array; tanh's cotangent g * (1 - ans * ans) in three. Here
the log-softmax is a pass for the shift, numpy's exp (vectorized, where numba's exp is a
call per entry, 5x slower) and a pass for the sums and the result; its cotangent numpy's
exp and one pass; tanh's cotangent one pass writing only the result. On an RL step's
(4096, 16) log-probabilities and (4096, 64) activations, a few hundred microseconds of
the step.

The numpy rules (scg/numpy/rules.py, plain_rules.py) keep their numpy code as the twin
of each kernel, and take the kernel through scg/core/rewrites.py (registered here: this
layer sits above them). The kernels follow the twins' steps (the same maximum, a shift of
0 when it is not finite, log of the sum plus the maximum; the same products for tanh, so
its cotangent is the twin's to the bit); the sums are taken in order along each row,
where numpy sums pairwise, so the log-softmax and its cotangent agree with the twins to
rounding (tests/kernels/test_layers.py).
"""

import math

import numpy as np
from numba import njit, types

from ..core import rewrites
from .primitives import entry_point

_F64 = np.dtype(np.float64)
_ROWS_RO = types.Array(types.float64, 2, "C", readonly=True)
_ROWS = types.Array(types.float64, 2, "C")
_FLAT_RO = types.Array(types.float64, 1, "C", readonly=True)
_FLAT = types.Array(types.float64, 1, "C")


@njit(types.void(_ROWS_RO, _ROWS, _FLAT), cache=True, error_model="numpy")
def _shift_rows(x, out, m):
    """out = x - m with m the maximum of each row (0 where that is not finite)."""
    n, k = x.shape
    for i in range(n):
        mi = x[i, 0]
        for j in range(1, k):
            v = x[i, j]
            if v > mi or v != v:  # (np.max: a nan in the row is the maximum)
                mi = v
        if not math.isfinite(mi):  # (as the twin: an infinite or nan maximum shifts by 0)
            mi = 0.0
        m[i] = mi
        for j in range(k):
            out[i, j] = x[i, j] - mi


@njit(types.void(_ROWS_RO, _ROWS_RO, _FLAT_RO, _ROWS), cache=True, error_model="numpy")
def _subtract_log_sums(x, e, m, out):
    """out = x - (log(sum of each row of e) + m)."""
    n, k = x.shape
    for i in range(n):
        s = 0.0
        for j in range(k):
            s += e[i, j]
        lse = math.log(s) + m[i]  # (-inf for a row of -inf, as the twin's)
        for j in range(k):
            out[i, j] = x[i, j] - lse


@njit(types.void(_ROWS_RO, _ROWS_RO, _ROWS), cache=True, error_model="numpy")
def _log_softmax_vjp_rows(g, e, out):
    """out = g - e * (sum of each row of g), e = exp(ans)."""
    n, k = g.shape
    for i in range(n):
        s = 0.0
        for j in range(k):
            s += g[i, j]
        for j in range(k):
            out[i, j] = g[i, j] - e[i, j] * s


@njit(types.void(_FLAT_RO, _FLAT_RO, _FLAT), cache=True, error_model="numpy")
def _tanh_vjp_flat(g, ans, out):
    for i in range(g.shape[0]):
        a = ans[i]
        out[i] = g[i] * (1.0 - a * a)


_SHIFT = entry_point(_shift_rows) or _shift_rows
_SUBTRACT_LOG_SUMS = entry_point(_subtract_log_sums) or _subtract_log_sums
_LOG_SOFTMAX_VJP = entry_point(_log_softmax_vjp_rows) or _log_softmax_vjp_rows
_TANH_VJP = entry_point(_tanh_vjp_flat) or _tanh_vjp_flat


def _rows(a):
    """a as (rows, last axis) if it is a C-contiguous float64 ndarray with a last axis of
    at least one entry, else None."""
    if type(a) is not np.ndarray or a.dtype is not _F64 or not a.ndim or \
            not a.flags.c_contiguous or a.shape[-1] == 0:
        return None
    return a.reshape(-1, a.shape[-1])


def log_softmax(x, axis, out=None):
    """x - logsumexp(x) along the last axis of a C-contiguous float64 array (written into
    `out` if given: C-contiguous float64 of x's shape); None for other input (another
    axis, dtype or layout)."""
    rows = _rows(x)
    if rows is None or axis not in (-1, x.ndim - 1):
        return None
    out = np.empty(x.shape) if out is None else out
    out_rows = out.reshape(rows.shape)
    m = np.empty(rows.shape[0])
    _SHIFT(rows, out_rows, m)
    # (numpy's exp is vectorized, numba's is not: 5x faster on the rows of an RL step)
    _SUBTRACT_LOG_SUMS(rows, np.exp(out_rows), m, out_rows)
    return out


def log_softmax_vjp(g, ans, axis, out=None):
    """g - exp(ans) * sum(g along the last axis), the cotangent of log_softmax at its
    result ans (into `out` if given, as for log_softmax); None unless g and ans are
    C-contiguous float64 arrays of one shape."""
    rows, ans_rows = _rows(g), _rows(ans)
    if rows is None or ans_rows is None or g.shape != ans.shape or \
            axis not in (-1, g.ndim - 1):
        return None
    out = np.empty(g.shape) if out is None else out
    _LOG_SOFTMAX_VJP(rows, np.exp(ans_rows), out.reshape(rows.shape))
    return out


def tanh_vjp(g, ans, out=None):
    """g * (1 - ans * ans), the cotangent of tanh at its result ans, in one pass (into
    `out` if given, as for log_softmax); None unless g and ans are C-contiguous float64
    arrays of one shape."""
    if type(g) is not np.ndarray or type(ans) is not np.ndarray or g.dtype is not _F64 or \
            ans.dtype is not _F64 or g.shape != ans.shape or not g.flags.c_contiguous or \
            not ans.flags.c_contiguous:
        return None
    out = np.empty(g.shape) if out is None else out
    _TANH_VJP(g.reshape(-1), ans.reshape(-1), out.reshape(-1))
    return out


# (for the numpy rules: scg/core/rewrites.py)
rewrites.register("log_softmax", log_softmax)
rewrites.register("log_softmax_vjp", log_softmax_vjp)
rewrites.register("tanh_vjp", tanh_vjp)
