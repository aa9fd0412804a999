"""Timing shared by the benchmarks: calls per repeat calibrated to a target duration, the
systems interleaved (the order reversed every other repeat), medians."""

import statistics
import time


def per_call(fn, number):
    """Seconds per call of fn(), averaged over `number` calls."""
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def calibrate(fn, target=0.05):
    """The number of calls (a power of 2) that takes at least `target` seconds."""
    number = 1
    while per_call(fn, number) * number < target:
        number *= 2
    return number


def time_interleaved(fns, repeats, target=0.05):
    """Median seconds per call of each fn of the dict `fns`, all interleaved (the first
    calls, in calibration, warm up)."""
    keys = list(fns)
    numbers = {k: calibrate(fns[k], target) for k in keys}
    times = {k: [] for k in keys}
    for r in range(repeats):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            times[k].append(per_call(fns[k], numbers[k]))
    return {k: statistics.median(v) for k, v in times.items()}
