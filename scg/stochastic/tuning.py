"""The tuning of self-tuning estimators at a gradient call (see estimators/learned.py).

For each site whose estimator tunes itself, one probe run of the model: the estimator's
parameters are roots of an outer trace level, the site's logits roots of an inner one;
the probe's per-draw estimate g of the gradient with respect to the logits is traced in
the parameters, and the gradient of mean(|g|^2) (an unbiased estimate of the gradient of
the variance, since E[g] does not depend on the parameters) takes one Adam step.

The probe draws fresh randomness from the expectation's generator, so it is independent
of the call's estimate. The step is computed when the call's run is done, and written
into the site's state as an `effects.after` update, once the call has returned: the
call's estimate used the parameters as they were before it, so the estimate stays
unbiased while they learn. Everything the probe reads (the parameters, Adam's moments,
the generator) goes through the effect stack, so scg.jit records the probe with the call
and a replay tunes as an eager call does, at the replay's own arguments.
"""

import warnings

import numpy as np

from ..core import effects, pytree
from ..core.tape import Box, Tracer, backward, new_level, new_root, strip
from ..estimators.learned import read, store, updated
from ..numpy import rules as R
from .sites import Overrides
from .surrogate import SurrogateContext
from .trace import run_model


def schedule(E, trace, args, kwargs):
    """At a gradient call of E, its run done: tune the sites of `trace` whose estimators
    tune."""
    tuning = {name: s.estimator for name, s in trace.sites.items()
              if getattr(s.estimator, "tunes", False)}
    if not tuning:
        return
    floor = effects.floor()
    # (the arguments at their values, below the call's own differentiation; under scg.jit
    # the recorded inputs)
    args, kwargs = pytree.tree_map(
        lambda x: strip(x, floor) if isinstance(x, Tracer) else x, (tuple(args), dict(kwargs)))
    with effects.values_only():  # (the probe's run is a model run of its own)
        for name, estimator in tuning.items():
            state = E.states.of(name).estimator
            params, opt_state = read(estimator, state)
            variance, grads = variance_gradient(E, name, estimator, params, args, kwargs)
            params, opt_state = updated(estimator, params, opt_state, grads)
            keys = tuple(params)
            effects.after(store, effects.State(state), keys, opt_state["t"], opt_state["m"],
                          opt_state["v"], variance, *(params[k] for k in keys))


def variance_gradient(E, name, estimator, params, args, kwargs):
    """(mean over draws of |g|^2, its gradient {parameter: array}) for the estimator of
    site `name` at `params`, from one probe run of E's model with fresh draws."""
    keys = list(params)
    floor = effects.floor()
    with new_level() as outer:
        roots = {k: new_root(_as_float(params[k]), outer) for k in keys}
        with new_level() as inner:
            probe = estimator.probe(roots, inner)

            def build(trace):
                site = trace.sites[name]
                return probe.per_draw_estimate(site, SurrogateContext(trace, E.states))

            with warnings.catch_warnings():  # (the call itself has warned)
                warnings.simplefilter("ignore")
                _, g = run_model(
                    E.model, args, kwargs, n=E.n, rng=E.rng, decisions=dict(E._decisions),
                    reasons=dict(E._reasons), plan=dict(E._plan),
                    estimators=Overrides({name: probe}, E.estimators), build=build,
                    has_aux=E.has_aux, states=E.states)
        g = strip(g, outer)
        second_moment = R.divide(R.sum_(R.square(g)), E.n)
        if not isinstance(second_moment, Box):  # (nothing depends on the parameters)
            return strip(second_moment, floor), {}
        grads = backward(second_moment, np.float64(1.0), [roots[k] for k in keys])
    return strip(second_moment, floor), {
        k: None if gk is None else strip(gk, floor) for k, gk in zip(keys, grads)}


def _as_float(x):
    return x if isinstance(x, Tracer) else np.asarray(x, dtype=float)
