"""Dirichlet(concentration): normalized Gamma draws, each implicitly reparameterized."""

import numpy as np

from ..core import effects
from ..core.tape import Tracer
from ..kernels.special_primitives import digamma, lgamma
from ..numpy import rules as R
from . import constraints
from ._util import full, mask_outside, plain, rare_draws_caveat
from .base import Distribution
from .gamma import standard_gamma_path


def _no_empty_rows(g):
    return not np.any(np.all(np.asarray(g) == 0.0, axis=-1))


class Dirichlet(Distribution):
    """A probability vector with density prod x_k^(a_k - 1) / B(a); event_shape (K,).

    The draw is g / sum(g) for independent standard Gamma(a_k) draws g (the noise),
    each differentiable in a_k by implicit reparameterization.

    Args:
        concentration: array (..., K) of positive concentrations.

    Example:
        >>> scg.Dirichlet(np.ones(3)).mean   # [1/3, 1/3, 1/3]
    """

    arg_constraints = {"concentration": constraints.positive_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        self.concentration = concentration
        shape = np.shape(concentration) if not hasattr(concentration, "shape") \
            else concentration.shape
        if len(shape) < 1:
            raise ValueError("Dirichlet: parameter 'concentration' must have at least one "
                             "dimension (the categories)")
        super().__init__({"concentration": concentration}, shape[:-1], shape[-1:],
                         validate_args=validate_args)

    def noise(self, rng, shape=()):
        shape = self._extended_shape(shape)
        g = rng.standard_gamma(np.broadcast_to(plain(self.concentration), shape), shape)
        if not effects.check(_no_empty_rows, g, "Dirichlet's Gamma draws not all 0"):
            c = float(np.min(plain(self.concentration)))
            lost = float(np.mean(np.all(np.asarray(g) == 0.0, axis=-1)))
            raise ValueError(
                f"Dirichlet at concentration {c:.3g}: in {lost:.1%} of the draws every Gamma "
                "variable it normalizes underflows to 0 in float64 (a Gamma(c) draw is below "
                "1e-308 with probability about 10^(-308 c)), so the draw is 0 / 0; scg draws "
                "a Dirichlet this way to follow its path, and cannot at concentrations this "
                "small: give each concentration at least about 0.01")
        return g

    def path_caveat(self, draws):
        if isinstance(self.concentration, Tracer):
            return rare_draws_caveat("Dirichlet", self.concentration, draws)
        return None

    def path(self, noise):
        g = standard_gamma_path(self.concentration, noise)
        return g / np.sum(g, axis=-1, keepdims=True)

    def log_prob(self, value):
        a = self.concentration
        pos = np.greater(value, 0.0)
        # (a - 1) log x is 0 when a == 1, also at x == 0 (not 0 * -inf); no log of 0 is taken
        xlog = np.where(pos, (a - 1.0) * np.log(np.where(pos, value, 1.0)), 0.0)
        lp = np.sum(xlog, axis=-1) - np.sum(lgamma(a), axis=-1) + lgamma(np.sum(a, axis=-1))
        # entries at 0: the density is 0 there if a > 1 and infinite if a < 1 (0 wins)
        zero = np.logical_not(pos)
        vanish = np.greater(np.sum(np.where(np.logical_and(zero, np.greater(a, 1.0)), 1.0, 0.0),
                                   axis=-1), 0.0)
        blow_up = np.greater(np.sum(np.where(np.logical_and(zero, np.less(a, 1.0)), 1.0, 0.0),
                                    axis=-1), 0.0)
        lp = np.where(vanish, -np.inf, np.where(blow_up, np.inf, lp))
        # the support: entries >= 0 summing to 1
        negative = np.sum(np.where(np.less(value, 0.0), 1.0, 0.0), axis=-1)
        inside = np.logical_and(np.equal(negative, 0.0),
                                np.less_equal(np.abs(np.sum(value, axis=-1) - 1.0), 1e-6))
        return mask_outside(inside, lp)

    def entropy(self):
        c = self.concentration
        k = R.shape(c)[-1]
        total = np.sum(c, axis=-1)
        log_b = np.sum(lgamma(c), axis=-1) - lgamma(total)
        return full(log_b + (total - k) * digamma(total)
                    - np.sum((c - 1.0) * digamma(c), axis=-1), self.batch_shape)

    @property
    def mean(self):
        a = self.concentration
        return full(a / np.sum(a, axis=-1, keepdims=True), self.batch_shape + self.event_shape)

    @property
    def variance(self):
        a = self.concentration
        a0 = np.sum(a, axis=-1, keepdims=True)
        return full(a * (a0 - a) / (a0 ** 2 * (a0 + 1)), self.batch_shape + self.event_shape)
