"""What the distributions built from other distributions share: their parameters, flat.

A TransformedDistribution or a MixtureSameFamily holds other distributions. The rest of
scg (per-draw parameters, plates, copies of a run) reads a family's parameters as one
flat dict of arrays with their constraints, so these families expose their parts'
parameters under prefixed names ("base_loc", "component_scale", "t0_loc") and rebuild
their parts from such a dict. A part's constraint keeps its event dimensions, counted
from the composite's batch shape (the part's own batch dims beyond it are events here).
"""

import numpy as np

from . import constraints
from .base import family_of


class Shifted(constraints.Constraint):
    """A part's parameter constraint with `extra` more event dimensions."""

    def __init__(self, inner, extra):
        super().__init__(inner.text, None, event_dim=inner.event_dim + extra,
                         discrete=inner.discrete)
        self.inner, self.extra = inner, extra

    def check(self, value):
        ok = np.asarray(self.inner.check(value))
        return np.all(ok, axis=tuple(range(-self.extra, 0))) if self.extra and ok.ndim else ok

    def holds(self, value):
        return bool(np.all(self.check(value)))

    @property
    def finiteness(self):
        return False


def part_params(prefix, dist):
    """The parameters of the distribution `dist`, named `prefix + name`."""
    return {prefix + k: v for k, v in dist.params.items()}


def part_constraints(prefix, dist, batch_rank):
    """The constraints of `dist`'s parameters, shifted to a composite of batch rank `batch_rank`."""
    inner = family_of(dist)
    extra = len(inner.batch_shape) - batch_rank
    out = {}
    for name in dist.params:
        c = inner.arg_constraints.get(name)
        if c is not None:
            out[prefix + name] = Shifted(c, extra) if extra else c
    return out


def rebuilt_part(prefix, dist, params):
    """`dist` rebuilt from the prefixed entries of `params` (not validated again)."""
    own = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
    return dist._rebuild(own)


def plain_draw(dist, rng, shape):
    """A plain draw of `dist` (plain parameters) of sample shape `shape`."""
    from ..core import effects
    if dist.has_rsample:
        return effects.asarray(dist.path(dist.noise(rng, shape)))
    return dist._sample(rng, tuple(shape))
