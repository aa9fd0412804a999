"""Uniform(low, high): reparameterized as low + (high - low) * u; its support moves."""

import numpy as np

from . import constraints
from ._util import full, mask_outside, plain
from .base import Distribution, broadcast_shape


class Uniform(Distribution):
    """The uniform distribution on [low, high].

    The support depends on the parameters (`moving_support`): a score-function
    estimator is biased for gradients in low or high; use the path.

    Args:
        low: lower end.
        high: upper end, > low.

    Example:
        >>> scg.Uniform(0.0, 2.0).log_prob(0.5)   # -log 2
    """

    arg_constraints = {"low": constraints.real, "high": constraints.real}
    support = constraints.interval("low", "high")
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        # lists and tuples as arrays (the path and log_prob use arithmetic operators)
        low, high = (np.asarray(v, dtype=float) if isinstance(v, (list, tuple)) else v
                     for v in (low, high))
        self.low, self.high = low, high
        super().__init__({"low": low, "high": high}, broadcast_shape(low, high),
                         validate_args=validate_args)

    def _validate(self):
        super()._validate()
        ok = np.asarray(plain(self.low) < plain(self.high))  # physical values: any shape
        if not np.all(ok):
            bad = int(ok.size - np.count_nonzero(ok))
            raise ValueError(f"Uniform: parameter 'high' must be greater than low; {bad} of "
                             f"{ok.size} entries are not. Fix the values passed as low=, high=")

    def noise(self, rng, shape=()):
        return rng.random(self._extended_shape(shape))

    def path(self, noise):
        return self.low + (self.high - self.low) * noise

    def antithetic_noise(self, noise):
        """The mirror image of uniform noise: 1 - u."""
        return 1.0 - noise

    def log_prob(self, value):
        inside = np.logical_and(np.greater_equal(value, self.low),
                                np.less_equal(value, self.high))
        return mask_outside(inside, -np.log(self.high - self.low) + 0.0 * value)

    def entropy(self):
        return full(np.log(self.high - self.low), self.batch_shape)

    def cdf(self, value):
        return np.clip((value - self.low) / (self.high - self.low), 0.0, 1.0)

    def icdf(self, u):
        return self.low + u * (self.high - self.low)

    @property
    def mean(self):
        return np.broadcast_to((self.low + self.high) / 2, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to((self.high - self.low) ** 2 / 12, self.batch_shape)
