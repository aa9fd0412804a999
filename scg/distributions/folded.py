"""Folded scale families: |x| of a symmetric law of scale `scale`, reparameterized as
scale * |eps| (HalfNormal, HalfCauchy)."""

import numpy as np

from ..kernels import heavy_tails as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from ._util import mask_outside, outside_to
from .base import Distribution, broadcast_shape

scale_path, _ = kernel_primitives("scale_path", K.scale_path, K.scale_path_twin, 2)


class Folded(Distribution):
    """The base of the folded families: a subclass gives `_standard(rng, shape)` (draws of
    the symmetric law at scale 1) and `_density` (a primitive: the log-density at x >= 0
    for a scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        self.scale = scale
        super().__init__({"scale": scale}, broadcast_shape(scale), validate_args=validate_args)

    def noise(self, rng, shape=()):
        return np.abs(self._standard(rng, self._extended_shape(shape)))

    def path(self, noise):
        return scale_path(noise, self.scale)

    def log_prob(self, value):
        inside = np.greater_equal(value, 0.0)
        lp = type(self)._density(outside_to(inside, value, 1.0), self.scale)
        return mask_outside(inside, lp)
