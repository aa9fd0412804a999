"""Fused passes over the draws for the per-draw case, on the kernel threads.

Each function here does in one pass what the general path does in two or more whole-array
steps, with the same floating-point operations in the same order, so the values are the
same:
- the standard normal noise, drawn by numba's implementation of numpy's Generator: the
  same numbers and the same generator state after, about three times faster than
  numpy's own loop (checked against numpy once per process);
- a Normal's plain draws, with the count of their non-finite log-densities, which the
  score term needs next;
- the square of a large array, with its sum as np.sum computes it (numpy's pairwise
  sum, walked in the same order) for the mean of the costs;
- the cotangent of that square, and the location-scale path's draw and its derivative
  in the scale times a cotangent;
- the score term of a Normal site, whose cotangents in loc and in scale come from one
  pass over the draws, with the advantage (a leave-one-out one included) formed inside
  the pass instead of as an array.
Each output's count of non-finite entries comes from the same pass (`facts`), so the
finiteness checks of costs and gradients need no pass of their own.

They return None when a call does not qualify (small, not C-contiguous, not float64, or
parameters that differ between draws); the caller then takes the general path.

Their large outputs come from `empty`, which hands out again the buffers of earlier
outputs that nothing references any more (a repeated gradient call allocates the same
sizes each time): a fresh buffer costs the kernel its page faults, that is zeroing its
memory, about as much as the pass that fills it.
"""

import math
import os
import sys
import threading

import numpy as np
from numba import njit

from ..core.random_state import restore_position, save_position
from ..core.tape import THREAD
from .continuous import _loc_scale_path, _normal
from ..core.facts import note, noted, remember
from ..core import effects, rewrites
from .parallel import THREADS, _loc_scale_path_flat, _pool, in_chunks
from .primitives import PARALLEL_MIN, readonly_flat

_F64 = np.dtype(np.float64)
_RO = "Array(float64, 1, 'C', readonly=True)"


def _flat_f64(a):
    """a as a 1-D float64 array if it is a large C-contiguous float64 ndarray (at least
    PARALLEL_MIN entries), else None."""
    if type(a) is not np.ndarray or a.size < PARALLEL_MIN or a.dtype != _F64 or \
            not a.flags.c_contiguous:
        return None
    return a.reshape(-1)


def single_value(a):
    """The one value of a (a number, a size-1 array or a broadcast copy), else None."""
    if type(a) is float:
        return a
    if type(a) is not np.ndarray:
        return float(a) if isinstance(a, (int, np.floating, np.integer)) else None
    if a.size == 1 or (a.size and not any(a.strides)):
        return float(a.flat[0])
    return None


# ---------------------------------------------------------------- output buffers
KEEP_FREE = 2  # free buffers kept for reuse; older ones are let go (their memory returns)
# Outputs from this many entries (32 MB) on are reused: above glibc's largest threshold
# for mapping memory apart, each new one would be fresh pages, faulted in as they are
# written. Below it the allocator's heap serves them better: buffers held back there
# break up its free memory (a 10 x 10 Hessian over 100 000 draws took 1.5x the time).
REUSE_MIN = 1 << 22
_BUFFERS = []  # the buffers handed out (1-D float64, in use or free), oldest first
_BUFFERS_LOCK = threading.Lock()
_FREE_REFS = 3  # references of a free buffer seen by getrefcount: the list, a local, the call
_getrefcount = sys.getrefcount


def _after_fork_in_child():
    # a thread of the parent may have held the lock: the child starts with its own
    global _BUFFERS_LOCK
    _BUFFERS_LOCK = threading.Lock()
    _BUFFERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def empty(shape):
    """np.empty(shape) of float64, for an output of at least REUSE_MIN entries the
    buffer of an earlier output that nothing references any more, if one has the size.

    A buffer is free when only this module holds it (views of it hold it too). At most
    KEEP_FREE free buffers are kept, the most recently handed out; so a call repeated with
    the same sizes reuses the memory of the previous call's outputs once they are dropped,
    and a change of sizes lets the old buffers go."""
    size = math.prod(shape)
    if size < REUSE_MIN:
        return np.empty(shape)
    with _BUFFERS_LOCK:
        found = None
        free = 0
        for k in range(len(_BUFFERS) - 1, -1, -1):
            b = _BUFFERS[k]
            if _getrefcount(b) > _FREE_REFS:
                continue
            if found is None and b.shape[0] == size:
                found = b
                del _BUFFERS[k]
                continue
            free += 1
            if free > KEEP_FREE:
                del _BUFFERS[k]
        if found is None:
            found = np.empty(size)
        else:
            found.flags.writeable = True  # (read_only may have marked it, for its last user)
        _BUFFERS.append(found)
        if len(_BUFFERS) > 8 * (KEEP_FREE + 1):  # in use: no longer tracked
            del _BUFFERS[0]
    return found.reshape(shape)


# ---------------------------------------------------------------- standard normal noise
@njit(nogil=True, cache=True)
def _standard_normal(rng, out):
    for i in range(out.shape[0]):
        out[i] = rng.standard_normal()


_NUMBA_DRAWS = []  # [whether numba's draws were found to be numpy's], checked on first use
_CHECK_SEED = 20261202
_TAIL_DRAWS = 256  # draws started in the ziggurat's tail that the check compares (at least)
# numpy's random_standard_normal takes a uint64 r: layer idx = r & 0xff and
# rabs = (r >> 9) & (2**52 - 1); it enters the tail (log1p) when idx == 0 and
# rabs >= ki_double[0] (numpy's ziggurat_constants.h).
_KI0 = np.uint64(0x000EF33D8025EF6A)
_LOW8, _MANTISSA = np.uint64(0xff), np.uint64(0x000FFFFFFFFFFFFF)
_NINE, _ZERO = np.uint64(9), np.uint64(0)


@njit(nogil=True, cache=True)
def _tail_starts(raw, first, out, n):
    # the indices (from first) of the words of raw that start a tail draw, written to
    # out from its entry n on while it has room; returns n plus their count
    for i in range(raw.shape[0]):
        r = raw[i]
        if r & _LOW8 == _ZERO and (r >> _NINE) & _MANTISSA >= _KI0:
            if n < out.shape[0]:
                out[n] = first + i
            n += 1
    return n


def _tail_draws_numpys():
    """Do numba's and numpy's draws agree on _TAIL_DRAWS draws that start in the tail?
    Each starts at a word of the PCG64 stream that sends the ziggurat into its tail
    (found in the raw words); a second draw follows it, which shows where the first left
    the generator (its rejected tail attempts included), and the state after the last
    pair is compared."""
    bits = np.random.PCG64(_CHECK_SEED)
    starts = np.empty(_TAIL_DRAWS, np.int64)
    found = first = 0
    while found < _TAIL_DRAWS:
        found = _tail_starts(bits.random_raw(1 << 16), first, starts, found)
        first += 1 << 16
    cursor = np.random.PCG64(_CHECK_SEED)
    a, b = (np.random.Generator(np.random.PCG64()) for _ in range(2))
    got, want = np.empty((_TAIL_DRAWS, 2)), np.empty((_TAIL_DRAWS, 2))
    at = 0
    for k, start in enumerate(starts.tolist()):
        cursor.advance(start - at)
        at = start
        a.bit_generator.state = b.bit_generator.state = cursor.state
        _standard_normal(a, got[k])
        b.standard_normal(out=want[k])
    return bool(np.array_equal(got, want)) and a.bit_generator.state == b.bit_generator.state


def _numba_draws_numpys():
    """Do numba's Generator.standard_normal and numpy's give the same numbers and leave the
    generator in the same state? (Checked once per process, 10 to 20 ms: on 2**16
    consecutive draws, which include about 1000 in the ziggurat's wedges (exp) but only
    about ten in its tail (log1p), and on _TAIL_DRAWS draws started in the tail.)"""
    if not _NUMBA_DRAWS:
        a, b = (np.random.Generator(np.random.PCG64(_CHECK_SEED)) for _ in range(2))
        out = np.empty(1 << 16)
        _standard_normal(a, out)
        _NUMBA_DRAWS.append(bool(np.array_equal(out, b.standard_normal(out.shape[0])))
                            and a.bit_generator.state == b.bit_generator.state
                            and _tail_draws_numpys())
    return _NUMBA_DRAWS[0]


def numba_draws(rng):
    """Does `standard_normal` draw rng's large normals with numba (a numpy Generator on
    PCG64, numba's draws checked to be numpy's)? Then they can also be drawn again."""
    return type(rng) is np.random.Generator and \
        type(rng.bit_generator) is np.random.PCG64 and _numba_draws_numpys()


def standard_normal(rng, shape):
    """rng.standard_normal(shape): the same numbers, and the generator in the same state
    after, drawn by numba's implementation of numpy's Generator (its ziggurat, on the
    same bit generator: about three times faster than numpy's own loop) into a reused
    buffer (`empty`). Under the bit generator's lock, as numpy draws. None unless rng is
    a numpy Generator on PCG64 (the default) and the draw large."""
    if math.prod(shape) < PARALLEL_MIN or not numba_draws(rng):
        return None
    out = empty(shape)
    with rng.bit_generator.lock:
        effects.drawing(rng, tuple(shape))  # (under the lock: where this very draw starts)
        _standard_normal(rng, out.reshape(-1))
    return out


class positions_of_draws(effects.Handler):
    """`with positions_of_draws() as taken:` the (position, shape) at which each
    `standard_normal` of this thread drew, in order: a handler of the effect stack that
    takes the `drawing` messages (each sent under the generator's lock together with its
    draw: another thread may draw from it too) and forwards every other message."""

    def __init__(self):
        self.taken = []

    def drawing(self, rng, shape):
        self.taken.append((save_position(rng), shape))
        super().drawing(rng, shape)

    def __enter__(self):
        effects.push(self)
        return self.taken

    def __exit__(self, *exc):
        effects.pop(self)
        return False


@njit(nogil=True, cache=True, error_model="numpy")
def _standard_normal_times(rng, out, g):
    # out = g * the noise drawn again, and the count of non-finite products (as `_times`)
    bad = 0
    for i in range(out.shape[0]):
        v = g[i] * rng.standard_normal()
        out[i] = v
        bad += v - v != 0.0
    return bad


class DrawnAgain:
    """Standard normal noise that the tape does not keep: where in its PCG64 stream it was
    drawn, and its shape. A derivative that needs it draws it again (numba's draws are
    numpy's: the same numbers), so the memory of a large noise array is free for the
    gradients by the time they are made."""

    __slots__ = ("position", "shape")

    def __init__(self, position, shape):
        self.position = position
        self.shape = shape

    def _generator(self):
        rng = np.random.Generator(np.random.PCG64())
        restore_position(rng, self.position)
        return rng

    def values(self):
        """The noise, drawn again (a new array)."""
        out = np.empty(self.shape)
        _standard_normal(self._generator(), out.reshape(-1))
        return out

    def times(self, g):
        """g * the noise in one pass that draws it again, its non-finite count noted
        (`facts`); None unless g is a C-contiguous float64 array of the noise's shape."""
        if type(g) is not np.ndarray or g.shape != self.shape or g.dtype != _F64 or \
                not g.flags.c_contiguous:
            return None
        out = empty(self.shape)
        remember(out, _standard_normal_times(self._generator(), out.reshape(-1),
                                             readonly_flat(g.reshape(-1))))
        return out


# ---------------------------------------------------------------- x ** 2 and its cotangent
@njit(f"int64(float64[::1], {_RO})", nogil=True, cache=True, error_model="numpy")
def _square(out, a):
    bad = 0
    for i in range(out.shape[0]):
        v = a[i] * a[i]
        out[i] = v
        bad += v - v != 0.0  # nan for inf and nan, 0 otherwise
    return bad


@njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _square_leaf(out, a, lo, n):
    # out[lo:lo+n] = a * a (n <= 128) and its sum as numpy's pairwise sum adds such a run:
    # eight lanes, combined as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), then the rest
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            v = a[i] * a[i]
            out[i] = v
            res += v
        return res
    r0 = a[lo] * a[lo]
    r1 = a[lo + 1] * a[lo + 1]
    r2 = a[lo + 2] * a[lo + 2]
    r3 = a[lo + 3] * a[lo + 3]
    r4 = a[lo + 4] * a[lo + 4]
    r5 = a[lo + 5] * a[lo + 5]
    r6 = a[lo + 6] * a[lo + 6]
    r7 = a[lo + 7] * a[lo + 7]
    out[lo], out[lo + 1], out[lo + 2], out[lo + 3] = r0, r1, r2, r3
    out[lo + 4], out[lo + 5], out[lo + 6], out[lo + 7] = r4, r5, r6, r7
    end = lo + n - n % 8
    for i in range(lo + 8, end, 8):
        v0 = a[i] * a[i]
        v1 = a[i + 1] * a[i + 1]
        v2 = a[i + 2] * a[i + 2]
        v3 = a[i + 3] * a[i + 3]
        v4 = a[i + 4] * a[i + 4]
        v5 = a[i + 5] * a[i + 5]
        v6 = a[i + 6] * a[i + 6]
        v7 = a[i + 7] * a[i + 7]
        out[i], out[i + 1], out[i + 2], out[i + 3] = v0, v1, v2, v3
        out[i + 4], out[i + 5], out[i + 6], out[i + 7] = v4, v5, v6, v7
        r0 += v0
        r1 += v1
        r2 += v2
        r3 += v3
        r4 += v4
        r5 += v5
        r6 += v6
        r7 += v7
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, lo + n):
        v = a[i] * a[i]
        out[i] = v
        res += v
    return res


@njit(f"float64(float64[::1], {_RO}, int64, int64)", nogil=True, cache=True,
      error_model="numpy")
def _square_sum(out, a, lo, n):
    # out[lo:lo+n] = a * a and its sum as numpy's pairwise sum computes it: a run longer
    # than 128 is cut at half its length rounded down to a multiple of 8, the halves
    # summed alike and added (walked with an explicit stack: state 1, left half running;
    # 2, right half running)
    if n <= 128:
        return _square_leaf(out, a, lo, n)
    st_lo = np.empty(64, np.int64)
    st_n = np.empty(64, np.int64)
    st_val = np.empty(64)
    st_state = np.zeros(64, np.int64)
    sp = 0
    st_lo[0] = lo
    st_n[0] = n
    while True:
        m = st_n[sp]
        if m > 128:  # cut it: the left half first
            st_state[sp] = 1
            m2 = m // 2
            m2 -= m2 % 8
            st_lo[sp + 1] = st_lo[sp]
            st_n[sp + 1] = m2
            st_state[sp + 1] = 0
            sp += 1
            continue
        v = _square_leaf(out, a, st_lo[sp], m)
        sp -= 1
        while True:  # hand v up
            if sp < 0:
                return v
            if st_state[sp] == 1:  # the left half's sum is in: the right half next
                st_val[sp] = v
                st_state[sp] = 2
                m2 = st_n[sp] // 2
                m2 -= m2 % 8
                st_lo[sp + 1] = st_lo[sp] + m2
                st_n[sp + 1] = st_n[sp] - m2
                st_state[sp + 1] = 0
                sp += 1
                break
            v = st_val[sp] + v
            sp -= 1


def _pairwise_parts(n):
    """[lo, hi) parts of range(n), one per thread (a power of two of them), cut where
    numpy's pairwise sum cuts: the parts' sums added as a tree are numpy's sum."""
    parts = [(0, n)]
    while 2 * len(parts) <= THREADS:
        cut = []
        for lo, hi in parts:
            half = (hi - lo) // 2
            mid = lo + half - half % 8
            cut += [(lo, mid), (mid, hi)]
        parts = cut
    return parts


def _on_parts(parts, call):
    """call(lo, hi) for every part, the first in the calling thread and the others in the
    pool; the results in order."""
    if len(parts) == 1:
        return [call(*parts[0])]
    pool = _pool()
    rest = [pool.submit(call, lo, hi) for lo, hi in parts[1:]]
    return [call(*parts[0])] + [f.result() for f in rest]


@njit(f"int64(float64[::1], {_RO}, {_RO}, float64)", nogil=True, cache=True,
      error_model="numpy")
def _square_vjp(out, g, a, g0):
    bad = 0
    if g.shape[0] == 0:  # one cotangent for every entry
        c = g0 * 2.0
        for i in range(out.shape[0]):
            v = c * a[i]
            out[i] = v
            bad += v - v != 0.0
    else:
        for i in range(out.shape[0]):
            v = (g[i] * 2.0) * a[i]
            out[i] = v
            bad += v - v != 0.0
    return bad


_NO_ARRAY = readonly_flat(np.empty(0))


def square(a):
    """a * a (numpy's a ** 2) of a large C-contiguous float64 array, on the threads.

    Inside a gradient call the square is a cost of the draws, whose mean the objective
    takes next: the same pass sums it as np.sum does (numpy's pairwise sum; the halves on
    two threads), and the sum and, when it is finite (then so is every entry), the count
    of non-finite entries, 0, are noted (`facts`). Otherwise the pass counts them."""
    v = _flat_f64(a)
    if v is None:
        return None
    v = readonly_flat(v)
    out = empty(a.shape)
    flat = out.reshape(-1)
    if THREAD.level == 0:
        remember(out, sum(in_chunks(flat.shape[0], lambda lo, hi: _square(flat[lo:hi],
                                                                             v[lo:hi]))))
        return out
    sums = _on_parts(_pairwise_parts(flat.shape[0]),
                     lambda lo, hi: _square_sum(flat, v, lo, hi - lo))
    while len(sums) > 1:  # (the tree of the parts)
        sums = [sums[k] + sums[k + 1] for k in range(0, len(sums), 2)]
    total = np.float64(0.0 + sums[0])
    remember(out, 0 if math.isfinite(total) else None, total)
    return out


def square_vjp(g, a):
    """The cotangent (g * 2) * a of a ** 2, as the rule computes it, in one pass on the
    threads: g a full array of a's shape, or one value broadcast (the mean of the draws
    seeds one). Its count of non-finite entries is noted. None when the call does not
    qualify."""
    v = _flat_f64(a)
    if v is None or type(g) is not np.ndarray or g.shape != a.shape or g.dtype != _F64:
        return None
    if not any(g.strides):
        gv, g0 = _NO_ARRAY, float(g.flat[0])
    elif g.flags.c_contiguous:
        gv, g0 = readonly_flat(g), 0.0
    else:
        return None
    v = readonly_flat(v)
    out = empty(a.shape)
    flat = out.reshape(-1)
    bad = in_chunks(flat.shape[0], lambda lo, hi: _square_vjp(
        flat[lo:hi], gv[lo:hi] if gv.shape[0] else gv, v[lo:hi], g0))
    remember(out, sum(bad))
    return out


# ---------------------------------------------------------------- the location-scale path
@njit(f"int64(float64[::1], {_RO}, {_RO})", nogil=True, cache=True, error_model="numpy")
def _times(out, g, d):
    # g times the derivative d (the noise: the path's derivative in the scale), counted
    bad = 0
    for i in range(out.shape[0]):
        v = g[i] * d[i]
        out[i] = v
        bad += v - v != 0.0
    return bad


def loc_scale_path(which, eps, loc, scale, g=None):
    """`continuous.loc_scale_path` output `which` (0 the draw loc + scale * eps, 3 its
    derivative eps in the scale), times g if given, for large C-contiguous noise and
    single-valued loc and scale, on the threads, into a reused buffer (`empty`); g * eps
    is counted (`facts`). None when the call does not qualify."""
    v = _flat_f64(eps)
    if v is None or (g is None) != (which == 0):
        return None
    loc, scale = single_value(loc), single_value(scale)
    if loc is None or scale is None:
        return None
    if g is not None:
        gv = _flat_f64(g)
        if gv is None or g.shape != eps.shape or which != 3:
            return None
        gv = readonly_flat(gv)
    v = readonly_flat(v)
    out = empty(eps.shape)
    flat = out.reshape(-1)
    if g is None:
        in_chunks(flat.shape[0], lambda lo, hi: _loc_scale_path_flat(
            0, flat[lo:hi], _NO_ARRAY, v[lo:hi], loc, scale))
    else:
        remember(out, sum(in_chunks(flat.shape[0], lambda lo, hi: _times(
            flat[lo:hi], gv[lo:hi], v[lo:hi]))))
    return out


# ---------------------------------------------------------------- the score term of a Normal
@njit(f"UniTuple(int64, 2)(float64[::1], float64[::1], {_RO}, {_RO}, float64, float64, "
      "float64, float64, float64, boolean)", nogil=True, cache=True, error_model="numpy")
def _normal_score_pair(d_loc, d_scale, w, x, loc, scale, k, t, c, unit):
    # weight W = w * k - t (k = 1, t = 0: w itself; the leave-one-out advantage otherwise),
    # times c unless c is 1; then W times each score, as `_normal` gives it; the
    # non-finite entries of each output counted. (One loop per case: plain loops.)
    n = x.shape[0]
    plain = k == 1.0 and t == 0.0
    bad_loc = 0
    bad_scale = 0
    if d_loc.shape[0] and d_scale.shape[0]:
        if plain and unit:
            for i in range(n):
                a = w[i] * _normal(2, x[i], loc, scale)
                b = w[i] * _normal(3, x[i], loc, scale)
                d_loc[i] = a
                d_scale[i] = b
                bad_loc += a - a != 0.0
                bad_scale += b - b != 0.0
        else:
            for i in range(n):
                W = w[i] * k - t
                if not unit:
                    W = c * W
                a = W * _normal(2, x[i], loc, scale)
                b = W * _normal(3, x[i], loc, scale)
                d_loc[i] = a
                d_scale[i] = b
                bad_loc += a - a != 0.0
                bad_scale += b - b != 0.0
    else:
        out = d_loc if d_loc.shape[0] else d_scale
        which = 2 if d_loc.shape[0] else 3
        for i in range(n):
            W = w[i] * k - t
            if not unit:
                W = c * W
            a = W * _normal(which, x[i], loc, scale)
            out[i] = a
            bad_loc += a - a != 0.0
        if not d_loc.shape[0]:
            bad_loc, bad_scale = 0, bad_loc
    return bad_loc, bad_scale


@njit(f"int64(float64[::1], {_RO}, float64, float64)", nogil=True, cache=True,
      error_model="numpy")
def _normal_draw(out, eps, loc, scale):
    # the draws loc + scale * eps, as the location-scale path computes them, and the count
    # of their non-finite Normal log-densities
    bad = 0
    for i in range(out.shape[0]):
        x = _loc_scale_path(0, eps[i], loc, scale)
        out[i] = x
        v = _normal(0, x, loc, scale)
        bad += v - v != 0.0
    return bad


def normal_draw(eps, loc, scale):
    """The plain draws loc + scale * eps of a Normal from large C-contiguous noise, with
    single-valued loc and scale, into a reused buffer; the count of their non-finite
    log-densities is noted on them (`facts.note`: trusted once a site has made its draws
    read-only) for the site's score term. None when the call does not qualify."""
    v = _flat_f64(eps)
    if v is None:
        return None
    loc, scale = single_value(loc), single_value(scale)
    if loc is None or scale is None:
        return None
    v = readonly_flat(v)
    out = empty(eps.shape)
    flat = out.reshape(-1)
    bad = sum(in_chunks(flat.shape[0], lambda lo, hi: _normal_draw(flat[lo:hi], v[lo:hi],
                                                                    loc, scale)))
    note(out, ("normal_log_prob_nonfinite", loc, scale), bad)
    return out


@njit(f"int64({_RO}, float64, float64)", nogil=True, cache=True, error_model="numpy")
def _normal_log_prob_nonfinite(x, loc, scale):
    bad = 0
    for i in range(x.shape[0]):
        v = _normal(0, x[i], loc, scale)
        bad += v - v != 0.0  # nan for inf and nan, 0 otherwise
    return bad


def normal_log_prob_nonfinite(x, loc, scale):
    """How many entries of the Normal(loc, scale) log-density at the draws x are inf or
    nan, counted without storing the densities; None when the call does not qualify
    (single-valued loc and scale, x large, C-contiguous, float64)."""
    v = _flat_f64(x)
    if v is None:
        return None
    loc, scale = single_value(loc), single_value(scale)
    if loc is None or scale is None:
        return None
    known = noted(x, ("normal_log_prob_nonfinite", loc, scale))  # (counted when drawn)
    if known is not None:
        return known
    v = readonly_flat(v)
    return int(sum(in_chunks(v.shape[0], lambda lo, hi: _normal_log_prob_nonfinite(
        v[lo:hi], loc, scale))))


def normal_score_pair(w, x, loc, scale, k, t, c, want_loc, want_scale):
    """W * d log p / d loc and W * d log p / d scale of Normal(loc, scale) at the draws x,
    W = c * (w * k - t) (w * k - t when c is 1), in one pass: (d_loc or None, d_scale or
    None) as wanted; None when the call does not qualify (loc and scale single-valued,
    w and x large C-contiguous float64 arrays of one shape)."""
    v, wv = _flat_f64(x), _flat_f64(w)
    if v is None or wv is None or w.shape != x.shape:
        return None
    loc, scale = single_value(loc), single_value(scale)
    if loc is None or scale is None:
        return None
    v, wv = readonly_flat(v), readonly_flat(wv)
    d_loc = empty(x.shape) if want_loc else None
    d_scale = empty(x.shape) if want_scale else None
    fl = d_loc.reshape(-1) if want_loc else np.empty(0)
    fs = d_scale.reshape(-1) if want_scale else np.empty(0)
    unit = c == 1.0
    c, k, t = float(c), float(k), float(t)

    def call(lo, hi):
        return _normal_score_pair(fl[lo:hi] if want_loc else fl,
                                  fs[lo:hi] if want_scale else fs,
                                  wv[lo:hi], v[lo:hi], loc, scale, k, t, c, unit)
    bad = in_chunks(v.shape[0], call)
    if want_loc:
        remember(d_loc, sum(b[0] for b in bad))
    if want_scale:
        remember(d_scale, sum(b[1] for b in bad))
    return d_loc, d_scale


rewrites.register("square", square)  # (for the numpy rules: scg/core/rewrites.py)
rewrites.register("square_vjp", square_vjp)
