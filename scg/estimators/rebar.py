"""REBAR: the score function with the concrete relaxation as control variate (Tucker, Mnih,
Maddison, Lawson and Sohl-Dickstein 2017), for the sites whose family declares a concrete
relaxation (`relaxed(T)`: Bernoulli, OneHotCategorical; the relaxation gives the noise, the
rounding b and the conditional noise z~ | b, see scg/distributions/relaxed.py).

For a coin, with logistic noise, z = a + log u - log(1 - u) (a the logits) and b = 1[z > 0] is the
site's draw; given b, the noise is uniform on the part of (0, 1) that gives b, so a
second uniform v gives z~ ~ p(z | b) along a path in a as well. With the relaxation
s(z) = sigmoid(z / T), the estimate is

    (f(b) - eta f(s(z~))) d log p(b) / da + eta d f(s(z)) / da - eta d f(s(z~)) / da,

unbiased for d E[f(b)] / da at any temperature T and scale eta (the last two terms are the
correction that makes the control variate's mean zero), with three evaluations of the
model downstream per draw: at b, at s(z) and at s(z~), the relaxed values of all the
site's elements at once. A one-hot site takes Gumbel noise per category, b its argmax,
and s(z) = softmax(z / T).
"""

import numbers

import numpy as np

from ..core import effects
from ..core.tape import strip
from ..distributions.base import family_of
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .learned import Learned
from .terms import RELAXED, linear_term, require_open_probs, require_relaxation




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
        who = f"scg.{type(self).__name__}()"
        require_relaxation(name, dist, who)
        family = family_of(dist)
        probs = family.arg_constraints.get("probs")
        if family.params.get("logits") is None and probs is not None and probs.event_dim:
            # (a derivative in probs on a simplex leaves it, where the score b - p of the
            # relaxation's logits is not the family's)
            raise EstimatorError(
                f"site {name!r}: {who} for a family with probs on the simplex needs logits= "
                "(its noise and the conditional noise are paths in the log-probabilities); "
                "give logits=np.log(probs), or use scg.Score('loo') with probs=")
        require_open_probs(name, dist, who)

    def copies(self, name, dist, plates):
        return 3

    def draw(self, d):
        u = effects.asarray(d.uniform())
        v = effects.asarray(d.draws(lambda dist, rng, shape: rng.random(
            dist._extended_shape(shape))))
        # (tuned: read from the site's state; a probe's: traced; else the initial ones)
        params = d.aux["params"] = self.params(d)
        if self.tunes or self._probe_params is not None:
            d.aux["T"], d.aux["eta"] = R.exp(params["log_temperature"]), params["scale"]
        else:  # (as given: exp(log T) would round)
            d.aux["T"], d.aux["eta"] = self.temperature, self.scale
        T = d.aux["T"]
        # (the relaxation at temperature 1: the temperature may be traced, and divides here)
        relaxation = family_of(d.dist).relaxed(1.0)
        logits = relaxation.logits
        z = R.add(logits, d.per_draw(relaxation.noise_of(u)))
        relaxed = relaxation.soft(R.divide(z, T))
        # (b rounds the relaxed draw, as it rounds z at any temperature; d log p(b) /
        # d logits = b - p is the score's weight)
        b = relaxation.hard(effects.asarray(relaxed, dtype=float))
        d.aux["b"], d.aux["p"] = b, effects.asarray(relaxation.soft(logits), dtype=float)
        z_tilde = relaxation.conditional(b, v, d.per_draw)  # (z~ ~ p(z | b), a path in a)
        return self._assemble(d, u, b, relaxed, relaxation.soft(R.divide(z_tilde, T)))

    @staticmethod
    def _assemble(d, u, b, relaxed, relaxed_tilde):
        """Copy 0 of the rows holds b, copy 1 the relaxation s(z), copy 2 s(z~)."""
        d.aux["relaxed"] = (relaxed, relaxed_tilde)  # (for a learned control, relax.py)
        d.law = RELAXED  # (a log_prob at the copies takes its continuous form)
        copy = d.copies.index(d.name).reshape((-1,) + (1,) * (u.ndim - 1))
        return R.add(d.per_draw(np.where(copy == 0, b, 0.0)),
                     R.add(R.multiply(d.per_draw((copy == 1).astype(float)), relaxed),
                           R.multiply(d.per_draw((copy == 2).astype(float)), relaxed_tilde)))

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
        theta = _traced_logits(site, ctx)
        if len(R.shape(theta)) > len(R.shape(spread)):  # (an event axis: the categories)
            spread = spread[..., None]
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
        theta = _traced_logits(site, ctx)[:n]
        if len(R.shape(theta)) > len(R.shape(advantage)):  # (the categories)
            advantage = R.expand_dims(advantage, -1)
        weight = R.multiply(advantage, (site.aux["b"] - site.aux["p"])[:n])
        score = R.sum_(R.multiply(theta, weight))
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


def _traced_logits(site, ctx):
    """The logits of the site's relaxation, traced in the surrogate's parameters."""
    family = family_of(site.dist)
    traced = family._rebuild({k: ctx.param(site, k) for k in family.params})
    return traced.relaxed(1.0).logits
