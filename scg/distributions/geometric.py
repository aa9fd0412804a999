"""Geometric(probs): the number of failures before the first success."""

import numpy as np

from ..kernels import discrete as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from ._util import (ProbsBoundary, full, is_count, mask_outside, outside_to, plain,
                    probs_below_one)
from .base import Distribution, broadcast_shape
from . import weak

geometric_log_prob, _ = kernel_primitives(
    "geometric_log_prob", K.geometric_density, K.geometric_density_twin, 2, differentiable=(1,))


class Geometric(Distribution):
    """P(k) = (1 - p)^k p for k = 0, 1, 2, ... (failures before the first success).

    Args:
        probs: success probability p in (0, 1].

    Example:
        >>> scg.Geometric(0.25).mean   # 3.0
    """

    arg_constraints = {"probs": constraints.half_open_unit_interval}
    support = constraints.nonnegative_integer
    has_rsample = False
    probs_boundary = ProbsBoundary(
        probs_below_one, "exactly 1",
        "use scg.MeasureValued(), which evaluates more failures too and is exact at the "
        "boundary, or keep probs below 1 (e.g. probs=scg.sigmoid(logits))")

    def __init__(self, probs, validate_args=None):
        self.probs = probs
        super().__init__({"probs": probs}, broadcast_shape(probs), validate_args=validate_args)

    def _sample(self, rng, shape):
        shape = self._extended_shape(shape)
        return (rng.geometric(np.broadcast_to(plain(self.probs), shape), shape) - 1).astype(float)

    def weak_derivative(self, param):
        """In probs: x+ = G, x- = 1 + G + G', c = 1/probs."""
        return weak.geometric_probs() if param == "probs" else None

    def log_prob(self, value):
        inside = is_count(value)
        lp = geometric_log_prob(outside_to(inside, value, 0.0), self.probs)
        return mask_outside(inside, lp)

    def entropy(self):
        p = self.probs
        q = 1.0 - p
        return full(-(q * np.log(np.where(np.greater(q, 0.0), q, 1.0)) + p * np.log(p)) / p,
                    self.batch_shape)

    def cdf(self, value):
        k = np.floor(value)
        return np.where(np.less(value, 0.0), 0.0, -np.expm1((k + 1.0) * np.log1p(-self.probs)))

    @property
    def mean(self):
        return full((1.0 - self.probs) / self.probs, self.batch_shape)

    @property
    def variance(self):
        return full((1.0 - self.probs) / self.probs ** 2, self.batch_shape)
