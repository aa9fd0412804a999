"""Normal(loc, scale): location-scale, reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import continuous as K
from ..kernels import parallel as P
from ..kernels.primitives import kernel_primitives
from .location_scale import LocationScale

normal_log_prob, normal_dlogp = kernel_primitives(
    "normal_log_prob", K.normal_density, K.normal_density_twin, 3, flat=P.normal_density_flat)


class Normal(LocationScale):
    """The normal distribution with mean `loc` and standard deviation `scale`.

    Args:
        loc: mean (array-like, possibly traced).
        scale: standard deviation, > 0.

    Example:
        >>> scg.Normal(0.0, 1.0).log_prob(0.0)   # -0.9189...
    """

    def noise(self, rng, shape=()):
        return rng.standard_normal(self._extended_shape(shape))

    def log_prob(self, value):
        return normal_log_prob(value, self.loc, self.scale)

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(self.scale ** 2, self.batch_shape)
