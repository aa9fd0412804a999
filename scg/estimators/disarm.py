"""DisARM: the antithetic augment-REINFORCE-merge estimator for coins (Dong, Mnih and
Tucker 2020), unbiased, with two evaluations of the downstream model per draw."""

import numpy as np

from .base import Estimator
from .finite import plain_coin, traced_logit, two_values
from .terms import linear_term, require_open_probs


class DisARM(Estimator):
    """Pairs each draw b = 1[u < sigmoid(a)] with its antithetic b~ = 1[1 - u < sigmoid(a)]
    (a the logits, one uniform u per element and draw) and estimates the derivative in
    a_i by 1/2 (f(b) - f(b~)) (-1)^(b~_i) 1[b_i != b~_i] sigmoid(|a_i|), where f is the
    sum of the costs downstream (per element inside a plate). Both halves of the pair are
    draws of the site, so the costs enter the objective with weight 1/2 each.

    It serves every coin: a family whose declared support (`enumerate_support`) has two
    values v0, v1 (Bernoulli: 0 and 1; a user's own family alike). The family's own
    `log_prob` of the two values gives p = p(v1) and the logit a = log p(v1) - log p(v0)
    that the estimate differentiates; b takes the value v1 where u < p, else v0.

    Example:
        >>> scg.sample("z", scg.Bernoulli(logits=enc), estimator=scg.DisARM())
    """

    name = "disarm"

    def check(self, name, dist):
        two_values(name, dist, "scg.DisARM()")
        require_open_probs(name, dist, "scg.DisARM()")

    def copies(self, name, dist, plates):
        return 2

    def draw(self, d):
        values = two_values(d.name, d.dist, "scg.DisARM()")
        u = d.uniform()
        # (before broadcasting: shared parameters stay small)
        p, larger = plain_coin(d, "scg.DisARM()")
        keep = u < p
        mirror = (1.0 - u) < p
        # the derivative's factor per element: (-1)^b~ 1[b != b~] sigmoid(|logits|)
        d.aux["factor"] = np.where(keep != mirror, np.where(mirror, -1.0, 1.0), 0.0) * larger
        second = np.where(d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1)) == 0,
                          keep, mirror)
        return np.where(second, values[1], values[0])

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
        return linear_term(traced_logit(site, ctx), spread * site.aux["factor"],
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

