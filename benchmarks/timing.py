"""Timing shared by the benchmarks: calls per repeat calibrated to a target duration, the
systems interleaved (the order reversed every other repeat), medians."""

import os
import shlex
import statistics
import sys
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


def command_line():
    """The command that is running, with the thread settings of the environment."""
    env = "".join(f"{k}={os.environ[k]} " for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
                  if k in os.environ)
    return f"$ {env}python {shlex.join(sys.argv)}"


def peer_versions(systems, threads):
    """numpy's version, and torch's and Storchastic's when Storchastic is measured."""
    versions = f"numpy {__import__('numpy').__version__}"
    if "storchastic" in systems:
        import importlib.metadata
        import torch
        torch.set_num_threads(threads)
        versions += (f", torch {torch.__version__} ({threads} thread(s)), storchastic "
                     f"{importlib.metadata.version('storchastic')}")
    return versions
