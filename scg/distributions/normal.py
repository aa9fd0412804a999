"""Normal(loc, scale): location-scale, reparameterized as loc + scale * eps."""

import numpy as np

from ..core.tape import defvjp
from ..kernels import continuous as K
from ..kernels.primitives import kernel_primitives
from ..numpy import rules as R
from . import constraints
from .base import Distribution, broadcast_shape

normal_log_prob, normal_dlogp = kernel_primitives(
    "normal_log_prob", K.normal_density, K.normal_density_twin, 3)
loc_scale_path, loc_scale_dpath = kernel_primitives(
    "loc_scale_path", K.loc_scale_path, K.loc_scale_path_twin, 3)
# The path derivatives are 1 and the noise itself: written out, they cost no kernel pass.
defvjp(loc_scale_path,
       lambda g, ans, eps, loc, scale: R.unbroadcast(R.multiply(g, scale), R.shape(eps)),
       lambda g, ans, eps, loc, scale: R.unbroadcast(g, R.shape(loc)),
       lambda g, ans, eps, loc, scale: R.unbroadcast(R.multiply(g, eps), R.shape(scale)))


class Normal(Distribution):
    """The normal distribution with mean `loc` and standard deviation `scale`.

    Args:
        loc: mean (array-like, possibly traced).
        scale: standard deviation, > 0.

    Example:
        >>> scg.Normal(0.0, 1.0).log_prob(0.0)   # -0.9189...
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = loc, scale
        super().__init__({"loc": loc, "scale": scale}, broadcast_shape(loc, scale),
                         validate_args=validate_args)

    def noise(self, rng, shape=()):
        return rng.standard_normal(self._extended_shape(shape))

    def path(self, noise):
        return loc_scale_path(noise, self.loc, self.scale)

    def log_prob(self, value):
        return normal_log_prob(value, self.loc, self.scale)

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(self.scale ** 2, self.batch_shape)
