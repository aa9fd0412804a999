"""The concrete / Gumbel-softmax relaxation (Maddison, Mnih and Teh 2017; Jang, Gu and Poole
2017) of the sites whose family declares one (`relaxed(T)`: Bernoulli, OneHotCategorical): a
smooth draw differentiated along its path, biased for the true objective (the gradient is
that of the relaxed objective)."""

import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..numpy import rules as R
from .base import Estimator
from .terms import RELAXED, relaxed_form, require_relaxation


class GumbelSoftmax(Estimator):
    """Replaces the discrete draw by its relaxation at temperature T, with u ~ U(0, 1) per
    element and draw (shared by copies of the run) and `a` the logits (log probs, minus
    log(1 - probs) for a Bernoulli, when probs were given):

    - Bernoulli: y = sigmoid((a + log u - log(1 - u)) / T) (logistic noise);
    - OneHotCategorical: y = softmax((a + G) / T) over the categories, G = -log(-log u)
      (Gumbel noise per category).

    The model sees y and derivatives flow along it (as for a pathwise site), so the
    estimate is unbiased for the gradient of the relaxed objective E[f(y)], biased for
    that of E[f(b)]; the bias vanishes as T -> 0 while the variance grows. Derivatives of
    any order of the relaxed objective are available.

    With `hard=True` (straight-through), the model sees the exact discrete value (the
    0/1 step of y > 1/2, or the one-hot argmax, distributed as the site's distribution),
    and the gradient is that of y: value = y + (hard - y), the difference a constant.

    Args:
        temperature: T > 0.
        hard: straight-through: exact discrete values, the relaxed gradient.

    Example:
        >>> scg.sample("z", scg.OneHotCategorical(logits=h),
        ...            estimator=scg.GumbelSoftmax(temperature=0.5))
    """

    name = "gumbel_softmax"
    differentiable = True
    biased = True

    def __init__(self, temperature=1.0, hard=False):
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
                or not np.isfinite(temperature) or temperature <= 0:
            raise ValueError("GumbelSoftmax: temperature must be a positive finite float, "
                             f"got {temperature!r}")
        self.temperature = float(temperature)
        if not isinstance(hard, (bool, np.bool_)):
            raise TypeError(f"GumbelSoftmax: hard must be True or False, got {hard!r}")
        self.hard = bool(hard)

    def check(self, name, dist):
        require_relaxation(name, dist, "scg.GumbelSoftmax()")

    def draw(self, d):
        relaxation = family_of(d.dist).relaxed(self.temperature)
        noise = relaxation.noise_of(d.uniform())
        scores = R.divide(R.add(relaxation.logits, d.per_draw(noise)), self.temperature)
        y = relaxation.soft(scores)
        if not self.hard:
            d.law = RELAXED  # (log q at the relaxed draw: its continuous form)
            return y
        # straight-through: add the plain constant (hard - y), with no dependencies, so
        # that no jump enters the draw's path
        soft = effects.asarray(y, dtype=float)
        return R.add(y, d.per_draw(relaxation.hard(soft) - soft))

    def dice_log_prob(self, site, ctx):
        if self.hard:  # (the straight-through gradient has no second derivative to match)
            self.unsupported_order(site)
        return None

    def describe(self, site):
        kind = ("straight-through Gumbel-softmax (exact discrete values, the gradient of "
                "the relaxed draw)" if self.hard else "Gumbel-softmax (concrete) relaxation")
        return f"{kind} at temperature {self.temperature:g}, differentiated along the path"

    def explain_terms(self, site, trace):
        return [f"biased: the gradient of the relaxed objective at temperature "
                f"T = {self.temperature:g}, with {site.name} replaced by its concrete "
                f"relaxation {relaxed_form(site.dist)}"
                + (" (the model sees its rounding, the gradient is the relaxed one)"
                   if self.hard else "")]

    def __repr__(self):
        return f"GumbelSoftmax(temperature={self.temperature!r}, hard={self.hard!r})"
