"""StudentT(df, loc, scale): reparameterized through its normal-over-Gamma mixture."""

import numpy as np

from ..core.tape import Tracer
from ..kernels import heavy_tails as K
from ..kernels.primitives import kernel_primitives
from ..kernels.special_primitives import digamma, lgamma
from . import constraints
from ._util import full, plain, rare_draws_caveat
from .base import Distribution, broadcast_shape
from .gamma import standard_gamma_path
from .location_scale import loc_scale_path

studentt_log_prob, _ = kernel_primitives(
    "studentt_log_prob", K.studentt_density, K.studentt_density_twin, 4)


class StudentT(Distribution):
    """Student's t with `df` degrees of freedom, location `loc` and scale `scale`.

    A draw is loc + scale * z * sqrt(df / (2 g)) with z ~ N(0, 1) and g ~ Gamma(df / 2, 1):
    the noise holds both (last axis: z, g), and the derivative in df goes through g by
    implicit reparameterization, as Gamma's does.

    Args:
        df: degrees of freedom, > 0.
        loc: location (the mean when df > 1).
        scale: > 0.

    Example:
        >>> scg.StudentT(4.0, 0.0, 1.0).variance   # 2.0
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = df, loc, scale
        super().__init__({"df": df, "loc": loc, "scale": scale},
                         broadcast_shape(df, loc, scale), validate_args=validate_args)

    def noise(self, rng, shape=()):
        shape = self._extended_shape(shape)
        z = rng.standard_normal(shape)
        g = rng.standard_gamma(np.broadcast_to(0.5 * plain(self.df), shape), shape)
        return np.stack([z, g], axis=-1)

    def path_caveat(self, draws):
        if isinstance(self.df, Tracer):  # (the Gamma's concentration is df / 2)
            return rare_draws_caveat("StudentT", 0.5 * plain(self.df), draws)
        return None

    def path(self, noise):
        z, g = noise[..., 0], noise[..., 1]
        gamma = standard_gamma_path(0.5 * self.df, g)
        return loc_scale_path(z * np.sqrt(0.5 * self.df / gamma), self.loc, self.scale)

    def log_prob(self, value):
        return studentt_log_prob(value, self.df, self.loc, self.scale)

    def entropy(self):
        df = self.df
        half = 0.5 * df
        lbeta = lgamma(half) + lgamma(0.5) - lgamma(half + 0.5)
        return full((half + 0.5) * (digamma(half + 0.5) - digamma(half)) + 0.5 * np.log(df)
                    + lbeta + np.log(self.scale), self.batch_shape)

    @property
    def mean(self):
        # (defined for df > 1; nan below, as torch.distributions gives)
        return full(np.where(np.greater(self.df, 1.0), self.loc, np.nan), self.batch_shape)

    @property
    def variance(self):
        # scale^2 df / (df - 2) for df > 2, infinite for 1 < df <= 2, nan for df <= 1
        df = self.df
        above = np.greater(df, 2.0)
        finite = self.scale ** 2 * df / np.where(above, df - 2.0, 1.0)
        return full(np.where(above, finite, np.where(np.greater(df, 1.0), np.inf, np.nan)),
                    self.batch_shape)
