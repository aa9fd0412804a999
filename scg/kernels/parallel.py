"""Per-draw kernels split over the cores, for large arrays with single-valued parameters.

The common per-draw case (`scg.grad_samples`, or `scg.grad` of a site whose parameters
depend on no draw) calls a kernel on one full array (draws or noise) and parameters that
are one value each (broadcast copies). The 2-D kernels of `continuous` handle every
broadcast, but their loop over an (n, 1) array is serial and cannot use SIMD. These flat
kernels take the parameters as numbers, loop with numba's prange over both cores, and
optionally multiply by a cotangent g in the same pass (a first-order VJP), so
`g * derivative` costs one pass instead of two. They evaluate the same scalar function
as the 2-D kernel, so the values are identical; the numpy twin is the 2-D kernel's twin
(times g).

`count_nonfinite` is the finiteness check of costs, log-probabilities and gradients in
one parallel counting pass; `loo_advantage` the leave-one-out advantage of many draws in
one parallel pass after the sum.
"""

import numpy as np
from numba import njit, prange

from .continuous import _loc_scale_path, _normal
from .primitives import PARALLEL_MIN, readonly_flat


def flat_sig(n_params):
    """The numba signature (which, out, g, first, *params): flat arrays, number params.
    An empty g means no cotangent (the plain values)."""
    return ("void(int64, float64[::1], Array(float64, 1, 'C', readonly=True), "
            "Array(float64, 1, 'C', readonly=True)" + ", float64" * n_params + ")")


@njit(flat_sig(2), parallel=True, cache=True)
def normal_density_flat(which, out, g, x, loc, scale):
    """`continuous.normal_density` for single-valued loc and scale, times g if given."""
    if g.shape[0] == 0:
        for i in prange(out.shape[0]):
            out[i] = _normal(which, x[i], loc, scale)
    else:
        for i in prange(out.shape[0]):
            out[i] = g[i] * _normal(which, x[i], loc, scale)


@njit(flat_sig(2), parallel=True, cache=True)
def loc_scale_path_flat(which, out, g, eps, loc, scale):
    """`continuous.loc_scale_path` for single-valued loc and scale, times g if given."""
    if g.shape[0] == 0:
        for i in prange(out.shape[0]):
            out[i] = _loc_scale_path(which, eps[i], loc, scale)
    else:
        for i in prange(out.shape[0]):
            out[i] = g[i] * _loc_scale_path(which, eps[i], loc, scale)


def flat_twin(twin, which, g, first, *params):
    """The numpy twin of a flat kernel: the 2-D kernel's twin, times g if given."""
    out = twin(which, first, *params)
    return out if g is None else g * out


@njit("int64(Array(float64, 1, 'C', readonly=True))", parallel=True, cache=True)
def _count_nonfinite(x):
    bad = 0
    for i in prange(x.shape[0]):
        v = x[i]
        bad += v - v != 0.0  # nan for inf and nan, 0 otherwise
    return bad


def count_nonfinite(x):
    """How many entries of x are inf or nan: one parallel counting pass for a large array,
    else one summing pass when there are none (a sum is finite only if every entry is)."""
    x = np.asarray(x, dtype=float)
    if x.size >= PARALLEL_MIN and x.flags.c_contiguous:
        return int(_count_nonfinite(readonly_flat(x)))
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(x)):
            return 0
    return int(x.size - np.count_nonzero(np.isfinite(x)))



@njit("void(float64[:, ::1], Array(float64, 2, 'C', readonly=True), float64, "
      "Array(float64, 1, 'C', readonly=True))", parallel=True, cache=True)
def _loo_advantage(out, q, k, t):
    for i in prange(q.shape[0]):
        for j in range(q.shape[1]):
            out[i, j] = q[i, j] * k - t[j]


def loo_advantage(q):
    """The leave-one-out advantage q - (sum of the other draws) / (n - 1) of a large
    C-contiguous q (n, *elements), in one parallel pass after the sum; the same operations
    as `baselines.LeaveOneOut.advantage` (its twin): q * (n / (n - 1)) - sum / (n - 1).
    None when q does not qualify."""
    n = q.shape[0]
    if q.size < PARALLEL_MIN or not q.flags.c_contiguous or q.dtype != np.float64 or n < 2:
        return None
    t = np.sum(q, axis=0, keepdims=True) / (n - 1)
    out = np.empty(q.shape)
    q2 = q.reshape(n, -1)
    _loo_advantage(out.reshape(q2.shape), readonly_flat(q2).reshape(q2.shape), n / (n - 1),
                   readonly_flat(t))
    return out
