"""DisARM: the antithetic augment-REINFORCE-merge estimator for Bernoulli sites (Dong, Mnih
and Tucker 2020), unbiased, with two evaluations of the downstream model per draw."""

import numpy as np

from ..core import effects

from ..distributions.base import family_name
from ..errors import EstimatorError
from .base import Estimator
from .terms import linear_term, require_open_probs, traced_logits


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # (no overflow for large |x|)


class DisARM(Estimator):
    """Pairs each draw b = 1[u < sigmoid(a)] with its antithetic b~ = 1[1 - u < sigmoid(a)]
    (a the logits, one uniform u per element and draw) and estimates the derivative in
    a_i by 1/2 (f(b) - f(b~)) (-1)^(b~_i) 1[b_i != b~_i] sigmoid(|a_i|), where f is the
    sum of the costs downstream (per element inside a plate). Both halves of the pair are
    draws of the site, so the costs enter the objective with weight 1/2 each.

    Example:
        >>> scg.sample("z", scg.Bernoulli(logits=enc), estimator=scg.DisARM())
    """

    name = "disarm"

    def check(self, name, dist):
        family = family_name(dist)
        if family != "Bernoulli":
            raise EstimatorError(
                f"site {name!r}: scg.DisARM() serves Bernoulli sites only, not {family}; use "
                "scg.Score(baseline='loo'), scg.MeasureValued() or scg.Enumerate()")
        require_open_probs(name, dist, "scg.DisARM()")

    def copies(self, name, dist, plates):
        return 2

    def draw(self, d):
        u = d.uniform()
        p = _probs(d.plain_params())  # (before broadcasting: shared logits stay small)
        keep = u < p
        mirror = (1.0 - u) < p
        # the derivative's factor per element: (-1)^b~ 1[b != b~] sigmoid(|logits|)
        d.aux["factor"] = np.where(keep != mirror, np.where(mirror, -1.0, 1.0), 0.0) * \
            np.maximum(p, 1.0 - p)
        return np.where(d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1)) == 0,
                        keep, mirror).astype(float)

    def weight(self, site, ctx):
        return np.full(ctx.trace.rows, 0.5)

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        q = ctx.q(site)
        f_b, f_mirror = ctx.own(site, q)
        half_diff = 0.5 * (f_b - f_mirror)
        g = np.stack([half_diff, np.zeros_like(half_diff)], axis=ctx.own_axis(site))
        spread = ctx.to_batch(ctx.spread(g, site), site)  # (rows, *batch), 0 on b~'s rows
        return linear_term(traced_logits(site, ctx), spread * site.aux["factor"],
                           1.0 / ctx.n)

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def describe(self, site):
        return ("DisARM: each draw paired with its antithetic draw (shared uniforms), "
                "1/2 (f(b) - f(b~)) (-1)^b~ 1[b != b~] sigmoid(|logits|)")

    def cost_factor(self, site):
        return f"1/2 for each half of the pair of {site.name}"

    def explain_terms(self, site, trace):
        down = [c.name for c in trace.downstream_costs(site)] or ["no cost"]
        return [f"d/dlogits of {site.name}: 1/2 (f(b) - f(b~)) (-1)^b~ 1[b != b~] "
                f"sigmoid(|logits|), f = {' + '.join(down)}"]


def _probs(params):
    if params.get("logits") is not None:
        return _sigmoid(effects.asarray(params["logits"], dtype=float))
    return effects.asarray(params["probs"], dtype=float)

