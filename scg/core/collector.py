"""Holding Python's garbage collector while a tape is open.

A gradient call keeps every value of its tape alive until its backward pass: tens of
thousands of objects for a loop of a few hundred steps. Python's generational collector,
triggered every 700 allocations, then traverses them again and again, and finds nothing:
the tape's values are freed by reference counting when the call ends. That took a third of
an eager gradient of a 200-step episode. So the collector is held from the outermost trace
level's opening to its closing (and while scg.jit watches a recorded call, where a
collection would run other code's callbacks inside the call); it collects as usual between
calls. Holds are counted across threads: the collector runs again after the last one.

Threads that take gradients back to back overlap: one of them is nearly always inside a
call, and the last hold would almost never end. So a thread whose outermost call ends while
others still hold runs the collection that is due itself (the generation whose count is
past its threshold, as the collector would): there, outside its own tape and any watched
call, and once per call at most, not every 700 allocations.
"""

import gc
import threading

_LOCK = threading.Lock()
_HELD = [0, False]  # (holds running, whether the collector was on before the first)


def hold():
    """Hold the collector (until a `release` for each `hold`)."""
    with _LOCK:
        if not _HELD[0]:
            _HELD[1] = gc.isenabled()
            gc.disable()
        _HELD[0] += 1


def release(collect_due=False):
    """End one hold; after the last, the collector is on again if it was before.
    `collect_due`: the caller is outside every tape and watched call of its thread, where
    a collection another thread's hold keeps from starting may run (see above)."""
    with _LOCK:
        _HELD[0] -= 1
        if not _HELD[0]:
            if _HELD[1]:
                gc.enable()
            return
        due = _due() if collect_due and _HELD[1] else None
    if due is not None:  # (outside the lock: finalizers may take gradients themselves)
        gc.collect(due)


def _due():
    """The oldest generation whose count is past its threshold (None: none is)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    for generation in range(len(thresholds) - 1, -1, -1):
        if thresholds[generation] and counts[generation] > thresholds[generation]:
            return generation
    return None
