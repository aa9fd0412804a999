"""A tiny progress printer for long loops, without dependencies.

`scg.progress(iterable)` yields the items of `iterable` and, when enabled, keeps one line
on stderr up to date: count, total, rate and a short description. It is enabled only when
stderr is a terminal and the environment variable SCG_PROGRESS is not "0", so it stays
quiet in tests, pipes and logs.

Example:
    >>> for step in scg.progress(range(2000), desc="training"):
    ...     pass
"""

import os
import sys
import time


def enabled_by_default(stream=None):
    """True when `stream` (stderr by default) is a terminal and SCG_PROGRESS is not "0"."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("SCG_PROGRESS", "1").strip() == "0":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress(iterable, *, total=None, desc="", enabled=None, every=0.2, stream=None):
    """Iterate over `iterable`, printing a progress line at most every `every` seconds.

    Args:
        iterable: anything iterable.
        total: the number of items, if len(iterable) does not give it.
        desc: a short label printed first.
        enabled: True or False to force; None (default) follows `enabled_by_default`.
        every: minimal seconds between two updates of the line.
        stream: where to print (stderr by default).
    Yields:
        The items of `iterable`, unchanged.
    """
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = enabled_by_default(stream)
    if not enabled:
        yield from iterable
        return
    if total is None:
        try:
            total = len(iterable)
        except TypeError:
            total = None
    start = last = time.perf_counter()
    count = 0
    label = f"{desc}: " if desc else ""
    try:
        for item in iterable:
            yield item
            count += 1
            now = time.perf_counter()
            if now - last >= every:
                last = now
                stream.write("\r" + _line(label, count, total, now - start))
                stream.flush()
    finally:
        stream.write("\r" + _line(label, count, total, time.perf_counter() - start) + "\n")
        stream.flush()


def _line(label, count, total, elapsed):
    rate = count / elapsed if elapsed > 0 else 0.0
    if total:
        width = 24
        filled = int(width * min(count, total) / total)
        bar = "#" * filled + "." * (width - filled)
        return f"{label}[{bar}] {count}/{total} {rate:,.0f} it/s {elapsed:.1f}s"
    return f"{label}{count} {rate:,.0f} it/s {elapsed:.1f}s"
