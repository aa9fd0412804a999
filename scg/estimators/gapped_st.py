"""The gapped straight-through estimator (Fan, Chi, Rudnicky and Ramadge 2022, "Training
Discrete Deep Generative Models via Gapped Straight-Through Estimator"): straight-through
Gumbel-softmax with the Gumbel noise replaced by a deterministic perturbation of the logits.

Given the exact draw b, the logits a move by the smallest m after which b is their
argmax with a margin `gap` over the others (the chosen score raised to the maximum, the
others lowered to at most the maximum minus the gap; a coin's logit to max(a, gap) or
min(a, -gap)). The gradient g in b reaches the logits as J(softmax((a + m) / T)) g / T, m
held fixed: no noise beyond the draw's, so less variance than straight-through
Gumbel-softmax; biased.
"""

import numbers

import numpy as np

from .straight_through import StraightThrough, check_temperature


class GappedST(StraightThrough):
    """The gapped straight-through estimator for the sites whose family declares a concrete
    relaxation (Bernoulli, OneHotCategorical): exact discrete values; biased, first
    derivatives only.

    Args:
        temperature: T > 0 of the relaxation softmax((a + m) / T).
        gap: the margin of the draw's score over the others after the perturbation (the
            paper's 1.0).

    Example:
        >>> scg.sample("z", scg.OneHotCategorical(logits=h), estimator=scg.GappedST(0.5))
    """

    name = "gapped_st"

    def __init__(self, temperature=1.0, gap=1.0):
        self.temperature = check_temperature("GappedST", temperature)
        if isinstance(gap, bool) or not isinstance(gap, numbers.Real) or \
                not np.isfinite(gap) or gap <= 0:
            raise ValueError(f"GappedST: gap must be a positive finite number, got {gap!r}")
        self.gap = float(gap)

    def jacobian(self, d, relaxation, logits, b):
        moved = logits + relaxation.gap_offset(logits, b, self.gap)
        y = relaxation.soft(moved / self.temperature)
        return relaxation.soft_jacobian(y) / self.temperature

    def describe(self, site):
        return (f"gapped straight-through at temperature {self.temperature:g}, gap "
                f"{self.gap:g}: exact discrete values, the gradient of the relaxation at "
                "logits moved deterministically to round to the draw")

    def explain_terms(self, site, trace):
        return [f"biased: {site.name} takes exact discrete values b and its gradient g "
                "reaches the logits a as J(s((a + m) / T)) g / T, m the smallest move after "
                f"which b wins by a gap of {self.gap:g}, T = {self.temperature:g}"]

    def __repr__(self):
        return f"GappedST(temperature={self.temperature!r}, gap={self.gap!r})"
