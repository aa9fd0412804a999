"""Small helpers shared by the family files."""

import numpy as np

from ..core.tape import strip


def plain(x):
    """The untraced float value of a parameter (for sampling and validation)."""
    return np.asarray(strip(x), dtype=float)


def is_count(k):
    """Whether each entry of a (possibly traced) value is a nonnegative integer (a jump mask)."""
    return np.logical_and(np.greater_equal(k, 0), np.equal(k, np.floor(k)))


def full(x, shape):
    """x broadcast to `shape` (works on traced values)."""
    return np.broadcast_to(x, tuple(shape))
