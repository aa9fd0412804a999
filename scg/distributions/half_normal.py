"""HalfNormal(scale): |x| of a Normal(0, scale), reparameterized as scale * |eps|."""

import math

import numpy as np

from ..kernels import heavy_tails as K
from ..kernels.primitives import kernel_primitives
from ..kernels.special_primitives import erf, ndtri
from ._util import full
from . import weak
from .folded import Folded

half_normal_log_prob, _ = kernel_primitives(
    "half_normal_log_prob", K.half_normal_density, K.half_normal_density_twin, 2)


class HalfNormal(Folded):
    """Density sqrt(2 / pi) / scale exp(-x^2 / (2 scale^2)) on x >= 0.

    Args:
        scale: the scale of the normal folded at 0, > 0.

    Example:
        >>> scg.HalfNormal(1.0).mean   # sqrt(2 / pi) = 0.7978...
    """

    @staticmethod
    def _standard(rng, shape):
        return rng.standard_normal(shape)

    _density = half_normal_log_prob

    def weak_derivative(self, param):
        """In scale, Normal's folded at 0: x+ = scale |M| (M double-sided Maxwell), x- =
        scale |eps|, c = 1/scale."""
        return weak.normal_scale(np.abs, "the absolute value of ") if param == "scale" \
            else None

    def entropy(self):
        return full(0.5 * np.log(0.5 * np.pi * self.scale ** 2) + 0.5, self.batch_shape)

    def cdf(self, value):
        inside = np.greater_equal(value, 0.0)
        return np.where(inside, erf(np.where(inside, value, 0.0) / (self.scale * math.sqrt(2.0))),
                        0.0)

    def icdf(self, u):
        # scale sqrt(2) erfinv(u); near 0, (1 + u) / 2 would round u away, so the series
        # erfinv(u) = sqrt(pi)/2 (u + pi u^3 / 12 + 7 pi^2 u^5 / 480 + ...) serves there
        small = np.less(u, 1e-3)
        us = np.where(small, u, 0.0)
        series = math.sqrt(0.5 * math.pi) * us * (1.0 + math.pi / 12.0 * us ** 2
                                                  + 7.0 * math.pi ** 2 / 480.0 * us ** 4)
        return self.scale * np.where(small, series, ndtri(0.5 * (1.0 + np.where(small, 0.5, u))))

    @property
    def mean(self):
        return full(self.scale * math.sqrt(2.0 / math.pi), self.batch_shape)

    @property
    def variance(self):
        return full(self.scale ** 2 * (1.0 - 2.0 / math.pi), self.batch_shape)
