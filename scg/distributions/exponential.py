"""Exponential(rate): reparameterized as eps / rate with eps standard exponential."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from ._util import full, mask_outside
from .base import Distribution, broadcast_shape
from . import weak

exponential_log_prob, _ = kernel_primitives(
    "exponential_log_prob", K.exponential_density, K.exponential_density_twin, 2)
exponential_path, _ = kernel_primitives(
    "exponential_path", K.exponential_path, K.exponential_path_twin, 2)


class Exponential(Distribution):
    """Density rate * exp(-rate * x) on x >= 0.

    Args:
        rate: > 0 (the mean is 1 / rate).

    Example:
        >>> scg.Exponential(2.0).mean   # 0.5
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self.rate = rate
        super().__init__({"rate": rate}, broadcast_shape(rate), validate_args=validate_args)

    def noise(self, rng, shape=()):
        return rng.standard_exponential(self._extended_shape(shape))

    def path(self, noise):
        return exponential_path(noise, self.rate)

    def antithetic_noise(self, noise):
        """The mirror image of E = -log U: -log(1 - U) = -log(-expm1(-E))."""
        return -np.log(-np.expm1(-noise))

    def weak_derivative(self, param):
        """In rate: x+ ~ Exp(rate), x- ~ Gamma(2, rate), c = 1/rate."""
        return weak.gamma_rate() if param == "rate" else None

    def log_prob(self, value):
        inside = np.greater_equal(value, 0.0)
        return mask_outside(inside, exponential_log_prob(value, self.rate))

    def entropy(self):
        return full(1.0 - np.log(self.rate), self.batch_shape)

    def cdf(self, value):
        return np.where(np.greater_equal(value, 0.0),
                        -np.expm1(-self.rate * np.maximum(value, 0.0)), 0.0)

    def icdf(self, u):
        return -np.log1p(-u) / self.rate

    @property
    def mean(self):
        return np.broadcast_to(1.0 / self.rate, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(self.rate ** -2.0, self.batch_shape)
