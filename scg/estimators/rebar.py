"""REBAR: the score function with the concrete relaxation as control variate (Tucker, Mnih,
Maddison, Lawson and Sohl-Dickstein 2017), for Bernoulli and OneHotCategorical sites (the
categorical one with Gumbel noise and its conditional, described at `_draw_categorical`).

With logistic noise, z = a + log u - log(1 - u) (a the logits) and b = 1[z > 0] is the
site's draw; given b, the noise is uniform on the part of (0, 1) that gives b, so a
second uniform v gives z~ ~ p(z | b) along a path in a as well. With the relaxation
s(z) = sigmoid(z / T), the estimate is

    (f(b) - eta f(s(z~))) d log p(b) / da + eta d f(s(z)) / da - eta d f(s(z~)) / da,

unbiased for d E[f(b)] / da at any temperature T and scale eta (the last two terms are the
correction that makes the control variate's mean zero), with three evaluations of the
model downstream per draw: at b, at s(z) and at s(z~), the relaxed values of all the
site's elements at once.
"""

import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .terms import linear_term, traced_logits

_TINY = np.finfo(float).tiny


class REBAR(Estimator):
    """REBAR for Bernoulli and OneHotCategorical sites: unbiased at any temperature and
    scale.

    Args:
        temperature: T > 0 of the relaxation sigmoid(z / T).
        scale: eta, the weight of the control variate.
        learn: tune T and eta during training (not available yet: pass learn=False).

    Example:
        >>> scg.sample("b", scg.Bernoulli(logits=a),
        ...            estimator=scg.REBAR(temperature=0.5, scale=1.0, learn=False))
    """

    name = "rebar"
    differentiable = True  # (the relaxed copies carry derivatives along their paths)

    def __init__(self, temperature=0.5, scale=1.0, learn=False):
        for label, value, positive in (("temperature", temperature, True),
                                       ("scale", scale, False)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
                    not np.isfinite(value) or (positive and value <= 0):
                raise ValueError(f"REBAR: {label} must be a {'positive ' if positive else ''}"
                                 f"finite number, got {value!r}")
        if not isinstance(learn, (bool, np.bool_)):
            raise TypeError(f"REBAR: learn must be True or False, got {learn!r}")
        if learn:
            raise NotImplementedError(
                "REBAR(learn=True), tuning the temperature and scale by the gradient of the "
                "estimator's variance, is not available yet; pass learn=False (unbiased at "
                "any fixed temperature and scale)")
        self.temperature = float(temperature)
        self.scale = float(scale)
        self.learn = False

    def check(self, name, dist):
        family = type(family_of(dist)).__name__
        if family not in ("Bernoulli", "OneHotCategorical"):
            raise EstimatorError(
                f"site {name!r}: scg.REBAR() serves Bernoulli and OneHotCategorical sites, not "
                f"{family}; use scg.Score('loo'), scg.DisARM() or scg.Enumerate()")
        if family == "OneHotCategorical" and family_of(dist).params.get("logits") is None:
            raise EstimatorError(
                f"site {name!r}: scg.REBAR() for OneHotCategorical needs logits= (its Gumbel "
                "noise and the conditional noise are paths in the log-probabilities); give "
                "logits=np.log(probs), or use scg.Score('loo') with probs=")

    def copies(self, name, dist, plates):
        return 3

    def draw(self, d):
        u = np.clip(effects.asarray(d.uniform()), _TINY, 1.0 - np.finfo(float).epsneg)
        v = np.clip(effects.asarray(d.draws(lambda dist, rng, shape: rng.random(
            dist._extended_shape(shape)))), _TINY, 1.0 - np.finfo(float).epsneg)
        if type(family_of(d.dist)).__name__ == "OneHotCategorical":
            return self._draw_categorical(d, u, v)
        logits = _logits(family_of(d.dist))
        p = R.sigmoid(logits)
        p_plain = effects.asarray(p, dtype=float)
        b = (u > 1.0 - p_plain).astype(float)  # (z > 0)
        d.aux["b"], d.aux["p"] = b, p_plain
        T = self.temperature
        z = R.add(logits, d.per_draw(np.log(u) - np.log1p(-u)))
        # z~ ~ p(z | b): u~ uniform on (1 - p, 1) for b = 1, on (0, 1 - p) for b = 0,
        # along a path in the logits through p
        one_minus_p = R.subtract(1.0, p)
        u_tilde = R.add(R.multiply(d.per_draw(b), R.add(one_minus_p, R.multiply(d.per_draw(v), p))),
                        R.multiply(d.per_draw(1.0 - b), R.multiply(d.per_draw(v), one_minus_p)))
        z_tilde = R.add(logits, R.subtract(R.log(u_tilde), R.log1p(R.negative(u_tilde))))
        copy = d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1))
        return R.add(d.per_draw(np.where(copy == 0, b, 0.0)),
                     R.add(R.multiply(d.per_draw((copy == 1).astype(float)),
                                      R.sigmoid(R.divide(z, T))),
                           R.multiply(d.per_draw((copy == 2).astype(float)),
                                      R.sigmoid(R.divide(z_tilde, T)))))

    def _draw_categorical(self, d, u, v):
        """Gumbel noise: z = theta + G (theta the log-probabilities), b the one-hot argmax;
        given b = k, z~_k = -log(-log v_k) and z~_i = -log(-log(v_i) e^(-theta_i) - log v_k)
        for the others (Gumbels truncated below z~_k), along paths in theta; the
        relaxation softmax(z / T)."""
        theta = _log_probs(family_of(d.dist))
        theta_plain = effects.asarray(theta, dtype=float)
        gumbel = -np.log(-np.log(u))
        b = effects.opaque(_one_hot_argmax, theta_plain + gumbel)
        d.aux["b"], d.aux["p"] = b, np.exp(theta_plain)
        T = self.temperature
        z = R.add(theta, d.per_draw(gumbel))
        minus_log_v = -np.log(v)
        top = np.sum(b * minus_log_v, axis=-1, keepdims=True)  # (-log v_k, per element)
        others = R.negative(R.log(R.add(R.multiply(d.per_draw(minus_log_v),
                                                   R.exp(R.negative(theta))),
                                        d.per_draw(np.broadcast_to(top, v.shape)))))
        z_tilde = R.add(d.per_draw(b * -np.log(np.broadcast_to(top, v.shape))),
                        R.multiply(d.per_draw(1.0 - b), others))
        copy = d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1))
        return R.add(d.per_draw(np.where(copy == 0, b, 0.0)),
                     R.add(R.multiply(d.per_draw((copy == 1).astype(float)),
                                      R.softmax(R.divide(z, T), axis=-1)),
                           R.multiply(d.per_draw((copy == 2).astype(float)),
                                      R.softmax(R.divide(z_tilde, T), axis=-1))))

    def weight(self, site, ctx):
        # the costs at s(z) and s(z~) enter with +eta and -eta: their derivatives are the
        # correction; their values are taken out again by the term
        index = ctx.trace.copies.index(site.name)
        return np.where(index == 0, 1.0, np.where(index == 1, self.scale, -self.scale))

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        others = [k for k in ctx.trace.copies.names if k != site.name]
        if others:
            raise EstimatorError(
                f"site {site.name!r}: scg.REBAR() with other sites that copy the run "
                f"({', '.join(map(repr, others))}) is not supported yet; use one REBAR site "
                "(a vector of coins) or another estimator for the others")
        q = ctx.q(site)
        f_b, f_z, f_zt = ctx.own(site, q)
        eta = self.scale
        advantage = f_b - eta * f_zt
        g = np.stack([advantage, np.zeros_like(advantage), np.zeros_like(advantage)],
                     axis=ctx.own_axis(site))
        spread = ctx.to_batch(ctx.spread(g, site), site)  # (rows, *batch), 0 off copy 0
        categorical = type(family_of(site.dist)).__name__ == "OneHotCategorical"
        if categorical:  # (d log p(b) / d theta = b - p over the categories)
            spread = spread[..., None]
        # (the logits: a OneHotCategorical site has them, see check; a Bernoulli's may come
        # from its probs)
        theta = traced_logits(site, ctx)
        score = linear_term(theta, spread * (site.aux["b"] - site.aux["p"]), 1.0 / ctx.n)
        # (the values eta f(s(z)) - eta f(s(z~)) that the weights put in the objective)
        return R.add(score, effects.opaque(_taken_out, f_z, f_zt, eta, ctx.n))

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def evaluations(self, site):
        return 3

    def describe(self, site):
        return (f"REBAR at temperature {self.temperature:g}, scale {self.scale:g}: the score "
                "function with the relaxation at z~ ~ p(z | b) as control variate, and its "
                "pathwise correction")

    def cost_factor(self, site):
        return (f"1 at b; +{self.scale:g} at s(z) and -{self.scale:g} at s(z~) for their "
                "derivatives (their values are taken out by the term)")

    def explain_terms(self, site, trace):
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        return [f"(f(b) - eta f(s(z~))) dlog p({site.name}) + eta df(s(z)) - eta df(s(z~)), "
                f"f = {down}, s(z) = sigmoid(z / {self.temperature:g}), "
                f"eta = {self.scale:g}"]

    def __repr__(self):
        return f"REBAR(temperature={self.temperature!r}, scale={self.scale!r}, learn=False)"


def _taken_out(f_z, f_zt, eta, n):
    """-eta (f(s(z)) - f(s(z~))) summed over the draws, / n: a plain number."""
    return -eta * np.sum(f_z - f_zt) / n


def _one_hot_argmax(z):
    return (z == np.max(z, axis=-1, keepdims=True)).astype(float)


def _log_probs(family):
    return R.log_softmax(family.params["logits"], axis=-1)


def _logits(family):
    params = family.params
    if params.get("logits") is not None:
        return params["logits"]
    p = params["probs"]
    return R.subtract(R.log(p), R.log1p(R.negative(p)))

