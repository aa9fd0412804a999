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
from ..core.tape import strip
from ..distributions.base import family_name, family_of
from ..distributions.one_hot_categorical import OneHotCategorical
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .learned import Learned
from .terms import RELAXED, linear_term, require_open_probs, traced_logits

_TINY = np.finfo(float).tiny




class REBAR(Learned, Estimator):
    """REBAR for Bernoulli and OneHotCategorical sites: unbiased at any temperature and
    scale.

    Args:
        temperature: T > 0 of the relaxation sigmoid(z / T).
        scale: eta, the weight of the control variate.
        learn: tune T and eta after each gradient call, by one Adam step down an unbiased
            estimate of the gradient of the estimate's variance (see estimators/learned.py);
            the tuned values live in the expectation, and explain() shows them.
        lr: the step size of that tuning.

    Example:
        >>> scg.sample("b", scg.Bernoulli(logits=a), estimator=scg.REBAR(temperature=0.5))
    """

    name = "rebar"
    differentiable = True  # (the relaxed copies carry derivatives along their paths)

    def __init__(self, temperature=0.5, scale=1.0, learn=True, lr=0.01):
        for label, value, positive in (("temperature", temperature, True),
                                       ("scale", scale, False), ("lr", lr, True)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
                    not np.isfinite(value) or (positive and value <= 0):
                raise ValueError(f"REBAR: {label} must be a {'positive ' if positive else ''}"
                                 f"finite number, got {value!r}")
        if not isinstance(learn, (bool, np.bool_)):
            raise TypeError(f"REBAR: learn must be True or False, got {learn!r}")
        self.temperature = float(temperature)
        self.scale = float(scale)
        self.learn = self.tunes = bool(learn)
        self.lr = float(lr)

    def initial_params(self, dist=None, plates=()):
        # (the same for every site; the temperature in log space: it stays positive along
        # the descent)
        return {"log_temperature": np.log(self.temperature), "scale": self.scale}

    def shown(self, params):
        return {"temperature": np.exp(params["log_temperature"]), "scale": params["scale"]}

    def check(self, name, dist):
        family = family_name(dist)
        who = f"scg.{type(self).__name__}()"
        if family not in ("Bernoulli", "OneHotCategorical"):
            instead = ("sample the category as scg.OneHotCategorical (a one-hot vector), or use "
                       "scg.Score('loo'), scg.UnorderedSet(k) or scg.Enumerate()"
                       if family == "Categorical" else "use scg.Score('loo') or scg.MeasureValued()")
            raise EstimatorError(
                f"site {name!r}: {who} serves Bernoulli and OneHotCategorical sites, not "
                f"{family}; {instead}")
        if family == "OneHotCategorical" and family_of(dist).params.get("logits") is None:
            raise EstimatorError(
                f"site {name!r}: {who} for OneHotCategorical needs logits= (its Gumbel "
                "noise and the conditional noise are paths in the log-probabilities); give "
                "logits=np.log(probs), or use scg.Score('loo') with probs=")
        require_open_probs(name, dist, who)

    def copies(self, name, dist, plates):
        return 3

    def draw(self, d):
        u = np.clip(effects.asarray(d.uniform()), _TINY, 1.0 - np.finfo(float).epsneg)
        v = np.clip(effects.asarray(d.draws(lambda dist, rng, shape: rng.random(
            dist._extended_shape(shape)))), _TINY, 1.0 - np.finfo(float).epsneg)
        # (tuned: read from the site's state; a probe's: traced; else the initial ones)
        params = d.aux["params"] = self.params(d)
        if self.tunes or self._probe_params is not None:
            d.aux["T"], d.aux["eta"] = R.exp(params["log_temperature"]), params["scale"]
        else:  # (as given: exp(log T) would round)
            d.aux["T"], d.aux["eta"] = self.temperature, self.scale
        if isinstance(family_of(d.dist), OneHotCategorical):
            return self._draw_categorical(d, u, v)
        logits = _logits(family_of(d.dist))
        p = R.sigmoid(logits)
        p_plain = effects.asarray(p, dtype=float)
        b = (u > 1.0 - p_plain).astype(float)  # (z > 0)
        d.aux["b"], d.aux["p"] = b, p_plain
        T = d.aux["T"]
        z = R.add(logits, d.per_draw(np.log(u) - np.log1p(-u)))
        # z~ ~ p(z | b): u~ uniform on (1 - p, 1) for b = 1, on (0, 1 - p) for b = 0,
        # along a path in the logits through p
        one_minus_p = R.subtract(1.0, p)
        u_tilde = R.add(R.multiply(d.per_draw(b), R.add(one_minus_p, R.multiply(d.per_draw(v), p))),
                        R.multiply(d.per_draw(1.0 - b), R.multiply(d.per_draw(v), one_minus_p)))
        z_tilde = R.add(logits, R.subtract(R.log(u_tilde), R.log1p(R.negative(u_tilde))))
        return self._assemble(d, u, b, R.sigmoid(R.divide(z, T)),
                              R.sigmoid(R.divide(z_tilde, T)))

    @staticmethod
    def _assemble(d, u, b, relaxed, relaxed_tilde):
        """Copy 0 of the rows holds b, copy 1 the relaxation s(z), copy 2 s(z~)."""
        d.aux["relaxed"] = (relaxed, relaxed_tilde)  # (for a learned control, relax.py)
        d.aux["law"] = RELAXED  # (a log_prob at the copies takes its continuous form)
        copy = d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1))
        return R.add(d.per_draw(np.where(copy == 0, b, 0.0)),
                     R.add(R.multiply(d.per_draw((copy == 1).astype(float)), relaxed),
                           R.multiply(d.per_draw((copy == 2).astype(float)), relaxed_tilde)))

    def _draw_categorical(self, d, u, v):
        """Gumbel noise: z = theta + G (theta the log-probabilities), b the one-hot argmax;
        given b = k, z~_k = -log(-log v_k) and z~_i = -log(-log(v_i) e^(-theta_i) - log v_k)
        for the others (Gumbels truncated below z~_k), along paths in theta; the
        relaxation softmax(z / T)."""
        theta = R.log_softmax(family_of(d.dist).params["logits"], axis=-1)
        theta_plain = effects.asarray(theta, dtype=float)
        gumbel = -np.log(-np.log(u))
        b = effects.opaque(_one_hot_argmax, theta_plain + gumbel)
        d.aux["b"], d.aux["p"] = b, np.exp(theta_plain)
        T = d.aux["T"]
        z = R.add(theta, d.per_draw(gumbel))
        minus_log_v = -np.log(v)
        top = np.sum(b * minus_log_v, axis=-1, keepdims=True)  # (-log v_k, per element)
        others = R.negative(R.log(R.add(R.multiply(d.per_draw(minus_log_v),
                                                   R.exp(R.negative(theta))),
                                        d.per_draw(np.broadcast_to(top, v.shape)))))
        z_tilde = R.add(d.per_draw(b * -np.log(np.broadcast_to(top, v.shape))),
                        R.multiply(d.per_draw(1.0 - b), others))
        return self._assemble(d, u, b, R.softmax(R.divide(z, T), axis=-1),
                              R.softmax(R.divide(z_tilde, T), axis=-1))

    def weight(self, site, ctx):
        # the costs at s(z) and s(z~) enter with +eta and -eta: their derivatives are the
        # correction; their values are taken out again by the term
        index = ctx.trace.copies.index(site.name)
        return R.add((index == 0).astype(float),
                     R.multiply(site.aux["eta"], (index == 1).astype(float) - (index == 2)))

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
        eta = site.aux["eta"]
        control = self._control_at_tilde(site, ctx)
        if control is not None:  # (RELAX: the learned part of the control variate too)
            f_b = effects.opaque(np.subtract, f_b, control)
        g = effects.opaque(_advantage_rows, f_b, f_zt, eta, ctx.own_axis(site))
        spread = ctx.to_batch(ctx.spread(g, site), site)  # (rows, *batch), 0 off copy 0
        categorical = isinstance(family_of(site.dist), OneHotCategorical)
        if categorical:  # (d log p(b) / d theta = b - p over the categories)
            spread = spread[..., None]
        # (the logits: a OneHotCategorical site has them, see check; a Bernoulli's may come
        # from its probs)
        theta = traced_logits(site, ctx)
        score = linear_term(theta, spread * (site.aux["b"] - site.aux["p"]), 1.0 / ctx.n)
        # (the values eta f(s(z)) - eta f(s(z~)) that the weights put in the objective)
        out = R.add(score, effects.opaque(_taken_out, f_z, f_zt, eta, ctx.n))
        extra = self._control_correction(site, ctx)
        return out if extra is None else R.add(out, extra)

    def _control_at_tilde(self, site, ctx):
        """A learned control's plain value at s(z~), on q's grid (n, *plates), or None."""
        return None

    def _control_correction(self, site, ctx):
        """A learned control's zero-valued term d[c(s(z)) - c(s(z~))] / n, or None."""
        return None

    def _probe_control(self, site, n):
        """For a probe: the learned control at s(z) and s(z~) for the n draws, traced, on
        the site's batch layout (n, *batch), or None."""
        return None

    def probe_objective(self, site, ctx):
        """For a probe: a number whose derivative in the differentiated arguments is the
        estimate, traced in the temperature and scale (see estimators/learned.py):

            sum_i [(f(b) - eta f(s(z~))) (b - p) . a + f(b) + eta (f(s(z)) - f(s(z~)))] / n

        with the weight of a (the logits) constant in the arguments; f(b)'s own derivative
        (a cost that depends on the parameters besides the draw, as an ELBO's log q) and
        the relaxed costs' derivatives along every path are part of it."""
        n, eta = ctx.n, site.aux["eta"]
        outer = self._probe_outer
        f = ctx.downstream(site)  # (rows, *batch), traced in the arguments and the tuning
        f_b, f_z, f_zt = f[:n], f[n:2 * n], f[2 * n:]
        relaxed = R.multiply(eta, R.subtract(R.sum_(f_z), R.sum_(f_zt)))
        weighed = f_b
        control = self._probe_control(site, n)
        if control is not None:
            c_z, c_zt = control
            relaxed = R.add(relaxed, R.subtract(R.sum_(c_z), R.sum_(c_zt)))
            weighed = R.subtract(f_b, c_zt)
        # (the score's weight, constant in the arguments: their tracers stripped)
        advantage = R.subtract(strip(weighed, outer), R.multiply(eta, strip(f_zt, outer)))
        if isinstance(family_of(site.dist), OneHotCategorical):
            advantage = R.expand_dims(advantage, -1)
        weight = R.multiply(advantage, (site.aux["b"] - site.aux["p"])[:n])
        score = R.sum_(R.multiply(traced_logits(site, ctx)[:n], weight))
        return R.divide(R.add(score, R.add(R.sum_(f_b), relaxed)), n)

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def evaluations(self, site):
        return 3

    def describe(self, site):
        T, eta = _shown(site.aux["T"]), _shown(site.aux["eta"])
        return (f"REBAR at temperature {T}, scale {eta}: the score function with the "
                "relaxation at z~ ~ p(z | b) as control variate, and its pathwise correction")

    def cost_factor(self, site):
        eta = _shown(site.aux["eta"])
        return (f"1 at b; +{eta} at s(z) and -{eta} at s(z~) for their derivatives (their "
                "values are taken out by the term)")

    def explain_terms(self, site, trace):
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        states = trace.states
        tuning = self.describe_tuning(
            states[site.name].estimator if states is not None and site.name in states else {})
        return [f"(f(b) - eta f(s(z~))) dlog p({site.name}) + eta df(s(z)) - eta df(s(z~)), "
                f"f = {down}, s(z) = sigmoid(z / {_shown(site.aux['T'])}), "
                f"eta = {_shown(site.aux['eta'])}{tuning}"]

    def __repr__(self):
        extra = "" if self.lr == 0.01 else f", lr={self.lr!r}"
        return (f"REBAR(temperature={self.temperature!r}, scale={self.scale!r}, "
                f"learn={self.learn!r}{extra})")


def _shown(x):
    try:
        return f"{float(strip(x)):.4g}"
    except TypeError:  # (a value held by a handler)
        return "(tuned)"


def _advantage_rows(f_b, f_zt, eta, axis):
    """The score's weight f(b) - eta f(s(z~)) on copy 0, zero on the relaxed copies."""
    advantage = f_b - eta * f_zt
    zeros = np.zeros_like(advantage)
    return np.stack([advantage, zeros, zeros], axis=axis)


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

