"""Holding Python's garbage collector while a tape is open.

A gradient call keeps every value of its tape alive until its backward pass: tens of
thousands of objects for a loop of a few hundred steps. Python's generational collector,
triggered every 700 allocations, then traverses them again and again, and finds nothing:
the tape's values are freed by reference counting when the call ends. That took a third of
an eager gradient of a 200-step episode. So the collector is held from the outermost trace
level's opening to its closing (and while scg.jit watches a recorded call, where a
collection would run other code's callbacks inside the call); it collects as usual between
calls. Holds are counted across threads: the collector runs again after the last one.
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


def release():
    """End one hold; after the last, the collector is on again if it was before."""
    with _LOCK:
        _HELD[0] -= 1
        if not _HELD[0] and _HELD[1]:
            gc.enable()
