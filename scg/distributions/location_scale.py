"""The base of the (loc, scale) families: Normal, Laplace, Gumbel and LogNormal.

A draw is loc + scale * eps with the family's standard noise eps (LogNormal takes its
exponential); the path is one fused kernel, its derivatives are 1 and eps, written out.
"""

import numpy as np

from ..core import effects
from ..core.lowering import INLINE
from ..core.tape import Tracer, defvjp, strip
from ..kernels import continuous as K
from ..kernels import fused as F
from ..kernels import parallel as P
from ..kernels.primitives import kernel_primitives, run_flat
from ..numpy import rules as R
from . import constraints
from ._util import plain
from .base import Distribution, broadcast_shape

loc_scale_path, loc_scale_dpath = kernel_primitives(
    "loc_scale_path", K.loc_scale_path, K.loc_scale_path_twin, 3, flat=P.loc_scale_path_flat)
_kernel_path = loc_scale_path.fn


def _path(eps, loc, scale):
    # the draws of large noise with single-valued loc and scale: the flat kernel, its
    # output a reused buffer (fused.empty); else the kernel primitive's own call
    if type(eps) is np.ndarray and eps.size >= F.PARALLEL_MIN:
        out = F.loc_scale_path(0, eps, loc, scale)
        if out is not None:
            return out
    return _kernel_path(eps, loc, scale)


loc_scale_path.fn = _path
INLINE[_path] = INLINE[_kernel_path]  # (scg.jit: small noise replays the kernel's call)


def _scale_vjp(g, ans, eps, loc, scale):
    # g * eps; for a large per-draw g the flat kernel (which=3: the derivative eps) splits
    # the product over the cores. Noise the tape did not keep (F.DrawnAgain, a site's
    # large pathwise Normal draw) is drawn again: in the same pass as the product when g
    # is a plain per-draw array, else as an array first.
    if type(eps) is F.DrawnAgain:
        d = F.DrawnAgain.times(eps, g) if not isinstance(g, Tracer) else None
        if d is not None:
            return R.unbroadcast(d, R.shape(scale))
        eps = eps.values()
    d = F.loc_scale_path(3, eps, loc, scale, g) if type(eps) is np.ndarray and \
        eps.size >= F.PARALLEL_MIN else None
    if d is None:
        d = run_flat(K.loc_scale_path, 3, (eps, loc, scale), g)
    return R.unbroadcast(R.multiply(g, eps) if d is None else d, R.shape(scale))


defvjp(loc_scale_path,
       lambda g, ans, eps, loc, scale: R.unbroadcast(R.multiply(g, scale), R.shape(eps)),
       lambda g, ans, eps, loc, scale: R.unbroadcast(g, R.shape(loc)),
       _scale_vjp)


class LocationScale(Distribution):
    """A family of draws loc + scale * eps; subclasses give `noise` and `log_prob`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = loc, scale
        super().__init__({"loc": loc, "scale": scale}, broadcast_shape(loc, scale),
                         validate_args=validate_args)

    def path(self, noise):
        return loc_scale_path(noise, self.loc, self.scale)

    def score_caveat(self):
        """None, or why a score-function estimate at these parameters would be wrong: where
        the scale is below 2^-40 |loc| (about 2^12 spacings of floats at loc), the draws
        loc + scale * eps round to values near loc a sizable part of scale apart, and the
        score, a function of (x - loc) / scale, loses the noise (at scale 1e-17 beside loc
        2 every draw is loc itself)."""
        floor = effects.floor()
        loc, scale = strip(self.loc, floor), strip(self.scale, floor)
        margin = R.subtract(scale, R.multiply(2.0 ** -40, R.abs_(loc)))
        if effects.check(_all_nonnegative, margin, "a scale not lost in loc's rounding") or \
                not effects.check(_all_positive, scale, "a positive scale"):
            return None  # (a scale of 0 or below: the parameter checks say so)
        loc, scale = np.broadcast_arrays(np.abs(plain(loc)), plain(scale))
        k = np.argmin(scale - 2.0 ** -40 * loc)  # (the element furthest inside)
        loc, scale = float(loc.ravel()[k]), float(scale.ravel()[k])
        return (f"{type(self).__name__} at scale {scale:.3g} beside loc {loc:.3g}: the "
                f"draws loc + scale * eps round to values {np.spacing(loc):.2g} apart "
                "near loc (the spacing of floats there), so the score, a function of "
                "(x - loc) / scale, loses the noise and the estimate is wrong")


def _all_nonnegative(x):
    # (checked on every call, replays included: one number compared as a float)
    x = np.asarray(x)
    return float(x) >= 0.0 if x.ndim == 0 else bool((x >= 0.0).all())


def _all_positive(x):
    x = np.asarray(x)
    return float(x) > 0.0 if x.ndim == 0 else bool((x > 0.0).all())

