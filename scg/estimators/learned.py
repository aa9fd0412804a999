"""Estimators that tune their own parameters: the part the estimator supplies.

REBAR's temperature and scale, and RELAX's control variate, are free: the estimate is
unbiased whatever they are, and its variance depends on them. Such an estimator
(`tunes = True`) keeps its parameters in the site's state in the expectation
(`SiteState.estimator`, like a moving-average baseline's) and, after each gradient call,
the stochastic layer (scg/stochastic/tuning.py) runs it once more as a probe: the
parameters are the roots of an outer trace level, and the differentiated arguments of the
call that the site's logits depend on (the parameters of the site's distribution, as an
encoder's weights) the roots of an inner one, copied once per draw. The probe gives each
draw's estimate g of the gradient with respect to those arguments, traced in the
parameters, with every path the call's gradient has (a cost that depends on them besides
the draw, as the log q of an ELBO, included). Since E[g] does not depend on the
parameters, the gradient of mean(|g|^2) is an unbiased estimate of the gradient of the
variance of the estimate an optimizer of the distribution's parameters sees (summed over
their elements); one Adam step descends it.

The estimator supplies `initial_params(dist, plates)` (a dict of floats or arrays, for the
site of that distribution in those plates: one estimator may serve sites of any shapes,
each with parameters of its own in its own state), `probe(params, level)` (a copy drawing
with the traced parameters, `level` theirs) and the probe's `probe_objective(site, ctx)`,
a number whose derivative in the arguments is the estimate; this module keeps the state.
"""

import numpy as np

from ..core import effects
from ..optim import Adam


class Learned:
    """Mixin of an estimator whose parameters are tuned between calls.

    Attributes:
        tunes: the parameters are tuned (`learn=True`).
        lr: the Adam step size of the tuning.
    """

    tunes = False
    lr = 0.01
    _probe_params = None  # (a probe's traced parameters)
    _probe_outer = None  # (their trace level)

    def initial_params(self, dist=None, plates=()):
        """The parameters before any tuning, {name: float or array}, for the site of
        distribution `dist` (plates applied) in `plates` (an estimator whose parameters'
        shapes depend on the site's reads them; `dist=None`: those that do not)."""
        raise NotImplementedError

    def params(self, d):
        """The parameters a draw uses, {name: value}: a probe's traced ones; the tuned ones
        in the site's state (read through the effect stack, so that a replay of scg.jit
        reads them again); or the initial ones when not tuning."""
        if self._probe_params is not None:
            return self._probe_params
        initial = self.initial_params(d.dist, d.run.plates)
        if not self.tunes:
            return initial
        state = d.state()
        return {k: effects.stateful(_read, effects.State(state), k, v)
                for k, v in initial.items()}

    def probe(self, params, level):
        """A copy of this estimator that draws with `params`, traced at trace level
        `level`."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._probe_params = params
        clone._probe_outer = level
        return clone

    def probe_objective(self, site, ctx):
        """For a probe: a number whose derivative in the call's differentiated arguments
        (each copied once per draw) is the estimate of their gradient, traced in the
        parameters."""
        raise NotImplementedError

    def describe_tuning(self, state):
        """explain()'s words on the tuning: the current values and the steps taken."""
        steps = int(state.get("optimizer", {}).get("t", 0))
        if not self.tunes:
            return ""
        if not steps:
            return "; tuned after each gradient call (no step yet)"
        words = ", ".join(f"{k} {_show(v)}" for k, v in self.shown(state["params"]).items())
        return (f"; tuned over {steps} call{'s' if steps > 1 else ''} to {words} "
                f"(last variance estimate {state['variance']:.4g})")

    def shown(self, params):
        """The tuned parameters as explain() names them."""
        return params


def _read(state, key, initial):
    params = state.get("params")
    if params is None:
        return _as_param(initial)
    value = params.get(key)
    if value is None or np.shape(value) != np.shape(initial):
        raise ValueError(
            f"the estimator's tuned parameter {key!r} kept in this site's state has shape "
            f"{None if value is None else np.shape(value)}, but the site now needs "
            f"{np.shape(initial)}: the site's shape changed between calls of the expectation "
            "(its tuned parameters are its own). Use a new expectation for the new shape, "
            "or clear the site's estimator state (E.states[name].estimator.clear())")
    return value


def _as_param(v):
    return np.float64(v) if np.ndim(v) == 0 else np.array(v, dtype=float)


def read(estimator, state, site):
    """(params, Adam's state) of `site` (a `Site`) as a run reads them: each leaf through
    the effect stack (a replay of scg.jit reads them again), the initial ones before any
    step."""
    initial = estimator.initial_params(site.dist, site.plates)
    params = {k: effects.stateful(_read, effects.State(state), k, v)
              for k, v in initial.items()}
    size = sum(int(np.size(v)) for v in initial.values())
    opt_state = {k: effects.stateful(_read_optimizer, effects.State(state), k, size)
                 for k in ("t", "m", "v")}
    return params, opt_state


def _read_optimizer(state, key, size):
    opt_state = state.get("optimizer")
    if opt_state is None:
        return np.int64(0) if key == "t" else np.zeros(size)
    return opt_state[key]


def updated(estimator, params, opt_state, grads):
    """One Adam step of `params` against `grads` (a dict like them; None for a parameter
    nothing depends on): (params, Adam's state), computed on whatever the values are
    (recorded under scg.jit)."""
    grads = {k: np.zeros(np.shape(params[k])) if grads.get(k) is None else grads[k]
             for k in params}
    return Adam(estimator.lr).update(grads, opt_state, params)


def store(state, keys, t, m, v, variance, *values):
    """Write a step's result into the site's state: the parameters named `keys` at
    `values`, Adam's t, m, v, the variance estimate (an `effects.after` update, its
    arguments arrays, so that a replay of scg.jit passes its own)."""
    state["params"] = {k: _as_param(x) for k, x in zip(keys, values)}
    state["optimizer"] = {"t": np.int64(t), "m": np.asarray(m), "v": np.asarray(v)}
    state["variance"] = float(variance)


def _show(v):
    return f"{float(v):.4g}" if np.ndim(v) == 0 else f"({np.size(v)} numbers)"
