"""Small helpers shared by the family files."""

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


class ProbsBoundary:
    """Where a family's `probs` gives some outcome probability 0 (its class attribute
    `probs_boundary`): the score function never draws that outcome, and with
    `every_value` the log-probability of one of the values is -inf there, which an
    estimator that takes every value's log-probability cannot differentiate.

    Attributes:
        test: `test(probs)`: True when every outcome has probability above 0.
        where: the boundary in words ("exactly 0 or 1").
        advice: what serves the site at the boundary (for the score function).
        every_value: the log-probability of some value is -inf at the boundary.
        value_word: what a value is ("coin", "count"), for messages.
        logits_advice: how to avoid the boundary by parameterization, or "".
    """

    def __init__(self, test, where, advice, every_value=False, value_word="value",
                 logits_advice=""):
        self.test, self.where, self.advice = test, where, advice
        self.every_value, self.value_word, self.logits_advice = \
            every_value, value_word, logits_advice


def open_probs(p):
    """Are all of p strictly between 0 and 1?"""
    return bool(np.all((p > 0.0) & (p < 1.0)))


def probs_below_one(p):
    return bool(np.all(p < 1.0))


def probs_positive(p):
    return bool(np.all(p > 0.0))


def expanded_support(table, batch_shape, event_ndim, expand):
    """A support table (S,) + event_shape, or with `expand` broadcast to (S,) + batch_shape
    + event_shape (enumerate_support's two forms)."""
    if not expand:
        return table
    event = table.shape[1:]
    shaped = table.reshape((table.shape[0],) + (1,) * len(batch_shape) + event)
    return np.broadcast_to(shaped, (table.shape[0],) + tuple(batch_shape) + event)


INSIDE_DRAW = "a draw inside the support"
INSIDE_VALUE = "a value inside the support"


def mask_outside(inside, lp):
    """lp where `inside`, -inf elsewhere. When every entry is inside (draws of the
    distribution itself), lp is returned as is: no extra operation on the tape."""
    return lp if effects.check(_all_true, strip(inside), INSIDE_DRAW) \
        else np.where(inside, lp, -np.inf)


def outside_to(inside, value, safe):
    """value where `inside`, `safe` elsewhere (a point where the formulas stay finite)."""
    return value if effects.check(_all_true, strip(inside), INSIDE_VALUE) \
        else np.where(inside, value, safe)


class own_draws(effects.Handler):
    """`with own_draws():` the values given to log_prob are the distribution's own draws,
    in its support by construction: a handler of the effect stack that answers the support
    tests (`mask_outside`, `outside_to`) with True, and forwards every other message.
    (The test's operations are then unused, and scg.jit drops them from replays. A draw
    that rounded onto the edge of the support still gets a non-finite log-probability from
    the formulas, which the sites report.)"""

    def check(self, predicate, x, where):
        if where is INSIDE_DRAW or where is INSIDE_VALUE:
            return True
        return super().check(predicate, x, where)

    def __enter__(self):
        effects.push(self)
        return self

    def __exit__(self, *exc):
        effects.pop(self)
        return False


_ENOUGH = {}


def _enough_draws(draws):
    """The predicate `c * draws >= 1` (one per number of draws, so that recordings of
    scg.jit compare it by identity)."""
    predicate = _ENOUGH.get(draws)
    if predicate is None:
        def predicate(c):
            return bool(np.all(c * draws >= 1.0))
        predicate = _ENOUGH.setdefault(draws, predicate)
    return predicate


def rare_draws_caveat(family, concentrations, draws):
    """For a path_caveat: at concentrations c near 0 nearly all the draws of a Gamma, Beta
    or Dirichlet lie at 0 (or 1), where the path does not move, and the derivative rests
    on the draws in between, about 7 c n of n. With too few of them expected the estimate
    and its standard error (from the same draws) are typically 0, whatever the gradient
    (1 for a Gamma's mean, 1 / (4 c) for a symmetric Beta's)."""
    smallest = np.min(plain(concentrations))
    # (a condition every call must meet, not a value read: under scg.jit a learned
    # concentration that moves between calls keeps the replay, which checks it)
    if effects.check(_enough_draws(draws), smallest, f"{family}'s concentration >= 1 / n"):
        return None
    c = float(effects.read(smallest, "the smallest concentration, for the warning"))
    return (f"{family}'s pathwise derivative at concentration {c:.3g} rests on its draws "
            f"away from the boundary, about 7 x concentration x n of them: "
            f"{7 * c * draws:.2g} expected in {draws} draws, so the estimate and its "
            f"standard error are not reliable; use n >= {10.0 / c:.3g} (10 / concentration) "
            "or larger concentrations")
