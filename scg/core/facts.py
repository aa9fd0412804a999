"""What a pass learned about a large array, kept for the passes that would learn it again.

A fused kernel (`fused.py`) that writes a large output counts its non-finite entries in
the same pass; the finiteness check of a cost or of a gradient that follows
(`parallel.count_nonfinite`) asks here instead of reading the array again. Sums of large
vectors of the tape are kept too: the square of the draws (`fused.square`) sums the costs
as it writes them, and `rules.sum_` keeps the sums it computes, so that the mean of the
objective and a leave-one-out baseline sum the costs of the draws once.

A fact is about the memory of one live array (found by its data pointer and shape; it
goes when the array is freed), per thread, and is trusted only while nothing can have
changed the array: the values of a gradient call are the tape's, which no step changes.
- A count is used once: each output is checked once, by the step that receives it (a
  cost by `scg.cost`, a gradient by the check after the backward pass). Counts are
  dropped when the next outermost gradient call starts.
- A sum is noted only inside a gradient call and dropped when that call's outermost
  level closes (`tape.new_level`).
- A keyed fact (`note` / `noted`: the count of non-finite log-densities at a site's
  draws, counted by the pass that drew them) is about a read-only array and is dropped
  with the counts.
"""

import weakref

import numpy as np

from .tape import THREAD

_F64 = np.dtype(np.float64)
# arrays of this many entries and more are large: the kernels split passes over them
# between threads, and the numpy rules hand them to those passes (scg/core/rewrites.py)
LARGE = 1 << 16


def _key(a):
    return a.__array_interface__["data"][0]


def _note(store, a, value):
    key = _key(a)
    store[key] = (weakref.ref(a, lambda _, store=store, key=key: _drop(store, key)),
                  a.shape, value)


def _drop(store, key):
    got = store.get(key)
    if got is not None and got[0]() is None:
        del store[key]


def note(a, key, value):
    """Note `value` under `key` about the array `a`, just written (trusted while it is
    read-only: the draws of a site are made read-only as they are drawn)."""
    _note(THREAD.keyed, a, (key, value))


def noted(x, key):
    """What was noted under `key` about x, if x is still read-only; else None."""
    store = THREAD.keyed
    found = _find(store, x)
    if found is None or x.flags.writeable:
        return None
    got = store[found][2]
    return got[1] if got[0] == key else None


def remember(a, nonfinite=None, total=None):
    """Note that the C-contiguous float64 array `a`, just written, has `nonfinite`
    non-finite entries and sums to `total` (None: not known)."""
    if nonfinite is not None:
        _note(THREAD.counts, a, nonfinite)
    if total is not None and THREAD.level > 0:
        _note(THREAD.sums, a, total)


def _find(store, x):
    if not store or type(x) is not np.ndarray or x.dtype != _F64 or \
            not x.flags.c_contiguous:
        return None
    key = _key(x)
    got = store.get(key)
    if got is None or got[1] != x.shape or got[0]() is None:
        return None
    return key


def take_nonfinite(x):
    """The count of non-finite entries of x noted by the kernel that wrote it (once), or
    None."""
    store = THREAD.counts
    key = _find(store, x)
    return None if key is None else store.pop(key)[2]


def known_sum(x):
    """The sum of x noted by the kernel that wrote it in this gradient call, or None."""
    store = THREAD.sums
    key = _find(store, x)
    return None if key is None else store[key][2]
