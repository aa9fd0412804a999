"""The measure-valued (weak) derivative: unbiased first derivatives from evaluations of the
downstream model at draws of the positive and negative parts of the derivative of the
density (Pflug 1989; Mohamed, Rosca, Figurnov and Mnih, JMLR 2020, section 6)."""

from dataclasses import dataclass

import numpy as np

from .. import distributions
from ..core import effects
from ..core.tape import Box
from ..distributions.base import Distribution, Independent, declares, family_name, family_of
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .element_copies import assembled, copy_costs, elements, placed, require_per_element
from .enumerate import support_of
from .terms import linear_term


def weak_families():
    """The names of scg's families that declare a weak derivative."""
    classes = [getattr(distributions, k) for k in distributions.__all__]
    return sorted(c.__name__ for c in classes if isinstance(c, type) and
                  issubclass(c, Distribution) and c is not Independent and
                  c.weak_derivative is not Distribution.weak_derivative)


def carries_derivative(v):
    """Is this parameter differentiated (a traced value, or a per-draw value holding one)?"""
    return isinstance(v, Box) or isinstance(getattr(v, "value", None), Box)


class MeasureValued(Estimator):
    """The measure-valued derivative: for every differentiated parameter coordinate theta,
    the weak derivative d/dtheta p(x) = c_theta (p+(x) - p-(x)) gives the estimate
    c_theta (f(x+) - f(x-)), with x+ ~ p+, x- ~ p-, the rest of the draw unchanged, and f
    the sum of the costs downstream of the site. Unbiased, first derivatives only; the
    downstream model is evaluated at x+ and x- along copies of the run (same upstream
    values, shared randomness downstream), so a draw costs 1 + 2 evaluations per
    coordinate (1 + K per element of a Categorical).

    Decompositions (with coupled=True, x+ and x- share their randomness):

    - Normal(loc, scale): loc: c = 1/(scale sqrt(2 pi)), x+- = loc +- scale R, R Rayleigh
      (the same R); scale: c = 1/scale, x+ = loc + scale M, M double-sided Maxwell,
      x- = loc + scale M U, U ~ U(0, 1) (M U is standard normal; uncoupled: an
      independent N(0, 1)). LogNormal: the exp of these.
    - Exponential(rate): c = 1/rate, x+ ~ Exp(rate), x- = x+ + Exp(rate) ~ Gamma(2, rate).
    - Gamma(concentration, rate), in rate: c = concentration/rate, x+ ~ Gamma(a, rate),
      x- = x+ + Exp(rate) ~ Gamma(a + 1, rate).
    - Poisson(rate): c = 1, x+ = X + 1, x- = X, X ~ Poisson(rate).
    - Bernoulli, in probs: c = 1, x+ = 1, x- = 0.
    - Binomial(total_count, probs): c = total_count, x+ = 1 + B, x- = B,
      B ~ Binomial(total_count - 1, probs).
    - Geometric(probs) (failures before the first success): c = 1/probs, x+ = G,
      x- = 1 + G + G', G, G' ~ Geometric(probs).
    - Categorical and OneHotCategorical, in each probability p_k: f(k), the derivative
      of sum_k p_k f(k) (the chain rule through softmax or a normalisation removes any
      part common to all k).

    Plates: the elements of a plate are replaced together (one pair of copies per
    coordinate outside the plates, whatever the plate's size): element b's costs then
    meet element b's replacement only. This needs every cost downstream of the site to
    be per element of the plate; a cost that mixes its elements raises EstimatorError.
    Other batch dimensions (to_event) get a pair of copies per element.

    Args:
        coupled: draw x+ and x- with common randomness (lower variance for smooth f).

    Example:
        >>> scg.sample("x", scg.Normal(mu, sigma), estimator=scg.MeasureValued())
    """

    name = "measure_valued"

    def __init__(self, coupled=True):
        if not isinstance(coupled, (bool, np.bool_)):
            raise ValueError(f"MeasureValued: coupled must be True or False, got {coupled!r}")
        self.coupled = bool(coupled)

    # ------------------------------------------------------------ validity and drawing
    def check(self, name, dist):
        _differentiated(name, dist)

    def copies(self, name, dist, plates):
        return _layout(name, dist, plates).count

    def draw(self, d):
        lay = _layout(d.name, d.dist, d.run.plates)
        d.aux["layout"] = lay
        base = effects.asarray(d.sample(), dtype=float)
        if not lay.slots:
            return base
        idx = d.copies.index(d.name)
        order = np.argsort(idx, kind="stable")
        bounds = np.searchsorted(idx[order], np.arange(lay.count + 1))
        rows = [order[bounds[k]:bounds[k + 1]] for k in range(lay.count)]
        if lay.over_support:
            support = lay.support
            places = tuple(((rows[copy],) + index, support[k]) for _, index, k, copy in lay.slots)
            return effects.opaque(placed, base, places)
        places, taken = [], []
        for key in lay.keys:
            pair = d.draws(lambda dist, rng, shape, key=key:
                           _pair(lay.weak[key], dist, rng, shape, self.coupled))
            for k, index, up, down in lay.slots:
                if k == key:
                    places.append((len(taken), (rows[up],) + index, (rows[down],) + index))
            taken.append(pair)
        # (one operation of the plain values: a program recorded for replay repeats it)
        return effects.opaque(_placed_pairs, base, tuple(places), tuple(taken))

    def evaluations(self, site):
        lay = site.aux.get("layout")
        return lay.count if lay is not None else 1

    # ------------------------------------------------------------ surrogate
    def term(self, site, ctx):
        lay = site.aux.get("layout")
        if lay is None or not lay.slots or not ctx.has_downstream(site):
            return None
        require_per_element(site, lay.shared, ctx, "scg.MeasureValued()",
                            "replaces every element at once (one pair of copies for the "
                            "whole plate)", "draw the site outside the plate (a pair of "
                            "copies per element)")
        per_copy, spread = copy_costs(site, ctx, lay.shared)

        # (the weights assembled by one operation of plain values, which a program
        # recorded for replay repeats, rather than written entry by entry)
        rows, everything = ctx.trace.rows, (slice(None),)
        if lay.over_support:
            places = tuple(everything + index + (k,) for _, index, k, _ in lay.slots)
            values = tuple(spread(per_copy[copy]) for _, _, _, copy in lay.slots)
            weight = effects.opaque(assembled, (rows,) + lay.shape + (len(lay.support),),
                                    places, values)
            return linear_term(_traced(lay, site, ctx, lay.keys[0]), weight, 1.0 / ctx.n)
        total = None
        for key in lay.keys:
            coef = np.broadcast_to(lay.weak[key].coefficient(_Params(site, ctx)),
                                   (rows,) + lay.shape)
            slots = [(everything + index, up, down) for k, index, up, down in lay.slots
                     if k == key]
            values = tuple(coef[ix] * spread(per_copy[up] - per_copy[down])
                           for ix, up, down in slots)
            weight = effects.opaque(assembled, (rows,) + lay.shape,
                                    tuple(ix for ix, _, _ in slots), values)
            term = linear_term(_traced(lay, site, ctx, key), weight, 1.0 / ctx.n)
            total = term if total is None else R.add(total, term)
        return total

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    # ------------------------------------------------------------ explanation
    def describe(self, site):
        lay = site.aux.get("layout")
        family = family_name(site.dist)
        keys = lay.keys if lay is not None else ()
        what = ", ".join(keys) if keys else "no differentiated parameter in this run"
        return (f"measure-valued derivative{' (coupled)' if self.coupled else ''} of "
                f"{family} in {what}: c (f(x+) - f(x-)) per parameter coordinate, x+ and x- "
                "drawn from the positive and negative parts of the weak derivative of the "
                "density, the rest of the draw unchanged")

    def cost_factor(self, site):
        return f"1 on the base copy of {site.name} (its other copies enter its terms only)"

    def explain_terms(self, site, trace):
        lay = site.aux.get("layout")
        if lay is None or not lay.slots:
            return [f"no parameter of {site.name} is differentiated: no term"]
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        lines = [f"d/d{lay.weak[key].coordinate_name or key} of {site.name}, per coordinate: "
                 f"{lay.weak[key].formula(self.coupled)}; f = {down}" for key in lay.keys]
        if lay.over_support:
            what = f"{len(lay.slots) // len(lay.support)} element(s) x {len(lay.support)} copies"
        else:
            what = f"{len(lay.slots)} coordinate(s) x 2 copies"
        lines.append(f"{what} + the base draw = {lay.count} evaluations per draw")
        if lay.shared:
            lines.append(f"the elements of plate {', '.join(p.name for p in lay.shared)} are "
                         "replaced together: every cost downstream must be per element")
        return lines

    def __repr__(self):
        return "MeasureValued()" if self.coupled else "MeasureValued(coupled=False)"


# ---------------------------------------------------------------------- the copies
@dataclass(frozen=True)
class _Layout:
    """The copies of a site: copy 0 is the draw; each slot replaces the elements `index`
    (ints along the dims outside the plates, slices along the plates) in some copies:
    (key, index, copy of x+, copy of x-), or over a finite support (key, index, k, copy)."""

    weak: dict  # the family's WeakDerivative of each differentiated parameter
    keys: tuple
    shape: tuple  # the family's batch shape
    shared: tuple  # the plates whose elements are replaced together, by dim
    over_support: bool
    support: object  # the support's values (over_support), else None
    slots: tuple
    count: int


def _differentiated(name, dist):
    """The differentiated parameters and the family's weak derivative in each, or
    EstimatorError."""
    inner = family_of(dist)
    family = family_name(inner)
    if not declares(dist, "weak_derivative"):
        raise EstimatorError(
            f"site {name!r}: scg.MeasureValued() needs a weak derivative, and {family} "
            "declares none (a family declares it with a weak_derivative(param) method); the "
            f"families that do: {', '.join(weak_families())}. Use 'auto', scg.Score() or, "
            "with a sampling path, scg.Pathwise()")
    keys = tuple(k for k, v in inner.params.items() if v is not None and carries_derivative(v))
    weak = {}
    for k in keys:
        weak[k] = inner.weak_derivative(k)
        if weak[k] is None:
            served = [p for p in inner.params if inner.weak_derivative(p) is not None]
            raise EstimatorError(
                f"site {name!r}: scg.MeasureValued() has no weak derivative of {family} in "
                f"its parameter {k!r} ({family} declares one in {' or '.join(served)}). Use "
                f"scg.Score() or scg.Pathwise() at this site, or pass {k} as a constant")
    return keys, weak


def _layout(name, dist, plates):
    keys, weak = _differentiated(name, dist)
    shape, shared, each = elements(dist, plates)
    over = any(w.over_support for w in weak.values())
    support = support_of(name, dist, "scg.MeasureValued()") if over else None
    slots, count = [], 1
    for key in keys:
        for index in each:
            if over:
                for k in range(len(support)):
                    slots.append((key, index, k, count))
                    count += 1
            else:
                slots.append((key, index, count, count + 1))
                count += 2
    return _Layout(weak, keys, shape, shared, over, support, tuple(slots), count)


def _placed_pairs(base, places, pairs):
    """The draws with x+ in each slot's upper copy and x- in its lower one."""
    value = np.array(base)
    for k, up, down in places:
        pair = pairs[k]
        value[up] = pair[..., 0][up]
        value[down] = pair[..., 1][down]
    return value


# ---------------------------------------------------------------------- the decompositions
def _pair(weak, dist, rng, shape, coupled):
    """x+ and x- for every element and draw, stacked on a last axis, from the plain `dist`
    with physical parameters (drawn for the n draws, shared by the copies)."""
    ext = dist._extended_shape(shape)
    p = {k: (None if v is None else np.broadcast_to(effects.asarray(v, dtype=float), ext))
         for k, v in family_of(dist).params.items()}
    plus, minus = weak.pair(p, rng, ext, coupled)
    return np.stack([plus, minus], axis=-1)


class _Params:
    """The site's parameters per row and element, plain, read by name (for c)."""

    def __init__(self, site, ctx):
        self.site, self.ctx = site, ctx

    def __getitem__(self, key):
        return effects.asarray(self.ctx.param(self.site, key), dtype=float)


def _traced(lay, site, ctx, key):
    """The traced coordinate the estimate differentiates: the parameter itself, or the
    probabilities computed from it (through a normalization, sigmoid or softmax)."""
    return lay.weak[key].coordinate(ctx.param(site, key))
