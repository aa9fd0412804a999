"""DisARM: the antithetic augment-REINFORCE-merge estimator for coins (Dong, Mnih and
Tucker 2020), unbiased, with two evaluations of the downstream model per draw; on other
finite supports, an antithetic pair of categorical draws (coupled_categorical.py)."""

import numpy as np

from .base import Estimator
from .coupled_categorical import CoupledCategorical
from .finite import coin_values, plain_coin, traced_logit
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

    Other finite supports (Categorical, OneHotCategorical, Binomial, a user's family): the
    pair z, z~ is one Metropolis move apart (z ~ p; z~ proposes b != z with probability
    p_b / (1 - p_z) and takes it with probability min(1, (1 - p_z) / (1 - p_b))), so that
    P(z = a, z~ = b) = p_a p_b / (1 - min(p_a, p_b)) for a != b, and the estimate is

        1/2 (f(z) - f(z~)) (1 - min(p_z, p_z~)) (grad log p(z) - grad log p(z~)),

    the importance-weighted pair estimator of Dong, Mnih and Tucker (2021) and CARMS at
    k = 2 (Dimitriev and Zhou 2021), its weight p_z p_z~ / P(z, z~) = 1 - min(p_z, p_z~)
    at most 1; on a coin it is the DisARM estimate above, and scg.ARMS(2) is the same
    estimator. What the field calls categorical DisARM, Dong, Mnih and Tucker's, couples
    the pair through antithetic coins of a stick-breaking construction instead: in the
    values' order, a stick of probability 1/2 or more leaves the pairs of values after it
    undrawn, which biases the importance-weighted form (up to 40 % of the gradient's norm
    on random laws), and its variance reached 4.5x leave-one-out's; this pair was below
    leave-one-out's variance on every law measured (benchmarks/categorical_couplings.py).

    Example:
        >>> scg.sample("z", scg.Bernoulli(logits=enc), estimator=scg.DisARM())
        >>> scg.sample("c", scg.Categorical(logits=enc), estimator=scg.DisARM())
    """

    name = "disarm"

    def __init__(self):
        self._categorical = CoupledCategorical(2, self)

    def check(self, name, dist):
        if coin_values(name, dist, "scg.DisARM()") is not None:
            require_open_probs(name, dist, "scg.DisARM()")

    def copies(self, name, dist, plates):
        return 2

    def draw(self, d):
        values = coin_values(d.name, d.dist, "scg.DisARM()")
        if values is None:
            return self._categorical.draw(d)
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

    def after_draw(self, site, run):
        if "draws" in site.aux:
            self._categorical.after_draw(site, run)

    def weight(self, site, ctx):
        return np.full(ctx.trace.rows, 0.5)

    def term(self, site, ctx):
        if "draws" in site.aux:
            return self._categorical.term(site, ctx)
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
        if "draws" in site.aux:
            return f"DisARM for a categorical: {self._categorical.describe()}"
        return ("DisARM: each draw paired with its antithetic draw (shared uniforms), "
                "1/2 (f(b) - f(b~)) (-1)^b~ 1[b != b~] sigmoid(|logits|)")

    def cost_factor(self, site):
        return f"1/2 for each half of the pair of {site.name}"

    def explain_terms(self, site, trace):
        if "draws" in site.aux:
            return self._categorical.explain_terms(site, trace)
        down = [c.name for c in trace.downstream_costs(site)] or ["no cost"]
        return [f"d/dlogits of {site.name}: 1/2 (f(b) - f(b~)) (-1)^b~ 1[b != b~] "
                f"sigmoid(|logits|), f = {' + '.join(down)}"]
