"""`scg.mask`: sites and costs that count only where a condition holds (Pyro's
`poutine.mask`), and `scg.all`: whether a per-draw condition holds for every draw, the test
that ends a vectorized episode loop.

A mask is a message field: the handler of an open `with scg.mask(alive):` block writes it
into every "sample" and "cost" message that passes (combined with the masks of the blocks
around it); the run multiplies the site's log-probability and the cost by it
(scg/stochastic/sites.py).
"""

from contextlib import contextmanager

import numpy as np

from ..core import effects
from ..core.tape import THREAD, Tracer, strip
from ..numpy import rules as R
from .persample import PerSample, lift


class MaskHandler(effects.Handler):
    """An open `scg.mask`: the sample and cost messages inside it carry its condition."""

    takes_values = False

    def __init__(self, condition):
        self.condition = condition

    def process(self, msg):
        if msg.kind in ("sample", "cost"):
            inner = msg.fields.get("mask")  # (an inner block's, written first)
            msg.fields["mask"] = self.condition if inner is None else \
                R.logical_and(inner, self.condition)


@contextmanager
def mask(condition):
    """Count the sites and costs inside only where `condition` holds.

    `condition` is a per-draw boolean (a comparison of draws, with the logical shape of the
    sites and costs inside or one that broadcasts to it) or a plain Python bool. A cost
    inside counts as 0 where the condition fails; a site inside is still drawn, but its
    log-probability counts as 0 there, so its score meets no cost there (as Pyro's
    `poutine.mask`). Masks nest (their conditions combine with `&`). Sites inside take the
    score function or a pathwise derivative; the estimators that evaluate copies of the
    model (Enumerate, MeasureValued, DisARM, ...) raise EstimatorError there.

    Example:
        >>> alive = True
        >>> for t in range(200):
        ...     with scg.mask(alive):
        ...         a = scg.sample(f"a{t}", scg.Bernoulli(logits=policy(theta, s)))
        ...         scg.cost(f"r{t}", -1.0)
        ...     s, done = step(s, a)
        ...     alive = alive & ~done
        ...     if scg.all(~alive):
        ...         break
    """
    if isinstance(condition, (bool, np.bool_)):
        if condition:  # (nothing is masked)
            yield
            return
        condition = np.bool_(False)
    else:
        if not isinstance(condition, Tracer):
            condition = np.asarray(condition)
        dtype = strip(condition).dtype  # (a held value's dtype: no read of it)
        if dtype != np.bool_:
            raise TypeError(f"scg.mask needs a boolean condition (a comparison of draws, "
                            f"combined with &, |, ~, or True / False), got values of dtype "
                            f"{dtype}")
    handler = MaskHandler(condition)
    effects.push(handler)
    try:
        yield
    finally:
        effects.pop(handler)


def all_(condition):
    """True when `condition` holds for every draw (and every element): a Python bool.

    `if scg.all(done): break` ends a vectorized loop of episodes once every draw's episode
    has ended; the draws that ended earlier are masked by `scg.mask` meanwhile. Under
    scg.jit the answer is checked on every replay (a replay whose answer differs is
    recorded again).

    Example:
        >>> if scg.all(~alive):
        ...     break
    """
    if not isinstance(condition, Tracer):
        THREAD.checks += 1  # (a decision, as a traced one's check: see effects.check)
        return bool(np.all(condition))
    x = strip(condition)
    if effects.check(_every, x, "scg.all(...) of a per-draw condition is True"):
        return True
    # (a condition that fails is a check too: a replay is valid where it fails again)
    return not effects.check(_not_every, x, "scg.all(...) of a per-draw condition is False")


def _every(x):
    return bool(np.all(x))


def _not_every(x):
    return not np.all(x)


def physical_mask(mask, rank, level):
    """A mask laid out against a value of logical rank `rank` at `level`: the per-draw
    condition's physical value with unit axes so that it broadcasts, or the plain one."""
    if isinstance(mask, PerSample) and mask.level == level:
        return lift(mask, rank, level)
    return strip(mask)
