"""Normal(loc, scale): location-scale, reparameterized as loc + scale * eps."""

import numpy as np

from . import constraints
from .base import Distribution, broadcast_shape

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


class Normal(Distribution):
    """The normal distribution with mean `loc` and standard deviation `scale`.

    Example:
        >>> scg.Normal(0.0, 1.0).log_prob(0.0)   # -0.9189...
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = loc, scale
        super().__init__({"loc": loc, "scale": scale}, broadcast_shape(loc, scale),
                         validate_args=validate_args)

    def noise(self, rng, shape=()):
        return rng.standard_normal(self._extended_shape(shape))

    def path(self, noise):
        return self.loc + self.scale * noise

    def log_prob(self, value):
        z = (value - self.loc) / self.scale
        return -0.5 * z ** 2 - np.log(self.scale) - _HALF_LOG_2PI

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(self.scale ** 2, self.batch_shape)
