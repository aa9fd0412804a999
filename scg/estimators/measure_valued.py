"""The measure-valued (weak) derivative: unbiased first derivatives from evaluations of the
downstream model at draws of the positive and negative parts of the derivative of the
density (Pflug 1989; Mohamed, Rosca, Figurnov and Mnih, JMLR 2020, section 6)."""

import math
from dataclasses import dataclass

import numpy as np

from ..core import effects
from ..core.tape import Box
from ..distributions.base import family_name, family_of
from ..distributions.bernoulli import Bernoulli
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .terms import linear_term

# the parameters each family is differentiated in (Bernoulli and Categorical: in probs,
# chained through sigmoid / softmax when the logits are given)
PARAMETERS = {
    "Normal": ("loc", "scale"), "LogNormal": ("loc", "scale"), "Exponential": ("rate",),
    "Gamma": ("rate",), "Poisson": ("rate",), "Bernoulli": ("probs", "logits"),
    "Binomial": ("probs",), "Geometric": ("probs",), "Categorical": ("probs", "logits"),
    "OneHotCategorical": ("probs", "logits"),
}
FAMILIES = tuple(PARAMETERS)
_CATEGORICAL = ("Categorical", "OneHotCategorical")
_SUPPORTED = ("Normal and LogNormal (loc, scale), Exponential (rate), Gamma (rate), Poisson "
              "(rate), Bernoulli (probs or logits), Binomial (probs), Geometric (probs), "
              "Categorical and OneHotCategorical (probs or logits)")


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
        if lay.family in _CATEGORICAL:
            size = lay.categories
            onehot = np.eye(size) if lay.family == "OneHotCategorical" else np.arange(size)
            places = tuple(((rows[copy],) + index, onehot[k]) for _, index, k, copy in lay.slots)
            return effects.opaque(_placed, base, places)
        places, taken = [], []
        for key in lay.keys:
            pair = d.draws(lambda dist, rng, shape, key=key:
                           _pair(lay.family, key, dist, rng, shape, self.coupled))
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
        for c in ctx.trace.downstream_costs(site):
            wide = [p.name for p in lay.shared if p not in c.plates_for(site.name)]
            if wide:
                raise EstimatorError(
                    f"cost {c.name!r} mixes the elements of plate {', '.join(wide)}, in "
                    f"which scg.MeasureValued() at site {site.name!r} replaces every element "
                    "at once (one pair of copies for the whole plate); compute the cost per "
                    "element (inside the plate, without summing over it), or draw the site "
                    "outside the plate (a pair of copies per element)")
        q = ctx.q(site)
        at_base = (slice(None),) * ctx.own_axis(site) + (0,)
        per_copy = ctx.own(site, q)
        onto_site = (slice(None),) + tuple(slice(None) if p in lay.shared else 0
                                           for p in ctx.grid.plates)

        def spread(diff):  # a per-draw difference on the rows of the base copy
            g = effects.opaque(_assembled, np.shape(q), (at_base,), (diff,))
            return ctx.spread(g, site)[onto_site]  # (rows, *the shared plates)

        # (the weights assembled by one operation of plain values, which a program
        # recorded for replay repeats, rather than written entry by entry)
        rows, everything = ctx.trace.rows, (slice(None),)
        if lay.family in _CATEGORICAL:
            places = tuple(everything + index + (k,) for _, index, k, _ in lay.slots)
            values = tuple(spread(per_copy[copy]) for _, _, _, copy in lay.slots)
            weight = effects.opaque(_assembled, (rows,) + lay.shape + (lay.categories,),
                                    places, values)
            return linear_term(_traced(site, ctx, lay.keys[0]), weight, 1.0 / ctx.n)
        total = None
        for key in lay.keys:
            coef = np.broadcast_to(_coefficient(lay.family, key, site, ctx), (rows,) + lay.shape)
            slots = [(everything + index, up, down) for k, index, up, down in lay.slots
                     if k == key]
            values = tuple(coef[ix] * spread(per_copy[up] - per_copy[down])
                           for ix, up, down in slots)
            weight = effects.opaque(_assembled, (rows,) + lay.shape,
                                    tuple(ix for ix, _, _ in slots), values)
            term = linear_term(_traced(site, ctx, key), weight, 1.0 / ctx.n)
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
        lines = [f"d/d{_coordinate(lay.family, key)} of {site.name}, per coordinate: "
                 f"{_formula(lay.family, key, self.coupled)}; f = {down}" for key in lay.keys]
        if lay.family in _CATEGORICAL:
            what = f"{len(lay.slots) // lay.categories} element(s) x {lay.categories} copies"
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
    (key, index, copy of x+, copy of x-), or for a categorical (key, index, k, copy)."""

    family: str
    keys: tuple
    shape: tuple  # the family's batch shape
    shared: tuple  # the plates whose elements are replaced together, by dim
    categories: int
    slots: tuple
    count: int


def _differentiated(name, dist):
    """The family and its differentiated parameters, or EstimatorError."""
    inner = family_of(dist)
    family = family_name(inner)
    if family not in PARAMETERS:
        raise EstimatorError(
            f"site {name!r}: scg.MeasureValued() has no weak derivative of {family}; it "
            f"serves {_SUPPORTED}. Use 'auto', scg.Score() or, with a sampling path, "
            "scg.Pathwise()")
    keys = tuple(k for k, v in inner.params.items() if v is not None and carries_derivative(v))
    for k in keys:
        if k not in PARAMETERS[family]:
            raise EstimatorError(
                f"site {name!r}: scg.MeasureValued() has no weak derivative of {family} in "
                f"its parameter {k!r} (it differentiates {family} in "
                f"{' or '.join(PARAMETERS[family])}); the families and parameters it serves "
                f"are {_SUPPORTED}. Use scg.Score() or scg.Pathwise() at this site, or "
                f"pass {k} as a constant")
    return family, keys


def _layout(name, dist, plates):
    family, keys = _differentiated(name, dist)
    inner = family_of(dist)
    shape = tuple(inner.batch_shape)
    outer = len(dist.batch_shape)
    shared = {}
    for p in plates:
        d = outer + p.dim  # the plate's dim, counted in the outer batch shape
        if 0 <= d < len(shape) and shape[d] == p.size and p.size > 1:
            shared[d] = p
    elements = [tuple(slice(None) if d in shared else int(i) for d, i in enumerate(e))
                for e in np.ndindex(*[1 if d in shared else s for d, s in enumerate(shape)])]
    categories = int(inner.num_categories) if family in _CATEGORICAL else 0
    slots, count = [], 1
    for key in keys:
        for index in elements:
            if family in _CATEGORICAL:
                for k in range(categories):
                    slots.append((key, index, k, count))
                    count += 1
            else:
                slots.append((key, index, count, count + 1))
                count += 2
    return _Layout(family, keys, shape, tuple(shared[d] for d in sorted(shared)), categories,
                   tuple(slots), count)


def _assembled(shape, places, values):
    """Zeros of `shape` with values[k] at places[k]."""
    out = np.zeros(shape)
    for where, v in zip(places, values):
        out[where] = v
    return out


def _placed(base, places):
    """The draws with each copy's elements set to the values of its slot."""
    value = np.array(base)
    for where, v in places:
        value[where] = v
    return value


def _placed_pairs(base, places, pairs):
    """The draws with x+ in each slot's upper copy and x- in its lower one."""
    value = np.array(base)
    for k, up, down in places:
        pair = pairs[k]
        value[up] = pair[..., 0][up]
        value[down] = pair[..., 1][down]
    return value


# ---------------------------------------------------------------------- the decompositions
def _pair(family, key, dist, rng, shape, coupled):
    """x+ and x- for every element and draw, stacked on a last axis, from the plain `dist`
    with physical parameters (drawn for the n draws, shared by the copies)."""
    ext = dist._extended_shape(shape)
    p = {k: (None if v is None else np.broadcast_to(effects.asarray(v, dtype=float), ext))
         for k, v in family_of(dist).params.items()}
    if family in ("Normal", "LogNormal"):
        loc, scale = p["loc"], p["scale"]
        if key == "loc":
            r = np.sqrt(2.0 * rng.standard_exponential(ext))  # Rayleigh
            r2 = r if coupled else np.sqrt(2.0 * rng.standard_exponential(ext))
            plus, minus = loc + scale * r, loc - scale * r2
        else:
            m = np.sqrt(2.0 * rng.standard_gamma(1.5, ext))  # chi with 3 degrees of freedom
            m = np.where(rng.random(ext) < 0.5, -m, m)  # double-sided Maxwell
            eps = m * rng.random(ext) if coupled else rng.standard_normal(ext)
            plus, minus = loc + scale * m, loc + scale * eps
        if family == "LogNormal":
            plus, minus = np.exp(plus), np.exp(minus)
    elif family in ("Exponential", "Gamma"):
        rate = p["rate"]
        a = p["concentration"] if family == "Gamma" else np.ones(ext)
        g = rng.standard_gamma(a, ext)
        more = g + rng.standard_exponential(ext) if coupled else rng.standard_gamma(a + 1.0, ext)
        plus, minus = g / rate, more / rate
    elif family == "Poisson":
        x = rng.poisson(p["rate"], ext).astype(float)
        plus, minus = x + 1.0, (x if coupled else rng.poisson(p["rate"], ext).astype(float))
    elif family == "Bernoulli":
        plus, minus = np.ones(ext), np.zeros(ext)
    elif family == "Binomial":
        n = p["total_count"].astype(np.int64)
        probs = p["probs"]
        b = rng.binomial(np.maximum(n - 1, 0), probs, ext).astype(float)
        b2 = b if coupled else rng.binomial(np.maximum(n - 1, 0), probs, ext).astype(float)
        plus, minus = np.where(n > 0, b + 1.0, 0.0), b2
    elif family == "Geometric":
        probs = p["probs"]

        def geometric():  # failures before the first success
            return (rng.geometric(probs, ext) - 1).astype(float)

        g = geometric()
        plus, minus = g, 1.0 + (g if coupled else geometric()) + geometric()
    else:  # (unreachable: checked by _differentiated)
        raise EstimatorError(f"scg.MeasureValued(): no decomposition of {family} in {key}")
    return np.stack([plus, minus], axis=-1)


def _coefficient(family, key, site, ctx):
    """c of the weak derivative, per row and element (plain)."""
    def param(k):
        return effects.asarray(ctx.param(site, k), dtype=float)

    if family in ("Normal", "LogNormal"):
        return 1.0 / (param("scale") * math.sqrt(2.0 * math.pi)) if key == "loc" else \
            1.0 / param("scale")
    if family == "Exponential":
        return 1.0 / param("rate")
    if family == "Gamma":
        return param("concentration") / param("rate")
    if family == "Binomial":
        return param("total_count")
    if family == "Geometric":
        return 1.0 / param("probs")
    return 1.0  # Poisson, Bernoulli


def _traced(site, ctx, key):
    """The traced coordinate the estimate differentiates: the parameter itself, or the
    probabilities computed from the logits."""
    x = ctx.param(site, key)
    if key == "probs" and family_name(site.dist) in _CATEGORICAL:
        return x / np.sum(x, axis=-1, keepdims=True)  # (through the normalization)
    if key != "logits":
        return x
    if isinstance(family_of(site.dist), Bernoulli):
        return R.sigmoid(x)
    return R.softmax(x, axis=-1)


def _coordinate(family, key):
    return "probs (through the logits)" if key == "logits" else key


def _formula(family, key, coupled):
    if family in ("Normal", "LogNormal"):
        wrap = "exp of " if family == "LogNormal" else ""
        if key == "loc":
            return ("c = 1/(scale sqrt(2 pi)), x+- = " + wrap + "loc +- scale R, R Rayleigh" +
                    (" (the same R)" if coupled else " (independent R's)"))
        return ("c = 1/scale, x+ = " + wrap + "loc + scale M, M double-sided Maxwell, x- = " +
                wrap + ("loc + scale M U, U ~ U(0, 1)" if coupled else
                        "loc + scale eps, eps ~ N(0, 1)"))
    if family == "Exponential":
        return ("c = 1/rate, x+ ~ Exp(rate), x- ~ Gamma(2, rate)" +
                (" = x+ + Exp(rate)" if coupled else ""))
    if family == "Gamma":
        return ("c = concentration/rate, x+ ~ Gamma(a, rate), x- ~ Gamma(a + 1, rate)" +
                (" = x+ + Exp(rate)" if coupled else ""))
    if family == "Poisson":
        return "c = 1, x+ = X + 1, x- = X" + ("" if coupled else "'") + ", X ~ Poisson(rate)"
    if family == "Bernoulli":
        return "c = 1, x+ = 1, x- = 0"
    if family == "Binomial":
        return ("c = total_count, x+ = 1 + B, x- = B" + ("" if coupled else "'") +
                ", B ~ Binomial(total_count - 1, probs)")
    if family == "Geometric":
        return ("c = 1/probs, x+ = G, x- = 1 + " + ("G" if coupled else "G''") +
                " + G', G, G', G'' ~ Geometric(probs) (failures)")
    return "f(k) - f(x) for each category k, x the draw (copies at every category)"
