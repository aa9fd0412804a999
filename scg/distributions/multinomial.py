"""Multinomial(total_count, probs=None, logits=None): counts of total_count categorical draws."""

import functools
import itertools
import math

import numpy as np

from ..kernels.special_primitives import lgamma
from ..numpy import rules as R
from . import constraints
from ._util import full, mask_outside, plain
from .base import Distribution
from .categorical import normalized_log_probs, normalized_probs


def _count_vector(x):
    return (x >= 0) & (x == np.floor(x)) & np.isfinite(x)


multinomial_support = constraints.Constraint(
    "a vector of nonnegative integers summing to total_count", _count_vector, event_dim=1,
    discrete=True)
constraints.pickle_by_name(globals())


class Multinomial(Distribution):
    """Counts x (event_shape (K,)) of total_count draws of a category with probabilities probs.

    P(x) = n! / prod(x_k!) prod(p_k^x_k), n = total_count = sum(x). Give exactly one of
    probs (entries >= 0 summing to 1 along the last axis; the log-probability is that of
    the normalized p / sum(p), as Categorical's) or logits (any reals).

    Args:
        total_count: the number of draws n, a nonnegative integer (not differentiable).
        probs: the category probabilities, shape (..., K); or
        logits: their logits.

    Example:
        >>> scg.Multinomial(4, probs=np.array([0.25, 0.75])).mean   # [1.0, 3.0]
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.simplex, "logits": constraints.real_vector}
    support = multinomial_support
    has_rsample = False

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Multinomial: give exactly one of probs= or logits=")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        self.total_count, self.probs, self.logits = total_count, probs, logits
        shape = R.shape(value)
        if len(shape) < 1 or shape[-1] == 0:
            raise ValueError(f"Multinomial: parameter '{name}' must have a last dimension of "
                             f"at least one category, got shape {tuple(shape)}")
        self.num_categories = shape[-1]
        try:
            batch = np.broadcast_shapes(tuple(shape[:-1]), R.shape(total_count))
        except ValueError:
            raise ValueError(f"Multinomial: total_count of shape {R.shape(total_count)} does "
                             f"not broadcast against the batch shape {tuple(shape[:-1])} of "
                             f"{name}; give matching shapes") from None
        super().__init__({"total_count": total_count, name: value}, batch, shape[-1:],
                         validate_args=validate_args)

    def _log_probs(self):  # (normalized, for the gradient too: see Categorical)
        return normalized_log_probs(self.probs, self.logits)

    def _probs(self):
        return normalized_probs(self.probs, self.logits)

    def _sample(self, rng, shape):
        shape = self._extended_shape(shape)
        p = np.broadcast_to(plain(self._probs()), shape)
        n = np.broadcast_to(plain(self.total_count), shape[:-1]).astype(np.int64)
        # (numpy rejects probabilities that sum above 1 by rounding: renormalize the rest)
        p = p / np.sum(p, axis=-1, keepdims=True)
        return rng.multinomial(n, p).astype(float)

    def log_prob(self, value):
        n = self.total_count
        counts = np.logical_and(np.greater_equal(value, 0.0), np.equal(value, np.floor(value)))
        inside = np.logical_and(np.all(counts, axis=-1), np.equal(np.sum(value, axis=-1), n))
        positive = np.greater(value, 0.0)
        x = np.where(counts, value, 0.0)
        terms = x * np.where(positive, self._log_probs(), 0.0)
        # (total_count is a count: no derivative in it)
        lp = (lgamma(R.stop_gradient(n) + 1.0) - np.sum(lgamma(x + 1.0), axis=-1)
              + np.sum(terms, axis=-1))
        return mask_outside(inside, lp)

    def enumerate_support(self, expand=True):
        """Every count vector of the support, shape (S,) + event_shape with S = C(n + K - 1,
        K - 1), or (S,) + batch_shape + event_shape when `expand` (as torch.distributions).
        Needs one total_count for the whole batch.

        Example:
            >>> scg.Multinomial(2, probs=np.array([0.5, 0.5])).enumerate_support(False)
        """
        n = np.unique(np.asarray(plain(self.total_count), dtype=float))
        if n.size != 1:
            raise ValueError(f"Multinomial.enumerate_support: the batch has {n.size} different "
                             "total_count values; its support differs between elements. Split "
                             "the distribution by total_count")
        table = _compositions(int(n[0]), int(self.num_categories))
        if expand:
            table = np.broadcast_to(table.reshape((table.shape[0],) + (1,) * len(
                self.batch_shape) + table.shape[1:]), (table.shape[0],) + self.batch_shape
                + table.shape[1:])
        return table

    @property
    def mean(self):
        return full(np.expand_dims(self.total_count, -1) * self._probs(),
                    self.batch_shape + self.event_shape)

    @property
    def variance(self):
        p = self._probs()
        return full(np.expand_dims(self.total_count, -1) * p * (1.0 - p),
                    self.batch_shape + self.event_shape)


@functools.lru_cache(maxsize=32)
def _compositions(n, k):
    """The count vectors of k nonnegative integers summing to n, shape (C(n + k - 1, k - 1), k),
    by the bars between n stars: each choice of k - 1 bar places among n + k - 1 slots."""
    size = math.comb(n + k - 1, k - 1)
    out = np.empty((size, k))
    for row, bars in enumerate(itertools.combinations(range(n + k - 1), k - 1)):
        edges = (-1,) + bars + (n + k - 1,)
        out[row] = [edges[i + 1] - edges[i] - 1 for i in range(k)]
    out.flags.writeable = False
    return out
