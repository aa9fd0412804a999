"""check_grads: reverse-mode derivatives against central finite differences, to any order.

Importable by every test (``from tests.core.gradcheck import check_grads`` when the
repository root is on sys.path, as with ``python -m pytest``). The check is
directional, as in HIPS/autograd: for a random input direction u and a random output
weighting v, the reverse-mode directional derivative  <grad <v, f>(x), u>  must match
(<v, f(x + eps u)> - <v, f(x - eps u)>) / (2 eps). For order 2 the same check is applied to
the function x -> <grad <v, f>(x), u>, which is itself computed by scg (a gradient of a
gradient), and so on.
"""

import numpy as np

import scg

EPS = 1e-6


def _as_args(args):
    return tuple(np.asarray(a, dtype=np.float64) for a in args)


def _vdot(a, b):
    """Sum of the elementwise product, for plain or traced a and constant b."""
    return np.sum(a * b)


def check_grads(f, args, order=2, *, eps=EPS, rtol=1e-5, atol=1e-6, seed=0):
    """Assert that scg's derivatives of f at args match finite differences up to `order`.

    Args:
        f: a function of float arrays returning an array (any shape) or a scalar.
        args: a sequence of arrays (or floats); all of them are differentiated.
        order: highest derivative order checked (1: gradients, 2: also second derivatives).
        eps, rtol, atol: finite-difference step and tolerances.
        seed: seeds the random directions.
    Returns:
        None; raises AssertionError with the order and the two values on mismatch.

    Example:
        >>> check_grads(np.sin, [np.array([0.1, 0.2])], order=2)
    """
    args = _as_args(args)
    rng = np.random.default_rng(seed)
    out = np.asarray(scg.stop_gradient(f(*args)), dtype=np.float64)
    v = rng.normal(size=out.shape)
    _check(lambda *xs: _vdot(f(*xs), v), args, order, eps, rtol, atol, rng, 1)


def _check(scalar_f, args, order, eps, rtol, atol, rng, current):
    if order < current:
        return
    us = [rng.normal(size=np.shape(a)) for a in args]
    argnums = tuple(range(len(args)))

    def directional(*xs):
        grads = scg.grad(scalar_f, argnums=argnums)(*xs)
        return sum(_vdot(g, u) for g, u in zip(grads, us))

    plus = [a + eps * u for a, u in zip(args, us)]
    minus = [a - eps * u for a, u in zip(args, us)]
    numeric = (float(np.asarray(scalar_f(*plus))) - float(np.asarray(scalar_f(*minus)))) / (2 * eps)
    analytic = float(np.asarray(directional(*args)))
    assert np.isfinite(analytic), f"order {current}: non-finite derivative {analytic}"
    assert abs(analytic - numeric) <= atol + rtol * abs(numeric), (
        f"order {current}: reverse mode gives {analytic!r}, "
        f"central differences give {numeric!r}")
    _check(directional, args, order, eps, rtol, atol, rng, current + 1)
