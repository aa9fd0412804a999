"""Per-draw kernels split over the cores, for large arrays with single-valued parameters.

The common per-draw case (`scg.grad_samples`, or `scg.grad` of a site whose parameters
depend on no draw) calls a kernel on one full array (draws or noise) and parameters that
are one value each (broadcast copies). The 2-D kernels of `continuous` handle every
broadcast, but their loop over an (n, 1) array is serial and cannot use SIMD. The flat
kernels here take the parameters as numbers and optionally multiply by a cotangent g in
the same pass (a first-order VJP), so `g * derivative` costs one pass instead of two.
They evaluate the same scalar function as the 2-D kernel, so the values are identical;
the numpy twin is the 2-D kernel's twin (times g).

`count_nonfinite` is the finiteness check of costs, log-probabilities and gradients in
one counting pass; `loo_advantage` the leave-one-out advantage of many draws in one pass
after the sum.

Threads, not numba's prange: the kernels release the GIL and run on contiguous slices
in a small thread pool, as fast as prange here. prange needs a threading layer, and the
only one available is often GNU OpenMP, which aborts a forked child (multiprocessing's
default on Linux) that runs a parallel kernel after its parent did; a forked child here
starts its own pool.
"""

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

from ..core import effects
from ..core.facts import take_nonfinite
from .continuous import _loc_scale_path, _normal
from .primitives import PARALLEL_MIN, readonly_flat

THREADS = max(1, min(numba.config.NUMBA_NUM_THREADS, 8))  # memory-bound: a few suffice
_POOL = []  # the pool of the THREADS - 1 helper threads, made on first use
_LOCK = [threading.Lock()]


def _pool():
    if not _POOL:
        with _LOCK[0]:
            if not _POOL:
                _POOL.append(ThreadPoolExecutor(THREADS - 1, "scg-kernels"))
    return _POOL[0]


def _after_fork_in_child():
    # the parent's threads do not exist in a forked child: it makes its own pool
    _POOL.clear()
    _LOCK[0] = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def in_chunks(n, call):
    """`call(lo, hi)` on THREADS contiguous slices of range(n) at once (one in the
    calling thread); the list of the results, in order."""
    if THREADS == 1 or n < PARALLEL_MIN:
        return [call(0, n)]
    bounds = [n * k // THREADS for k in range(THREADS + 1)]
    pool = _pool()
    rest = [pool.submit(call, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    return [call(bounds[0], bounds[1])] + [f.result() for f in rest]


def flat_sig(n_params):
    """The numba signature (which, out, g, first, *params): flat arrays, number params.
    An empty g means no cotangent (the plain values)."""
    return ("void(int64, float64[::1], Array(float64, 1, 'C', readonly=True), "
            "Array(float64, 1, 'C', readonly=True)" + ", float64" * n_params + ")")


def _on_threads(kernel, doc):
    """A flat kernel (which, out, g, first, *params) run on slices in the threads."""
    def run(which, out, g, first, *params):
        def call(lo, hi):
            kernel(which, out[lo:hi], g[lo:hi] if g.shape[0] else g, first[lo:hi], *params)
        in_chunks(out.shape[0], call)
    run.__doc__ = doc
    run.serial = kernel  # (the kernel itself: small calls run it in the calling thread)
    return run


@njit(flat_sig(2), nogil=True, cache=True, error_model="numpy")
def _normal_density_flat(which, out, g, x, loc, scale):
    if g.shape[0] == 0:
        for i in range(out.shape[0]):
            out[i] = _normal(which, x[i], loc, scale)
    else:
        for i in range(out.shape[0]):
            out[i] = g[i] * _normal(which, x[i], loc, scale)


@njit(flat_sig(2), nogil=True, cache=True, error_model="numpy")
def _loc_scale_path_flat(which, out, g, eps, loc, scale):
    if g.shape[0] == 0:
        for i in range(out.shape[0]):
            out[i] = _loc_scale_path(which, eps[i], loc, scale)
    else:
        for i in range(out.shape[0]):
            out[i] = g[i] * _loc_scale_path(which, eps[i], loc, scale)


normal_density_flat = _on_threads(
    _normal_density_flat,
    "`continuous.normal_density` for single-valued loc and scale, times g if given.")
loc_scale_path_flat = _on_threads(
    _loc_scale_path_flat,
    "`continuous.loc_scale_path` for single-valued loc and scale, times g if given.")


def flat_twin(twin, which, g, first, *params):
    """The numpy twin of a flat kernel: the 2-D kernel's twin, times g if given."""
    out = twin(which, first, *params)
    return out if g is None else g * out


@njit("int64(Array(float64, 1, 'C', readonly=True))", nogil=True, cache=True, error_model="numpy")
def _count_nonfinite(x):
    bad = 0
    for i in range(x.shape[0]):
        v = x[i]
        bad += v - v != 0.0  # nan for inf and nan, 0 otherwise
    return bad


_F64 = np.dtype(np.float64)
_isfinite = math.isfinite


def all_finite(x):
    """Is every entry of x finite? (Under scg.jit, the checks of one call join in one
    pass over them all: `all_finite.many`.)"""
    return count_nonfinite(x) == 0


def _all_finite_many(*xs):
    """Are all entries of all xs finite? One sum over their entries (finite only if every
    entry is; when it is not, the entries are counted: a sum may also overflow)."""
    try:
        flat = np.concatenate(xs, axis=None)
    except (TypeError, ValueError):  # (not all numeric arrays)
        return all(count_nonfinite(x) == 0 for x in xs)
    if flat.dtype == _F64 and _isfinite(float(np.add.reduce(flat))):
        return True
    return count_nonfinite(flat) == 0


all_finite.many = _all_finite_many


def count_nonfinite(x):
    """How many entries of x are inf or nan: one counting pass over the threads for a large
    array, else one summing pass when there are none (a sum is finite only if every entry
    is). Under scg.jit, the replays check it again."""
    if effects.is_held(x):
        return 0 if effects.check(all_finite, x, "a finiteness check") else \
            count_nonfinite(np.asarray(x.value))
    if type(x) is not np.ndarray or x.dtype != _F64:
        x = np.asarray(x, dtype=float)
    if x.size <= 32:  # tiny (a scalar cost, a bias): Python's test is faster than a ufunc's
        if x.ndim == 0:
            return 0 if _isfinite(float(x)) else 1
        values = x.tolist() if x.ndim == 1 else x.ravel().tolist()
        return 0 if all(map(_isfinite, values)) else sum(not _isfinite(v) for v in values)
    if x.size < 4096:  # small: one test per entry, without the error-state context
        finite = np.isfinite(x)
        return 0 if finite.all() else int(x.size - np.count_nonzero(finite))
    if x.size >= PARALLEL_MIN and x.flags.c_contiguous:
        known = take_nonfinite(x)  # (counted by the kernel that wrote it)
        if known is not None:
            return known
        v = readonly_flat(x)
        return int(sum(in_chunks(v.shape[0], lambda lo, hi: _count_nonfinite(v[lo:hi]))))
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(x)):
            return 0
    return int(x.size - np.count_nonzero(np.isfinite(x)))


@njit("void(float64[:, ::1], Array(float64, 2, 'C', readonly=True), float64, "
      "Array(float64, 1, 'C', readonly=True))", nogil=True, cache=True, error_model="numpy")
def _loo_advantage(out, q, k, t):
    for i in range(q.shape[0]):
        for j in range(q.shape[1]):
            out[i, j] = q[i, j] * k - t[j]


def loo_advantage(q):
    """The leave-one-out advantage q - (sum of the other draws) / (n - 1) of a large
    C-contiguous q (n, *elements), in one pass over the threads after the sum; the same
    operations as `baselines.LeaveOneOut.advantage` (its twin): q * (n / (n - 1)) -
    sum / (n - 1). None when q does not qualify."""
    n = q.shape[0]
    if q.size < PARALLEL_MIN or not q.flags.c_contiguous or q.dtype != np.float64 or n < 2:
        return None
    t = readonly_flat(np.sum(q, axis=0, keepdims=True) / (n - 1))
    k = n / (n - 1)
    out = np.empty(q.shape).reshape(n, -1)
    q2 = readonly_flat(q).reshape(out.shape)
    in_chunks(n, lambda lo, hi: _loo_advantage(out[lo:hi], q2[lo:hi], k, t))
    return out.reshape(q.shape)
