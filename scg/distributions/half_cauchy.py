"""HalfCauchy(scale): |x| of a Cauchy(0, scale), reparameterized as scale * |eps|."""

import numpy as np

from ..kernels import heavy_tails as K
from ..kernels.primitives import kernel_primitives
from ._util import full
from .folded import Folded

half_cauchy_log_prob, _ = kernel_primitives(
    "half_cauchy_log_prob", K.half_cauchy_density, K.half_cauchy_density_twin, 2)


class HalfCauchy(Folded):
    """Density 2 / (pi scale (1 + (x / scale)^2)) on x >= 0: no finite mean or variance.

    Args:
        scale: the median, > 0 (a common prior on a scale parameter).

    Example:
        >>> scg.HalfCauchy(1.0).icdf(0.5)   # 1.0
    """

    @staticmethod
    def _standard(rng, shape):
        return rng.standard_cauchy(shape)

    _density = half_cauchy_log_prob

    def entropy(self):
        return full(np.log(2.0 * np.pi * self.scale), self.batch_shape)

    def cdf(self, value):
        inside = np.greater_equal(value, 0.0)
        return np.where(inside, 2.0 / np.pi * np.arctan(np.where(inside, value, 0.0) / self.scale),
                        0.0)

    def icdf(self, u):
        return self.scale * np.tan(0.5 * np.pi * u)

    @property
    def mean(self):
        return full(np.inf + 0.0 * self.scale, self.batch_shape)

    @property
    def variance(self):
        return full(np.inf + 0.0 * self.scale, self.batch_shape)
