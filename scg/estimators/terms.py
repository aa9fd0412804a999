"""The building blocks of surrogate terms: zero in value, the estimate in their derivatives."""

import numpy as np

from ..core import effects
from ..core.tape import Primitive, defvjp
from ..errors import EstimatorError
from ..distributions.base import declares, family_name, family_of
from ..numpy import rules as R


def magic_box(tau):
    """exp(tau - stop_gradient(tau)): 1 in value; its derivatives reproduce score terms
    to every order (Foerster et al. 2018)."""
    return R.exp(R.subtract(tau, R.stop_gradient(tau)))


linear_term = Primitive(
    "linear_term", lambda x, weight, scale: 0.0,
    doc="0 in value; its derivative in x is scale * weight (plain constants): the score "
        "term grad log p * (Q - b) with x = log p, or a weak derivative with x a parameter.")


def _linear_term_vjp(g, ans, x, weight, scale):
    c = R.multiply(g, scale)
    if type(c) in (float, np.float64) and c == 1.0:
        return weight  # scg.grad_samples seeds n against scale 1/n: no pass over the draws
    return R.multiply(c, weight)


defvjp(linear_term, _linear_term_vjp)


def traced_logits(site, ctx):
    """The logits of a Bernoulli site, traced in the parameters: as given, or log p -
    log(1 - p) of its probs."""
    if family_of(site.dist).params.get("logits") is not None:
        return ctx.param(site, "logits")
    p = ctx.param(site, "probs")
    return R.subtract(R.log(p), R.log1p(R.negative(p)))


def require_open_probs(name, dist, who):
    """Raise EstimatorError if the family's probs reach a boundary where the log-probability
    of one of its values is -inf (its `probs_boundary` with `every_value`: a coin's probs of
    exactly 0 or 1): an estimator that takes the log-probability (or the logits) of every
    value cannot evaluate it there, although the derivative exists."""
    family = family_of(dist)
    boundary = getattr(type(family), "probs_boundary", None)
    if boundary is None or not boundary.every_value or family.params.get("probs") is None:
        return
    plain = effects.asarray(family.params["probs"], dtype=float)
    if not effects.check(boundary.test, plain, f"site {name!r}: probs inside (0, 1)"):
        raise EstimatorError(
            f"site {name!r}: {who} takes the log-probability of every value of the "
            f"{boundary.value_word}, but its probs is {boundary.where} at some element (log p "
            "= -inf there). The derivative exists: scg.MeasureValued() gives it exactly at "
            "the boundary" + boundary.logits_advice)


def require_relaxation(name, dist, who):
    """Raise EstimatorError unless the site's family declares a concrete relaxation
    (`relaxed(T)`), saying which estimators serve it instead."""
    if declares(dist, "relaxed"):
        return
    family = family_name(dist)
    raise EstimatorError(
        f"site {name!r}: {who} relaxes the draw of a family that declares a concrete "
        f"relaxation (relaxed(temperature): Bernoulli and OneHotCategorical), and {family} "
        "declares none. A categorical index (Categorical) has none: sample "
        "scg.OneHotCategorical(probs=..., logits=...) instead (its draw is the one-hot "
        "vector of the category); otherwise use estimator='auto', scg.Score('loo') or "
        "scg.Enumerate()")


def relaxed_form(dist):
    """How a site's concrete relaxation maps its noise, for explain()."""
    return family_of(dist).relaxed(1.0).form


class _Relaxed:
    """The law of a draw that holds relaxed values, between 0 and 1 (PerSample.law): REBAR's
    copies 1 and 2, a Gumbel-softmax draw. A model's log_prob of a Bernoulli or
    OneHotCategorical at the draw (log q(z) in an ELBO, a prior's log p(z)) takes the
    family's continuous form there, `relaxed_log_prob`, equal to log_prob at 0 and 1.
    Other families take their plain log_prob."""

    def log_prob(self, dist, value, log_prob):
        if getattr(family_of(dist), "relaxed_log_prob", None) is None:
            return None
        return dist.relaxed_log_prob(value)


RELAXED = _Relaxed()
