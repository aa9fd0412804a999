"""A guard against runs whose layout cannot fit in memory: a clear error before numpy asks
the system for tens of gigabytes (or the system's out-of-memory killer ends the process),
and the chunk size that fits, for studies that split their draws.

A run holds rows = n draws x the evaluations each draw takes (copies of the run, see
copies.py); each site adds arrays of one row per evaluation, of its value's and its
parameters' sizes.
"""

import math
import os
import tracemalloc

from ..distributions.base import family_of

# Arrays of a site's size that a gradient keeps alive at once (the draw, its parameters
# lifted to the rows, the log-probability, the estimator's terms and their cotangents):
# about 6 measured at rows = 10**6 (a chain of DisARM coins, a Categorical of 50 values).
ARRAYS_PER_SITE = 6


def available_bytes():
    """Memory the system can still give this process (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_error(n, needed, available, what, copies=None):
    gb = 1024 ** 3
    fits = max(2, n * available // (2 * needed))  # (a chunk has at least 2 draws)
    layout = ""
    if copies:
        layout = (f" x {copies.count:,} evaluations each ({copies.describe()}) = "
                  f"{n * copies.count:,} rows")
        if 2 * needed > n * available:  # (not even two draws fit: fewer draws do not help)
            return MemoryError(
                f"{what}: each draw takes {copies.count:,} evaluations of the model "
                f"({copies.describe()}), which need about {needed / n / gb:,.1f} GiB per "
                f"draw, and this machine has {available / gb:.1f} GiB available: no number "
                "of draws fits. The copies multiply where enumerated sites meet in a common "
                "cost: enumerate fewer of them jointly (give some scg.Score('loo') or "
                "scg.DisARM()), or declare the independent dimensions with scg.plate (each "
                "element is then enumerated alone)")
    return MemoryError(
        f"{what}: n = {n:,} draws{layout} need at least about {needed / gb:.1f} GiB at once "
        f"(float64 arrays of one row per evaluation for the draws, their parameters, "
        f"log-probabilities, costs and their derivatives), and this machine has "
        f"{available / gb:.1f} GiB available. Use fewer draws per call (n = {fits:,} fits) "
        "and average several calls, each of which draws fresh samples, or split the draws: "
        f"scg.grad_samples(E, chunk={fits:,}) or scg.compare(..., chunk={fits:,}), whose "
        "default chunk fits by itself")


def check_n(n):
    """Refuse an n whose smallest model (one scalar site) cannot fit."""
    available = available_bytes()
    needed = 8 * n * ARRAYS_PER_SITE
    if available is not None and needed > available:
        raise memory_error(n, needed, available, "scg.expectation")


def site_size(dist):
    """The numbers a site keeps per row: its value's and its parameters' beyond them."""
    shape = tuple(dist.batch_shape) + tuple(dist.event_shape)
    size = math.prod(shape)
    batch = math.prod(dist.batch_shape)
    for v in family_of(dist).params.values():
        if v is not None:  # (a parameter's entries beyond the value's, such as logits)
            size += max(0, math.prod(getattr(v, "shape", ())) - batch)
    return size


def check_layout(n, copies, sites):
    """Refuse a layout of copies whose sites (those of a run with a few draws) cannot fit
    with n draws, before a run allocates it."""
    if not copies:
        return
    needed = 8 * n * copies.count * ARRAYS_PER_SITE * sum(site_size(s.dist)
                                                          for s in sites.values())
    if needed <= (1 << 30):
        return
    available = available_bytes()
    if available is not None and needed > available:
        names = [repr(k) for k in copies.names]
        which = (f"site {names[0]}" if len(names) == 1 else
                 f"sites {', '.join(names)}" if len(names) <= 4 else
                 f"sites {', '.join(names[:3])} and {len(names) - 3} more")
        raise memory_error(n, needed, available, f"the copies of the run for {which}", copies)


def check_fits(run, dist, name):
    """Count the memory a new site `name` adds to `run` (rows x its value's and parameters'
    sizes); refuse it when the run's sites together cannot fit."""
    size = site_size(dist)
    before = run.bytes_estimate
    run.bytes_estimate += 8 * run.rows * size * ARRAYS_PER_SITE
    if run.bytes_estimate > (1 << 30):  # (below a GiB: not worth a look at the system)
        if run.bytes_budget is None:
            # read once per run: what was free before the earlier sites took their share
            available = available_bytes()
            run.bytes_budget = -1 if available is None else available + before
        if 0 <= run.bytes_budget < run.bytes_estimate:
            raise memory_error(run.n, run.bytes_estimate, run.bytes_budget, f"site {name!r}",
                               run.copies)


def bytes_per_draw(run_with):
    """The memory one draw takes, measured: the peak of numpy's and Python's allocations
    (tracemalloc) while `run_with(n)` runs at two small n, the difference per draw (what
    does not grow with n, such as parameters, cancels)."""
    peaks = []
    sizes = (64, 320)
    for n in sizes:
        was = tracemalloc.is_tracing()
        if not was:
            tracemalloc.start()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        try:
            run_with(n)
            peaks.append(tracemalloc.get_traced_memory()[1] - start)
        finally:
            if not was:
                tracemalloc.stop()
    return max(1.0, (peaks[1] - peaks[0]) / (sizes[1] - sizes[0]))


# Allocations that tracemalloc sees take up to about half of the process's resident
# memory at its peak (freed arrays the allocator keeps, numba's and numpy's own buffers):
# a chunk is sized to a quarter of the memory available by that measure.
MEASURED_SHARE = 4


def fitting_chunk(per_draw, wanted, even=False):
    """The largest chunk up to `wanted` draws whose measured allocations take at most a
    quarter of the memory available now, at `per_draw` bytes a draw (at least 2; even
    when `even`)."""
    available = available_bytes()
    if available is None:
        return wanted
    chunk = int(min(wanted, max(2, available // (MEASURED_SHARE * per_draw))))
    if even and chunk % 2 and chunk > 2:
        chunk -= 1
    return chunk
