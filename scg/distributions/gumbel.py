"""Gumbel(loc, scale): the extreme-value law; reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from .base import Distribution, broadcast_shape
from .normal import loc_scale_path

gumbel_log_prob, _ = kernel_primitives(
    "gumbel_log_prob", K.gumbel_density, K.gumbel_density_twin, 3)
_EULER = 0.5772156649015329


class Gumbel(Distribution):
    """Density exp(-(z + exp(-z))) / scale with z = (x - loc) / scale.

    Args:
        loc: the mode.
        scale: > 0.

    Example:
        >>> scg.Gumbel(0.0, 1.0).mean   # Euler's constant
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = loc, scale
        super().__init__({"loc": loc, "scale": scale}, broadcast_shape(loc, scale),
                         validate_args=validate_args)

    def noise(self, rng, shape=()):
        return rng.gumbel(size=self._extended_shape(shape))

    def path(self, noise):
        return loc_scale_path(noise, self.loc, self.scale)

    def log_prob(self, value):
        return gumbel_log_prob(value, self.loc, self.scale)

    @property
    def mean(self):
        return np.broadcast_to(self.loc + _EULER * self.scale, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(np.pi ** 2 / 6 * self.scale ** 2, self.batch_shape)
