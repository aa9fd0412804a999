"""Normal(loc, scale): location-scale, reparameterized as loc + scale * eps."""

import math

import numpy as np

from ..core.tape import Box, Primitive, Tracer, defvjp, strip, unkept
from ..kernels import continuous as K
from ..kernels import fused as F
from ..kernels import parallel as P
from ..kernels.primitives import kernel_primitives
from ..kernels.special_primitives import erf, ndtri
from ..numpy import rules as R
from ._util import full
from .location_scale import LocationScale, loc_scale_path
from . import weak

normal_log_prob, normal_dlogp = kernel_primitives(
    "normal_log_prob", K.normal_density, K.normal_density_twin, 3, flat=P.normal_density_flat)


# ---------------------------------------------------------------- the fused score term
# linear_term(normal_log_prob(x, loc, scale), k * w - t, c) without the log-density's
# values: 0 in value; its cotangent in loc and in scale is c * (k * w - t) times the score
# (w, k, t, c plain: the costs q and the leave-one-out constants, or the advantage, 1, 0).
# For large draws with single-valued loc and scale both cotangents come from one pass
# (`fused.normal_score_pair`); the rule of loc computes the one of scale too and leaves it
# in `stash` for the rule of scale, called next with the same cotangent.
def _score_term_value(x, loc, scale, w, k, t, c, stash):
    return 0.0


normal_score_term = Primitive(
    "normal_score_term", _score_term_value,
    doc="0 in value; its derivative in (x, loc, scale) is c * (k * w - t) times the "
        "derivative of normal_log_prob(x, loc, scale): the score term without the "
        "log-density's values.")


def _score_term_rule(i):
    def rule(g, ans, x, loc, scale, w, k, t, c, stash):
        args = (x, loc, scale)
        plain = not isinstance(g, Tracer) and not any(isinstance(a, Tracer) for a in args)
        if plain and i:
            kept = stash.pop(i, None)
            if kept is not None and kept[0] is g:
                return R.unbroadcast(kept[1], R.shape(args[i]))
            both = i == 1 and 2 in stash["want"]
            pair = F.normal_score_pair(w, x, loc, scale, k, t, R.multiply(g, c),
                                       want_loc=i == 1, want_scale=i == 2 or both)
            if pair is not None:
                if both:
                    stash[2] = (g, pair[1])
                return R.unbroadcast(pair[i - 1], R.shape(args[i]))
        weight = w if k == 1.0 and t == 0.0 else w * k - t
        cc = R.multiply(g, c)  # (then as linear_term's rule and normal_log_prob's)
        cotangent = weight if type(cc) in (float, np.float64) and cc == 1.0 else \
            R.multiply(cc, weight)
        return normal_log_prob.vjps[i](cotangent, None, x, loc, scale)
    return rule


defvjp(normal_score_term, *[_score_term_rule(i) for i in range(3)])


class Normal(LocationScale):
    """The normal distribution with mean `loc` and standard deviation `scale`.

    Args:
        loc: mean (array-like, possibly traced).
        scale: standard deviation, > 0.

    Example:
        >>> scg.Normal(0.0, 1.0).log_prob(0.0)   # -0.9189...
    """

    def noise(self, rng, shape=()):
        shape = self._extended_shape(shape)
        if math.prod(shape) >= F.PARALLEL_MIN:
            out = F.standard_normal(rng, shape)  # (numpy's numbers, drawn by numba)
            if out is not None:
                return out
        return rng.standard_normal(shape)

    def path(self, noise):
        if type(noise) is np.ndarray and noise.size >= F.PARALLEL_MIN:
            # plain draws (a score-function site's) with single-valued loc and scale: one
            # pass that also counts the non-finite log-densities for the score term
            out = F.normal_draw(noise, self.loc, self.scale)
            if out is not None:
                return out
        return super().path(noise)

    def fresh_path(self, noise, path, rng):
        """For a large draw whose noise numba draws from PCG64, the tape keeps where the
        noise was drawn instead of the noise (`fused.DrawnAgain`): the scale's derivative
        draws it again, and the noise's memory serves the gradients (one array of n fewer
        at the peak)."""
        if not F.numba_draws(rng):
            return path(noise())
        with F.positions_of_draws() as taken:
            eps = noise()
        x = path(eps)
        if len(taken) == 1 and type(eps) is np.ndarray and taken[0][1] == eps.shape and \
                type(taken[0][0]) is bytes and eps.size >= F.REUSE_MIN:
            box = getattr(x, "value", None)  # (the per-draw value's traced array)
            if type(box) is Box and box.prim is loc_scale_path and box.args[0] is eps and \
                    type(box.value) is np.ndarray:
                box.args = (F.DrawnAgain(taken[0][0], eps.shape),) + tuple(box.args[1:])
                unkept(eps)
        return x

    def antithetic_noise(self, noise):
        """The mirror image of symmetric noise: -eps."""
        return np.negative(noise)

    def weak_derivative(self, param):
        """In loc (Rayleigh pair) or scale (double-sided Maxwell): scg.distributions.weak."""
        return {"loc": weak.normal_loc(), "scale": weak.normal_scale()}.get(param)

    def log_prob(self, value):
        return normal_log_prob(value, self.loc, self.scale)

    # ------------------------------------------------------------ the fused score term
    def log_prob_nonfinite(self, value, params):
        """How many log-densities at the draws `value` (physical, plain) are not finite,
        counted in one pass without storing them; `params` the physical parameters. None
        when that pass does not apply (few draws, parameters that differ between draws)."""
        return F.normal_log_prob_nonfinite(value, strip(params["loc"]), strip(params["scale"]))

    def score_term(self, value, params, weight, factor, k=1.0, t=0.0):
        """The score-function term `linear_term(log_prob(value), k * weight - t, factor)`
        at the draws `value` (physical, plain) with the physical parameters `params`
        (traced), without computing the log-densities: 0 in value, the same cotangents."""
        loc, scale = params["loc"], params["scale"]
        stash = {"want": tuple(i for i, p in ((1, loc), (2, scale)) if isinstance(p, Box))}
        return normal_score_term(value, loc, scale, weight, float(k), float(t), factor, stash)

    def entropy(self):
        return full(0.5 * np.log(2.0 * np.pi * np.e) + np.log(self.scale), self.batch_shape)

    def cdf(self, value):
        return 0.5 * (1.0 + erf((value - self.loc) / (self.scale * np.sqrt(2.0))))

    def icdf(self, u):
        return self.loc + self.scale * ndtri(u)

    @property
    def mean(self):
        return np.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return np.broadcast_to(self.scale ** 2, self.batch_shape)
