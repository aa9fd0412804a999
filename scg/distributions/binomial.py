"""Binomial(total_count, probs): successes in total_count independent trials."""

import numpy as np

from ..kernels import discrete as K
from ..kernels.primitives import kernel_primitives
from . import constraints
from ._util import (ProbsBoundary, expanded_support, full, is_count, mask_outside, open_probs,
                    outside_to, plain)
from .base import Distribution, broadcast_shape
from . import weak

# arguments (k, total_count, probs); only probs is differentiable (its derivative is which=3)
binomial_log_prob, _ = kernel_primitives(
    "binomial_log_prob", K.binomial_density, K.binomial_density_twin, 3, differentiable=(2,))


class Binomial(Distribution):
    """P(k) = C(n, k) p^k (1 - p)^(n - k) for k = 0, ..., n = total_count.

    Args:
        total_count: nonnegative integer n (not differentiable).
        probs: success probability p in [0, 1].

    Example:
        >>> scg.Binomial(10, 0.3).mean   # 3.0
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval}
    support = constraints.integer_interval("total_count")
    has_rsample = False
    probs_boundary = ProbsBoundary(
        open_probs, "exactly 0 or 1",
        "use scg.MeasureValued(), which evaluates the counts on both sides and is exact at the "
        "boundary, or keep probs inside (0, 1) (e.g. probs=scg.sigmoid(logits))",
        every_value=True, value_word="count")

    def __init__(self, total_count, probs, validate_args=None):
        self.total_count, self.probs = total_count, probs
        super().__init__({"total_count": total_count, "probs": probs},
                         broadcast_shape(total_count, probs), validate_args=validate_args)

    def _sample(self, rng, shape):
        shape = self._extended_shape(shape)
        n = np.broadcast_to(plain(self.total_count), shape).astype(np.int64)
        return rng.binomial(n, np.broadcast_to(plain(self.probs), shape), shape).astype(float)

    def weak_derivative(self, param):
        """In probs: x+ = 1 + B, x- = B, B ~ Binomial(n - 1, probs), c = n."""
        return weak.binomial_probs() if param == "probs" else None

    def log_prob(self, value):
        inside = np.logical_and(is_count(value), np.less_equal(value, self.total_count))
        lp = binomial_log_prob(outside_to(inside, value, 0.0), self.total_count, self.probs)
        return mask_outside(inside, lp)

    def enumerate_support(self, expand=True):
        """The counts 0, ..., total_count (one total_count for the whole batch): shape
        (n + 1,), or (n + 1,) + batch_shape with `expand`."""
        n = np.unique(np.asarray(plain(self.total_count), dtype=float))
        if n.size != 1:
            raise ValueError(f"Binomial.enumerate_support: the batch has {n.size} different "
                             "total_count values; its support differs between elements. "
                             "Split the distribution by total_count")
        return expanded_support(np.arange(n[0] + 1.0), self.batch_shape, 0, expand)

    @property
    def mean(self):
        return full(self.total_count * self.probs, self.batch_shape)

    @property
    def variance(self):
        return full(self.total_count * self.probs * (1.0 - self.probs), self.batch_shape)
