"""Per-sample kernels of the continuous families, each beside its numpy twin.

Density kernels `<family>_density(which, out, x, *params)` compute, elementwise:
which=0 the log-density, 1 its derivative in the value x, 2, 3, ... its
derivative in each parameter (the scores). Path kernels
`<family>_path(which, out, eps, *params)` compute which=0 the draw from standard
noise eps, 1 its derivative in eps, 2, 3, ... its derivative in each parameter.
Twins `<family>_density_twin(which, x, *params)` use numpy calls only, so they
also run on traced values (they are the composite formulas of higher orders).
"""

import math

import numpy as np
from numba import njit, prange

from .primitives import sig
from .special import digamma_scalar
from .special_primitives import digamma, lgamma

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _edge(c):
    """The limit of c * log(x) as x -> 0+: -inf for c > 0, +inf for c < 0, 0 for c == 0."""
    return np.where(np.greater(c, 0.0), -np.inf, np.where(np.less(c, 0.0), np.inf, 0.0))


def _xlogy(c, x):
    """c * log(x) for x >= 0, taken as 0 when c == 0 (also at x == 0); no log of 0 is taken."""
    pos = np.greater(x, 0.0)
    return np.where(pos, c * np.log(np.where(pos, x, 1.0)), _edge(c))


def _xdivy(c, x):
    """c / x, taken as 0 when c == 0 (also at x == 0); no division by 0 is done."""
    nz = np.not_equal(x, 0.0)
    return np.where(nz, c / np.where(nz, x, 1.0), -_edge(c))


def _log0(x):
    """log(x) for x >= 0 (-inf at 0) without taking the log of 0."""
    pos = np.greater(x, 0.0)
    return np.where(pos, np.log(np.where(pos, x, 1.0)), -np.inf)


@njit(cache=True, error_model="numpy")
def _xdivy_scalar(c, x):
    """c / x, 0 when c == 0 and +-inf when x == 0 (no ZeroDivisionError)."""
    if c == 0.0:
        return 0.0
    if x == 0.0:
        return math.inf if c > 0 else -math.inf
    return c / x


# ---------------------------------------------------------------- Normal(loc, scale)
@njit(cache=True, error_model="numpy")
def _normal(which, x, loc, scale):
    return _normal_at(which, x, loc, scale, math.log(scale) if which == 0 else 0.0)


@njit(cache=True, error_model="numpy")
def _normal_at(which, x, loc, scale, log_scale):
    # (a scale of 1 divides by nothing: x / 1.0 is x, the same bits without a division)
    z = x - loc if scale == 1.0 else (x - loc) / scale
    if which == 0:
        return -0.5 * z * z - log_scale - _HALF_LOG_2PI
    if which == 1:
        return -z if scale == 1.0 else -z / scale
    if which == 2:
        return z if scale == 1.0 else z / scale
    return z * z - 1.0 if scale == 1.0 else (z * z - 1.0) / scale


@njit(cache=True, error_model="numpy")
def _all_equal(a, first):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j] != first:
                return False
    return True


@njit(sig(3), cache=True, error_model="numpy")
def normal_density(which, out, x, loc, scale):
    rows, cols = out.shape
    if which == 0 and rows and cols and _all_equal(scale, scale[0, 0]):
        # (one scale, as a mixture's or an HMM's unit emissions: its log taken once)
        s = scale[0, 0]
        log_scale = math.log(s)
        for i in range(rows):
            for j in range(cols):
                out[i, j] = _normal_at(0, x[i, j], loc[i, j], s, log_scale)
        return
    for i in range(rows):
        for j in range(cols):
            out[i, j] = _normal(which, x[i, j], loc[i, j], scale[i, j])


def normal_density_twin(which, x, loc, scale):
    z = (x - loc) / scale
    return [-0.5 * z ** 2 - np.log(scale) - _HALF_LOG_2PI, -z / scale, z / scale,
            (z ** 2 - 1.0) / scale][which]


@njit(cache=True, error_model="numpy")
def _loc_scale_path(which, eps, loc, scale):
    if which == 0:
        return loc + scale * eps
    if which == 1:
        return scale
    if which == 2:
        return 1.0
    return eps


@njit(sig(3), cache=True, error_model="numpy")
def loc_scale_path(which, out, eps, loc, scale):
    """The path loc + scale * eps of every location-scale family (Normal, Laplace, Gumbel)."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _loc_scale_path(which, eps[i, j], loc[i, j], scale[i, j])


def loc_scale_path_twin(which, eps, loc, scale):
    return [loc + scale * eps, scale + 0.0 * eps, 1.0 + 0.0 * (eps + loc + scale),
            eps + 0.0 * (loc + scale)][which]


@njit(cache=True, parallel=True, error_model="numpy")
def normal_score_and_path(eps, loc, scale, x, score_loc, score_scale):
    """Fused per-draw pass for a Normal with scalar parameters (the benchmark's hot loop).

    From standard normal noise eps (n,), writes the draws x = loc + scale * eps and the
    scores d log p(x) / d loc = eps / scale and d log p(x) / d scale = (eps^2 - 1) / scale.
    The path derivatives are dx/dloc = 1 and dx/dscale = eps (the noise itself).
    The loop is split over the available cores (numba prange).
    """
    inv = 1.0 / scale
    for i in prange(eps.shape[0]):
        e = eps[i]
        x[i] = loc + scale * e
        score_loc[i] = e * inv
        score_scale[i] = (e * e - 1.0) * inv


def normal_score_and_path_twin(eps, loc, scale):
    """Numpy twin of `normal_score_and_path`: returns (x, score_loc, score_scale)."""
    x = loc + scale * eps
    z = (x - loc) / scale
    return x, z / scale, (z * z - 1.0) / scale


# ---------------------------------------------------------------- LogNormal(loc, scale)
@njit(cache=True, error_model="numpy")
def _lognormal(which, x, loc, scale):
    y = math.log(x)
    z = (y - loc) / scale
    if which == 0:
        return -0.5 * z * z - math.log(scale) - _HALF_LOG_2PI - y
    if which == 1:
        return (-z / scale - 1.0) / x
    if which == 2:
        return z / scale
    return (z * z - 1.0) / scale


@njit(sig(3), cache=True, error_model="numpy")
def lognormal_density(which, out, x, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _lognormal(which, x[i, j], loc[i, j], scale[i, j])


def lognormal_density_twin(which, x, loc, scale):
    y = np.log(x)
    z = (y - loc) / scale
    return [-0.5 * z ** 2 - np.log(scale) - _HALF_LOG_2PI - y, (-z / scale - 1.0) / x,
            z / scale, (z ** 2 - 1.0) / scale][which]


@njit(cache=True, error_model="numpy")
def _lognormal_path(which, eps, loc, scale):
    x = math.exp(loc + scale * eps)
    if which == 0:
        return x
    if which == 1:
        return scale * x
    if which == 2:
        return x
    return eps * x


@njit(sig(3), cache=True, error_model="numpy")
def lognormal_path(which, out, eps, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _lognormal_path(which, eps[i, j], loc[i, j], scale[i, j])


def lognormal_path_twin(which, eps, loc, scale):
    x = np.exp(loc + scale * eps)
    return [x, scale * x, x, eps * x][which]


# ---------------------------------------------------------------- Laplace(loc, scale)
@njit(cache=True, error_model="numpy")
def _laplace(which, x, loc, scale):
    d = x - loc
    s = 1.0 if d > 0 else (-1.0 if d < 0 else 0.0)
    if which == 0:
        return -math.log(2.0 * scale) - abs(d) / scale
    if which == 1:
        return -s / scale
    if which == 2:
        return s / scale
    return (abs(d) / scale - 1.0) / scale


@njit(sig(3), cache=True, error_model="numpy")
def laplace_density(which, out, x, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _laplace(which, x[i, j], loc[i, j], scale[i, j])


def laplace_density_twin(which, x, loc, scale):
    d = x - loc
    s = np.sign(d)
    return [-np.log(2.0 * scale) - np.abs(d) / scale, -s / scale, s / scale,
            (np.abs(d) / scale - 1.0) / scale][which]


# ---------------------------------------------------------------- Gumbel(loc, scale)
@njit(cache=True, error_model="numpy")
def _gumbel(which, x, loc, scale):
    z = (x - loc) / scale
    e = math.exp(-z)
    if which == 0:
        return -(z + e) - math.log(scale)
    if which == 1:
        return (e - 1.0) / scale
    if which == 2:
        return (1.0 - e) / scale
    return (z * (1.0 - e) - 1.0) / scale


@njit(sig(3), cache=True, error_model="numpy")
def gumbel_density(which, out, x, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _gumbel(which, x[i, j], loc[i, j], scale[i, j])


def gumbel_density_twin(which, x, loc, scale):
    z = (x - loc) / scale
    e = np.exp(-z)
    return [-(z + e) - np.log(scale), (e - 1.0) / scale, (1.0 - e) / scale,
            (z * (1.0 - e) - 1.0) / scale][which]


# ---------------------------------------------------------------- Exponential(rate)
@njit(cache=True, error_model="numpy")
def _exponential(which, x, rate):
    if which == 0:
        return math.log(rate) - rate * x
    if which == 1:
        return -rate
    return 1.0 / rate - x


@njit(sig(2), cache=True, error_model="numpy")
def exponential_density(which, out, x, rate):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _exponential(which, x[i, j], rate[i, j])


def exponential_density_twin(which, x, rate):
    return [np.log(rate) - rate * x, -rate + 0.0 * x, 1.0 / rate - x][which]


@njit(cache=True, error_model="numpy")
def _exponential_path(which, eps, rate):
    if which == 0:
        return eps / rate
    if which == 1:
        return 1.0 / rate
    return -eps / (rate * rate)


@njit(sig(2), cache=True, error_model="numpy")
def exponential_path(which, out, eps, rate):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _exponential_path(which, eps[i, j], rate[i, j])


def exponential_path_twin(which, eps, rate):
    return [eps / rate, 1.0 / rate + 0.0 * eps, -eps / rate ** 2][which]


# ---------------------------------------------------------------- Gamma(concentration, rate)
@njit(cache=True, error_model="numpy")
def _gamma(which, x, a, rate):
    if which == 0:
        # (a - 1) log x is 0 when a == 1, also at x == 0 (not 0 * -inf)
        xlog = 0.0 if a == 1.0 else (a - 1.0) * math.log(x)
        return a * math.log(rate) + xlog - rate * x - math.lgamma(a)
    if which == 1:
        return _xdivy_scalar(a - 1.0, x) - rate
    if which == 2:
        return math.log(rate * x) - digamma_scalar(a)
    return a / rate - x


@njit(sig(3), cache=True, error_model="numpy")
def gamma_density(which, out, x, a, rate):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _gamma(which, x[i, j], a[i, j], rate[i, j])


def gamma_density_twin(which, x, a, rate):
    if which == 0:
        return a * np.log(rate) + _xlogy(a - 1.0, x) - rate * x - lgamma(a)
    if which == 1:
        return _xdivy(a - 1.0, x) - rate
    if which == 2:
        return np.log(rate) + _log0(x) - digamma(a)
    return a / rate - x


# ---------------------------------------------------------------- Beta(a, b)
@njit(cache=True, error_model="numpy")
def _beta(which, x, a, b):
    if which == 0:
        # (a - 1) log x is 0 when a == 1, also at x == 0 (not 0 * -inf); same for b
        xlog = 0.0 if a == 1.0 else (a - 1.0) * math.log(x)
        ylog = 0.0 if b == 1.0 else (b - 1.0) * math.log1p(-x)
        return xlog + ylog - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b)
    if which == 1:
        return _xdivy_scalar(a - 1.0, x) - _xdivy_scalar(b - 1.0, 1.0 - x)
    if which == 2:
        return math.log(x) - digamma_scalar(a) + digamma_scalar(a + b)
    return math.log1p(-x) - digamma_scalar(b) + digamma_scalar(a + b)


@njit(sig(3), cache=True, error_model="numpy")
def beta_density(which, out, x, a, b):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _beta(which, x[i, j], a[i, j], b[i, j])


def beta_density_twin(which, x, a, b):
    if which == 0:
        y_in = np.less(x, 1.0)
        ylog = np.where(y_in, (b - 1.0) * np.log1p(-np.where(y_in, x, 0.0)), _edge(b - 1.0))
        return _xlogy(a - 1.0, x) + ylog - lgamma(a) - lgamma(b) + lgamma(a + b)
    if which == 1:
        return _xdivy(a - 1.0, x) - _xdivy(b - 1.0, 1.0 - x)
    if which == 2:
        return _log0(x) - digamma(a) + digamma(a + b)
    y_in = np.less(x, 1.0)
    ylog = np.where(y_in, np.log1p(-np.where(y_in, x, 0.0)), -np.inf)
    return ylog - digamma(b) + digamma(a + b)
