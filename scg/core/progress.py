"""Progress bars for long loops: tqdm's, shown only when stderr is a terminal.

`scg.progress(iterable)` yields the items of `iterable` and, when enabled, draws a tqdm
bar on stderr: count, total, rate and a short description. It is enabled only when the
stream is a terminal and the environment variable SCG_PROGRESS is not "0", so it stays
quiet in tests, pipes and logs. tqdm is optional (`pip install "scg[progress]"`); without
it the loop runs without a bar.

Example:
    >>> for step in scg.progress(range(2000), desc="training"):
    ...     pass
"""

import os
import sys


def enabled_by_default(stream=None):
    """True when `stream` (stderr by default) is a terminal and SCG_PROGRESS is not "0"."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("SCG_PROGRESS", "1").strip() == "0":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress(iterable, *, total=None, desc="", enabled=None, stream=None):
    """Iterate over `iterable` with a tqdm progress bar on `stream` (stderr by default).

    Args:
        total: the number of items, if `iterable` has no len().
        desc: a short description shown before the bar.
        enabled: force the bar on or off; by default, on when the stream is a terminal.

    The bar needs tqdm, an optional extra (pip install "scg[progress]"); without it the
    items come as they are, with no bar.
    """
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = enabled_by_default(stream)
    if not enabled:
        return iter(iterable)
    try:
        from tqdm import tqdm
    except ImportError:  # (an optional extra: no bar without it)
        return iter(iterable)
    return tqdm(iterable, total=total, desc=desc or None, file=stream, dynamic_ncols=True)
