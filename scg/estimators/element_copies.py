"""Copies of a run that set a site's elements to other values, one copy per element and
value (MeasureValued's positive and negative parts, IndeCateR's support values): the
layout of the elements, the copies' values, and each copy's costs back on the main draw.

The elements of a plate are set together (one copy for the whole plate, whatever its
size): element b's costs then meet element b's value only, which needs every cost
downstream to be per element of the plate. Other batch dims get copies per element.
"""

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..errors import EstimatorError


def elements(dist, plates):
    """(the family's batch shape, the plates whose elements are set together (by dim),
    the elements: tuples of ints along the other dims and slices along those plates)."""
    shape = tuple(family_of(dist).batch_shape)
    outer = len(dist.batch_shape)
    shared = {}
    for p in plates:
        d = outer + p.dim  # the plate's dim, counted in the outer batch shape
        if 0 <= d < len(shape) and shape[d] == p.size and p.size > 1:
            shared[d] = p
    each = [tuple(slice(None) if d in shared else int(i) for d, i in enumerate(e))
            for e in np.ndindex(*[1 if d in shared else s for d, s in enumerate(shape)])]
    return shape, tuple(shared[d] for d in sorted(shared)), each


def placed(base, places):
    """The draws with each copy's elements set to the values of its slot."""
    value = np.array(base)
    for where, v in places:
        value[where] = v
    return value


def assembled(shape, places, values):
    """Zeros of `shape` with values[k] at places[k]."""
    out = np.zeros(shape)
    for where, v in zip(places, values):
        out[where] = v
    return out


def require_per_element(site, shared, ctx, who, how, instead):
    """Raise EstimatorError if a cost downstream of the site mixes the elements of a plate
    whose elements the copies set together (`how` says how, `instead` what to do)."""
    for c in ctx.trace.downstream_costs(site):
        wide = [p.name for p in shared if p not in c.plates_for(site.name)]
        if wide:
            raise EstimatorError(
                f"cost {c.name!r} mixes the elements of plate {', '.join(wide)}, in which "
                f"{who} at site {site.name!r} {how}; compute the cost per element (inside "
                f"the plate, without summing over it), or {instead}")


def copy_costs(site, ctx, shared):
    """(the costs downstream of the site in each of its copies, one row per draw;
    `spread(f)`: a per-draw value on the rows of the main copy, laid out as the site's
    terms need it, shape (rows, *the shared plates))."""
    q = ctx.q(site)
    at_base = (slice(None),) * ctx.own_axis(site) + (0,)
    per_copy = ctx.own(site, q)
    onto_site = _onto_site(ctx, shared)

    def spread(f):
        g = effects.opaque(assembled, np.shape(q), (at_base,), (f,))
        return ctx.spread(g, site)[onto_site]

    return per_copy, spread


def _onto_site(ctx, shared):
    """The index that takes spread's grid (rows, *plate axes) to the site's: the shared
    plates' axes kept, the others' element 0."""
    return (slice(None),) + tuple(slice(None) if p in shared else 0 for p in ctx.grid.plates)


def spread_copies(site, ctx, shared, copies):
    """The costs of the site's `copies` (a tuple of copy indices), each laid out as
    `spread` of `copy_costs` lays it, stacked along a last axis: (rows, *the shared plates,
    len(copies)). One layout of them all where no copying site upstream weighs them; one
    per copy where one does (its weights may be traced)."""
    if ctx.own_axis(site) != 1:
        per_copy, spread = copy_costs(site, ctx, shared)
        return np.stack([spread(per_copy[c]) for c in copies], axis=-1)
    q = ctx.q(site)
    g = effects.opaque(_at_base, q, copies)
    return ctx.spread(g, site)[_onto_site(ctx, shared)]


def _at_base(q, copies):
    """Zeros of q's shape and a last axis of len(copies), the costs of each copy at the
    site's copy 0 (the main run's place, where spread takes them from); q's own copies
    lie along its axis 1 (no other copying site upstream)."""
    out = np.zeros(q.shape + (len(copies),))
    out[:, 0] = np.moveaxis(np.take(q, list(copies), axis=1), 1, -1)
    return out


def assembled_stacked(shape, places, values):
    """Zeros of `shape` with values[..., k] at places[k]."""
    out = np.zeros(shape)
    for k, where in enumerate(places):
        out[where] = values[..., k]
    return out
