"""The tuning of self-tuning estimators after a gradient call (see estimators/learned.py).

For each site whose estimator tunes itself, one probe run of the model: the estimator's
parameters are roots of an outer trace level, the site's logits roots of an inner one;
the probe's per-draw estimate g of the gradient with respect to the logits is traced in
the parameters, and the gradient of mean(|g|^2) (an unbiased estimate of the gradient of
the variance, since E[g] does not depend on the parameters) takes one Adam step.

The probe draws fresh randomness from the expectation's generator, so it is independent
of the call's estimate, which used the parameters as they were before the step: the
estimate stays unbiased while the parameters learn. The tuning is an `effects.after`
update: it runs when the call has returned, and again after every replay of scg.jit,
outside every handler (a model run of its own, never recorded).
"""

import warnings

import numpy as np

from ..core import effects, pytree
from ..core.tape import Box, Tracer, backward, new_level, new_root, strip
from ..estimators.learned import current, step
from ..numpy import rules as R
from .sites import Overrides
from .surrogate import SurrogateContext
from .trace import run_model


def schedule(E, trace, args, kwargs):
    """After a gradient call of E: tune the sites of `trace` whose estimators tune."""
    tuning = {name: s.estimator for name, s in trace.sites.items()
              if getattr(s.estimator, "tunes", False)}
    if not tuning:
        return
    leaves, treedef = pytree.flatten_leaves((tuple(args), dict(kwargs)))
    # (the differentiated arguments at their values; under scg.jit recorded inputs, so a
    # replay tunes at its own arguments)
    leaves = [effects.asarray(x) if isinstance(x, Tracer) else x for x in leaves]
    effects.after(_tune, effects.State(E), tuning, treedef, *leaves)


def _tune(E, tuning, treedef, *leaves):
    args, kwargs = pytree.unflatten(treedef, list(leaves))
    with effects.outside():
        for name, estimator in tuning.items():
            state = E.states.of(name).estimator
            variance, grads = variance_gradient(E, name, estimator, current(estimator, state),
                                                args, kwargs)
            step(estimator, state, grads, variance)


def variance_gradient(E, name, estimator, params, args, kwargs):
    """(mean over draws of |g|^2, its gradient {parameter: array}) for the estimator of
    site `name` at `params`, from one probe run of E's model with fresh draws."""
    keys = list(params)
    with new_level() as outer:
        roots = {k: new_root(np.asarray(params[k], dtype=float), outer) for k in keys}
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
            return float(second_moment), {}
        grads = backward(second_moment, np.float64(1.0), [roots[k] for k in keys])
    return float(strip(second_moment)), {
        k: None if gk is None else np.asarray(strip(gk), dtype=float)
        for k, gk in zip(keys, grads)}
