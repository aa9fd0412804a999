"""Poisson(rate): counts; no reparameterization path."""

import numpy as np

from ..core import effects
from ..kernels import discrete as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from ._util import full, is_count, mask_outside, outside_to, plain
from .base import Distribution, broadcast_shape
from . import weak

poisson_log_prob, _ = kernel_primitives(
    "poisson_log_prob", K.poisson_density, K.poisson_density_twin, 2, differentiable=(1,))


MAX_RATE = 1e13  # (numpy's draws measured: mean, variance and skewness right up to here)


def _exact_range(rate):
    return bool(np.all(np.asarray(rate) <= MAX_RATE))


class Poisson(Distribution):
    """P(k) = rate^k exp(-rate) / k! for k = 0, 1, 2, ...

    Args:
        rate: > 0.

    Example:
        >>> scg.Poisson(3.0).log_prob(0)   # -3.0
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative_integer
    has_rsample = False

    def __init__(self, rate, validate_args=None):
        self.rate = rate
        super().__init__({"rate": rate}, broadcast_shape(rate), validate_args=validate_args)

    def _sample(self, rng, shape):
        shape = self._extended_shape(shape)
        rate = plain(self.rate)
        if not effects.check(_exact_range, rate, "Poisson rates numpy draws exactly"):
            raise ValueError(
                f"Poisson: rate {float(np.max(rate)):.3g} is above {MAX_RATE:.0e}, where "
                "numpy's Poisson sampler (scg draws with it) loses the law in floating point "
                "(the variance of its draws is 0.7 % high at 1e14, 10 % at 3e14), so "
                "estimates would be biased; at such rates a Normal(rate, sqrt(rate)) is within "
                "1 / sqrt(rate) of the Poisson: use scg.Normal(rate, np.sqrt(rate)) instead")
        return rng.poisson(np.broadcast_to(plain(self.rate), shape), shape).astype(float)

    def weak_derivative(self, param):
        """In rate: x+ = X + 1, x- = X, c = 1."""
        return weak.poisson_rate() if param == "rate" else None

    def log_prob(self, value):
        inside = is_count(value)
        return mask_outside(inside, poisson_log_prob(outside_to(inside, value, 0.0), self.rate))

    @property
    def mean(self):
        return full(self.rate, self.batch_shape)

    @property
    def variance(self):
        return full(self.rate, self.batch_shape)
