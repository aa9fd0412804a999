"""Expectations of models: their Monte Carlo value, gradient estimates, per-sample gradients."""

import copy
import dataclasses
import functools
import warnings

import numpy as np

from ..core import effects, pytree
from ..core.reach import generators_reachable
from ..differential_operators import _Traced, reverse
from ..core.tape import (Box, Tracer, backward, current_level, dropped_at, new_level, new_root,
                         strip)
from ..estimators import as_estimator
from ..estimators.baselines import Baseline
from ..kernels.parallel import count_nonfinite
from ..numpy import rules as R
from .memory import check_n
from .persample import NO_DEPS, PerSample
from .rebuilt import note_fresh_start
from .site_states import SiteStates
from .surrogate import surrogate
from .trace import run_model
from .tuning import schedule as schedule_tuning


def _generator(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be an int, a numpy.random.Generator or None, got {seed!r}")


class Expectation:
    """E[sum of the model's costs] over its random draws, estimated with n draws per call.

    Calling it returns the Monte Carlo estimate. Under `scg.grad`, `scg.value_and_grad`,
    `scg.jacobian` or `scg.hessian` it returns the surrogate objective, whose derivatives
    are unbiased estimates of the expectation's derivatives. Use `scg.expectation` to make one.
    """

    requires_gradient_path = True
    warn_lost_history = True  # (a study's chunks are expectations called once, by design)

    def __init__(self, model, n=1, seed=None, estimators=None, has_aux=False):
        if not callable(model):
            raise TypeError(f"model must be callable, got {type(model).__name__}")
        if not isinstance(has_aux, (bool, np.bool_)):
            raise TypeError(f"has_aux must be True or False, got {has_aux!r}")
        self.has_aux = bool(has_aux)
        self.model = model
        self.n = n
        self.estimators = _check_estimators(estimators)
        self.rng = _generator(seed)
        self._decisions = {}
        self._reasons = {}
        self._plan = {}  # sites whose estimators evaluate copies of the run -> copies
        self._states = SiteStates()  # what each site keeps between calls (site_states.py)
        self._calls = [0]  # (a list: the history of stateful baselines keeps a reference)
        self.__name__ = getattr(model, "__name__", "expectation")
        self.__doc__ = getattr(model, "__doc__", None)
        self.last_trace = None
        self.last_aux = None  # (has_aux=True: what the model returned beside its cost)

    @property
    def last_trace(self):
        """The trace of the last call: its sites (their draws) and costs. After a call
        that scg.jit replayed, the recorded call's trace holding the replay's draws and
        costs (its sites' log_prob() raise: they are not kept)."""
        replayed = self.__dict__.get("_replayed")
        if replayed is not None:
            self._replayed = None
            self._last_trace = _with_values(*replayed)
        return self.__dict__.get("_last_trace")

    @last_trace.setter
    def last_trace(self, trace):
        self._replayed = None
        self._last_trace = trace

    @property
    def states(self):
        """What each site keeps between calls (its baseline's and estimator's state):
        a `SiteStates`, saved with `copy.deepcopy(E.states)` and restored by assigning it."""
        return self._states

    @states.setter
    def states(self, states):
        if not isinstance(states, SiteStates):
            raise TypeError(f"expectation.states: expected the SiteStates of an expectation "
                            f"(copy.deepcopy(E.states)), got {type(states).__name__}")
        # (the object stays, its sites are the new ones: a call repeated by scg.jit reads
        # the sites' states through this object, and finds the restored ones)
        self._states._sites = states._sites

    @property
    def n(self):
        """The number of draws per call (a positive int)."""
        return self._n

    @n.setter
    def n(self, n):
        self._n = _checked_n(n)

    def __call__(self, *args, **kwargs):
        out, aux = self._objective(args, kwargs)
        if self.has_aux and current_level() <= effects.floor():  # (not under scg.grad)
            return out, aux
        return out

    def call_with_aux(self, *args, **kwargs):
        """(the estimate, aux) of one call, at every level: under scg.grad too, where
        calling the expectation gives the estimate alone (`scg.grad(E, has_aux=True)`
        takes this call's own aux from here). aux is None unless has_aux=True."""
        return self._objective(args, kwargs)

    # what a call depends on besides its arguments (guarded by scg.jit): the model, the
    # number of draws, the generator (by identity), the estimators chosen so far
    __jit_attrs__ = ("model", "_n", "estimators", "rng", "_decisions", "_plan", "has_aux")

    def __getstate__(self):
        # the last trace holds the tape of the last call: not part of the expectation
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_last_trace", "_replayed", "_fresh", "_model_generators")}

    def __setstate__(self, state):
        if "states" in state:  # (pickled before `states` was a property)
            state["_states"] = state.pop("states")
        self.__dict__.update(state)
        self.last_trace = None

    def _objective(self, args, kwargs, wrap_args=None):
        # Under any transformation the surrogate is built: the differentiated values may
        # reach the model through its arguments, closures, functools.partial or objects
        # that scg cannot look into, and the surrogate is right in every case.
        traced = wrap_args is not None or current_level() > effects.floor()
        if traced:
            def build(t):
                return surrogate(t, self.states)
        else:
            build = _plain_mean
        # a model whose every site is an exact sum has no variance: after a first call
        # found that, one evaluation stands for all n (the estimate is the same)
        n = 1 if _NO_VARIANCE in self._decisions and wrap_args is None and \
            not self.has_aux else self.n
        trace, (objective, updates) = run_model(
            self.model, args, kwargs, n=n, rng=self.rng, decisions=self._decisions,
            reasons=self._reasons, wrap_args=wrap_args, build=build, plan=self._plan,
            estimators=self.estimators, has_aux=self.has_aux, states=self.states,
            generators=self._generators() + generators_reachable((args, kwargs)))
        self._calls[0] += 1
        if isinstance(self.estimators, dict) and self._calls[0] == 1:
            unknown = [k for k in self.estimators if k not in trace.sites]
            if unknown:
                warnings.warn(
                    f"estimators names site(s) {', '.join(map(repr, unknown))}, which the "
                    f"model did not draw (its sites: {', '.join(map(repr, trace.sites))}): "
                    "check the names", UserWarning, stacklevel=3)
        for site, baseline, q, state in updates:
            if baseline.stateful and not state and self.warn_lost_history:
                note_fresh_start(self, site, baseline)
            if type(baseline).update is not Baseline.update:  # (not a baseline without memory)
                effects.after(baseline.update, q, effects.State(state))  # (and after each replay)
        if traced:  # (estimators that tune themselves take a step after the call)
            schedule_tuning(self, trace, args, kwargs)
        if _without_variance(trace):
            self._decisions[_NO_VARIANCE] = True
        else:
            self._decisions.pop(_NO_VARIANCE, None)
        self.last_trace = trace
        aux = None
        if self.has_aux:
            aux = pytree.tree_map(lambda leaf: _plain_aux(leaf, self.n), trace.aux)
            self.last_aux = aux
        if effects.sees_operations():  # (a recording: a replay leaves its own values)
            aux_leaves, aux_def = pytree.flatten_leaves(aux) if self.has_aux else ([], None)
            self._fresh = trace  # (the recorded call itself keeps its whole trace)
            effects.after(_note_values, effects.State(self), effects.State(trace, own=True),
                          effects.State(aux_def, own=True),
                          *[strip(s.draw) for s in trace.sites.values()],
                          *[strip(c.value) for c in trace.cost_sites.values()], *aux_leaves)
        return objective, aux

    def finite_value(self, value):
        """The value of the last call again where the mean of its finite costs overflowed
        (see _mean_of_costs)."""
        trace = self.last_trace
        if trace is None or not trace.cost_sites:
            return value
        return _mean_of_costs(tuple(trace.cost_sites),
                              *[np.asarray(v, dtype=float) for v in trace.costs.values()])

    def _generators(self):
        """The numpy Generators the model reaches (looked for once: its closures change
        rarely, and the walk costs microseconds per call)."""
        found = self.__dict__.get("_model_generators")
        if found is None:
            found = self._model_generators = generators_reachable(self.model)
        return found

    def no_path_message(self, name):
        message = (f"no cost of the model depends on {name}: not through a sampling path, "
                   "a score term, nor directly, so its gradient is not defined by this model")
        # the jumps and cuts that values of the levels below the last run went through
        # (read now, right after the gradient call: no level has been opened again since)
        levels = range(1, self.last_trace.level) if self.last_trace is not None else ()
        dropped = [name for level in levels for name in dropped_at(level)]
        jumps = [d for d in dropped if d != "stop_gradient"]
        if jumps:
            return message + (
                f". Values of this gradient went through {', '.join(jumps)}: piecewise "
                "constant operations (jumps), whose derivative is zero almost everywhere. If "
                f"{name} reaches the costs only through them, draw the discrete choice with "
                f"scg.sample from a distribution that {name} parameterizes (for example "
                "scg.Bernoulli(probs=scg.sigmoid(z)) or scg.Categorical(logits=z)), so that "
                "the score function carries its gradient, or replace the jump by a smooth "
                "function (scg.sigmoid for a step). Pass allow_unused=True to get zeros "
                "instead")
        if dropped:
            return message + (
                f". Values of this gradient went through scg.stop_gradient (the .detach() of "
                f"PyTorch), which cuts the derivative: remove it between {name} and the "
                "distribution or cost it should reach. Pass allow_unused=True to get zeros "
                "instead")
        return message + (
            ". Likely causes: the model does not use it, or uses it only as a Python value "
            "(an int, a shape, a seed). Pass allow_unused=True to get zeros instead")

    def check_gradient(self, grads, names, roots):
        """Raise FloatingPointError naming the site or cost behind a non-finite gradient.

        `names()` gives the arguments' names (made only for the message)."""
        bad = [k for k, g in enumerate(grads) if g is not None and count_nonfinite(strip(g))]
        if bad:
            raise FloatingPointError(f"the gradient estimate for {names()[bad[0]]} is not "
                                     f"finite; it comes from {self._culprit(roots)}")

    def _culprit(self, roots):
        t = self.last_trace
        parts = [(f"the log-probability of site {s.name!r}", s._log_prob)
                 for s in t.sites.values()]
        parts += [(f"the sampling path of site {s.name!r}", s.draw.value)
                  for s in t.sites.values()]
        parts += [(f"cost {c.name!r}", getattr(c.value, "value", c.value))
                  for c in t.cost_sites.values()]
        for what, x in parts:
            if isinstance(x, Box):
                gs = backward(x, np.ones(np.shape(x.value)), roots)
                if any(g is not None and count_nonfinite(strip(g)) for g in gs):
                    return what
        return "the combination of the terms (each is finite alone)"

    def __repr__(self):
        return f"Expectation({self.__name__}, n={self.n})"


_NO_VARIANCE = ("every site an exact sum",)  # (among the decisions: see _objective)


def _without_variance(trace):
    """Is the run's estimate the same for every draw: every site an exact sum over its
    values (scg.Enumerate), no minibatch drawn (a subsampled plate)?"""
    return all(s.estimator.copies_multiply for s in trace.sites.values()) and \
        not trace.subsampled


def _plain_mean(trace):
    """The Monte Carlo estimate when nothing is differentiated: the mean total cost."""
    costs = list(trace.costs.values()) if trace.cost_sites else [np.zeros(trace.n)]
    # (under scg.jit: one recorded operation)
    return effects.opaque(_mean_of_costs, tuple(trace.cost_sites), *costs), []


def _mean_of_costs(names, *costs):
    """The mean over the draws of the costs' per-draw total, as a float. Where finite
    costs overflow that sum, each cost's mean is taken with its values divided by n first;
    FloatingPointError naming the costs where even that exceeds the largest float."""
    with np.errstate(over="ignore"):
        total = sum(costs)
    mean = float(_mean_of_draws(np.asarray(total, dtype=float)))
    if np.isfinite(mean) or not all(np.all(np.isfinite(c)) for c in costs):
        return mean
    with np.errstate(over="ignore"):
        mean = float(np.sum([_mean_of_draws(np.asarray(c, dtype=float)) for c in costs]))
    if not np.isfinite(mean):
        raise FloatingPointError(
            f"the mean over the draws of the costs {', '.join(map(repr, names))} exceeds the "
            "largest float64 although each draw's cost is finite; scale the costs down (e.g. "
            "measure them in larger units)")
    return mean


def _mean_of_draws(x):
    """The mean along the draws' axis (0), without overflow where the sum of finite values
    exceeds the largest float (each divided by n first, then)."""
    with np.errstate(over="ignore"):
        mean = np.mean(x, axis=0)
    if np.all(np.isfinite(mean)) or not np.all(np.isfinite(x)):
        return np.asarray(mean)
    return np.asarray(np.sum(x / np.shape(x)[0], axis=0))


def _check_estimators(estimators):
    if estimators is None:
        return None
    if isinstance(estimators, dict):
        for name, spec in estimators.items():
            if not isinstance(name, str):
                raise TypeError(f"estimators: keys are site names (strings), got {name!r}")
            as_estimator(spec)  # (raises a clear error for a bad spec)
        return dict(estimators)
    as_estimator(estimators)
    return estimators


def _checked_n(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int (the number of draws), got {n!r}")
    check_n(int(n))
    return int(n)


def _plain_aux(leaf, n):
    """An aux leaf as the caller gets it: a per-draw value as its n draws (the main copy's
    rows), a traced one as its value."""
    if isinstance(leaf, PerSample):
        return effects.opaque(_main_rows, effects.asarray(leaf.value), n)
    if isinstance(leaf, Tracer):
        return effects.asarray(leaf)
    return leaf


def _main_rows(x, n):
    return np.array(x[:n])


def _note_values(E, trace, aux_def, *values):
    """After a call of E (a replay's too): the values of its sites and costs, for
    E.last_trace (made when read), and what the model returned beside its cost."""
    if E.__dict__.get("_fresh") is trace:  # (the call that made the trace: it is whole)
        E._fresh = None
        return
    if aux_def is not None:
        k = len(trace.sites) + len(trace.cost_sites)
        E.last_aux = pytree.unflatten(aux_def, list(values[k:]))
    E._replayed = (trace, values)


def _with_values(trace, values):
    """A copy of `trace` whose sites' draws and costs hold `values` (see _note_values)."""
    out = copy.copy(trace)
    values = iter(values)
    out.sites = {k: _site_with(s, next(values)) for k, s in trace.sites.items()}
    out.cost_sites = {k: _site_with(c, next(values)) for k, c in trace.cost_sites.items()}
    return out


def _site_with(site, value):
    site = copy.copy(site)
    field = "draw" if hasattr(site, "draw") else "value"
    old = getattr(site, field)
    if isinstance(old, PerSample):
        new = copy.copy(old)
        new.value = value
        value = new
    setattr(site, field, value)
    if hasattr(site, "_log_prob"):  # (a replay's log-probability is not kept: never the
        # recorded call's in its place)
        site._log_prob = None
        site.log_prob = functools.partial(_not_kept, site.name)
    return site


def _not_kept(name):
    raise ValueError(f"site {name!r}: after a call that scg.jit replayed, E.last_trace holds "
                     "the draws and costs, not the log-probabilities; compute it from the "
                     "site's distribution and value")


def expectation(model, n=1, seed=None, estimators=None, has_aux=False):
    """The expectation of a model's total cost, estimated with `n` draws per call.

    Args:
        model: a function written for one draw; it calls scg.sample / scg.cost and may
            return a cost. Its positional arguments pass through (`E(theta, data)`).
        n: number of draws per evaluation.
        seed: an int (the expectation owns a generator seeded once; each call draws fresh
            samples), a numpy Generator (shared), or None.
        estimators: the estimators to use instead of the model's: one spec (an estimator
            or "auto", "pathwise", "score") for every site whose family it serves (the
            others keep "auto"), or a dict {site name: spec}. None keeps the model's.
        has_aux: the model returns (cost, aux): `E(...)` returns (value, aux), and
            `scg.value_and_grad(E, has_aux=True)` ((value, aux), gradient); aux is a
            pytree whose per-draw values come back as arrays of the n draws.
    Returns:
        An `Expectation`, to call or to pass to scg.grad, scg.value_and_grad,
        scg.grad_samples, scg.hessian.

    Example:
        >>> E = scg.expectation(lambda mu: scg.sample("x", scg.Normal(mu, 1.0)) ** 2,
        ...                     n=10_000, seed=0)
        >>> scg.grad(E)(2.0)   # about 4
    """
    return Expectation(model, n, seed, estimators, has_aux)


@dataclasses.dataclass(init=False, repr=False, eq=False)
class GradSamples:
    """Per-draw gradient estimates: `.samples` (leaves of shape (n, *leaf.shape)),
    `.mean` (the estimate of scg.grad for the same draws), `.var` (ddof=1), `.stderr`, `.n`.

    `.stderr` is sqrt(var / n), the standard error of a mean of n independent estimates.
    `.coupled` names the sites whose baseline is computed from the other draws
    (leave-one-out, Mean, GRPO): their draws' estimates are not independent, and the mean
    is a U-statistic whose variance is var / n plus a term of order 1 / n^2 that `.var`
    does not see. For large n that term is negligible, unless the per-draw variance itself
    nearly vanishes (a coin at p = 1/2 with a cost linear in the draw: every draw's estimate
    is the same number but for the coupling); there, `.stderr` understates the error, and
    independent estimates (expectations with independent seeds) give an honest one.

    A study in chunks keeps only the statistics: `.samples` is None, and `.mean`, `.var`
    are those of all the chunks' draws, merged exactly.

    A dataclass of its fields, so that a jitted function may return it (`scg.jit` replays
    `scg.grad_samples(E)`) and `scg.pytree` functions see its arrays."""

    samples: object
    n: int
    _mean: object = None
    _var: object = None
    coupled: tuple = ()

    def __init__(self, samples, n, mean=None, var=None, coupled=()):
        self.samples = samples
        self.n = n
        self._mean, self._var = mean, var
        self.coupled = tuple(coupled)

    @property
    def mean(self):
        if self.samples is None:
            return self._mean
        return pytree.tree_map(_mean_of_draws, self.samples)

    @property
    def var(self):
        if self.samples is None:
            return self._var
        return pytree.tree_map(lambda s: np.asarray(np.var(s, axis=0, ddof=1)) if self.n > 1
                               else np.full(s.shape[1:], np.nan), self.samples)

    @property
    def stderr(self):
        return pytree.tree_map(lambda v: np.asarray(np.sqrt(v / self.n)), self.var)

    def __repr__(self):
        return f"GradSamples(n={self.n}, mean={self.mean!r}, stderr={self.stderr!r})"


def coupled_sites(sites):
    """The names of the sites whose baseline is computed from the other draws."""
    return tuple(s.name for s in sites
                 if getattr(getattr(s.estimator, "baseline", None), "couples_draws", False))


def grad_samples(E, argnums=0, *, allow_unused=False):
    """Per-draw gradient estimates of an expectation, computed in one vectorized pass.

    Each differentiated argument is copied once per draw, so one backward pass gives the
    gradient of every draw's term of the surrogate.

    Returns:
        A function returning a `GradSamples`.

    Example:
        >>> gs = scg.grad_samples(E)(2.0)
        >>> gs.mean, gs.var, gs.stderr
    """
    if not isinstance(E, Expectation):
        raise TypeError("scg.grad_samples takes an expectation made by scg.expectation")

    def per_draw(traced, level):
        # each differentiated leaf is copied once per draw: one backward pass, seeded with n
        # against the objective's average, gives every draw's own gradient
        n = E.n
        copies = [new_root(np.broadcast_to(r.value, (n,) + np.shape(r.value)), level)
                  for r in traced.roots()]
        positions = _root_positions(traced)

        def per_draw_args(call_args, batch_level, rows):
            call_args = list(call_args)
            for (i, treedef, k0, count) in positions:
                # (with copies of the run, every copy of draw i uses draw i's parameters)
                leaves = [PerSample(c if rows == n else R.reshape(
                    R.broadcast_to(c, (rows // n,) + np.shape(c.value)),
                    (rows,) + np.shape(c.value)[1:]), batch_level, NO_DEPS)
                    for c in copies[k0:k0 + count]]
                call_args[i] = pytree.unflatten(treedef, leaves)
            return call_args

        def call(*args, **kwargs):
            return E._objective(args, kwargs, wrap_args=per_draw_args)[0]

        return call, copies, np.float64(n)

    def grad_samples_fun(*args, **kwargs):
        traced, _, grads = reverse(E, args, kwargs, argnums, needs_path=not allow_unused,
                                   check=E.check_gradient, per_draw=per_draw)
        n = E.n
        flat = []
        for g, shape in zip(grads, traced.shapes()):
            g = np.zeros((n,) + tuple(shape)) if g is None else effects.asarray(g, dtype=float)
            flat.append(effects.opaque(_writable, g))  # (an operation under scg.jit)
        sites = E.last_trace.sites.values()
        if any(s.estimator.antithetic for s in sites):
            # draw i and draw i + n/2 share their noise: only the pair means are independent
            half = n // 2
            flat = [0.5 * (g[:half] + g[half:]) for g in flat]
            n = half
        return GradSamples(traced.rebuild(flat), n, coupled=coupled_sites(sites))

    return grad_samples_fun


def _root_positions(traced):
    out, k = [], 0
    for i, (treedef, roots) in zip(traced.argnums, traced.parts):
        out.append((i, treedef, k, len(roots)))
        k += len(roots)
    return out


def trace(model, *args, n=1, seed=None, **kwargs):
    """Run a model once with n draws and return its `Trace`, with the graph recorded.

    The positional arguments are the model's; floats and arrays among them (and in nested
    dicts, lists, tuples) are treated as parameters, so the graph shows what depends on them.

    Example:
        >>> t = scg.trace(model, theta, n=4, seed=0)
        >>> print(t.explain())
    """
    n = _checked_n(n)
    rng = _generator(seed)
    with new_level() as level:
        traced = _Traced(args, tuple(range(len(args))), level, floats_only=True)
        names = {r: name for r, name in zip(traced.roots(), traced.names(prefix="arg"))
                 if isinstance(r, Box)}
        t, _ = run_model(model, tuple(traced.args), kwargs, n=n, rng=rng, decisions={},
                         reasons={}, record=True, param_names=names)
    return t


def _writable(g):
    """g, or a copy of it if it is read-only (a broadcast view): the caller may write into
    the per-draw gradients it gets."""
    return g if g.flags.writeable else g.copy()
