"""Categorical(probs=None, logits=None): one of K categories; no reparameterization path."""

import numpy as np

from ..core import effects
from ..numpy import rules as R
from . import constraints
from ._util import ProbsBoundary, expanded_support, full, is_count, mask_outside, plain, probs_positive
from .base import Distribution
from . import weak


def _category_index(x):
    return (x >= 0) & (x == np.floor(x))


categorical_support = constraints.Constraint("an integer in [0, K)", _category_index,
                                             discrete=True)
constraints.pickle_by_name(globals())


def _inverse_cdf(u, p):
    """The categories whose cumulative probabilities u falls in (u: (..., 1), p: (..., k))."""
    k = np.sum(u > np.cumsum(p, axis=-1), axis=-1)
    return np.minimum(k, p.shape[-1] - 1).astype(float)


def normalized_log_probs(probs, logits):
    """log(p_k / sum(p)) from probs, or log_softmax(logits): p sums to 1 (validated), but
    the gradient in p goes through the normalization, as torch.distributions' does, so the
    score has mean zero."""
    if logits is not None:
        return R.log_softmax(logits, axis=-1)
    return R.log_nonnegative(probs) - np.log(np.sum(probs, axis=-1, keepdims=True))


def normalized_probs(probs, logits):
    """p / sum(p) from probs, or softmax(logits) (the gradient through the normalization)."""
    if probs is None:
        return R.softmax(logits, axis=-1)
    return probs / np.sum(probs, axis=-1, keepdims=True)


class Categorical(Distribution):
    """Category k in {0, ..., K-1} with probability probs[..., k] (or softmax(logits)).

    Give exactly one of probs (entries >= 0 summing to 1 along the last axis) or
    logits (any reals). batch_shape is the parameter's shape without its last axis.
    log_prob is that of the normalized probabilities, log(p_k / sum(p)): the same value,
    and a gradient in probs through the normalization (as torch.distributions').

    Example:
        >>> scg.Categorical(probs=np.array([0.2, 0.8])).log_prob(1)   # log 0.8
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = categorical_support
    has_rsample = False

    probs_boundary = ProbsBoundary(
        probs_positive, "exactly 0 for some category",
        "parameterize the site by logits=, or give every category a probability above 0")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: give exactly one of probs= or logits=")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        self.probs, self.logits = probs, logits
        shape = R.shape(value)
        if len(shape) < 1:
            raise ValueError(f"Categorical: parameter '{name}' must have at least one "
                             "dimension (the categories)")
        if shape[-1] == 0:
            raise ValueError(f"Categorical: parameter '{name}' has no categories (its last "
                             f"dimension has size 0, shape {tuple(shape)}); give at least one")
        self.num_categories = shape[-1]
        super().__init__({name: value}, shape[:-1], validate_args=validate_args)

    def _log_probs(self):
        return normalized_log_probs(self.probs, self.logits)

    def _probs(self):
        return normalized_probs(self.probs, self.logits)

    def _sample(self, rng, shape):
        p = np.broadcast_to(plain(self._probs()), self._extended_shape(shape) + (self.num_categories,))
        u = rng.random(p.shape[:-1] + (1,))
        return effects.opaque(_inverse_cdf, u, p)  # (under scg.jit: one recorded operation)

    def enumerate_support(self, expand=True):
        """The categories 0, ..., K - 1 (as floats): shape (K,), or (K,) + batch_shape with
        `expand`."""
        return expanded_support(np.arange(float(self.num_categories)), self.batch_shape, 0,
                                expand)

    def weak_derivative(self, param):
        """In each category's probability (through the normalization of probs, or the
        softmax of logits): the model at every category."""
        if param == "probs":
            return weak.over_support(weak.normalized)
        return weak.over_support(weak.softmax, "probs (through the logits)") \
            if param == "logits" else None

    def log_prob(self, value):
        hit = np.equal(np.arange(self.num_categories), np.expand_dims(value, -1))
        lp = np.sum(np.where(hit, self._log_probs(), 0.0), axis=-1)
        inside = np.logical_and(is_count(value),
                                np.less_equal(value, self.num_categories - 1))
        return mask_outside(inside, lp)

    def entropy(self):
        lp = self._log_probs()
        p = np.exp(lp)
        return full(-np.sum(np.where(np.greater(p, 0.0), p * lp, 0.0), axis=-1),
                    self.batch_shape)

    @property
    def mean(self):
        k = np.arange(self.num_categories, dtype=float)
        return full(np.sum(self._probs() * k, axis=-1), self.batch_shape)

    @property
    def variance(self):
        k = np.arange(self.num_categories, dtype=float)
        p = self._probs()
        m = np.sum(p * k, axis=-1)
        return full(np.sum(p * k ** 2, axis=-1) - m ** 2, self.batch_shape)
