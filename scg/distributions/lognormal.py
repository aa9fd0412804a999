"""LogNormal(loc, scale): exp of a Normal(loc, scale); reparameterized as exp(loc + scale * eps)."""

import numpy as np

from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from ..kernels.special_primitives import erf, ndtri
from . import constraints
from ._util import full, mask_outside, outside_to
from .location_scale import LocationScale
from . import weak

lognormal_log_prob, _ = kernel_primitives(
    "lognormal_log_prob", K.lognormal_density, K.lognormal_density_twin, 3)
lognormal_path, _ = kernel_primitives("lognormal_path", K.lognormal_path, K.lognormal_path_twin, 3)


class LogNormal(LocationScale):
    """A positive variable whose logarithm is Normal(loc, scale).

    Args:
        loc: mean of the logarithm.
        scale: standard deviation of the logarithm, > 0.

    Example:
        >>> scg.LogNormal(0.0, 1.0).mean   # exp(1/2)
    """

    support = constraints.positive

    def noise(self, rng, shape=()):
        return rng.standard_normal(self._extended_shape(shape))

    def path(self, noise):
        return lognormal_path(noise, self.loc, self.scale)

    def antithetic_noise(self, noise):
        """The mirror image of symmetric noise: -eps."""
        return np.negative(noise)

    def weak_derivative(self, param):
        """The exp of Normal's: in loc (Rayleigh pair) or scale (double-sided Maxwell)."""
        if param == "loc":
            return weak.normal_loc(np.exp, "exp of ")
        return weak.normal_scale(np.exp, "exp of ") if param == "scale" else None

    def log_prob(self, value):
        inside = np.greater(value, 0.0)
        lp = lognormal_log_prob(outside_to(inside, value, 1.0), self.loc, self.scale)
        return mask_outside(inside, lp)

    def entropy(self):
        return full(self.loc + 0.5 + np.log(self.scale) + 0.5 * np.log(2.0 * np.pi),
                    self.batch_shape)

    def cdf(self, value):
        positive = np.greater(value, 0.0)
        z = (np.log(np.where(positive, value, 1.0)) - self.loc) / (self.scale * np.sqrt(2.0))
        return np.where(positive, 0.5 * (1.0 + erf(z)), 0.0)

    def icdf(self, u):
        return np.exp(self.loc + self.scale * ndtri(u))

    @property
    def mean(self):
        return np.broadcast_to(np.exp(self.loc + 0.5 * self.scale ** 2), self.batch_shape)

    @property
    def variance(self):
        # in log space: expm1(s2) exp(2 loc + s2) overflows where the product is finite
        s2 = self.scale ** 2
        return np.broadcast_to(np.exp(np.log(np.expm1(s2)) + 2 * self.loc + s2),
                               self.batch_shape)
