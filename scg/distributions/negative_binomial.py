"""NegativeBinomial(total_count, probs=None, logits=None): successes before total_count failures."""

import numpy as np

from ..kernels import discrete as K
from ..kernels.primitives import kernel_primitives
from ..numpy import rules as R
from . import constraints
from ._util import full, is_count, mask_outside, outside_to, plain
from .base import Distribution, broadcast_shape

negative_binomial_log_prob, _ = kernel_primitives(
    "negative_binomial_log_prob", K.negative_binomial_density,
    K.negative_binomial_density_twin, 3, differentiable=(1, 2))
negative_binomial_logits_log_prob, _ = kernel_primitives(
    "negative_binomial_logits_log_prob", K.negative_binomial_logits_density,
    K.negative_binomial_logits_density_twin, 3, differentiable=(1, 2))


class NegativeBinomial(Distribution):
    """P(k) = Gamma(k + r) / (k! Gamma(r)) p^k (1 - p)^r for k = 0, 1, 2, ...

    The number of successes (probability p each) before the r-th failure, r = total_count,
    as torch.distributions counts it; equivalently a Poisson count whose rate is
    Gamma(r, (1 - p) / p) distributed, which is how it is drawn.

    Args:
        total_count: r > 0, any real (differentiable).
        probs: success probability p in [0, 1); or
        logits: log(p / (1 - p)), any real. Give exactly one of the two.

    Example:
        >>> scg.NegativeBinomial(3.0, probs=0.25).mean   # 1.0
    """

    arg_constraints = {"total_count": constraints.positive,
                       "probs": constraints.unit_interval_below_one,
                       "logits": constraints.real}
    support = constraints.nonnegative_integer
    has_rsample = False

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("NegativeBinomial: give exactly one of probs= or logits=")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        self.total_count, self.probs, self.logits = total_count, probs, logits
        super().__init__({"total_count": total_count, name: value},
                         broadcast_shape(total_count, value), validate_args=validate_args)

    def _p(self):
        return self.probs if self.logits is None else R.sigmoid(self.logits)

    def _sample(self, rng, shape):
        shape = self._extended_shape(shape)
        r = np.broadcast_to(plain(self.total_count), shape)
        p = np.broadcast_to(plain(self._p()), shape)
        # Poisson-Gamma: the rate is Gamma(r) with scale p / (1 - p)
        rate = rng.standard_gamma(r, shape) * (p / (1.0 - p))
        return rng.poisson(rate, shape).astype(float)

    def log_prob(self, value):
        inside = is_count(value)
        k = outside_to(inside, value, 0.0)
        if self.logits is None:
            lp = negative_binomial_log_prob(k, self.total_count, self.probs)
        else:
            lp = negative_binomial_logits_log_prob(k, self.total_count, self.logits)
        return mask_outside(inside, lp)

    @property
    def mean(self):
        p = self._p()
        return full(self.total_count * p / (1.0 - p), self.batch_shape)

    @property
    def variance(self):
        p = self._p()
        return full(self.total_count * p / (1.0 - p) ** 2, self.batch_shape)

