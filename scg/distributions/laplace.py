"""Laplace(loc, scale): double exponential; reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from ._util import full
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

    def antithetic_noise(self, noise):
        """The mirror image of symmetric noise: -eps."""
        return np.negative(noise)

    def log_prob(self, value):
        return laplace_log_prob(value, self.loc, self.scale)

    def entropy(self):
        return full(1.0 + np.log(2.0 * self.scale), self.batch_shape)

    def cdf(self, value):
        z = (value - self.loc) / self.scale
        return 0.5 + 0.5 * np.sign(z) * -np.expm1(-np.abs(z))

    def icdf(self, u):
        # (each tail from its own side: log(2u) below the median, -log(2(1 - u)) above)
        below = np.less(u, 0.5)
        return self.loc + self.scale * np.where(
            below, np.log(2.0 * np.where(below, u, 0.25)),
            -np.log(2.0 * np.where(below, 0.75, 1.0 - u)))

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(2 * self.scale ** 2, self.batch_shape)
