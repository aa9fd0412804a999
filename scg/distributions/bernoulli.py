"""Bernoulli(probs=None, logits=None): a coin; no reparameterization path."""

import numpy as np

from ..core import effects
from ..core.tape import Primitive, defvjp, strip
from ..numpy import rules as R
from . import constraints
from ._util import ProbsBoundary, expanded_support, full, mask_outside, open_probs, plain
from .base import Distribution, broadcast_shape
from . import weak


def _log_odds_of_probs(p):
    with np.errstate(divide="ignore"):  # (-inf at 0, inf at 1, without numpy's warning)
        return np.log(p) - np.log1p(-p)


# one operation: scg.jit records (and replays) it as one call, eager calls it as is
log_odds_of_probs = Primitive("log_odds_of_probs", _log_odds_of_probs,
                              doc="log p - log(1 - p): a coin's logits from its probs.",
                              batch=R.EW)
defvjp(log_odds_of_probs, lambda g, ans, p: R.divide(g, R.multiply(p, R.subtract(1.0, p))))


class Bernoulli(Distribution):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0. Give exactly one of the two.

    Example:
        >>> scg.Bernoulli(probs=0.3).log_prob(1.0)   # log 0.3
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_rsample = False
    # (a draw of 1 has p > 0 and one of 0 has p < 1; finite logits give finite softplus)
    finite_log_prob_of_draws = True
    probs_boundary = ProbsBoundary(
        open_probs, "exactly 0 or 1",
        "parameterize the site by logits= (then the derivative is exact at any finite logits), "
        "or use scg.MeasureValued(), which evaluates both outcomes and is exact at the boundary",
        every_value=True, value_word="coin",
        logits_advice="; or parameterize the coin by logits=, which never reach 0 or 1")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: give exactly one of probs= or logits=")
        if probs is not None:
            self.probs, self.logits, given = probs, None, {"probs": probs}
        else:
            self.probs, self.logits, given = None, logits, {"logits": logits}
        super().__init__(given, broadcast_shape(*given.values()), validate_args=validate_args)

    def _probs(self):
        return self.probs if self.probs is not None else R.sigmoid(self.logits)

    def _sample(self, rng, shape):
        p = plain(self._probs())
        return (rng.random(self._extended_shape(shape)) < p).astype(float)

    def weak_derivative(self, param):
        """In probs (x+ = 1, x- = 0, c = 1), or in logits through the probability."""
        if param == "probs":
            return weak.coin()
        return weak.coin(R.sigmoid, "probs (through the logits)") if param == "logits" else None

    def log_prob(self, value):
        inside = np.logical_or(np.equal(value, 0), np.equal(value, 1))
        if self.logits is not None:
            # x l - softplus(l): log sigmoid(l) for 1, log sigmoid(-l) for 0, without
            # overflow; linear in the logits, so per-draw work stays linear in every order
            return mask_outside(inside, value * self.logits - R.softplus(self.logits))
        p = self.probs
        one = np.equal(value, 1)
        lp = np.where(one, np.log(np.where(one, p, 1.0)), np.log1p(-np.where(one, 0.0, p)))
        return mask_outside(inside, lp)

    def enumerate_support(self, expand=True):
        """The values 0 and 1: shape (2,), or (2,) + batch_shape with `expand`."""
        return expanded_support(np.array([0.0, 1.0]), self.batch_shape, 0, expand)

    def log_odds(self):
        """log p(1) - log p(0): the logits as given, or log p - log(1 - p) from probs
        (-inf at probs 0, inf at 1); traced in the parameters."""
        return self.logits if self.logits is not None else log_odds_of_probs(self.probs)

    def relaxed(self, temperature):
        """The binary concrete relaxation at `temperature` (scg.RelaxedBernoulli), of the
        same logits (from probs: log p - log(1 - p))."""
        from .relaxed import RelaxedBernoulli, logits_of
        return RelaxedBernoulli(temperature, logits_of(self.params, True), validate_args=False)

    def relaxed_log_prob(self, value):
        """The log-probability's continuous extension to values in [0, 1], x log p +
        (1 - x) log(1 - p): log_prob itself on {0, 1}, finite between (the concrete
        relaxations of REBAR and RELAX evaluate the model there)."""
        if self.logits is not None:
            return value * self.logits - R.softplus(self.logits)
        p = self.probs
        inner = np.logical_and(np.greater(p, 0.0), np.less(p, 1.0))
        q = np.where(inner, p, 0.5)
        lp = value * np.log(q) + (1.0 - value) * np.log1p(-q)
        if effects.check(np.all, strip(inner), "probabilities strictly between 0 and 1"):
            # (no comparison of the value: its derivative is the slope)
            return lp
        with np.errstate(divide="ignore"):  # (p at 0 or 1: only that value is finite)
            return np.where(inner, lp, self.log_prob(value))

    def entropy(self):
        if self.logits is not None:  # softplus(l) - l sigmoid(l), without overflow
            l = self.logits
            return full(R.softplus(l) - l * R.sigmoid(l), self.batch_shape)
        p = self.probs
        inner = np.logical_and(np.greater(p, 0.0), np.less(p, 1.0))
        q = np.where(inner, p, 0.5)
        return full(np.where(inner, -(q * np.log(q) + (1.0 - q) * np.log1p(-q)), 0.0),
                    self.batch_shape)

    def cdf(self, value):
        p = self._probs()
        return np.where(np.less(value, 0.0), 0.0, np.where(np.less(value, 1.0), 1.0 - p, 1.0))

    @property
    def mean(self):
        return np.broadcast_to(self._probs(), self.batch_shape)

    @property
    def variance(self):
        p = self._probs()
        return np.broadcast_to(p * (1 - p), self.batch_shape)
