"""Cauchy(loc, scale): location-scale, reparameterized as loc + scale * eps."""

import numpy as np

from ..kernels import heavy_tails as K
from ..kernels.primitives import kernel_primitives
from ._util import full
from .location_scale import LocationScale

cauchy_log_prob, _ = kernel_primitives(
    "cauchy_log_prob", K.cauchy_density, K.cauchy_density_twin, 3)


class Cauchy(LocationScale):
    """Density 1 / (pi scale (1 + ((x - loc) / scale)^2)): no mean, no variance.

    Args:
        loc: the median.
        scale: half the interquartile range, > 0.

    Example:
        >>> scg.Cauchy(0.0, 1.0).icdf(0.75)   # 1.0
    """

    def noise(self, rng, shape=()):
        return rng.standard_cauchy(self._extended_shape(shape))

    def antithetic_noise(self, noise):
        """The mirror image of symmetric noise: -eps."""
        return np.negative(noise)

    def log_prob(self, value):
        return cauchy_log_prob(value, self.loc, self.scale)

    def entropy(self):
        return full(np.log(4.0 * np.pi * self.scale), self.batch_shape)

    def cdf(self, value):
        return 0.5 + np.arctan((value - self.loc) / self.scale) / np.pi

    def icdf(self, u):
        # tan(pi (u - 1/2)) = -1 / tan(pi u), with u - 1 for the upper half: each tail from
        # its own side, no cancellation near 0 or 1
        return self.loc - self.scale / np.tan(np.pi * np.where(np.less(u, 0.5), u, u - 1.0))

    @property
    def mean(self):
        # (undefined: nan, as torch.distributions gives)
        return full(np.nan + 0.0 * self.loc, self.batch_shape)

    @property
    def variance(self):
        return full(np.inf + 0.0 * self.scale, self.batch_shape)
