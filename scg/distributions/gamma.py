"""Gamma(concentration, rate): implicitly reparameterized through its CDF."""

import numpy as np

from ..core.tape import Tracer
from ..kernels import continuous as K
from ..kernels import implicit as KI
from ..kernels.primitives import implicit_path_primitive, kernel_primitives
from ..kernels.special_primitives import digamma, lgamma
from . import constraints
from ._util import full, mask_outside, outside_to, plain, rare_draws_caveat
from .base import Distribution, broadcast_shape
from . import weak

gamma_log_prob, _ = kernel_primitives("gamma_log_prob", K.gamma_density, K.gamma_density_twin, 3)
standard_gamma_path, _ = implicit_path_primitive(
    "standard_gamma_path", KI.gamma_dxda_kernel, 1,
    lambda which, x, a: K.gamma_density_twin(which, x, a, 1.0))


class Gamma(Distribution):
    """Density rate^a x^(a-1) exp(-rate x) / Gamma(a) on x > 0, a = concentration.

    Reparameterized implicitly: the noise is a standard Gamma(a, 1) draw g and the
    draw is g / rate; dg/da comes from the implicit function theorem on the CDF.

    Args:
        concentration: shape a > 0.
        rate: inverse scale, > 0.

    Example:
        >>> scg.Gamma(2.0, 4.0).mean   # 0.5
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = concentration, rate
        super().__init__({"concentration": concentration, "rate": rate},
                         broadcast_shape(concentration, rate), validate_args=validate_args)

    def noise(self, rng, shape=()):
        shape = self._extended_shape(shape)
        return rng.standard_gamma(np.broadcast_to(plain(self.concentration), shape), shape)

    def path_caveat(self, draws):
        if isinstance(self.concentration, Tracer):
            return rare_draws_caveat("Gamma", self.concentration, draws)
        return None

    def path(self, noise):
        return standard_gamma_path(self.concentration, noise) / self.rate

    def weak_derivative(self, param):
        """In rate: x+ ~ Gamma(a, rate), x- ~ Gamma(a + 1, rate), c = a/rate."""
        return weak.gamma_rate("concentration") if param == "rate" else None

    def log_prob(self, value):
        # x = 0 belongs to the closure of the support: finite density there when a == 1
        inside = np.greater_equal(value, 0.0)
        lp = gamma_log_prob(outside_to(inside, value, 1.0), self.concentration, self.rate)
        return mask_outside(inside, lp)

    def entropy(self):
        a = self.concentration
        return full(a - np.log(self.rate) + lgamma(a) + (1.0 - a) * digamma(a),
                    self.batch_shape)

    @property
    def mean(self):
        return full(self.concentration / self.rate, self.batch_shape)

    @property
    def variance(self):
        return full(self.concentration / self.rate ** 2, self.batch_shape)
