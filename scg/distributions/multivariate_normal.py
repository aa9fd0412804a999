"""MultivariateNormal(loc, scale_tril): reparameterized as loc + L @ eps."""

import numpy as np

from ..core.tape import Primitive, defvjp
from ..numpy import rules as R
from . import constraints
from .base import Distribution

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def _solve(a, b, lower=True):
    tri = np.tril(a) if lower else np.triu(a)
    return np.linalg.solve(tri, np.asarray(b, dtype=float)[..., None])[..., 0]


triangular_solve = Primitive(
    "triangular_solve", _solve,
    doc="z with T z = b for the lower (lower=True) or upper triangle T of a; b has shape (..., d).",
    batch=R.batch_core_dims(2, 1))


def _mask(a, lower):
    d = R.shape(a)[-1]
    return np.tril(np.ones((d, d))) if lower else np.triu(np.ones((d, d)))


def _solve_b(g, ans, a, b, lower=True):
    gb = triangular_solve(R.swapaxes(a, -1, -2), g, lower=not lower)
    return R.unbroadcast(gb, R.shape(b))


def _solve_a(g, ans, a, b, lower=True):
    gb = triangular_solve(R.swapaxes(a, -1, -2), g, lower=not lower)
    outer = R.multiply(R.expand_dims(gb, -1), R.expand_dims(ans, -2))
    return R.unbroadcast(R.negative(R.multiply(outer, _mask(a, lower))), R.shape(a))


defvjp(triangular_solve, _solve_a, _solve_b)


class MultivariateNormal(Distribution):
    """The normal distribution on R^d with mean `loc` and covariance L L^T, L = scale_tril.

    Args:
        loc: array (..., d).
        scale_tril: lower-triangular (..., d, d) with a positive diagonal (a Cholesky factor).

    Example:
        >>> scg.MultivariateNormal(np.zeros(2), np.eye(2)).log_prob(np.zeros(2))  # -log(2 pi)
    """

    arg_constraints = {"loc": constraints.real_vector, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, scale_tril, validate_args=None):
        self.loc, self.scale_tril = loc, scale_tril
        ls, ts = R.shape(loc), R.shape(scale_tril)
        if len(ls) < 1 or len(ts) < 2 or ts[-1] != ts[-2] or ls[-1] != ts[-1]:
            raise ValueError(f"MultivariateNormal: loc (shape {ls}) must be (..., d) and "
                             f"scale_tril (shape {ts}) (..., d, d)")
        batch = np.broadcast_shapes(ls[:-1], ts[:-2])
        super().__init__({"loc": loc, "scale_tril": scale_tril}, batch, ls[-1:],
                         validate_args=validate_args)

    def noise(self, rng, shape=()):
        return rng.standard_normal(self._extended_shape(shape))

    def path(self, noise):
        return self.loc + np.squeeze(np.matmul(self.scale_tril, np.expand_dims(noise, -1)), -1)

    def antithetic_noise(self, noise):
        """The mirror image of symmetric noise: -eps."""
        return np.negative(noise)

    def log_prob(self, value):
        d = self.event_shape[0]
        z = triangular_solve(self.scale_tril, value - self.loc)
        log_det = np.sum(np.log(np.sum(self.scale_tril * np.eye(d), axis=-1)), axis=-1)
        return -0.5 * np.sum(z ** 2, axis=-1) - log_det - d * _HALF_LOG_2PI

    def entropy(self):
        d = self.event_shape[0]
        log_det = np.sum(np.log(np.sum(self.scale_tril * np.eye(d), axis=-1)), axis=-1)
        return np.broadcast_to(0.5 * d * (1.0 + np.log(2.0 * np.pi)) + log_det,
                               self.batch_shape)

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape + self.event_shape)

    @property
    def covariance_matrix(self):
        L = self.scale_tril
        return np.matmul(L, np.swapaxes(L, -1, -2))

    @property
    def variance(self):
        return np.broadcast_to(np.sum(self.scale_tril ** 2, axis=-1),
                               self.batch_shape + self.event_shape)
