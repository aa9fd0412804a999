"""The tuning of self-tuning estimators at a gradient call (see estimators/learned.py).

For each site whose estimator tunes itself, one probe run of the model: the estimator's
parameters are roots of an outer trace level; the call's differentiated arguments, copied
once per draw, roots of an inner one. The probe's estimate of each draw's gradient with
respect to the arguments that the site's logits depend on, g, is traced in the
parameters, and the gradient of mean(|g|^2) (an unbiased estimate of the gradient of the
variance, since E[g] does not depend on the parameters) takes one Adam step.

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
from ..estimators.terms import traced_logits
from ..estimators.learned import Learned, read, store, updated
from ..numpy import rules as R
from .persample import NO_DEPS, PerSample
from .site_states import estimator_of
from .sites import Overrides
from .surrogate import SurrogateContext
from .trace import run_model


def schedule(E, trace, args, kwargs):
    """At a gradient call of E, its run done: tune the sites of `trace` whose estimators
    tune."""
    # (a site no cost depends on has an estimate of 0 whatever its settings: nothing to
    # tune, and its probe would have no cost to evaluate)
    tuning = {name: s.estimator for name, s in trace.sites.items()
              if isinstance(s.estimator, Learned) and s.estimator.tunes
              and trace.downstream_costs(s)}
    if not tuning:
        return
    floor = effects.floor()
    # (the arguments at their values, below the call's own differentiation; under scg.jit
    # the recorded inputs; which of them the call differentiates)
    leaves, treedef = pytree.flatten_leaves(tuple(args))
    differentiated = [isinstance(x, Tracer) and strip(x, floor) is not x for x in leaves]
    args = pytree.unflatten(treedef, [strip(x, floor) if isinstance(x, Tracer) else x
                                      for x in leaves])
    kwargs = pytree.tree_map(lambda x: strip(x, floor) if isinstance(x, Tracer) else x,
                             dict(kwargs))
    with effects.values_only():  # (the probe's run is a model run of its own)
        for name, estimator in tuning.items():
            state = estimator_of(E.states, name)
            params, opt_state = read(estimator, state, trace.sites[name])
            variance, grads = variance_gradient(E, name, estimator, params, args, kwargs,
                                                differentiated)
            params, opt_state = updated(estimator, params, opt_state, grads)
            keys = tuple(params)
            effects.after(store, effects.State(state), keys, opt_state["t"], opt_state["m"],
                          opt_state["v"], variance, *(params[k] for k in keys))


def variance_gradient(E, name, estimator, params, args, kwargs, differentiated=None):
    """(mean over draws of |g|^2, its gradient {parameter: array}) for the estimator of
    site `name` at `params`, from one probe run of E's model with fresh draws; g is a
    draw's estimate of the gradient with respect to the positional arguments marked in
    `differentiated` (default: every float array) that the site's logits depend on."""
    keys = list(params)
    floor = effects.floor()
    n = E.n
    leaves, treedef = pytree.flatten_leaves(tuple(args))
    if differentiated is None:
        differentiated = [_is_float_array(x) for x in leaves]
    with new_level() as outer:
        roots = {k: new_root(_as_float(params[k]), outer) for k in keys}
        with new_level() as inner:
            # (each differentiated leaf once per draw: one backward pass gives every draw's
            # own gradient, as scg.grad_samples does)
            copies = {i: new_root(R.broadcast_to(_as_float(leaves[i]),
                                                 (n,) + R.shape(strip(leaves[i]))), inner)
                      for i, d in enumerate(differentiated) if d}
            probe = estimator.probe(roots, outer)

            def per_draw_args(call_args, batch_level, rows):
                flat = list(leaves)
                for i, c in copies.items():
                    shape = R.shape(strip(c))
                    # (with copies of the run, every copy of draw i uses draw i's arguments)
                    value = c if rows == n else R.reshape(
                        R.broadcast_to(c, (rows // n,) + shape), (rows,) + shape[1:])
                    flat[i] = PerSample(value, batch_level, NO_DEPS)
                return list(pytree.unflatten(treedef, flat))

            def build(trace):
                site = trace.sites[name]
                ctx = SurrogateContext(trace, E.states)
                return probe.probe_objective(site, ctx), R.sum_(traced_logits(site, ctx))

            with warnings.catch_warnings():  # (the call itself has warned)
                warnings.simplefilter("ignore")
                _, (objective, logits) = run_model(
                    E.model, args, kwargs, n=n, rng=E.rng, decisions=dict(E._decisions),
                    reasons=dict(E._reasons), plan=dict(E._plan),
                    estimators=Overrides({name: probe}, E.estimators), build=build,
                    has_aux=E.has_aux, states=E.states, wrap_args=per_draw_args)
            upstream = [c for c, reached in zip(copies.values(), _backward(
                logits, inner, list(copies.values()))) if reached is not None]
            per_draw = _backward(objective, inner, upstream)  # (each draw's gradient / n)
        second_moment = None
        for g in per_draw:
            if g is not None:  # mean_i |n g_i|^2 = n sum_i |g_i|^2
                part = R.multiply(float(n), R.sum_(R.square(strip(g, outer))))
                second_moment = part if second_moment is None else R.add(second_moment, part)
        if second_moment is None:
            _warn_untuned(name, estimator)
            return np.float64(0.0), {}
        if not isinstance(second_moment, Box):  # (nothing depends on the parameters)
            return strip(second_moment, floor), {}
        grads = backward(second_moment, np.float64(1.0), [roots[k] for k in keys])
    return strip(second_moment, floor), {
        k: None if gk is None else strip(gk, floor) for k, gk in zip(keys, grads)}


def _backward(x, level, roots):
    """The cotangents of `roots` (None for each one not reached) of x's trace at `level`."""
    if not roots or not (isinstance(x, Box) and x.level == level):
        return [None] * len(roots)
    return backward(x, np.float64(1.0), roots)


def _warn_untuned(name, estimator):
    warnings.warn(
        f"site {name!r}: {type(estimator).__name__} cannot tune itself here: the site's "
        "logits depend on none of the differentiated positional arguments of the call (the "
        "tuning lowers the variance of their gradient). Pass the parameters of the site's "
        "distribution as an argument of the expectation and differentiate it, or fix the "
        "estimator's parameters (learn=False)", UserWarning, stacklevel=5)


def _is_float_array(x):
    return isinstance(x, (np.ndarray, np.floating, float)) and np.asarray(x).dtype.kind == "f"


def _as_float(x):
    return x if isinstance(x, Tracer) else np.asarray(x, dtype=float)
