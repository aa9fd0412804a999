"""Per-sample kernels of StudentT, Cauchy, HalfNormal and HalfCauchy, each beside its numpy twin.

The same conventions as `continuous.py`: density kernels `<family>_density(which, out, x,
*params)` give which=0 the log-density, 1 its derivative in x, 2, 3, ... its derivative in
each parameter (the scores); twins `<family>_density_twin(which, x, *params)` use numpy
calls only, so they also run on traced values (the formulas of higher orders).

`<family>_score_and_path` are the fused per-draw passes for parameters that are one value
each (the benchmark's loop): from the noise, the draws, the scores of every parameter and
the derivative of the draw in every parameter, the parameter-only constants computed once.
"""

import math

import numpy as np
from numba import njit

from .implicit import gamma_dxda_scalar
from .primitives import sig
from .special import digamma_scalar
from .special_primitives import digamma, lgamma

_LOG_PI = math.log(math.pi)
_HALF_LOG_2_OVER_PI = 0.5 * math.log(2.0 / math.pi)


# ---------------------------------------------------------------- StudentT(df, loc, scale)
@njit(cache=True, error_model="numpy")
def _studentt_const(df):
    """The log-density's constant without log(scale): lgamma((df+1)/2) - lgamma(df/2) - log(df pi)/2."""
    return math.lgamma(0.5 * (df + 1.0)) - math.lgamma(0.5 * df) - 0.5 * (math.log(df) + _LOG_PI)


@njit(cache=True, error_model="numpy")
def _studentt_dconst(df):
    """d/d df of `_studentt_const`."""
    return 0.5 * (digamma_scalar(0.5 * (df + 1.0)) - digamma_scalar(0.5 * df)) - 0.5 / df


@njit(cache=True, error_model="numpy")
def _studentt(which, x, df, loc, scale, const, dconst):
    z = (x - loc) / scale
    zz = z * z
    if which == 0:
        return const - math.log(scale) - 0.5 * (df + 1.0) * math.log1p(zz / df)
    if which == 1:
        return -(df + 1.0) * z / (scale * (df + zz))
    if which == 2:
        t = zz / df
        return dconst - 0.5 * math.log1p(t) + 0.5 * (df + 1.0) * t / (df * (1.0 + t))
    if which == 3:
        return (df + 1.0) * z / (scale * (df + zz))
    return ((df + 1.0) * zz / (df + zz) - 1.0) / scale


@njit(sig(4), cache=True, error_model="numpy")
def studentt_density(which, out, x, df, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            d = df[i, j]
            const = _studentt_const(d) if which == 0 else 0.0
            dconst = _studentt_dconst(d) if which == 2 else 0.0
            out[i, j] = _studentt(which, x[i, j], d, loc[i, j], scale[i, j], const, dconst)


def studentt_density_twin(which, x, df, loc, scale):
    z = (x - loc) / scale
    zz = z * z
    if which == 0:
        return (lgamma(0.5 * (df + 1.0)) - lgamma(0.5 * df) - 0.5 * (np.log(df) + _LOG_PI)
                - np.log(scale) - 0.5 * (df + 1.0) * np.log1p(zz / df))
    if which == 1:
        return -(df + 1.0) * z / (scale * (df + zz))
    if which == 2:
        t = zz / df
        return (0.5 * (digamma(0.5 * (df + 1.0)) - digamma(0.5 * df)) - 0.5 / df
                - 0.5 * np.log1p(t) + 0.5 * (df + 1.0) * t / (df * (1.0 + t)))
    if which == 3:
        return (df + 1.0) * z / (scale * (df + zz))
    return ((df + 1.0) * zz / (df + zz) - 1.0) / scale


@njit(cache=True, error_model="numpy")
def studentt_score_and_path(z, g, df, loc, scale, x, scores, paths):
    """From standard normal z (n,) and standard Gamma(df / 2) draws g (n,): the draws
    x = loc + scale * z * sqrt(df / (2 g)) (a Student t: a normal over the root of a
    chi-square over df), the scores of (df, loc, scale) into scores (3, n) and the path
    derivatives dx/d df (the Gamma's by implicit reparameterization at fixed CDF level)
    and dx/d scale = t into paths (2, n); dx/d loc is 1."""
    const, dconst = _studentt_const(df), _studentt_dconst(df)
    half = 0.5 * df
    for i in range(z.shape[0]):
        t = z[i] * math.sqrt(half / g[i])
        xi = loc + scale * t
        x[i] = xi
        for k in range(3):
            scores[k, i] = _studentt(k + 2, xi, df, loc, scale, const, dconst)
        # t = z sqrt(df / (2 g(df / 2))): d t / d df = t / 2 (1 / df - (dg/da) / (2 g))
        paths[0, i] = scale * 0.5 * t * (1.0 / df - 0.5 * gamma_dxda_scalar(half, g[i]) / g[i])
        paths[1, i] = t


# ---------------------------------------------------------------- Cauchy(loc, scale)
@njit(cache=True, error_model="numpy")
def _cauchy(which, x, loc, scale):
    z = (x - loc) / scale
    zz = z * z
    if which == 0:
        return -_LOG_PI - math.log(scale) - math.log1p(zz)
    if which == 1:
        return -2.0 * z / (scale * (1.0 + zz))
    if which == 2:
        return 2.0 * z / (scale * (1.0 + zz))
    return (zz - 1.0) / (scale * (1.0 + zz))


@njit(sig(3), cache=True, error_model="numpy")
def cauchy_density(which, out, x, loc, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _cauchy(which, x[i, j], loc[i, j], scale[i, j])


def cauchy_density_twin(which, x, loc, scale):
    z = (x - loc) / scale
    zz = z * z
    return [lambda: -_LOG_PI - np.log(scale) - np.log1p(zz),
            lambda: -2.0 * z / (scale * (1.0 + zz)),
            lambda: 2.0 * z / (scale * (1.0 + zz)),
            lambda: (zz - 1.0) / (scale * (1.0 + zz))][which]()


@njit(cache=True, error_model="numpy")
def cauchy_score_and_path(eps, loc, scale, x, scores):
    """From standard Cauchy noise eps (n,): draws loc + scale * eps and the scores of
    (loc, scale) into scores (2, n); the path derivatives are 1 and eps itself."""
    for i in range(eps.shape[0]):
        xi = loc + scale * eps[i]
        x[i] = xi
        scores[0, i] = _cauchy(2, xi, loc, scale)
        scores[1, i] = _cauchy(3, xi, loc, scale)


# ---------------------------------------------------------------- HalfNormal(scale), HalfCauchy(scale)
@njit(cache=True, error_model="numpy")
def _half_normal(which, x, scale):
    z = x / scale
    if which == 0:
        return _HALF_LOG_2_OVER_PI - math.log(scale) - 0.5 * z * z
    if which == 1:
        return -z / scale
    return (z * z - 1.0) / scale


@njit(sig(2), cache=True, error_model="numpy")
def half_normal_density(which, out, x, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _half_normal(which, x[i, j], scale[i, j])


def half_normal_density_twin(which, x, scale):
    z = x / scale
    return [lambda: _HALF_LOG_2_OVER_PI - np.log(scale) - 0.5 * z * z,
            lambda: -z / scale, lambda: (z * z - 1.0) / scale][which]()


@njit(cache=True, error_model="numpy")
def _half_cauchy(which, x, scale):
    z = x / scale
    zz = z * z
    if which == 0:
        return math.log(2.0) - _LOG_PI - math.log(scale) - math.log1p(zz)
    if which == 1:
        return -2.0 * z / (scale * (1.0 + zz))
    return (zz - 1.0) / (scale * (1.0 + zz))


@njit(sig(2), cache=True, error_model="numpy")
def half_cauchy_density(which, out, x, scale):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _half_cauchy(which, x[i, j], scale[i, j])


def half_cauchy_density_twin(which, x, scale):
    z = x / scale
    zz = z * z
    return [lambda: np.log(2.0) - _LOG_PI - np.log(scale) - np.log1p(zz),
            lambda: -2.0 * z / (scale * (1.0 + zz)),
            lambda: (zz - 1.0) / (scale * (1.0 + zz))][which]()


@njit(cache=True, error_model="numpy")
def _scale_path(which, eps, scale):
    if which == 0:
        return scale * eps
    if which == 1:
        return scale
    return eps


@njit(sig(2), cache=True, error_model="numpy")
def scale_path(which, out, eps, scale):
    """The path scale * |eps| of the half families, from folded noise |eps|."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = _scale_path(which, eps[i, j], scale[i, j])


def scale_path_twin(which, eps, scale):
    return [scale * eps, scale + 0.0 * eps, eps + 0.0 * scale][which]


@njit(cache=True, error_model="numpy")
def half_score_and_path(cauchy, eps, scale, x, score):
    """From folded noise eps (n,) (|N(0, 1)|, or |Cauchy(0, 1)| when `cauchy`): draws
    scale * eps and the score of scale; the path derivative is eps itself."""
    for i in range(eps.shape[0]):
        xi = scale * eps[i]
        x[i] = xi
        score[i] = _half_cauchy(2, xi, scale) if cauchy else _half_normal(2, xi, scale)
