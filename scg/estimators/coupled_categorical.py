"""Leave-one-out REINFORCE over k coupled draws of a site with a finite support, each pair
of draws weighted by how much likelier the coupling makes it than independent draws would:
the estimator of CARMS (Dimitriev and Zhou 2021), on couplings whose pair law is in closed
form and never makes a pair of distinct values rarer than independent draws do (so every
weight is at most 1): one Metropolis move for k = 2 (metropolis_pair.py), sampling without
replacement within the levels of the law for k >= 3 (level_coupling.py). scg.ARMS(k)
serves categoricals with it, and scg.DisARM() with k = 2; coins keep their own copula
(arms.py, disarm.py).

Per element, with f_i the sum of the costs downstream at the i-th draw z_i (per element
inside a plate) and r_ij = p(z_i) p(z_j) / Q(z_i, z_j), Q the law of a pair of draws,

    g = 1 / (k (k - 1)) sum_{i != j, z_i != z_j} r_ij (f_i - f_j) grad log p(z_i).

Unbiased: a pair's term has expectation sum_{a != b} p_a p_b (F(a) - F(b)) grad log p_a,
F(a) the mean cost at a (the other elements and the noise downstream independent of this
element's draws), which is grad E[f] since sum_a p_a grad log p_a = 0; it needs Q(a, b) > 0
for every pair of distinct values, which the couplings give. Pairs of equal values cancel
between (i, j) and (j, i), whatever their weight. g is symmetric in the draws, so its mean
is the same under a uniformly random relabeling of them, under which every pair (i, j) has
the same law Q: the couplings need not be exchangeable.
"""

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..numpy import rules as R
from .enumerate import support_of
from .finite import plain_log_probs, traced_family, traced_log_probs
from .level_coupling import level_draws, level_pair_weights
from .metropolis_pair import pair_draws, pair_weight
from .score import require_seen_outcomes
from .terms import linear_term


class CoupledCategorical:
    """The draws and the surrogate terms of k coupled draws of one site, for the estimator
    `who` (an ARMS or DisARM object) that delegates its categorical sites here."""

    def __init__(self, k, who):
        self.k, self.who = k, who

    def draw(self, d):
        k, who = self.k, repr(self.who)
        support = support_of(d.name, d.dist, who)
        log_p = plain_log_probs(d, who)  # (*batch, S) or (rows, *batch, S)

        width = 2 if k == 2 else 2 * k  # (the uniforms the coupling takes)

        def uniforms(dist, rng, shape):
            return rng.random(size=tuple(shape) + tuple(family_of(dist).batch_shape) + (width,))

        u = effects.asarray(d.draws(uniforms))  # (rows, *batch, width), shared by the copies
        z = effects.opaque(_coupled, log_p, u, k, d.n)  # (rows, *batch, k): the draws
        index = d.copies.index(d.name)
        d.aux["draws"] = z
        d.aux["log_p"] = log_p
        d.aux["index"] = index
        d.aux["support"] = support
        return effects.opaque(_values, z, index, support)

    def after_draw(self, site, run):
        require_seen_outcomes(site, run, repr(self.who))

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        k = self.k
        f = ctx.own(site, ctx.q(site))
        axis = ctx.own_axis(site)
        zero = np.zeros_like(f[0])
        # each draw's costs on the main copy's rows (the weights of copying sites upstream
        # applied), where the draws of every copy are known
        costs = tuple(ctx.to_batch(ctx.spread(np.stack([f[j]] + [zero] * (k - 1), axis=axis),
                                              site), site) for j in range(k))
        a = site.aux
        weights = effects.opaque(_weights, a["log_p"], a["draws"], costs, a["index"])
        # sum_i W_i grad log p(z_i): by the S values of the support when there are fewer of
        # them than draws (the weight of value s the sum of W_i over the draws at s), else
        # by the k draws (each log p(z_i) at its values, rows x batch)
        if len(a["support"]) <= k:
            scores = traced_log_probs(site, ctx)
            parts = [(scores[s], effects.opaque(_at_value, weights, a["draws"], s))
                     for s in range(len(scores))]
        else:
            family = traced_family(site, ctx)
            parts = [(family.log_prob(effects.opaque(_copy_values, a["draws"], i,
                                                     a["support"])),
                      effects.opaque(_column, weights, i)) for i in range(k)]
        total = None
        for score, weight in parts:
            part = linear_term(score, weight, 1.0 / ctx.n)
            total = part if total is None else R.add(total, part)
        return total

    def describe(self):
        how = ("a pair one Metropolis move apart" if self.k == 2 else
               f"{self.k} draws without replacement within the levels of the law")
        return (f"{how}, leave-one-out REINFORCE with each pair of distinct values weighted "
                "by p(a) p(b) / P(pair = (a, b))")

    def explain_terms(self, site, trace):
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        return [f"grad of {site.name}: 1 / (k (k - 1)) sum over draws i != j with z_i != z_j "
                f"of p(z_i) p(z_j) / Q(z_i, z_j) (f_i - f_j) grad log p(z_i), k = {self.k}, "
                f"Q the law of a pair of the coupled draws, f = {down}"]


def _normalized(log_p):
    p = np.exp(log_p)
    return p / np.sum(p, axis=-1, keepdims=True)


def _coupled(log_p, u, k, n):
    """The k coupled draws' indices (rows, *batch, k) from the coupling's uniforms."""
    p = _normalized(log_p)
    if p.ndim < u.ndim and len(u) > n:
        # (parameters shared by the rows: the uniforms, and so the draws, are the n draws'
        # in every block of rows, as SiteDraw.draws tiles them)
        first = _coupled(log_p, u[:n], k, n)
        return np.reshape(np.broadcast_to(first, (len(u) // n,) + first.shape), u.shape[:-1]
                          + (k,))
    return pair_draws(p, u) if k == 2 else level_draws(p, u[..., :k], u[..., k:])


def _pair_weights(p, z):
    """(..., k, k): p(z_i) p(z_j) / Q(z_i, z_j) where z_i != z_j, else 0."""
    if z.shape[-1] > 2:
        return level_pair_weights(p, z)
    p_z = np.take_along_axis(np.broadcast_to(p, z.shape[:-1] + p.shape[-1:]), z, axis=-1)
    r = np.where(z[..., 0] != z[..., 1], pair_weight(p_z[..., 0], p_z[..., 1]), 0.0)
    zero = np.zeros_like(r)
    return np.stack([np.stack([zero, r], axis=-1), np.stack([r, zero], axis=-1)], axis=-2)


def _values(z, index, support):
    """Row r holds the draw of its copy, index[r]: the support's value there."""
    index = np.asarray(index)
    chosen = np.take_along_axis(z, index.reshape((-1,) + (1,) * (z.ndim - 1)), axis=-1)
    return support[chosen[..., 0]]


def _copy_values(z, i, support):
    """The i-th draw on every row: the support's values, (rows, *batch, *event)."""
    return support[z[..., i]]


def _weights(log_p, z, costs, index):
    """(rows, *batch, k): the weight of grad log p(z_i), 1 / (k (k - 1)) sum_j r_ij
    (f_i - f_j), on the rows of the site's main copy (0 on its other copies, whose costs
    are 0 there)."""
    k = z.shape[-1]
    rows = np.flatnonzero(np.asarray(index) == 0)
    p = _normalized(log_p)
    if p.ndim == z.ndim:  # (per-row parameters)
        p = p[rows]
    f = np.stack([np.broadcast_to(c, z.shape[:-1])[rows] for c in costs], axis=-1)
    r = _pair_weights(p, z[rows])  # (main rows, *batch, k, k)
    out = np.zeros(z.shape, dtype=float)
    out[rows] = np.sum(r * (f[..., :, None] - f[..., None, :]), axis=-1) / (k * (k - 1))
    return out


def _column(weights, i):
    return weights[..., i]


def _at_value(weights, z, s):
    """The summed weight of the draws at the support's value s: (rows, *batch)."""
    return np.sum(np.where(z == s, weights, 0.0), axis=-1)
