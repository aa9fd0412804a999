"""OneHotCategorical(probs=None, logits=None): a Categorical draw as a one-hot vector;
no reparameterization path."""

import numpy as np

from ..core import effects
from ..core.tape import strip
from ..numpy import rules as R
from . import constraints
from ._util import ProbsBoundary, expanded_support, full, mask_outside, probs_positive
from .base import Distribution
from .categorical import Categorical


def _one_hot(x):
    with np.errstate(invalid="ignore", over="ignore"):  # (inf + -inf: not one-hot)
        ok = np.all((x == 0) | (x == 1), axis=-1) & (np.sum(x, axis=-1) == 1)
    return np.broadcast_to(ok[..., None], x.shape)


one_hot_support = constraints.Constraint("a one-hot vector (entries 0 or 1, one of them 1)",
                                         _one_hot, event_dim=1, discrete=True)
constraints.pickle_by_name(globals())


class OneHotCategorical(Distribution):
    """The one-hot vector e_k of a category k drawn with probability probs[..., k] (or
    softmax(logits)); event_shape (K,).

    Give exactly one of probs (entries >= 0 summing to 1 along the last axis) or
    logits (any reals). batch_shape is the parameter's shape without its last axis.
    log_prob(x) = sum(x * log_probs, axis=-1) for one-hot x (-inf for any other x).
    A draw is a Categorical draw (the same one, for the same random generator) as a
    float one-hot vector.

    Example:
        >>> scg.OneHotCategorical(probs=np.array([0.2, 0.8])).log_prob(np.array([0.0, 1.0]))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = one_hot_support
    has_rsample = False

    probs_boundary = ProbsBoundary(
        probs_positive, "exactly 0 for some category",
        "parameterize the site by logits=, or give every category a probability above 0")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("OneHotCategorical: give exactly one of probs= or logits=")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        self.probs, self.logits = probs, logits
        shape = R.shape(value)
        if len(shape) < 1:
            raise ValueError(f"OneHotCategorical: parameter '{name}' must have at least one "
                             "dimension (the categories)")
        if shape[-1] == 0:
            raise ValueError(f"OneHotCategorical: parameter '{name}' has no categories (its last "
                             f"dimension has size 0, shape {tuple(shape)}); give at least one")
        self.num_categories = shape[-1]
        super().__init__({name: value}, shape[:-1], shape[-1:], validate_args=validate_args)

    def _categorical(self):
        """The Categorical of the same parameters (its log-probabilities and its sampler)."""
        return Categorical(probs=self.probs, logits=self.logits, validate_args=False)

    def _probs(self):
        return self._categorical()._probs()

    def _sample(self, rng, shape):
        k = self._categorical()._sample(rng, shape)
        return np.equal(k[..., None], np.arange(self.num_categories)).astype(float)

    def enumerate_support(self, expand=True):
        """The K one-hot vectors (row k is category k): shape (K, K), or (K,) + batch_shape
        + (K,) with `expand`."""
        return expanded_support(np.eye(self.num_categories), self.batch_shape, 1, expand)

    def support_values(self):
        """The K one-hot vectors of the support, as the rows of a (K, K) float array.

        Row k is category k. For a batched distribution, give log_prob the rows with unit
        batch axes: `v.reshape((K,) + (1,) * len(d.batch_shape) + (K,))`.
        """
        return np.eye(self.num_categories)

    def weak_derivative(self, param):
        """As Categorical's: the model at every category."""
        return self._categorical().weak_derivative(param)

    def log_prob(self, value):
        hit = np.equal(value, 1)
        lp = np.sum(np.where(hit, self._categorical()._log_probs(), 0.0), axis=-1)
        # inside: every entry 0 or 1 and exactly one 1
        ones = np.sum(np.where(hit, 1.0, 0.0), axis=-1)
        others = np.sum(np.where(np.logical_or(hit, np.equal(value, 0)), 0.0, 1.0), axis=-1)
        inside = np.logical_and(np.equal(ones, 1.0), np.equal(others, 0.0))
        return mask_outside(inside, lp)

    def _log_probs(self):
        return self._categorical()._log_probs()

    def relaxed(self, temperature):
        """The concrete relaxation on the simplex at `temperature`
        (scg.RelaxedOneHotCategorical), of the same logits (from probs: log p)."""
        from .relaxed import RelaxedOneHotCategorical, logits_of
        return RelaxedOneHotCategorical(temperature, logits_of(self.params, False),
                                        validate_args=False)

    def relaxed_log_prob(self, value):
        """The log-probability's continuous extension to the simplex, sum(x * log_probs):
        log_prob itself on one-hot vectors, finite inside (the concrete relaxations of
        REBAR and RELAX evaluate the model there); 0 log 0 = 0."""
        lp = self._log_probs()
        finite = np.isfinite(lp)
        if effects.check(np.all, strip(finite), "finite log-probabilities"):
            return np.sum(value * lp, axis=-1)  # (no comparison of the value)
        zero = np.equal(value, 0)  # (a category of probability 0 takes only 0)
        return np.sum(np.where(finite, value * np.where(finite, lp, 0.0),
                               np.where(zero, 0.0, -np.inf)), axis=-1)

    def entropy(self):
        lp = self._log_probs()
        p = np.exp(lp)
        return full(-np.sum(np.where(np.greater(p, 0.0), p * lp, 0.0), axis=-1),
                    self.batch_shape)

    @property
    def mean(self):
        return full(self._probs(), self.batch_shape + self.event_shape)

    @property
    def variance(self):
        p = self._probs()
        return full(p * (1.0 - p), self.batch_shape + self.event_shape)
