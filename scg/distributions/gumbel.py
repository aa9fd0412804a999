"""Gumbel(loc, scale): the extreme-value law; reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from ._util import full
from .location_scale import LocationScale

gumbel_log_prob, _ = kernel_primitives(
    "gumbel_log_prob", K.gumbel_density, K.gumbel_density_twin, 3)
_EULER = 0.5772156649015329


class Gumbel(LocationScale):
    """Density exp(-(z + exp(-z))) / scale with z = (x - loc) / scale.

    Args:
        loc: the mode.
        scale: > 0.

    Example:
        >>> scg.Gumbel(0.0, 1.0).mean   # Euler's constant
    """

    def noise(self, rng, shape=()):
        return rng.gumbel(size=self._extended_shape(shape))

    def antithetic_noise(self, noise):
        """The mirror image of G = -log(-log U), through 1 - U = -expm1(-exp(-G))."""
        return -np.log(-np.log(-np.expm1(-np.exp(-noise))))

    def log_prob(self, value):
        return gumbel_log_prob(value, self.loc, self.scale)

    def entropy(self):
        return full(np.log(self.scale) + np.euler_gamma + 1.0, self.batch_shape)

    def cdf(self, value):
        return np.exp(-np.exp(-(value - self.loc) / self.scale))

    def icdf(self, u):
        return self.loc - self.scale * np.log(-np.log(u))

    @property
    def mean(self):
        return np.broadcast_to(self.loc + _EULER * self.scale, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(np.pi ** 2 / 6 * self.scale ** 2, self.batch_shape)
