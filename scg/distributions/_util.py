"""Small helpers shared by the family files."""

import threading

import numpy as np

from ..core import effects
from ..core.tape import strip


def plain(x):
    """The untraced float value of a parameter (for sampling and validation); under
    scg.jit, a recorded value (its operations are recorded too)."""
    return effects.asarray(x, dtype=float)


def _all_true(x):
    return bool(x.all() if type(x) is np.ndarray else np.all(x))


def is_count(k):
    """Whether each entry of a (possibly traced) value is a nonnegative integer (a jump mask)."""
    return np.logical_and(np.greater_equal(k, 0), np.equal(k, np.floor(k)))


def full(x, shape):
    """x broadcast to `shape` (works on traced values)."""
    return np.broadcast_to(x, tuple(shape))


def mask_outside(inside, lp):
    """lp where `inside`, -inf elsewhere. When every entry is inside (draws of the
    distribution itself), lp is returned as is: no extra operation on the tape."""
    if _DRAWS.own:
        return lp
    return lp if effects.check(_all_true, strip(inside), "a draw inside the support") \
        else np.where(inside, lp, -np.inf)


def outside_to(inside, value, safe):
    """value where `inside`, `safe` elsewhere (a point where the formulas stay finite)."""
    if _DRAWS.own:
        return value
    return value if effects.check(_all_true, strip(inside), "a value inside the support") \
        else np.where(inside, value, safe)


class _Draws(threading.local):
    own = False


_DRAWS = _Draws()


class own_draws:
    """`with own_draws():` the values given to log_prob are the distribution's own draws,
    in its support by construction: the support test is skipped. (Its operations are then
    unused, and scg.jit drops them from replays. A draw that rounded onto the edge of the
    support still gets a non-finite log-probability from the formulas, which the sites
    report.)"""

    __slots__ = ("before",)

    def __enter__(self):
        self.before = _DRAWS.own
        _DRAWS.own = True

    def __exit__(self, *exc):
        _DRAWS.own = self.before
