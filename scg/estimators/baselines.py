"""Baselines for score-function estimators: one small interface, one class each.

A baseline sees `q`, the downstream costs of a site for every draw and element
(shape (n, *elements)), and returns the value b that each draw's cost is
compared with: the score term is grad log p(w) * (q - b). It is unbiased when
b does not depend on the draw it is compared with. `state` is a dict owned by
the expectation for this site, so a baseline written inline in a model keeps
its memory across calls.
"""

import copy
import warnings

import numpy as np

from ..errors import BiasWarning, EstimatorError
from ..kernels import small
from ..kernels.parallel import loo_advantage
from ..numpy import rules as R


class Baseline:
    """Interface: `value(q, state)` gives b; `update(q, state)` runs after each call.

    `biased`: the baseline knowingly uses each draw's own cost (it warns itself).
    `stateful`: it learns from past calls in `state` (scg warns when that history is lost).
    `checked`: its value for draw i is known not to use draw i's cost (set by scg's own
    unbiased baselines on their class, not inherited: a subclass that changes `value` is
    checked once per site on its first call, like any other baseline).
    """

    biased = False
    stateful = False
    checked = False
    couples_draws = False  # (computed from the other draws: their estimates are coupled)
    first_order_only = None  # (or why it serves no second derivative)

    def value(self, q, state):
        raise NotImplementedError

    def advantage(self, q, state):
        """q - b: the weight of each draw's score in the estimate, the protocol's hook (a
        baseline may override it with a cheaper formula, or with a weight of its own)."""
        b = self.value(q, state)
        check_shape(self, q, b, "value")
        return q - b

    def affine(self, q):
        """(k, t) when the advantage is q * k - t for a number k and an array t that need
        no state (a fused pass then forms it itself), else None."""
        return None

    def paired(self, q, first_order):
        """For antithetic pairs: the advantage (first_order) or the baseline, if this
        baseline treats a draw's pair specially (None: as for any other draw)."""
        return None

    def update(self, q, state):
        pass

    def formula(self, cost):
        """The advantage as explain() writes it, for the costs `cost`."""
        return f"({cost} - b)"

    def describe(self):
        return type(self).__name__

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Constant(Baseline):
    """A fixed number b, the same for every draw: unbiased."""

    checked = True

    def __init__(self, b):
        if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, float, np.integer,
                                                                  np.floating)):
            raise TypeError(f"Constant: the baseline is a number, got {type(b).__name__} "
                            f"{b!r:.60}")
        if not np.isfinite(b):
            raise ValueError(
                f"Constant: the baseline is {float(b)!r}; a constant baseline is a finite "
                "number (every advantage q - b would be non-finite). Pass a finite number, "
                "or None for no baseline")
        self.b = float(b)

    def value(self, q, state):
        return self.b

    def describe(self):
        return f"the constant {self.b:g}"


class LeaveOneOut(Baseline):
    """For draw i, the mean of the other n - 1 draws' costs: unbiased, needs n > 1."""

    couples_draws = True
    checked = True

    @staticmethod
    def _check(q):
        if q.shape[0] < 2:
            raise EstimatorError("the leave-one-out baseline needs n > 1 draws; "
                                 "raise n or use scg.baselines.MovingAverage()")

    def value(self, q, state):
        self._check(q)
        n = q.shape[0]
        return (np.sum(q, axis=0, keepdims=True) - q) / (n - 1)

    def advantage(self, q, state):
        n = q.shape[0]
        if n < 2:
            self._check(q)
        # a few draws: one compiled loop; many: one pass over the threads after the sum
        fast = small.loo_advantage(q) if q.size < small.SMALL else loo_advantage(q)
        if fast is not None:
            return fast
        # q - (sum - q) / (n - 1) = (n q - sum) / (n - 1), in two passes
        a = q * (n / (n - 1))
        a -= np.add.reduce(q, axis=0, keepdims=True) / (n - 1)  # (np.sum minus its wrapper)
        return a

    def affine(self, q):
        # q - (sum - q) / (n - 1) = q * n / (n - 1) - sum / (n - 1)
        self._check(q)
        n = q.shape[0]
        return n / (n - 1), R.sum_(q) / (n - 1)

    def paired(self, q, first_order):
        # (draw i's pair depends on its noise: the mean of the draws outside the pair)
        n = q.shape[0]
        if n < 4:
            raise EstimatorError("the leave-one-out baseline with antithetic pairs needs "
                                 "n >= 4 draws (two pairs); raise n or use MovingAverage()")
        half = n // 2
        pair = q[:half] + q[half:]
        pair = np.concatenate([pair, pair], axis=0)
        b = (np.sum(q, axis=0, keepdims=True) - pair) / (n - 2)
        return q - b if first_order else b

    def describe(self):
        return "leave-one-out: the mean of the other n - 1 draws"


class MovingAverage(Baseline):
    """An exponential moving average of past calls' mean costs: unbiased even at n = 1.

    The average is kept per site and per element inside the expectation, corrected for its
    start at zero, and updated after each call, so the current draws never enter the value
    they are compared with. It restarts when the site's element shape changes.

    Args:
        decay: weight of the past, in [0, 1).
    """

    checked = True

    stateful = True

    def __init__(self, decay=0.9):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"MovingAverage: decay must be in [0, 1), got {decay}")
        self.decay = float(decay)

    def value(self, q, state):
        avg = state.get("avg")
        if avg is None or avg.shape != q.shape[1:]:
            return 0.0
        return avg / (1.0 - self.decay ** state["count"])

    def update(self, q, state):
        avg = state.get("avg")
        if avg is None or avg.shape != q.shape[1:]:
            avg, state["count"] = np.zeros(q.shape[1:]), 0
        mean = np.add.reduce(q, axis=0) / q.shape[0]  # (np.mean's wrapper costs more)
        state["avg"] = self.decay * avg + (1.0 - self.decay) * mean
        state["count"] += 1

    def describe(self):
        return f"moving average of past calls (decay {self.decay:g})"


class Mean(Baseline):
    """The mean of all n draws, including the draw itself: biased by the factor (n - 1) / n.

    Allowed because it is common (group-mean baselines), but it emits `scg.BiasWarning`.
    """

    couples_draws = True
    biased = True

    def value(self, q, state):
        n = q.shape[0]
        warnings.warn(f"the batch-mean baseline includes each draw in its own baseline: the "
                      f"gradient is scaled by (n - 1) / n = 1 - 1/{n}; use 'loo' for "
                      "an unbiased estimate", BiasWarning, stacklevel=2)
        return np.mean(q, axis=0, keepdims=True)

    def describe(self):
        return "the mean of all n draws, including the draw itself (biased)"


class GRPO(Baseline):
    """The group-normalized advantage of GRPO: (q_i - mean(q)) / (std(q) + eps).

    The group is the expectation's n draws (per plate element): the mean includes draw i
    itself and the standard deviation (ddof=1, as torch.std and TRL) depends on every
    draw, so the estimate is knowingly biased: its expectation is not the gradient of
    E[cost]. The mean alone scales that gradient by (n - 1) / n; the division reweights
    each group by 1 / std. One `scg.BiasWarning` per expectation says so; `explain()`
    marks the site biased. Use 'loo' (RLOO) for an unbiased estimate.

    Args:
        scale: "group" (each group's std, per plate element), "batch" (one std over all
            draws and plate elements), or None (no division: Dr. GRPO).
        eps: added to the std after the square root. With eps=0, a group of equal costs
            (std 0) has advantages 0, as with any eps > 0 (not 0 / 0).
    """

    couples_draws = True
    biased = True

    def __init__(self, scale="group", eps=1e-4):
        if scale not in ("group", "batch", None):
            raise ValueError(f"GRPO: scale must be 'group', 'batch' or None, got {scale!r}")
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or \
                not eps >= 0.0:
            raise ValueError(f"GRPO: eps must be a number >= 0, got {eps!r}")
        self.scale = scale
        self.eps = float(eps)

    def advantage(self, q, state):
        n = q.shape[0]
        if n < 2:
            raise EstimatorError("the GRPO baseline normalizes within a group of draws and "
                                 "needs n >= 2; raise n (the group size)")
        if not state.get("warned"):  # (once per expectation and site: the state is its)
            state["warned"] = True
            warnings.warn(self._bias(n), BiasWarning, stacklevel=2)
        # (about the first draw: a group of equal costs has a mean equal to them, exactly,
        # so its centered costs are 0, not the rounding error of a sum)
        shifted = q - q[:1]
        centered = shifted - np.add.reduce(shifted, axis=0, keepdims=True) / n
        if self.scale is None:
            return centered
        if self.scale == "group":
            std = np.sqrt(np.add.reduce(centered * centered, axis=0, keepdims=True) / (n - 1))
        else:
            std = np.std(q, ddof=1)
        if self.eps == 0.0:
            # a group of equal costs (std 0) carries no signal: its advantages are 0, as
            # with any eps > 0 (TRL's 1e-4, verl's 1e-6), not 0 / 0
            return centered / np.where(std == 0.0, 1.0, std)
        return centered / (std + self.eps)

    first_order_only = "it gives an advantage, not a value to subtract, and it is biased"

    def value(self, q, state):
        raise EstimatorError("the GRPO baseline gives an advantage, not a value to subtract, "
                             "and it is biased: it serves first derivatives only. Use 'loo' "
                             "for higher orders")

    def _bias(self, n):
        scaled = {"group": "divides by each group's standard deviation, which depends on "
                           "the draws and reweights the groups",
                  "batch": "divides by the batch's standard deviation, which depends on "
                           "the draws",
                  None: "does not divide (Dr. GRPO)"}[self.scale]
        return (f"the GRPO baseline is biased: it includes each draw in its group's mean "
                f"(scaling the gradient by (n - 1) / n = 1 - 1/{n}) and {scaled}; "
                "its expectation is not the gradient of the expected cost. Use "
                "scg.Score('loo') (RLOO) for an unbiased estimate, or measure the bias with "
                "scg.compare(..., reference=)")

    def formula(self, cost):
        if self.scale is None:
            return f"({cost} - group mean)"
        return f"({cost} - group mean) / ({self.scale} std + eps)"

    def describe(self):
        what = {"group": "/ (group std + eps)", "batch": "/ (batch std + eps)",
                None: "(Dr. GRPO: no division)"}[self.scale]
        return f"GRPO: (q - group mean) {what}, eps {self.eps:g} (biased)"


class BaselineShapeError(EstimatorError):
    """A baseline's value or advantage does not have a shape that lines up with q's (the
    estimator adds the site's name)."""


def check_shape(baseline, q, out, what):
    """Raise BaselineShapeError unless `out`, a baseline's `what` ("value" or "advantage")
    for costs q of shape (n, *elements), is one number, one per element (q.shape[1:]), or
    an array of q's number of dimensions that broadcasts to q's shape."""
    got, want = tuple(np.shape(out)), tuple(np.shape(q))
    if got == want or got == () or got == want[1:]:
        return
    if len(got) == len(want) and all(g in (1, w) for g, w in zip(got, want)):
        return
    elements = want[1:]
    raise BaselineShapeError(
        f"the baseline {baseline!r} gave {'a' if what == 'value' else 'an'} {what} of shape "
        f"{got} for the costs q of shape {want} (n = {want[0]} draws"
        f"{f' x elements {elements}' if elements else ''}); a baseline's {what} is one number "
        f"(shape ()), one per element (shape {elements}), or one per draw and element (shape "
        f"{want}, or {(1,) + elements} for all draws). Return one of those shapes from "
        f"{type(baseline).__name__}.{what}(q, state)")


def warn_if_own_draw_counts(baseline, q, state, site):
    """Warn (BiasWarning) when the baseline of draw 0 moves with draw 0's own cost, and
    say whether it did (also at n = 1: a baseline updated with the current cost before
    it is used moves with it).

    A baseline is unbiased only if b_i does not depend on draw i. The check moves q_0 and
    sees whether draw 0's advantage q_0 - b_0 moves by exactly as much; it runs on copies
    of the baseline and its state, so a baseline that changes itself when called (a user's
    `b = 0.9 b + 0.1 mean(q)`) is left as it was.
    """
    if baseline.biased or type(baseline).__dict__.get("checked", False):
        return False
    bump = 1.0 + float(np.max(np.abs(q)))
    moved = np.array(q)
    moved[0] += bump
    try:
        before = np.broadcast_to(copy.deepcopy(baseline).advantage(q, copy.deepcopy(state)),
                                 q.shape)[0]
        after = np.broadcast_to(
            copy.deepcopy(baseline).advantage(moved, copy.deepcopy(state)), q.shape)[0]
    except Exception:  # (the baseline cannot be copied or probed: the call itself decides)
        return False
    if not np.allclose(after - before, bump, rtol=1e-6, atol=0.0):
        warnings.warn(
            f"site {site!r}: the baseline {baseline!r} uses each draw's own cost (moving the "
            "cost of draw 0 moves draw 0's baseline), which biases the score-function "
            "gradient. An unbiased baseline for draw i may use past calls or the other "
            "draws only: scg.baselines.MovingAverage() (updated after each call) or 'loo'",
            BiasWarning, stacklevel=4)
        return True
    return False


_NAMED = {"loo": LeaveOneOut, "leave-one-out": LeaveOneOut, "mean": Mean,
          "moving_average": MovingAverage, "grpo": GRPO}

_KINDS = ("None, a finite number (a constant), 'loo', 'mean', 'moving_average', 'grpo', or "
          "an object of a scg.baselines.Baseline class (LeaveOneOut(), MovingAverage(0.9), "
          "GRPO(), or your own)")


def as_baseline(spec):
    """A Baseline from None, a number, 'loo', 'mean', or a Baseline object."""
    if spec is None or isinstance(spec, Baseline):
        return spec
    if isinstance(spec, str):
        if spec in _NAMED:
            return _NAMED[spec]()
        raise ValueError(f"unknown baseline {spec!r}; a baseline is {_KINDS}")
    if isinstance(spec, type) and issubclass(spec, Baseline):
        raise TypeError(f"baseline={spec.__name__} is the class; pass an object of it: "
                        f"baseline={spec.__name__}()")
    if isinstance(spec, (bool, np.bool_)):
        raise TypeError(f"baseline={spec!r} is not a baseline; a baseline is {_KINDS}")
    if isinstance(spec, (int, float, np.floating, np.integer)):
        if not np.isfinite(spec):
            raise ValueError(f"baseline={float(spec)!r}: a constant baseline is a finite number "
                             "(every advantage q - b would be non-finite); pass a finite "
                             "number, or None for no baseline")
        return Constant(spec)
    if isinstance(spec, np.ndarray) and spec.ndim == 0 and spec.dtype.kind in "iuf":
        return as_baseline(spec.item())
    raise TypeError(f"baseline={spec!r:.60} ({type(spec).__name__}) is not a baseline; a "
                    f"baseline is {_KINDS}")
