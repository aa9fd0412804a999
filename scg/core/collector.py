"""Holding Python's garbage collector while a tape is open.

A gradient call keeps every value of its tape alive until its backward pass: tens of
thousands of objects for a loop of a few hundred steps. Python's generational collector,
triggered every 700 allocations, then traverses them again and again, and finds nothing:
the tape's values are freed by reference counting when the call ends. That took a third of
an eager gradient of a 200-step episode. So the collector is held from the outermost trace
level's opening to its closing (and while scg.jit watches a recorded call, where a
collection would run other code's callbacks inside the call); it collects as usual between
calls. Holds are counted across threads: the collector runs again after the last one.

Threads whose calls overlap without end (a pool of workers taking gradients back to back)
would hold it for good, and the cyclic garbage of the whole process would grow: a hold
that ends while others go on collects once the collector has been held for
`MAX_HELD_SECONDS` in a row (in the thread ending its hold; a collection's callbacks run in
the thread that collects, outside the other threads' calls).
"""

import gc
import threading
import time

MAX_HELD_SECONDS = 2.0

_LOCK = threading.Lock()
_HELD = [0, False, 0.0]  # (holds running, whether the collector was on before the first,
#                           when it last collected or was given back)


def hold():
    """Hold the collector (until a `release` for each `hold`)."""
    with _LOCK:
        if not _HELD[0]:
            _HELD[1] = gc.isenabled()
            _HELD[2] = time.monotonic()
            gc.disable()
        _HELD[0] += 1


def release():
    """End one hold; after the last, the collector is on again if it was before."""
    collect = False
    with _LOCK:
        _HELD[0] -= 1
        if not _HELD[0]:
            if _HELD[1]:
                gc.enable()
        elif _HELD[1] and time.monotonic() - _HELD[2] > MAX_HELD_SECONDS:
            _HELD[2] = time.monotonic()
            collect = True
    if collect:
        gc.collect()
