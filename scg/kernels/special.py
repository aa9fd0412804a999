"""Special functions as numba kernels, each beside a plain-numpy twin.

lgamma, digamma and polygamma of real arguments. The kernels back the
primitives of `special_primitives.py`; the twins are independent vectorized
numpy implementations that the tests compare against the kernels.

Algorithms: digamma and polygamma shift the argument up by the recurrence
psi(x) = psi(x + 1) - 1/x until it is large, then sum the asymptotic series
(with Bernoulli numbers); negative non-integer arguments use the reflection
formula. lgamma is math.lgamma in the kernel and a shifted Stirling series in
the twin.
"""

import math

import numpy as np
from numba import njit

_SHIFT = 10.0          # digamma: recurrence until x >= _SHIFT, then the series
_PG_SHIFT = 15.0       # polygamma: the same, with a larger threshold
# Bernoulli numbers B_2, B_4, ..., B_14
_B2K = np.array([1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6])


# ---------------------------------------------------------------- scalar kernels
@njit(cache=True, error_model="numpy")
def digamma_scalar(x):
    """psi(x) = d/dx log Gamma(x); nan at the poles x = 0, -1, -2, ..."""
    if x <= 0.0 and x == math.floor(x):
        return math.nan
    r = 0.0
    if x < 0.0:
        r = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < _SHIFT:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (
        -1.0 / 132 + f * (691.0 / 32760 + f * (-1.0 / 12)))))))
    return r + math.log(x) - 0.5 / x + t


@njit(cache=True, error_model="numpy")
def polygamma_scalar(n, x):
    """The n-th derivative of digamma (n >= 1) for x > 0; nan for x <= 0."""
    if n == 0:
        return digamma_scalar(x)
    if not x > 0.0:
        return math.nan
    nfact = math.gamma(n + 1.0)
    sign = 1.0 if n % 2 == 1 else -1.0       # (-1)^(n+1)
    r = 0.0
    while x < _PG_SHIFT:
        r += nfact / x ** (n + 1)
        x += 1.0
    # asymptotic series: (n-1)!/x^n + n!/(2 x^(n+1)) + sum B_2k (2k+n-1)!/(2k)! / x^(2k+n)
    s = math.gamma(float(n)) / x ** n + 0.5 * nfact / x ** (n + 1)
    for k in range(1, 8):
        coef = math.exp(math.lgamma(2.0 * k + n) - math.lgamma(2.0 * k + 1.0))
        s += _B2K[k - 1] * coef / x ** (2 * k + n)
    return sign * (r + s)


# ---------------------------------------------------------------- array kernels (flat, contiguous)
@njit(cache=True, error_model="numpy")
def lgamma_kernel(out, x):
    for i in range(x.size):
        out[i] = math.lgamma(x[i])


@njit(cache=True, error_model="numpy")
def digamma_kernel(out, x):
    for i in range(x.size):
        out[i] = digamma_scalar(x[i])


@njit(cache=True, error_model="numpy")
def polygamma_kernel(n, out, x):
    for i in range(x.size):
        out[i] = polygamma_scalar(n, x[i])


# ---------------------------------------------------------------- numpy twins
def lgamma_twin(x):
    """log|Gamma(x)| by shifting to x >= 15 and the Stirling series (numpy only)."""
    x = np.asarray(x, dtype=float)
    neg = x < 0.5
    y = np.where(neg, 1.0 - x, x)
    shift = np.zeros_like(y)
    for _ in range(15):
        small = y < 15.0
        shift = shift + np.where(small, np.log(np.where(small, y, 1.0)), 0.0)
        y = np.where(small, y + 1.0, y)
    f = 1.0 / (y * y)
    series = (1 / 12 + f * (-1 / 360 + f * (1 / 1260 + f * (-1 / 1680 + f * (1 / 1188))))) / y
    out = (y - 0.5) * np.log(y) - y + 0.5 * np.log(2 * np.pi) + series - shift
    with np.errstate(divide="ignore"):
        refl = np.log(np.pi / np.abs(np.sin(np.pi * np.where(neg, x, 0.5)))) - out
    return np.where(neg, refl, out)


def digamma_twin(x):
    """psi(x) by the recurrence and the asymptotic series (numpy only)."""
    x = np.asarray(x, dtype=float)
    pole = (x <= 0) & (x == np.floor(x))
    neg = (x < 0) & ~pole
    r = np.where(neg, -np.pi / np.tan(np.pi * np.where(neg, x, 0.5)), 0.0)
    y = np.where(neg, 1.0 - x, np.where(pole, 1.0, x))
    for _ in range(int(_SHIFT) + 1):
        small = y < _SHIFT
        r = r - np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    while np.any(y < _SHIFT):   # very negative arguments need more steps
        small = y < _SHIFT
        r = r - np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    f = 1.0 / (y * y)
    coefs = [-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760, -1 / 12]
    t = np.zeros_like(y)
    for c in coefs[::-1]:
        t = f * (c + t)
    return np.where(pole, np.nan, r + np.log(y) - 0.5 / y + t)


def polygamma_twin(n, x):
    """The n-th derivative of digamma, n >= 1, x > 0 (numpy only)."""
    if n == 0:
        return digamma_twin(x)
    x = np.asarray(x, dtype=float)
    bad = ~(x > 0)
    y = np.where(bad, 1.0, x)
    nfact = math.factorial(n)
    r = np.zeros_like(y)
    for _ in range(int(_PG_SHIFT) + 1):
        small = y < _PG_SHIFT
        r = r + np.where(small, nfact / y ** (n + 1), 0.0)
        y = np.where(small, y + 1.0, y)
    s = math.factorial(n - 1) / y ** n + 0.5 * nfact / y ** (n + 1)
    for k in range(1, 8):
        coef = math.factorial(2 * k + n - 1) / math.factorial(2 * k)
        s = s + _B2K[k - 1] * coef / y ** (2 * k + n)
    return np.where(bad, np.nan, (1.0 if n % 2 == 1 else -1.0) * (r + s))


# ---------------------------------------------------------------- the normal CDF and its inverse
@njit(cache=True, error_model="numpy")
def erf_kernel(out, x):
    for i in range(x.size):
        out[i] = math.erf(x[i])


# Acklam's rational approximation of the standard normal quantile (relative error 1.2e-9),
# refined by one Halley step on the CDF written with erfc: about full double precision
_A = np.array([-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00])
_B = np.array([-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
               6.680131188771972e+01, -1.328068155288572e+01])
_C = np.array([-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00])
_D = np.array([7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
               3.754408661907416e+00])


@njit(cache=True, error_model="numpy")
def ndtri_scalar(u):
    """The standard normal quantile: x with Phi(x) = u; -inf at 0, inf at 1, nan outside."""
    if not (u >= 0.0 and u <= 1.0):
        return math.nan
    if u == 0.0:
        return -math.inf
    if u == 1.0:
        return math.inf
    if u > 0.5:  # (by symmetry: 1 - u is exact here, and the lower half is refined well)
        return -ndtri_scalar(1.0 - u)
    low = 0.02425
    if u < low:
        q = math.sqrt(-2.0 * math.log(u))
        x = (((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]) / \
            ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0)
    elif u <= 1.0 - low:
        q = u - 0.5
        r = q * q
        x = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q / \
            (((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0)
    else:
        q = math.sqrt(-2.0 * math.log1p(-u))
        x = -(((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]) / \
            ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0)
    # one Halley step: e = Phi(x) - u, with Phi from erfc (accurate in both tails)
    e = 0.5 * math.erfc(-x / math.sqrt(2.0)) - u
    d = e * math.sqrt(2.0 * math.pi) * math.exp(0.5 * x * x)
    return x - d / (1.0 + 0.5 * x * d)


@njit(cache=True, error_model="numpy")
def ndtri_kernel(out, u):
    for i in range(u.size):
        out[i] = ndtri_scalar(u[i])
