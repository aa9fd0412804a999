"""Plates by position: which axis of each per-draw value holds which plate's elements.

A site drawn inside `scg.plate(name, size, dim)` has the plate's elements along the axis
at `dim` of its batch shape. From there every operation passes the label on by its
primitive's axis-label rule (`scg.numpy.rules.axes_rule`), as the batching rules carry
the draws' axis: broadcasting, transposes, reshapes that leave the axis whole, matrix
products and einsum over other axes, reductions over other axes, indexing with `:` on it.
An operation that reduces, contracts, indexes, sorts or reshapes across a plate's axis
drops its label, and the value then *mixes* that plate's elements for the sites upstream:
for their scores it is a cost outside the plate. No size is compared to decide any of it:
a 64-wide layer applied to a minibatch of 64 keeps the minibatch per element.

A value's labels are `axes` (one frozenset per logical axis) and `mixed` (pairs (plate,
site name)): a cost is per element of plate p for the score of site s when p labels one
of its axes and (p, s) is not mixed.
"""

import numpy as np

from ..core.tape import Tracer
from ..distributions.base import family_of
from ..numpy import rules as R
from .persample import Deps, PerSample

NO_LABEL = R.NO_LABEL
_ELEMENTWISE = R.axes_rule(R.add)  # (the label rule of every elementwise primitive)
_ARRAYS = (np.ndarray, np.generic, int, float, Tracer)


def _settle(out, inputs, sites, shape):
    """The result's (axes, mixed) from a rule's labels `out`: one plate per axis and one
    axis per plate (an axis shared by two plates, or a plate on two axes, mixes them),
    and every plate an input had and the result lost is mixed for the sites upstream."""
    mixed = frozenset().union(*[a.mixed for a in inputs])
    had = {p for a in inputs for label in a.axes for p in label}
    if out is None or len(out) != len(shape):
        out = (NO_LABEL,) * len(shape)
    seen, twice = set(), set()
    for label in out:
        for p in label:
            (twice if p in seen else seen).add(p)
    lost = set(had)
    axes = []
    for label, n in zip(out, shape):
        if len(label) == 1 and not (label & twice):
            (plate,) = label
            if plate.size == n:  # (always, by the rules; a guard, not a decision)
                axes.append(label)
                lost.discard(plate)
                continue
        axes.append(NO_LABEL)
    if lost:
        up = Deps.merge([a.deps for a in inputs]).up
        mixed = mixed | {(p, s) for p in lost for s in up
                         if s in sites and p in sites[s].plates}
    return (tuple(axes) if any(axes) else ()), mixed


def label_op(prim, args, kwargs, inputs, level, result, sites):
    """Set the labels of `result`, computed by `prim` from `args` (its per-draw `inputs`
    at this level)."""
    axes = labelled = None
    mixed = NO_LABEL
    for a in inputs:
        if a.axes:
            if labelled is None:
                axes, labelled = a.axes, a
            elif a.axes != axes:
                labelled = False  # (inputs with different labels: the rule decides)
        if a.mixed:
            mixed = mixed | a.mixed
    if labelled is None:
        if mixed:
            result.mixed = mixed
        return
    rule = R.axes_rule(prim)
    if labelled is not False and rule is _ELEMENTWISE and result.shape == labelled.shape:
        # (the common case, settled as `_settle` would: an elementwise operation whose
        # labelled inputs have the result's shape and the same labels keeps them all)
        result.axes, result.mixed = axes, mixed
        return
    out = None
    if rule is not None:
        labels, shapes = [], []
        for a in args:
            if type(a) is PerSample and a.level == level:
                labels.append(a.axes or None)
                shapes.append(a.shape)
            else:
                labels.append(None)
                shapes.append(R.shape(a) if isinstance(a, _ARRAYS) else ())
        out = rule(args, kwargs, labels, shapes, result.shape)
    result.axes, result.mixed = _settle(out, inputs, sites, result.shape)


def label_draw(dist, level, open_plates, sites):
    """(axes, mixed) of a site's draw: each open plate along its dim of the batch shape;
    the labels of the parameters' batch axes broadcast to it (their event axes, which
    every element of the draw depends on, pass none on)."""
    inner = family_of(dist)
    batch = tuple(inner.batch_shape)
    value_shape = tuple(dist.batch_shape) + tuple(dist.event_shape)
    out = [NO_LABEL] * len(value_shape)
    outer = len(dist.batch_shape)
    for p in open_plates:
        out[outer + p.dim] = out[outer + p.dim] | {p}
    inputs, consumed = [], set()
    for key, v in inner.params.items():
        if not (type(v) is PerSample and v.level == level):
            continue
        inputs.append(v)
        if not v.axes:
            continue
        c = inner.arg_constraints.get(key)
        event = c.event_dim if c is not None else 0
        lab, shape = v.axes[:len(v.axes) - event], v.shape[:len(v.shape) - event]
        consumed.update(p for label in v.axes[len(v.axes) - event:] for p in label)
        for k, label in enumerate(R.broadcast_labels([lab], [shape], batch)):
            out[k] = out[k] | label
    return _settle(tuple(R.strip_labels(out, consumed)), inputs, sites, value_shape)
