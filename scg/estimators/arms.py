"""ARMS (Dimitriev and Zhou 2021, "ARMS: Antithetic-REINFORCE-Multi-Sample Gradient for
Binary Variables"): k draws of a coin coupled by a Dirichlet copula, combined by
leave-one-out REINFORCE with the correction that keeps it unbiased; on other finite
supports, the categorical form of CARMS (coupled_categorical.py)."""

import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from .base import Estimator
from .coupled_categorical import CoupledCategorical
from .finite import coin_values, plain_coin, plain_log_probs, traced_logit
from .terms import linear_term, require_open_probs

MAX_K = 64


class ARMS(Estimator):
    """k antithetically coupled draws of a coin or a categorical per draw, each a branch of
    the run.

    Coins (families whose declared support has two values and no event dims: Bernoulli, a
    user's own), per element and draw: k uniforms u_1..u_k with uniform marginals and
    negative dependence, D ~ Dirichlet(1, ..., 1) and u_i = 1 - (1 - D_i)^(k-1) (the CDF of
    D_i's Beta(1, k-1) marginal); b_i takes the coin's second value where u_i < p. With f_i
    the sum of the costs downstream at b_i (per element inside a plate), the derivative in
    the logit a = log p(second) - log p(first) is

        p (1 - p) / (k P(b_i = 1, b_j = 0)) sum_i (f_i - mean_{j != i} f_j) (1[b_i] - p).

    Leave-one-out REINFORCE with correlated draws has expectation (p (1 - p) - Cov(b_i,
    b_j)) df/dp; the factor in front divides that out (P(b_i = 1, b_j = 0) = p (1 - p) -
    Cov), so the estimate is unbiased. Under the Dirichlet copula,
    P(b_i = 1, b_j = 0) = (1 - p) - max(0, 2 (1 - p)^(1/(k-1)) - 1)^(k-1). At k = 2 the
    uniforms are u and 1 - u and ARMS is DisARM.

    Other finite supports (Categorical, OneHotCategorical, Binomial, a user's family that
    declares `enumerate_support`): the estimator of CARMS (Dimitriev and Zhou 2021,
    "CARMS: Categorical-Antithetic-REINFORCE Multi-Sample Gradient Estimator"),
    leave-one-out REINFORCE with each pair of draws weighted by p(z_i) p(z_j) / Q(z_i, z_j),
    Q the law of a pair of the coupled draws, which keeps it unbiased:

        1 / (k (k - 1)) sum_{i != j, z_i != z_j} p(z_i) p(z_j) / Q(z_i, z_j) (f_i - f_j)
            grad log p(z_i).

    The draws are coupled so that Q is in closed form and no pair of distinct values is
    rarer than under independent draws (every weight at most 1): at k = 2, DisARM's pair
    (one Metropolis move, see scg.DisARM); for k >= 3, sampling without replacement within
    the levels of the law: with p_(1) >= ... >= p_(C), p is the mixture of the uniform laws
    on its top l values with weights w_l = l (p_(l) - p_(l+1)); each draw picks a level
    with probability w_l, and the draws of one level take distinct values of it,
    uniformly (again from all once all are taken). A uniform p is sampled without
    replacement. The paper couples the draws by a copula over orders of the values instead,
    which makes pairs of values rarely drawn together much rarer than independent draws do:
    measured above leave-one-out's variance on 52 % of random laws at k = 2 (up to 2.8x)
    and 15 % at k = 3 (benchmarks/categorical_couplings.py). The probabilities come from
    the family's own `log_prob` of its support.

    The costs enter the objective with weight 1/k per draw; k evaluations of the downstream
    model per draw. First derivatives only.

    Args:
        k: the number of coupled draws, 2 <= k <= 64.

    Example:
        >>> scg.sample("z", scg.Bernoulli(logits=enc), estimator=scg.ARMS(4))
        >>> scg.sample("c", scg.Categorical(logits=enc), estimator=scg.ARMS(4))
    """

    name = "arms"

    def __init__(self, k):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 2 <= k <= MAX_K:
            raise ValueError(f"ARMS: k must be an int from 2 to {MAX_K} (the coupled draws "
                             f"per draw), got {k!r}")
        self.k = int(k)
        self._categorical = CoupledCategorical(self.k, self)

    def check(self, name, dist):
        if coin_values(name, dist, repr(self)) is not None:
            require_open_probs(name, dist, repr(self))

    def copies(self, name, dist, plates):
        return self.k

    def draw(self, d):
        values = coin_values(d.name, d.dist, repr(self))
        if values is None:
            return self._categorical.draw(d)
        who, k = repr(self), self.k
        p, _ = plain_coin(d, who)

        def exponentials(dist, rng, shape):
            return rng.standard_exponential(
                size=tuple(shape) + tuple(family_of(dist).batch_shape) + (k,))

        u = effects.opaque(_coupled_uniforms, effects.asarray(d.draws(exponentials)), k)
        second = effects.opaque(_below, u, p)  # (rows, *batch, k): 1 where b_i is v1
        d.aux["second"] = second
        d.aux["p"] = p
        d.aux["factor"] = effects.opaque(_factor, plain_log_probs(d, who), k)
        index = d.copies.index(d.name)
        return effects.opaque(_values, second, index, values)

    def after_draw(self, site, run):
        if _categorical(site):
            self._categorical.after_draw(site, run)

    def weight(self, site, ctx):
        return np.full(ctx.trace.rows, 1.0 / self.k)

    def term(self, site, ctx):
        if _categorical(site):
            return self._categorical.term(site, ctx)
        if not ctx.has_downstream(site):
            return None
        k, q = self.k, ctx.q(site)
        f = ctx.own(site, q)
        total = sum(f)
        axis = ctx.own_axis(site)
        weight = None
        for i in range(k):
            loo = f[i] - (total - f[i]) / (k - 1)
            g = np.stack([loo] + [np.zeros_like(loo)] * (k - 1), axis=axis)
            spread = ctx.to_batch(ctx.spread(g, site), site)  # (rows, *batch), 0 off copy 0
            part = effects.opaque(_times_score, spread, site.aux["second"], site.aux["p"], i)
            weight = part if weight is None else weight + part
        weight = effects.opaque(_scaled, weight, site.aux["factor"], k)
        return linear_term(traced_logit(site, ctx), weight, 1.0 / ctx.n)

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def describe(self, site):
        if _categorical(site):
            return f"ARMS (CARMS for a categorical): {self._categorical.describe()}"
        return (f"ARMS: k = {self.k} draws coupled by a Dirichlet copula, leave-one-out "
                "REINFORCE divided by 1 - the draws' correlation")

    def cost_factor(self, site):
        return f"1/{self.k} for each of the {self.k} coupled draws of {site.name}"

    def explain_terms(self, site, trace):
        if _categorical(site):
            return self._categorical.explain_terms(site, trace)
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        return [f"d/dlogit of {site.name}: p (1 - p) / (k P(b_i = 1, b_j = 0)) sum_i (f_i - "
                f"mean_j!=i f_j) (1[b_i] - p), k = {self.k}, f = {down}"]

    def __repr__(self):
        return f"ARMS({self.k})"


def _categorical(site):
    """Was the site drawn as a categorical (coupled_categorical.py), not as a coin?"""
    return "draws" in site.aux


def _coupled_uniforms(e, k):
    """u_i = 1 - (1 - D_i)^(k-1), D = e / sum(e) ~ Dirichlet(1, ..., 1): uniform marginals,
    negatively dependent (at k = 2: u and 1 - u)."""
    dirichlet = e / np.sum(e, axis=-1, keepdims=True)
    return -np.expm1((k - 1) * np.log1p(-dirichlet))


def _below(u, p):
    return (u < np.expand_dims(p, -1)).astype(float)


def _values(second, index, values):
    """Row c n + i holds the c-th coupled draw: the coin's value."""
    index = np.asarray(index)
    chosen = np.take_along_axis(
        second, index.reshape((-1,) + (1,) * (second.ndim - 1)), axis=-1)[..., 0]
    return np.where(chosen == 1.0, values[1], values[0])


def _factor(log_p, k):
    """p (1 - p) / P(b_i = 1, b_j = 0), from the log-probabilities (log(1 - p), log p) of
    the coin's values, accurate near p = 0 and 1: P(b_i = 1, b_j = 0) = s - max(0, 2
    s^(1/(k-1)) - 1)^(k-1), s = 1 - p."""
    log_s = log_p[..., 0]
    s = np.exp(log_s)
    inner = 1.0 + 2.0 * np.expm1(log_s / (k - 1))  # 2 s^(1/(k-1)) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (k - 1) * np.log1p(2.0 * np.expm1(log_s / (k - 1)))
        apart = np.where(inner > 0.0, -s * np.expm1(m - log_s), s)
    return np.exp(log_p[..., 0] + log_p[..., 1]) / apart


def _times_score(spread, second, p, i):
    return spread * (second[..., i] - p)


def _scaled(weight, factor, k):
    return weight * factor / k
