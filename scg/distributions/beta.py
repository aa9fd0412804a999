"""Beta(a, b): implicitly reparameterized through its CDF (the incomplete beta)."""

import numpy as np

from ..core.tape import Tracer

from ..kernels import continuous as K
from ..kernels import implicit as KI
from ..kernels.primitives import implicit_path_primitive, kernel_primitives
from ..kernels.special_primitives import digamma, lgamma
from . import constraints
from ._util import full, mask_outside, outside_to, plain, rare_draws_caveat
from .base import Distribution, broadcast_shape

beta_log_prob, _ = kernel_primitives("beta_log_prob", K.beta_density, K.beta_density_twin, 3)
beta_path, _ = implicit_path_primitive(
    "beta_path", KI.beta_dx_kernel, 2, lambda which, x, a, b: K.beta_density_twin(which, x, a, b))


class Beta(Distribution):
    """Density x^(a-1) (1-x)^(b-1) / B(a, b) on (0, 1).

    Reparameterized implicitly: the noise is a Beta(a, b) draw x, and dx/da, dx/db
    at fixed CDF level come from the implicit function theorem on I_x(a, b).

    Args:
        a: concentration of 1 (> 0).
        b: concentration of 0 (> 0).

    Example:
        >>> scg.Beta(2.0, 2.0).mean   # 0.5
    """

    arg_constraints = {"a": constraints.positive, "b": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, a, b, validate_args=None):
        self.a, self.b = a, b
        super().__init__({"a": a, "b": b}, broadcast_shape(a, b), validate_args=validate_args)

    def noise(self, rng, shape=()):
        shape = self._extended_shape(shape)
        return rng.beta(np.broadcast_to(plain(self.a), shape),
                        np.broadcast_to(plain(self.b), shape), shape)

    def path(self, noise):
        return beta_path(self.a, self.b, noise)

    def path_caveat(self, draws):
        if isinstance(self.a, Tracer) or isinstance(self.b, Tracer):
            return rare_draws_caveat("Beta", np.minimum(plain(self.a), plain(self.b)), draws)
        return None

    def log_prob(self, value):
        inside = np.logical_and(np.greater_equal(value, 0.0), np.less_equal(value, 1.0))
        lp = beta_log_prob(outside_to(inside, value, 0.5), self.a, self.b)
        return mask_outside(inside, lp)

    def entropy(self):
        a, b = self.a, self.b
        log_beta = lgamma(a) + lgamma(b) - lgamma(a + b)
        return full(log_beta - (a - 1.0) * digamma(a) - (b - 1.0) * digamma(b)
                    + (a + b - 2.0) * digamma(a + b), self.batch_shape)

    @property
    def mean(self):
        return full(self.a / (self.a + self.b), self.batch_shape)

    @property
    def variance(self):
        total = self.a + self.b
        return full(self.a * self.b / (total ** 2 * (total + 1)), self.batch_shape)
