"""Implicit reparameterization: how a Gamma or Beta draw moves with its parameters.

For a draw x with CDF F(x; theta) held at a fixed level u, the implicit function
theorem gives dx/dtheta = -(dF/dtheta) / p(x; theta) (Figurnov et al., 2018).
dF/dtheta is computed by forward-mode differentiation (value and derivative
carried together) through the classical evaluations of the CDF:

* Gamma: the regularized lower incomplete gamma P(a, x) by its power series
  for x < a + 1, else the continued fraction of Q = 1 - P (modified Lentz).
* Beta: the regularized incomplete beta I_x(a, b) by its continued fraction,
  using I_x(a, b) = 1 - I_{1-x}(b, a) when x > (a + 1) / (a + b + 2).

The common factor of the CDF and the density cancels analytically, so nothing
underflows for tiny draws (concentrations down to 0.05). Each kernel has a
vectorized numpy twin of the same recurrences.
"""

import math

import numpy as np
from numba import njit

from .primitives import sig

from .special import digamma_scalar, digamma_twin

_EPS = 1e-16
_TINY = 1e-300
_MAXIT = 20000


# ---------------------------------------------------------------- Gamma: scalar kernel
@njit(cache=True, error_model="numpy")
def gamma_dxda_scalar(a, x):
    """d x / d a for a Gamma(a, 1) draw x, at fixed CDF level."""
    if not x > 0.0:
        return 0.0
    lx = math.log(x)
    if x < a + 1.0:
        # P = x^a e^-x / Gamma(a + 1) * S,  S = sum_k t_k,  t_k = t_{k-1} x / (a + k)
        t, dt, s, ds = 1.0, 0.0, 1.0, 0.0
        for k in range(1, _MAXIT):
            r = x / (a + k)
            dt = dt * r - t * r / (a + k)
            t = t * r
            s += t
            ds += dt
            if t <= _EPS * s and -dt <= _EPS * -ds:
                break
        return -(x / a) * ((lx - digamma_scalar(a + 1.0)) * s + ds)
    # Q = x^a e^-x / Gamma(a) * h,  h the continued fraction (derivative dh in a)
    b, db = x + 1.0 - a, -1.0
    c, dc = 1.0 / _TINY, 0.0
    d = 1.0 / b
    dd = 1.0 / (b * b)
    h, dh = d, dd
    for i in range(1, _MAXIT):
        an, dan = -i * (i - a), float(i)
        b += 2.0
        den = an * d + b
        dden = dan * d + an * dd + db
        if abs(den) < _TINY:
            den = _TINY
        cc = b + an / c
        dcc = db + dan / c - an * dc / c / c
        if abs(cc) < _TINY:
            cc = _TINY
        d = 1.0 / den
        dd = -dden * d * d
        c, dc = cc, dcc
        delta = d * c
        ddelta = dd * c + d * dc
        dh = dh * delta + h * ddelta
        h = h * delta
        if abs(delta - 1.0) <= _EPS and abs(ddelta * h) <= _EPS * abs(dh) + _TINY:
            break
    return x * ((lx - digamma_scalar(a)) * h + dh)


# (one declared signature, as every kernel that `primitives.run` may call through the
# compiled entry point: an overload compiled for other layouts would read its arrays wrong)
@njit(sig(2), cache=True, error_model="numpy")
def gamma_dxda_kernel(which, out, a, x):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = gamma_dxda_scalar(a[i, j], x[i, j])


# ---------------------------------------------------------------- Beta: scalar kernel
@njit(cache=True, error_model="numpy")
def _betacf(a, b, x):
    """Continued fraction of I_x(a, b) and its derivatives in a and b (Numerical Recipes)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, dca, dcb = 1.0, 0.0, 0.0
    d0 = 1.0 - qab * x / qap
    dd0a = -x * (1.0 - b) / (qap * qap)
    dd0b = -x / qap
    if abs(d0) < _TINY:
        d0 = _TINY
    d = 1.0 / d0
    dda, ddb = -dd0a * d * d, -dd0b * d * d
    h, dha, dhb = d, dda, ddb
    for m in range(1, _MAXIT):
        m2 = 2.0 * m
        delta = 1.0
        for half in range(2):
            if half == 0:
                den = (qam + m2) * (a + m2)
                aa = m * (b - m) * x / den
                daa_a = -aa * (1.0 / (qam + m2) + 1.0 / (a + m2))
                daa_b = m * x / den
            else:
                den = (a + m2) * (qap + m2)
                aa = -(a + m) * (qab + m) * x / den
                daa_a = aa * (1.0 / (a + m) + 1.0 / (qab + m) - 1.0 / (a + m2) - 1.0 / (qap + m2))
                daa_b = aa / (qab + m)
            big_d = 1.0 + aa * d
            dDa, dDb = daa_a * d + aa * dda, daa_b * d + aa * ddb
            if abs(big_d) < _TINY:
                big_d = _TINY
            big_c = 1.0 + aa / c
            dCa = daa_a / c - aa * dca / c / c
            dCb = daa_b / c - aa * dcb / c / c
            if abs(big_c) < _TINY:
                big_c = _TINY
            d = 1.0 / big_d
            dda, ddb = -dDa * d * d, -dDb * d * d
            c, dca, dcb = big_c, dCa, dCb
            delta = d * c
            dela, delb = dda * c + d * dca, ddb * c + d * dcb
            dha = dha * delta + h * dela
            dhb = dhb * delta + h * delb
            h = h * delta
        if abs(delta - 1.0) <= _EPS and abs(dela * h) <= _EPS * abs(dha) + _TINY \
                and abs(delb * h) <= _EPS * abs(dhb) + _TINY:
            break
    return h, dha, dhb


@njit(cache=True, error_model="numpy")
def beta_dx_scalar(which, a, b, x):
    """d x / d a (which=0) or d x / d b (which=1) for a Beta(a, b) draw x at fixed CDF level."""
    if not (x > 0.0 and x < 1.0):
        return 0.0
    lx, l1x = math.log(x), math.log1p(-x)
    psab = digamma_scalar(a + b)
    ga = lx - digamma_scalar(a) + psab          # d/da log of the common factor
    gb = l1x - digamma_scalar(b) + psab         # d/db
    w = x * (1.0 - x)                           # common factor / density
    if x < (a + 1.0) / (a + b + 2.0):
        h, dha, dhb = _betacf(a, b, x)
        dIa = w * (ga * h / a + dha / a - h / (a * a))
        dIb = w * (gb * h / a + dhb / a)
    else:
        h, dhb, dha = _betacf(b, a, 1.0 - x)    # I_x(a, b) = 1 - I_{1-x}(b, a)
        dIa = -w * (ga * h / b + dha / b)
        dIb = -w * (gb * h / b + dhb / b - h / (b * b))
    return -dIa if which == 0 else -dIb


@njit(sig(3), cache=True, error_model="numpy")
def beta_dx_kernel(which, out, a, b, x):
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = beta_dx_scalar(which, a[i, j], b[i, j], x[i, j])


# ---------------------------------------------------------------- numpy twins
def _freeze(active, new, old):
    return np.where(active, new, old)


def gamma_dxda_twin(a, x):
    """Vectorized numpy version of `gamma_dxda_scalar` (same series and continued fraction)."""
    with np.errstate(all="ignore"):  # lanes of the branch not taken may overflow; masked out
        return _gamma_dxda_twin(a, x)


def _gamma_dxda_twin(a, x):
    a, x = np.broadcast_arrays(np.asarray(a, float), np.asarray(x, float))
    pos = x > 0
    xs = np.where(pos, x, 1.0)
    lx = np.log(xs)
    ser = xs < a + 1.0
    # series
    t, dt, s, ds = (np.ones_like(a), np.zeros_like(a), np.ones_like(a), np.zeros_like(a))
    active = ser.copy()
    k = 1
    while np.any(active) and k < _MAXIT:
        r = xs / (a + k)
        dt_new = dt * r - t * r / (a + k)
        t_new = t * r
        s, ds = _freeze(active, s + t_new, s), _freeze(active, ds + dt_new, ds)
        t, dt = _freeze(active, t_new, t), _freeze(active, dt_new, dt)
        active &= ~((t <= _EPS * s) & (-dt <= _EPS * -ds))
        k += 1
    series = -(xs / a) * ((lx - digamma_twin(a + 1.0)) * s + ds)
    # continued fraction
    b = xs + 1.0 - a
    c, dc = np.full_like(a, 1.0 / _TINY), np.zeros_like(a)
    cf = ~ser
    b = np.where(cf, b, 1.0)
    d = 1.0 / b
    dd = d * d
    h, dh = d.copy(), dd.copy()
    active = cf.copy()
    i = 1
    while np.any(active) and i < _MAXIT:
        an, dan = -i * (i - a), float(i)
        b = b + 2.0
        den = an * d + b
        dden = dan * d + an * dd - 1.0
        den = np.where(np.abs(den) < _TINY, _TINY, den)
        cc = b + an / c
        dcc = -1.0 + dan / c - an * dc / c / c
        cc = np.where(np.abs(cc) < _TINY, _TINY, cc)
        d_new = 1.0 / den
        dd_new = -dden * d_new * d_new
        delta = d_new * cc
        ddelta = dd_new * cc + d_new * dcc
        dh_new, h_new = dh * delta + h * ddelta, h * delta
        d, dd = _freeze(active, d_new, d), _freeze(active, dd_new, dd)
        c, dc = _freeze(active, cc, c), _freeze(active, dcc, dc)
        h, dh = _freeze(active, h_new, h), _freeze(active, dh_new, dh)
        active &= ~((np.abs(delta - 1.0) <= _EPS) & (np.abs(ddelta * h) <= _EPS * np.abs(dh) + _TINY))
        i += 1
    contfrac = xs * ((lx - digamma_twin(a)) * h + dh)
    return np.where(pos, np.where(ser, series, contfrac), 0.0)


def _betacf_twin(a, b, x, active):
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, dca, dcb = np.ones_like(a), np.zeros_like(a), np.zeros_like(a)
    d0 = 1.0 - qab * x / qap
    dd0a, dd0b = -x * (1.0 - b) / (qap * qap), -x / qap
    d0 = np.where(np.abs(d0) < _TINY, _TINY, d0)
    d = 1.0 / d0
    dda, ddb = -dd0a * d * d, -dd0b * d * d
    h, dha, dhb = d.copy(), dda.copy(), ddb.copy()
    active = active.copy()
    m = 1
    while np.any(active) and m < _MAXIT:
        m2 = 2.0 * m
        state = (d, dda, ddb, c, dca, dcb, h, dha, dhb)
        for half in range(2):
            if half == 0:
                den = (qam + m2) * (a + m2)
                aa = m * (b - m) * x / den
                daa_a = -aa * (1.0 / (qam + m2) + 1.0 / (a + m2))
                daa_b = m * x / den
            else:
                den = (a + m2) * (qap + m2)
                aa = -(a + m) * (qab + m) * x / den
                daa_a = aa * (1.0 / (a + m) + 1.0 / (qab + m) - 1.0 / (a + m2) - 1.0 / (qap + m2))
                daa_b = aa / (qab + m)
            big_d = 1.0 + aa * d
            dDa, dDb = daa_a * d + aa * dda, daa_b * d + aa * ddb
            big_d = np.where(np.abs(big_d) < _TINY, _TINY, big_d)
            big_c = 1.0 + aa / c
            dCa = daa_a / c - aa * dca / c / c
            dCb = daa_b / c - aa * dcb / c / c
            big_c = np.where(np.abs(big_c) < _TINY, _TINY, big_c)
            d = 1.0 / big_d
            dda, ddb = -dDa * d * d, -dDb * d * d
            c, dca, dcb = big_c, dCa, dCb
            delta = d * c
            dela, delb = dda * c + d * dca, ddb * c + d * dcb
            dha, dhb = dha * delta + h * dela, dhb * delta + h * delb
            h = h * delta
        new = (d, dda, ddb, c, dca, dcb, h, dha, dhb)
        d, dda, ddb, c, dca, dcb, h, dha, dhb = [_freeze(active, n, o) for n, o in zip(new, state)]
        active &= ~((np.abs(delta - 1.0) <= _EPS) & (np.abs(dela * h) <= _EPS * np.abs(dha) + _TINY)
                    & (np.abs(delb * h) <= _EPS * np.abs(dhb) + _TINY))
        m += 1
    return h, dha, dhb


def beta_dx_twin(which, a, b, x):
    """Vectorized numpy version of `beta_dx_scalar`."""
    with np.errstate(all="ignore"):  # lanes of the branch not taken may overflow; masked out
        return _beta_dx_twin(which, a, b, x)


def _beta_dx_twin(which, a, b, x):
    a, b, x = np.broadcast_arrays(*[np.asarray(v, float) for v in (a, b, x)])
    inside = (x > 0) & (x < 1)
    xs = np.where(inside, x, 0.5)
    psab = digamma_twin(a + b)
    ga = np.log(xs) - digamma_twin(a) + psab
    gb = np.log1p(-xs) - digamma_twin(b) + psab
    w = xs * (1.0 - xs)
    direct = xs < (a + 1.0) / (a + b + 2.0)
    h, dha, dhb = _betacf_twin(a, b, xs, direct & inside)
    h2, dhb2, dha2 = _betacf_twin(b, a, 1.0 - xs, ~direct & inside)
    dIa = np.where(direct, w * (ga * h / a + dha / a - h / (a * a)), -w * (ga * h2 / b + dha2 / b))
    dIb = np.where(direct, w * (gb * h / a + dhb / a),
                   -w * (gb * h2 / b + dhb2 / b - h2 / (b * b)))
    return np.where(inside, -(dIa if which == 0 else dIb), 0.0)
