"""A guard against runs whose n draws cannot fit in memory: a clear error before numpy
asks the system for tens of gigabytes."""

import math
import os

# Arrays of a site's size that a gradient keeps alive at once (draw, log-probability,
# cotangent): about 3 measured at n = 10**6, so a run that is refused would fail.
ARRAYS_PER_SITE = 3


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


def memory_error(n, needed, available, what):
    gb = 1024 ** 3
    return MemoryError(
        f"{what}: n = {n:,} draws need at least about {needed / gb:.1f} GiB at once "
        f"(float64 arrays of shape (n, ...) for the draws, log-probabilities, costs and "
        f"their derivatives), and this machine has {available / gb:.1f} GiB available. "
        f"Use fewer draws per call (n = {max(1, n * available // (4 * needed)):,} fits) "
        "and average several calls: each call draws fresh samples")


def check_n(n):
    """Refuse an n whose smallest model (one scalar site) cannot fit."""
    available = available_bytes()
    needed = 8 * n * ARRAYS_PER_SITE
    if available is not None and needed > available:
        raise memory_error(n, needed, available, "scg.expectation")


def check_fits(run, shape, name):
    """Count the memory a new site `name` of logical `shape` adds to `run`; refuse it when
    the run's sites together cannot fit."""
    before = run.bytes_estimate
    run.bytes_estimate += 8 * run.rows * math.prod(shape) * ARRAYS_PER_SITE
    if run.bytes_estimate > (1 << 30):  # (below a GiB: not worth a look at the system)
        if run.bytes_budget is None:
            # read once per run: what was free before the earlier sites took their share
            available = available_bytes()
            run.bytes_budget = -1 if available is None else available + before
        if 0 <= run.bytes_budget < run.bytes_estimate:
            raise memory_error(run.rows, run.bytes_estimate, run.bytes_budget, f"site {name!r}")
