"""Laplace(loc, scale): double exponential; reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from .location_scale import LocationScale

laplace_log_prob, _ = kernel_primitives(
    "laplace_log_prob", K.laplace_density, K.laplace_density_twin, 3)


class Laplace(LocationScale):
    """Density exp(-|x - loc| / scale) / (2 scale).

    Args:
        loc: the median.
        scale: > 0.

    Example:
        >>> scg.Laplace(0.0, 1.0).variance   # 2.0
    """

    def noise(self, rng, shape=()):
        return rng.laplace(size=self._extended_shape(shape))

    def log_prob(self, value):
        return laplace_log_prob(value, self.loc, self.scale)

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(2 * self.scale ** 2, self.batch_shape)
