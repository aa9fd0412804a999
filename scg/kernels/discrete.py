"""Per-sample kernels of the discrete families (log-mass and scores), with numpy twins.

Same convention as `continuous.py`: which=0 the log-mass at an integer value k,
which=2, 3, ... the derivative in each parameter (which=1, the value, has none).
Boundary probabilities (0 or 1) give exact limits instead of 0 * log 0.
"""

import math

import numpy as np
from numba import njit

from .primitives import sig
from .special import digamma_scalar
from .special_primitives import digamma, lgamma


# ---------------------------------------------------------------- Poisson(rate)
@njit(cache=True, error_model="numpy")
def _poisson(which, k, rate):
    if which == 0:
        return k * math.log(rate) - rate - math.lgamma(k + 1.0)
    return k / rate - 1.0


@njit(sig(2), cache=True, error_model="numpy")
def poisson_density(which, out, k, rate):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _poisson(which, k[i, j], rate[i, j])


def poisson_density_twin(which, k, rate):
    if which == 0:
        return k * np.log(rate) - rate - lgamma(k + 1.0)
    return k / rate - 1.0


# ---------------------------------------------------------------- Geometric(probs): failures before a success
@njit(cache=True, error_model="numpy")
def _geometric(which, k, p):
    if which == 0:
        return math.log(p) + (k * math.log1p(-p) if k > 0 else 0.0)
    return 1.0 / p - (k / (1.0 - p) if k > 0 else 0.0)


@njit(sig(2), cache=True, error_model="numpy")
def geometric_density(which, out, k, p):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _geometric(which, k[i, j], p[i, j])


def geometric_density_twin(which, k, p):
    pos = np.greater(k, 0)
    q = np.where(pos, 1.0 - p, 1.0)        # never log(0) where k == 0
    if which == 0:
        return np.log(p) + np.where(pos, k * np.log(q), 0.0)
    return 1.0 / p - np.where(pos, k / q, 0.0)


# ---------------------------------------------------------------- Binomial(total_count, probs)
@njit(cache=True, error_model="numpy")
def _binomial(which, k, n, p):
    if which == 0:
        out = math.lgamma(n + 1.0) - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0)
        if k > 0:
            out += k * math.log(p)
        if n - k > 0:
            out += (n - k) * math.log1p(-p)
        return out
    d = 0.0
    if k > 0:
        d += k / p
    if n - k > 0:
        d -= (n - k) / (1.0 - p)
    return d


@njit(sig(3), cache=True, error_model="numpy")
def binomial_density(which, out, k, n, p):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _binomial(which, k[i, j], n[i, j], p[i, j])


def binomial_density_twin(which, k, n, p):
    has_k, has_rest = np.greater(k, 0), np.greater(n - k, 0)
    p_safe = np.where(has_k, p, 1.0)
    q_safe = np.where(has_rest, 1.0 - p, 1.0)
    if which == 0:
        return (lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0)
                + np.where(has_k, k * np.log(p_safe), 0.0)
                + np.where(has_rest, (n - k) * np.log(q_safe), 0.0))
    return np.where(has_k, k / p_safe, 0.0) - np.where(has_rest, (n - k) / q_safe, 0.0)


# ---------------------------------------------------------------- NegativeBinomial(total_count, probs)
# k successes before the total_count-th failure, success probability p:
# C(k + r - 1, k) p^k (1 - p)^r, r = total_count > 0 (real)
@njit(cache=True, error_model="numpy")
def _negative_binomial(which, k, r, p):
    if which == 0:
        out = math.lgamma(k + r) - math.lgamma(k + 1.0) - math.lgamma(r) + r * math.log1p(-p)
        if k > 0:
            out += k * math.log(p)
        return out
    if which == 2:
        return digamma_scalar(k + r) - digamma_scalar(r) + math.log1p(-p)
    d = -r / (1.0 - p)
    if k > 0:
        d += k / p
    return d


@njit(sig(3), cache=True, error_model="numpy")
def negative_binomial_density(which, out, k, r, p):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _negative_binomial(which, k[i, j], r[i, j], p[i, j])


def negative_binomial_density_twin(which, k, r, p):
    has_k = np.greater(k, 0)
    p_safe = np.where(has_k, p, 1.0)
    if which == 0:
        return (lgamma(k + r) - lgamma(k + 1.0) - lgamma(r) + r * np.log1p(-p)
                + np.where(has_k, k * np.log(p_safe), 0.0))
    if which == 2:
        return digamma(k + r) - digamma(r) + np.log1p(-p)
    return np.where(has_k, k / p_safe, 0.0) - r / (1.0 - p)


# the same with logits l = log(p / (1 - p)): log p = -softplus(-l), log(1 - p) = -softplus(l)
@njit(cache=True, error_model="numpy")
def _softplus_scalar(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@njit(cache=True, error_model="numpy")
def _negative_binomial_logits(which, k, r, logit):
    if which == 0:
        return (math.lgamma(k + r) - math.lgamma(k + 1.0) - math.lgamma(r)
                - r * _softplus_scalar(logit) - k * _softplus_scalar(-logit))
    if which == 2:
        return digamma_scalar(k + r) - digamma_scalar(r) - _softplus_scalar(logit)
    p = 1.0 / (1.0 + math.exp(-logit))
    return k * (1.0 - p) - r * p


@njit(sig(3), cache=True, error_model="numpy")
def negative_binomial_logits_density(which, out, k, r, logit):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _negative_binomial_logits(which, k[i, j], r[i, j], logit[i, j])


def _softplus_twin(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def negative_binomial_logits_density_twin(which, k, r, logit):
    if which == 0:
        return (lgamma(k + r) - lgamma(k + 1.0) - lgamma(r) - r * _softplus_twin(logit)
                - k * _softplus_twin(-logit))
    if which == 2:
        return digamma(k + r) - digamma(r) - _softplus_twin(logit)
    p = 1.0 / (1.0 + np.exp(-logit))
    return k * (1.0 - p) - r * p
