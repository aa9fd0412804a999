"""The unordered set estimator (Kool, van Hoof and Welling 2020), for every family that
declares a finite support (`enumerate_support`: Categorical, OneHotCategorical, Bernoulli,
Binomial, a user's own): k distinct values per draw, sampled without replacement, each
weighted by how likely the set is with it drawn first.

The log-probabilities log p_i of the support's values come from the family's own
`log_prob` of its expanded support. A set S of k distinct values is drawn by Gumbel-top-k
(the k largest of log p_i + G_i, the same law as drawing k times without replacement). For a set drawn this way,
P(S) = sum over s in S of p(s) P_{D-s}(S - s), where P_{D-A}(T) is the probability of
drawing the set T from the categories outside A (their probabilities renormalized). So

    E[f] = E_S[ sum_s p(s) R(S, s) f(s) ],   R(S, s) = P_{D-s}(S - s) / P(S),

and the gradient, with the built-in baseline of the paper,

    sum_s p(s) R(S, s) (f(s) - b_s) grad log p(s),
    b_s = p(s) f(s) + sum_{s' != s} p(s') [P_{D-s-s'}(S - s - s') / P_{D-s}(S - s)] f(s'),

b_s the unordered set estimate of E[f] from the set without s drawn first, whose
expectation is E[f] for every s: the baseline adds no bias. At k = K (every category)
each ratio is 1 and the estimate is the exact gradient.

Each P_{D-A}(S - A) is one entry of a backward pass over the 2^k subsets A of S (`_ratios`):
B(A) = sum over s not in A of p(s) / (1 - p(A)) B(A + s), B(S) = 1.
"""

import functools
import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..errors import EstimatorError
from .base import Estimator
from .enumerate import support_of
from .finite import plain_log_probs
from .terms import linear_term

MAX_K = 16  # (2^k subsets per set)


class UnorderedSet(Estimator):
    """k distinct values per draw of a site with a finite support, combined by the
    unordered set estimator with its built-in baseline: unbiased, exact at k = the size of
    the support. It serves every family that declares `enumerate_support`.

    The model is evaluated once per value of the set (k evaluations per draw), each a
    branch of the run downstream of the site; `E()` is the set-weighted estimate.

    Args:
        k: the size of the set, 2 <= k <= the number of categories (the baseline is made
            of the other values of the set).

    Example:
        >>> scg.sample("c", scg.Categorical(logits=z), estimator=scg.UnorderedSet(4))
    """

    name = "unordered_set"
    own_draws = True  # (each copy holds a category: a point of the support)

    def __init__(self, k):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 2 <= k <= MAX_K:
            raise ValueError(f"UnorderedSet: k must be an int from 2 to {MAX_K} (the set's "
                             f"size; its baseline needs a second value), got {k!r}")
        self.k = int(k)

    def check(self, name, dist):
        size = len(support_of(name, dist, f"scg.UnorderedSet(k={self.k})"))
        if self.k > size:
            raise EstimatorError(
                f"site {name!r}: scg.UnorderedSet(k={self.k}) needs k distinct values of the "
                f"support, but the site has {size}; use k <= {size} (k = {size} is the exact "
                "sum)")

    def copies(self, name, dist, plates):
        return self.k

    def after_draw(self, site, run):
        # the set's weights are per element: an element outside every plate would share a
        # cost with the others, and a weight per copy cannot serve both
        batch = tuple(family_of(site.dist).batch_shape)  # (to_event dims included)
        outer = len(site.dist.batch_shape)
        in_plates = {outer + p.dim for p in site.plates if 0 <= outer + p.dim < outer}
        loose = [i for i, size in enumerate(batch) if size > 1 and i not in in_plates]
        if loose:
            raise EstimatorError(
                f"site {site.name!r}: scg.UnorderedSet() weights each element's set by "
                f"itself, but dims {loose} of its batch shape {batch} are outside every "
                "scg.plate, so their elements may meet in a cost. Draw the site inside a "
                "scg.plate over those elements (one set per element), or use scg.Score('loo')")
        others = [k for k in run.copies.names if k != site.name]
        if others:
            raise EstimatorError(
                f"site {site.name!r}: scg.UnorderedSet() with other sites that copy the run "
                f"({', '.join(map(repr, others))}) is not supported; use it at one site")

    def draw(self, d):
        who = f"scg.UnorderedSet(k={self.k})"
        support = support_of(d.name, d.dist, who)
        log_p = plain_log_probs(d, who)  # (*batch, S) or (rows, *batch, S)
        if not effects.check(_enough_support_of(self.k), log_p,
                             f"site {d.name!r}: k values of p > 0"):
            raise EstimatorError(
                f"site {d.name!r}: {who} draws {self.k} distinct values, but at some element "
                f"fewer than {self.k} have a probability above 0 (a set would hold one of "
                "probability 0, whose log-probability is -inf); lower k, or use "
                "scg.Score('loo') for sites with masked values")
        size = len(support)

        def gumbels(dist, rng, shape):
            return rng.gumbel(size=tuple(shape) + tuple(family_of(dist).batch_shape) + (size,))

        n = d.n
        g = effects.asarray(d.draws(gumbels))
        top = effects.opaque(_top_k, log_p, g, self.k, n)  # (n, *batch, k) indices
        index = d.copies.index(d.name)
        d.aux["top"] = top
        d.aux["weights"] = effects.opaque(_ratios, log_p, top, n)  # (n, *batch, k, k + 1)
        return effects.opaque(_values, top, index, n, support)

    # ------------------------------------------------------------ surrogate
    def weight(self, site, ctx):
        """Copy j of draw i counts with p(s_j) R(S, s_j): its value is the set estimate."""
        w = effects.opaque(_copy_weights, site.aux["weights"])  # (rows, *batch)
        return ctx.grid.layout(w, site.dist.batch_shape, site.plates, f"site {site.name!r}")

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        q = ctx.q(site)
        f = [ctx.to_batch(x, site) for x in ctx.own(site, q)]  # k arrays (n, *batch)
        coef = effects.opaque(_score_weights, site.aux["weights"], tuple(f))
        coef = ctx.grid.layout(coef, site.dist.batch_shape, site.plates, f"site {site.name!r}")
        return linear_term(ctx.log_prob(site), coef, 1.0 / ctx.n)

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def evaluations(self, site):
        return self.k

    def describe(self, site):
        return (f"unordered set of k = {self.k} distinct values per draw (Gumbel-top-k), "
                "weighted by p(s) R(S, s), with the built-in leave-one-out set baseline")

    def cost_factor(self, site):
        return "p(s) R(S, s) at each value s of the set S (their sum is the set estimate)"

    def explain_terms(self, site, trace):
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        return [f"sum over s in S of p(s) R(S, s) (f(s) - b_s) dlog p({site.name} = s), "
                f"f = {down}, b_s the set estimate of E[f] from S with s drawn first"]

    def __repr__(self):
        return f"UnorderedSet(k={self.k})"


@functools.lru_cache(maxsize=None)
def _enough_support_of(k):
    """The check for k, one object per k (scg.jit compares the checks of two recordings by
    identity)."""
    return functools.partial(_enough_support, k=k)


def _enough_support(log_p, k):
    return bool(np.all(np.sum(log_p > -np.inf, axis=-1) >= k))


def _top_k(log_p, g, k, n):
    """The k categories of largest log p + G per draw (the main copy's rows), largest
    first: a set drawn without replacement, its first value a draw of p."""
    keys = np.broadcast_to(log_p, g.shape)[:n] + g[:n]
    return np.argsort(-keys, axis=-1, kind="stable")[..., :k]


def _values(top, index, n, support):
    """Row c n + i holds draw i's c-th value of the set (copies are blocks of n rows): the
    support's values at those indices, shape (rows, *batch, *event)."""
    index = np.asarray(index)
    rows = np.moveaxis(top, -1, 1)[np.arange(index.shape[0]) % n, index]
    return support[rows]


def _ratios(log_p, top, n):
    """Per draw and element, (k, k + 1) numbers for each value s_j of the set: [j, 0] =
    p(s_j) R(S, s_j), and [j, 1 + j'] = p(s_j') P_{D-s_j-s_j'}(S - s_j - s_j') /
    P_{D-s_j}(S - s_j) for j' != j, p(s_j) at j' = j (the baseline's weights)."""
    if log_p.ndim == top.ndim:  # (per-row parameters: the main copy's rows)
        log_p = log_p[:n]
    p = np.exp(np.broadcast_to(log_p, top.shape[:-1] + (log_p.shape[-1],)))
    k = top.shape[-1]
    chosen = np.take_along_axis(p, top, axis=-1)  # (n, *batch, k)
    outside = np.sum(p, axis=-1) - np.sum(chosen, axis=-1)
    outside = np.maximum(outside, 0.0)  # (the mass of the categories not in S)
    full = (1 << k) - 1
    B = np.empty((1 << k,) + chosen.shape[:-1])
    B[full] = 1.0
    # subsets by decreasing size: B(A) from the B(A + s) of its supersets
    order = sorted(range(full), key=lambda a: -bin(a).count("1"))
    for a in order:
        left = [j for j in range(k) if not a >> j & 1]
        remaining = outside + sum(chosen[..., j] for j in left)  # 1 - p(A), accurately
        B[a] = sum(chosen[..., j] * B[a | 1 << j] for j in left) / remaining
    out = np.empty(chosen.shape + (k + 1,))
    for j in range(k):
        out[..., j, 0] = chosen[..., j] * B[1 << j] / B[0]
        for jj in range(k):
            out[..., j, 1 + jj] = chosen[..., j] if jj == j else \
                chosen[..., jj] * B[1 << j | 1 << jj] / B[1 << j]
    return out


def _copy_weights(weights):
    """p(s_j) R(S, s_j) on the rows of copy j: shape (k n, *batch)."""
    w = weights[..., 0]  # (n, *batch, k)
    return np.moveaxis(w, -1, 0).reshape((-1,) + w.shape[1:-1])


def _score_weights(weights, f):
    """p(s_j) R(S, s_j) (f(s_j) - b_j) on the rows of copy j, b_j = sum_j' w[j, j'] f(s_j')."""
    f = np.stack([np.broadcast_to(x, weights.shape[:-2]) for x in f], axis=-1)  # (n, *b, k)
    baseline = np.einsum("...jk,...k->...j", weights[..., 1:], f)
    coef = weights[..., 0] * (f - baseline)
    return np.moveaxis(coef, -1, 0).reshape((-1,) + coef.shape[1:-1])
