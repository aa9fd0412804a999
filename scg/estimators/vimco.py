"""VIMCO: the leave-one-out control variate of a multi-sample bound (Mnih and Rezende 2016).

For K particles z_1..z_K in a plate and the bound L = log (1/K) sum_k exp(w_k) downstream
(`scg.logmeanexp` over that plate), particle j's score is weighted by its costs minus
a L_{-j}, where L_{-j} is the bound with w_j replaced by the mean of the other particles'
log-weights and `a` the bound's weight in the cost. L_{-j} does not depend on z_j, so the
estimate stays unbiased; it is close to L, so the score's weight becomes the particle's
own contribution to the bound, not the bound itself.
"""

import numpy as np

from ..core import effects
from ..errors import EstimatorError
from .score import Score
from .terms import linear_term


class VIMCO(Score):
    """The score function with VIMCO's per-particle control variate.

    For a site inside the plate of a `scg.logmeanexp` bound downstream of it (K >= 2
    particles; other plates around them, such as a minibatch's data points, each with its
    own bound; the bound its own cost or a multiple of one). First derivatives only.

    Example:
        >>> with scg.plate("particles", K):
        ...     z = scg.sample("z", scg.Bernoulli(logits=phi), estimator=scg.VIMCO())
        ...     log_w = log_joint(x, z) - scg.Bernoulli(logits=phi).log_prob(z)
        >>> return -scg.logmeanexp(log_w, plate="particles")
    """

    name = "vimco"
    serves_masks = False  # (each particle's weight is its share of one bound)

    def __init__(self):
        super().__init__(baseline=None)

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        bound = self._bound(site, ctx)
        if ctx.copies:
            raise EstimatorError(f"site {site.name!r}: scg.VIMCO() with copies of the run "
                                 "(another site's estimator evaluates copies) is not supported")
        w = bound.plain_log_weights()  # (rows, *other plates, K)
        other = bound.other_plates()
        kinds = set()
        weight = bound_multiple(site, ctx, bound, "scg.VIMCO()", kinds=kinds, other=other)
        if len(kinds) > 1:
            raise EstimatorError(
                f"site {site.name!r}: the costs that are multiples of the bound lie along "
                f"different plates ({', '.join(p.name for p in other)} in some, not in "
                "others); give the bound one cost")
        q = ctx.q(site)
        grid = ctx.grid
        places = tuple(grid.axis(p) for p in other) + (grid.axis(bound.plate),)
        baseline = effects.opaque(_control, w, bound.plain_result(), places, len(q.shape),
                                  kinds.pop() == "each")
        return linear_term(ctx.log_prob(site), ctx.spread(q - weight * baseline, site),
                           1.0 / ctx.n)

    def _bound(self, site, ctx):
        for bound in ctx.trace.bounds:
            lw = bound.log_weights
            if bound.plate in site.plates and site.name in lw.deps.up and \
                    (bound.plate, site.name) not in lw.mixed:
                if bound.plate.size < 2:
                    raise EstimatorError(f"site {site.name!r}: scg.VIMCO() needs K >= 2 "
                                         f"particles; plate {bound.plate.name!r} has 1")
                return bound
        plates = ", ".join(repr(p.name) for p in site.plates) or "none"
        raise EstimatorError(
            f"site {site.name!r}: scg.VIMCO() builds its control variate from a multi-sample "
            f"bound over the site's plate, and none is downstream of it (its plates: "
            f"{plates}). Draw the particles in a plate, compute their log-weights inside it, "
            "and return -scg.logmeanexp(log_w, plate=...) over that plate; or use "
            "scg.Score('loo')")

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def dice_term(self, site, ctx):
        return None

    def describe(self, site):
        return ("VIMCO: score function, each particle's cost minus the bound with its "
                "log-weight replaced by the mean of the others'")

    def explain_terms(self, site, trace):
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        return [f"grad log p({site.name}_j) * ({down} - a L_-j), L_-j the bound with "
                f"log w_j replaced by the mean of the other particles' log-weights"]

    def __repr__(self):
        return "VIMCO()"


def bound_multiple(site, ctx, bound, who, every=False, kinds=None, other=()):
    """a: the sum of the multiples of the bound among the site's downstream costs (with
    `every`, each of them must be one). `kinds` collects, for each, whether it lies
    along the bound's other plates ("each": a cost per element) or not ("total")."""
    L = bound.plain_result()
    total, found = 0.0, False
    for c in ctx.trace.downstream_costs(site):
        if kinds is not None:
            along = [p in c.plates for p in other]
            if any(along) and not all(along):
                raise EstimatorError(
                    f"site {site.name!r}: cost {c.name!r} lies along some of the bound's "
                    "plates and not others; compute it per element of all or none")
            kinds.add("each" if all(along) and other else "total")
        # (one operation of plain values, and a check every later run meets too)
        fit = effects.opaque(_fit_multiple, effects.asarray(
            getattr(c.value, "value", c.value), dtype=float), L)
        if effects.check(_fits, fit, f"cost {c.name!r} a multiple of the bound"):
            total = fit[0] if not found else total + fit[0]
            found = True
        elif every:
            raise EstimatorError(
                f"site {site.name!r}: {who} weighs the derivative reaching the particles by "
                f"their normalized weights, which is right for the bound only, and cost "
                f"{c.name!r} downstream of the site is not a multiple of it; compute the "
                "other costs from values that do not depend on the particles, or use "
                "scg.Pathwise()")
    if not found:
        raise EstimatorError(
            f"site {site.name!r}: no cost downstream of it is a multiple of the bound "
            f"scg.logmeanexp(..., plate={bound.plate.name!r}), so {who} cannot weigh "
            "its control variate; give the bound a cost of its own (return -bound, or "
            "scg.cost('bound', -bound)) and the rest of the objective another")
    return total


def _fit_multiple(v, L):
    """[a, 1] if the cost v (rows, ...) summed per draw is a * L (summed per draw), else
    [a, 0]."""
    L = L.reshape(L.shape[:1] + (-1,)).sum(axis=1)
    per_draw = np.broadcast_to(v.reshape(v.shape[:1] + (-1,)).sum(axis=1) if v.ndim else v,
                               L.shape)
    scale = float(np.dot(per_draw, L) / np.dot(L, L)) if np.any(L) else 0.0
    ok = np.allclose(per_draw, scale * L, rtol=1e-10, atol=1e-12 * np.max(np.abs(L)))
    return np.array([scale, 1.0 if ok else 0.0])


def _fits(fit):
    return fit[1] == 1.0


def _control(w, bound, places, ndim, each):
    """The control variate of every particle, laid out as the site's costs q: the bound
    with the particle's log-weight replaced by the others' mean, and, for a cost of all
    the elements ("total"), the other elements' bounds beside it. w: (rows, *other, K),
    bound: the bound's value (rows, *other)."""
    K = w.shape[-1]
    loo = leave_one_out_bounds(w.reshape(-1, K)).reshape(w.shape)
    if not each:  # (the cost holds every element's bound: only this one's changes)
        L = np.asarray(bound)[..., None]
        others = tuple(range(1, w.ndim - 1))
        loo = loo + (np.sum(L, axis=others, keepdims=True) - L)
    order = sorted(range(len(places)), key=lambda k: places[k])
    moved = np.transpose(loo, (0,) + tuple(1 + k for k in order))
    shape = [w.shape[0]] + [1] * (ndim - 1)
    for k, at in enumerate(places):
        shape[at] = w.shape[1 + k]
    return moved.reshape(shape)


def leave_one_out_bounds(w):
    """L_{-j} for each particle j of each draw: log-weights w (rows, K) -> (rows, K)."""
    rows, K = w.shape
    mean_others = (w.sum(axis=1, keepdims=True) - w) / (K - 1)
    top = np.argmax(w, axis=1)
    m1 = w[np.arange(rows), top][:, None]
    s1 = np.exp(w - m1).sum(axis=1, keepdims=True)
    # the others' log-sum-exp: for j not the largest, S1 - exp(w_j - m1) >= 1 (no
    # cancellation: the largest term stays); for the largest, computed without it
    with np.errstate(divide="ignore"):
        others = m1 + np.log(s1 - np.exp(w - m1))
    masked = np.array(w)
    masked[np.arange(rows), top] = -np.inf
    m2 = masked.max(axis=1)
    s2 = np.exp(masked - m2[:, None]).sum(axis=1)
    others[np.arange(rows), top] = m2 + np.log(s2)
    return np.logaddexp(others, mean_others) - np.log(K)
