"""The concrete / Gumbel-softmax relaxation (Maddison, Mnih and Teh 2017; Jang, Gu and Poole
2017) of Bernoulli and OneHotCategorical sites: a smooth draw differentiated along its path,
biased for the true objective (the gradient is that of the relaxed objective)."""

import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_name, family_of
from ..distributions.bernoulli import Bernoulli
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .terms import RELAXED

_TINY = np.finfo(float).tiny
_BELOW_ONE = 1.0 - np.finfo(float).epsneg  # the largest float below 1


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
        family = family_name(dist)
        if family == "Categorical":
            raise EstimatorError(
                f"site {name!r}: scg.GumbelSoftmax() relaxes one-hot vectors, and a "
                "Categorical draw is an index; sample scg.OneHotCategorical(probs=..., "
                "logits=...) instead (its draw is the one-hot vector of the category)")
        if family not in ("Bernoulli", "OneHotCategorical"):
            raise EstimatorError(
                f"site {name!r}: scg.GumbelSoftmax() serves Bernoulli and OneHotCategorical "
                f"sites only, not {family}; use estimator='auto', 'score' or scg.Enumerate()")

    def draw(self, d):
        family = family_of(d.dist)
        bernoulli = isinstance(family, Bernoulli)
        u = np.clip(d.uniform(), _TINY, _BELOW_ONE)
        if bernoulli:
            noise = np.log(u) - np.log1p(-u)  # logistic
        else:
            noise = -np.log(-np.log(u))  # Gumbel
        scores = R.divide(R.add(_logits(family, bernoulli), d.per_draw(noise)),
                          self.temperature)
        y = R.sigmoid(scores) if bernoulli else R.softmax(scores, axis=-1)
        if not self.hard:
            d.aux["law"] = RELAXED  # (log q at the relaxed draw: its continuous form)
            return y
        # straight-through: add the plain constant (hard - y), with no dependencies, so
        # that no jump enters the draw's path
        soft = effects.asarray(y, dtype=float)
        # (one operation of the plain values: a program recorded for replay repeats it)
        return R.add(y, d.per_draw(effects.opaque(_hard_minus_soft, soft, bernoulli)))

    def dice_log_prob(self, site, ctx):
        if self.hard:  # (the straight-through gradient has no second derivative to match)
            self.unsupported_order(site)
        return None

    def describe(self, site):
        kind = ("straight-through Gumbel-softmax (exact discrete values, the gradient of "
                "the relaxed draw)" if self.hard else "Gumbel-softmax (concrete) relaxation")
        return f"{kind} at temperature {self.temperature:g}, differentiated along the path"

    def explain_terms(self, site, trace):
        relaxed = ("sigmoid((logits + logistic noise) / T)"
                   if isinstance(family_of(site.dist), Bernoulli)
                   else "softmax((logits + Gumbel noise) / T)")
        return [f"biased: the gradient of the relaxed objective at temperature "
                f"T = {self.temperature:g}, with {site.name} replaced by {relaxed}"
                + (" (the model sees its rounding, the gradient is the relaxed one)"
                   if self.hard else "")]

    def __repr__(self):
        return f"GumbelSoftmax(temperature={self.temperature!r}, hard={self.hard!r})"


def _logits(family, bernoulli):
    """The family's logits, traced: as given, or from its (traced) probs."""
    params = family.params
    if params.get("logits") is not None:
        return params["logits"]
    # (probs of 0 or 1 give infinite logits: their logs taken where they are positive,
    # -inf elsewhere, without np.errstate, which scg.jit cannot replay)
    p = params["probs"]
    if bernoulli:
        below_one = np.less(p, 1.0)
        log_not = np.where(below_one, R.log1p(R.negative(np.where(below_one, p, 0.0))),
                           -np.inf)
        return R.subtract(_log_positive(p), log_not)
    return _log_positive(p)


def _log_positive(p):
    positive = np.greater(p, 0.0)
    return np.where(positive, R.log(np.where(positive, p, 1.0)), -np.inf)


def _hard_minus_soft(soft, bernoulli):
    """The straight-through offset: the exact discrete value minus the relaxed one."""
    if bernoulli:
        hard = (soft > 0.5).astype(float)
    else:
        hard = np.equal(np.argmax(soft, axis=-1)[..., None],
                        np.arange(soft.shape[-1])).astype(float)
    return hard - soft
