"""What a model calls: scg.sample, scg.cost, scg.plate and scg.blackbox.

Each call is a message sent through this thread's effect handlers (scg/core/effects.py):
a plate open around it adds itself, a caller's choice of estimators sets the site's
estimator, and the run of the model in progress (a `Trace`, scg/stochastic/trace.py)
records the site, with `draw_site`, `add_cost`, `open_plate` and `close_plate` here.
Outside a model they raise a clear error.
"""

import collections.abc
import contextlib
import math
import functools
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..core import effects
from ..core.tape import Box, Tracer, kept, read_only, strip
from ..distributions._util import own_draws
from ..distributions.base import Distribution, family_name, family_of
from ..errors import EstimatorError, TracingError, VarianceWarning
from ..estimators import Estimator, as_estimator, auto
from ..estimators.antithetic import antithetic_noise
from ..estimators.marginalize import Marginalize
from ..kernels.parallel import count_nonfinite
from ..numpy import rules as R
from .copies import copies_for
from .marginal import marginal_of, refuse_downstream
from .masks import physical_mask
from .memory import check_fits
from .zero_mean import check_use, law_of
from .persample import NO_DEPS, Deps, PerSample, lift
from .plates import label_draw
from .runtime import current_run, innermost_run, send as _send
from .site_states import SiteStates, estimator_of


@dataclass(frozen=True)
class Plate:
    """A batch dimension along which sites and costs are conditionally independent.

    `size` is the number of elements the sites have along it; a subsampled plate (a
    minibatch) also has `scale`, the full size over the subsample's, which its costs are
    multiplied by, and `indices`, the elements of this run."""

    name: str
    size: int
    dim: int
    scale: float = 1.0
    indices: object = field(default=None, compare=False, repr=False)


@dataclass
class Site:
    """A sample site: its distribution, draws and estimator.

    `value` is the plain array of draws, physical shape (rows, *shape) (rows = n unless an
    estimator evaluates copies of the run); `draw` is the traced per-sample value the model
    saw.
    """

    name: str
    dist: Distribution
    draw: PerSample
    estimator: Estimator
    reason: str
    plates: tuple
    param_deps: Deps
    aux: dict = field(default_factory=dict, repr=False)  # what the estimator's draw kept
    _log_prob: object = field(default=None, repr=False)
    # the estimator's promises about its values (Estimator.promises), or the law's draws
    own_draws: bool = field(default=False, repr=False)
    draws_from_law: bool = field(default=False, repr=False)
    biased: bool = field(default=False, repr=False)  # (its baseline uses its own cost)
    # the distribution's per-draw parameters and their versions when the site was drawn
    param_versions: tuple = field(default=(), repr=False)
    mask: object = field(default=None, repr=False)  # (scg.mask: where the site counts)
    # the costs that hold log q at the site's draw linearly: its derivative in q's
    # parameters, of mean zero, left out there (zero_mean.py)
    zero_mean_costs: list = field(default_factory=list, repr=False)

    def check_unchanged(self):
        """Raise ValueError if an in-place operator changed a parameter of the site's
        distribution after the site was drawn (its score would be taken at other values)."""
        for p, version in self.param_versions:
            if p.version != version:
                raise ValueError(
                    f"site {self.name!r}: a parameter of its distribution was changed in place "
                    "(x += ..., as numpy changes the array) after the site was drawn; its "
                    "log-probability would be taken at the new value. Compute the new value "
                    "as a new variable (y = x + ...) instead")

    @property
    def value(self):
        return np.asarray(strip(self.draw))

    @property
    def kind(self):
        """The estimator's name ("pathwise", "score", "enumerate", ...)."""
        return self.estimator.name

    @property
    def baseline(self):
        return self.estimator.baseline

    def dist_params(self):
        """The values of the family's parameters (possibly traced)."""
        return [v for v in family_of(self.dist).params.values() if v is not None]

    def log_prob(self):
        """log p(value | parents), physical shape (rows, *batch_shape), computed once."""
        if self._log_prob is None:
            # on the physical values: per-draw parameters lifted to their rows, shared ones
            # broadcast by numpy (tape operations, without the per-draw layer's dispatch)
            # (or the one the model computed already: log q(z) of an ELBO)
            draw = self.draw
            lp = self.dist.last_log_prob(draw)
            if lp is not None:
                lp = lp.value if isinstance(lp, PerSample) else lp
            else:
                own = own_draws() if self.own_draws else contextlib.nullcontext()
                with effects.operations_unseen(), own:
                    lp = _traced_physical(self.dist, draw.level).log_prob(draw.value)
            if self.mask is not None:  # (scg.mask: the site counts only where it holds)
                lp = R.where(physical_mask(self.mask, len(self.dist.batch_shape), draw.level),
                             lp, 0.0)
            self._log_prob = lp
            family = family_of(self.dist)
            if family.finite_log_prob_of_draws and getattr(family, "_checked", False) and \
                    self.draws_from_law:
                return lp  # (finite by construction: the family's own draws, checked params)
            bad = count_nonfinite(strip(self._log_prob))
            if bad:
                raise FloatingPointError(
                    f"site {self.name!r}: log_prob is not finite for {bad} of "
                    f"{np.size(strip(self._log_prob))} entries of {self.dist!r}: a "
                    "degenerate parameter (a scale or rate of 0, or one that overflows), "
                    "or a draw outside the support")
        return self._log_prob


@dataclass
class Cost:
    """A cost site: its value, of physical shape (n, *shape) or shared.

    `plates` are the plates along whose axes its value lies, `axes` the logical axis of
    each, and `mixed` the pairs (plate, site) whose elements its computation combined
    (see `scg.stochastic.plates`)."""

    name: str
    value: object
    plates: tuple
    deps: Deps
    axes: tuple = ()
    mixed: frozenset = frozenset()

    def plates_for(self, site):
        """The plates the cost has element by element for the score of `site` (a name)."""
        return tuple(p for p in self.plates if (p, site) not in self.mixed)

    def plate_split(self):
        """(the plates the cost has element by element for every site's score, {plate:
        the sites for whose scores it mixes that plate's elements})."""
        mixed = {}
        for p, s in sorted(self.mixed, key=lambda ps: (ps[0].dim, ps[0].name, ps[1])):
            mixed.setdefault(p, []).append(s)
        return tuple(p for p in self.plates if p not in mixed), mixed


# ---------------------------------------------------------------------- sample
def sample(name, dist, *, estimator="auto", obs=None):
    """Draw from `dist` at a named site of the model and return the draw.

    Args:
        name: unique within the model.
        dist: a scg distribution; its parameters may depend on parameters and earlier draws.
        estimator: "auto" (pathwise where valid, else score with a leave-one-out baseline),
            "pathwise", "score", or an estimator object: scg.Pathwise(), scg.Score(...),
            scg.Enumerate(), scg.MeasureValued(), scg.GumbelSoftmax(...), scg.DisARM(),
            or any subclass of scg.estimators.Estimator.
        obs: an observed value: nothing is drawn; the site adds the cost
            -dist.log_prob(obs) (summed over its shape, per element inside a plate), named
            `name`, and returns `obs` (as Pyro's observed sites do).
    Returns:
        The draw, of shape dist.batch_shape + dist.event_shape (one value per draw), or
        `obs`.

    Example:
        >>> def model(mu):
        ...     x = scg.sample("x", scg.Normal(mu, 1.0))
        ...     scg.sample("y", scg.Normal(x, 0.5), obs=1.3)
        ...     return x ** 2
    """
    if effects.innermost() is None:
        current_run(f"scg.sample({name!r}, ...)")  # (raises: outside a model)
    if not isinstance(dist, Distribution):
        raise TypeError(f"site {name!r}: expected a scg distribution, got {type(dist).__name__}")
    if obs is not None:
        return _observe(name, dist, obs, estimator)
    return _send(f"scg.sample({name!r}, ...)",
                 effects.Message("sample", name, dist=_captured(dist), estimator=estimator,
                                 given=dist))


def _observe(name, dist, obs, estimator):
    if not (isinstance(estimator, str) and estimator == "auto"):
        raise ValueError(f"observed site {name!r}: an observed value is not drawn, so it has "
                         f"no estimator; drop estimator={estimator!r} (or obs= to draw it)")
    _check_observed_shape(name, dist, obs)
    lp = dist.log_prob(obs)
    marginal = _marginal_term(lp)
    bad = count_nonfinite(strip(lp)) if not marginal else 0
    if bad:
        raise ValueError(
            f"observed site {name!r}: the log-probability of the observed value under "
            f"{dist!r} is not finite for {bad} of {np.size(strip(lp))} entries: a value "
            "outside the support, or a degenerate parameter (a scale of 0)")
    # (a term of the marginal likelihood is kept as a factor, never as the cost -lp)
    _send(f"scg.sample({name!r}, ..., obs=...)",
          effects.Message("cost", name, value=None if marginal else R.negative(lp),
                          likelihood=lp))
    return obs


def _marginal_term(lp):
    """Does a log-likelihood depend on a marginalized site (its values may have
    probability 0 for some of them)?"""
    run = innermost_run()
    return run is not None and run.marginal is not None and bool(run.marginal.depends(lp))


def _check_observed_shape(name, dist, obs):
    """An observed value has the site's shape, batch_shape + event_shape, or one that
    broadcasts with it (each observation then meets the distribution's parameters)."""
    want = tuple(dist.batch_shape) + tuple(dist.event_shape)
    got = tuple(R.shape(obs))
    event = tuple(dist.event_shape)
    try:
        np.broadcast_shapes(got, want)
        fits = not event or got[len(got) - len(event):] == event
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"observed site {name!r}: the observed value has shape {got}, and {dist!r} gives "
            f"values of shape {want} (batch_shape {tuple(dist.batch_shape)} + event_shape "
            f"{event}): they do not broadcast, or the event dims differ. Pass an observation of shape {want}, or "
            "give the distribution parameters of the observation's shape")


class PlateHandler(effects.Handler):
    """An open `scg.plate`: the sites drawn inside it have its elements along its dim."""

    takes_values = False

    def __init__(self, frame):
        self.frame = frame

    def process(self, msg):
        if msg.kind == "sample":  # (innermost plates first: the outer ones go in front)
            msg.plates = (self.frame,) + msg.plates
            msg.fields["dist"] = _apply_plates(msg.fields["dist"], msg.name, (self.frame,))


class Overrides(dict):
    """Estimators by site name over a caller's choice `rest` (None, a spec or a dict) for
    the other sites."""

    def __init__(self, by_name, rest=None):
        super().__init__(by_name)
        self.rest = rest


class EstimatorChoice(effects.Handler):
    """The estimators a caller chose over the model's (scg.expectation's `estimators=`,
    scg.trace's): every site's, where the estimator serves the family, or by site name."""

    takes_values = False

    def __init__(self, chosen):
        self.chosen = chosen

    def process(self, msg):
        if msg.kind == "sample":
            msg.fields["estimator"] = _chosen_estimator(
                self.chosen, msg.name, msg.fields["dist"], msg.fields["estimator"])


def _chosen_estimator(chosen, name, dist, given):
    while isinstance(chosen, dict):
        if name in chosen:
            return chosen[name]
        chosen = getattr(chosen, "rest", None)  # (Overrides: a choice for the others)
        if chosen is None:
            return given
    spec = as_estimator(chosen)
    if spec == "auto":
        return spec
    try:
        spec.check(name, dist)
    except EstimatorError:
        return "auto"
    return spec


def draw_site(run, msg):
    """Perform a "sample" message in `run`: draw the site and record it."""
    name, dist, estimator = msg.name, msg.fields["dist"], msg.fields["estimator"]
    run.check_new_name(name)
    check_fits(run, dist, name)
    est, reason = _choose(run, name, dist, as_estimator(estimator))
    if isinstance(est, Marginalize):  # (summed out of the likelihood: marginal.py)
        if msg.fields.get("mask") is not None:
            raise EstimatorError(f"site {name!r} is marginalized inside scg.mask; give the "
                                 "mask to its likelihood terms' values instead")
        return marginal_of(run).draw(name, dist, run.plates, msg.fields.get("given", dist))
    copies_for(name, est.copies(name, dist, run.plates))  # (may stop the run: Replan)
    level = run.level
    params = [v for v in family_of(dist).params.values()
              if isinstance(v, PerSample) and v.level == level]
    if run.marginal is not None:
        refuse_downstream(run, f"site {name!r} (its parameters)",
                          Deps.merge([p.deps for p in params]).up)
    for p in params:
        check_use(p, f"the parameters of site {name!r}", run)
    param_deps = Deps.merge([p.deps for p in params])
    d = SiteDraw(run, name, dist, level, param_deps, est.antithetic)
    d.given = msg.fields.get("given", dist)  # (the distribution as the model gave it)
    with effects.operations_unseen():
        draw = est.draw(d)
    if isinstance(draw, PerSample):  # a draw with a derivative along its path
        read_only(strip(draw.value))
        dd = draw.deps
        deps = Deps(dd.up | {name}, dd.smooth | {name}, dd.rough)
        value = draw.value
    else:  # a draw without one depends on its parents only through the estimator's terms
        value = read_only(effects.asarray(draw, dtype=float))
        deps = Deps(param_deps.up | {name}, frozenset({name}), frozenset())
    # the draw has the elements of the plates open here along their dims, and those of the
    # plates along its parameters' batch axes (scg.stochastic.plates)
    axes, mixed = label_draw(dist, level, run.plates, run.sites) if run.plated \
        else ((), frozenset())
    out = PerSample(value, level, deps, axes=axes, mixed=mixed)
    # (DReG's proposal, REBAR's relaxation: PerSample.law; else, for the score function
    # and Pathwise(stl=True), log q at the draw with q's parameters held: zero_mean.py)
    out.law = d.law or law_of(est, name, d.given, run)
    law = draw is d.handed_out  # (the law's own draws, whatever the estimator declares)
    site = Site(name, dist, out, est, reason, run.plates, param_deps, d.aux,
                own_draws=law or bool(est.own_draws),
                draws_from_law=law or bool(est.draws_from_law),
                param_versions=tuple((p, p.version) for p in params),
                mask=_site_mask(name, est, msg.fields.get("mask")))
    est.after_draw(site, run)
    run.add_site(site)
    return out.alias()  # (the model may change its value in place: the site keeps its own)


def _site_mask(name, est, mask):
    """The mask of a site drawn inside scg.mask, checked against its estimator."""
    if mask is None:
        return None
    if not est.serves_masks:
        raise EstimatorError(
            f"site {name!r} is drawn inside scg.mask, where {est!r} cannot serve it (it "
            "evaluates copies of the model or reweights the draw, which a mask would leave "
            "half counted); use the score function (scg.Score(...), 'auto') or a pathwise "
            "derivative there")
    return mask


def _choose(run, name, dist, spec):
    """(estimator object, reason) for a site."""
    if spec != "auto":
        spec.check(name, dist)
        return spec, "requested"
    family = family_name(dist)
    decided = run.decisions.get(name)
    if decided is not None:
        return decided, run.reasons[name]
    return auto.first_choice(dist, family, run.n)


def carries_gradient(v, run):
    """Can a derivative reach v: is it differentiated, or smooth in a draw that carries
    derivatives? (Any draw is smooth in itself; only some carry a derivative.)"""
    if isinstance(v, PerSample):
        return isinstance(v.value, Box) or any(
            run.sites[s].estimator.differentiable for s in v.deps.smooth if s in run.sites)
    return isinstance(v, Box)


class SiteDraw:
    """What an estimator's `draw` gets: the site, and its sources of randomness.

    Randomness is drawn for the n draws and shared by every copy of the run
    (`scg.stochastic.copies`), so that copies differ only where a copying site makes
    them differ. Attributes: `name`, `dist` (plates applied), `level`, `n`, `rows`
    (n times the number of copies), `rng`, `copies`, `param_deps`, `antithetic`.

    Set by the estimator's `draw`: `aux`, its own notes for its terms (kept on the site);
    `law`, when the values it returns are not draws of the site's distribution, the law
    they follow (None: the site's own), which a log-probability at the draw then takes
    (a relaxation's continuous form, DReG's proposal with its parameters held).
    """

    def __init__(self, run, name, dist, level, param_deps, antithetic):
        self.run = run
        self.name = name
        self.dist = dist
        self.level = level
        self.n = run.n
        self.rows = run.rows
        self.rng = run.rng
        self.copies = run.copies
        self.param_deps = param_deps
        self.antithetic = antithetic
        self.aux = {}  # kept on the site for the estimator's surrogate terms
        self.law = None  # the law of the values draw returns, if not the site's own
        self.handed_out = None  # the last draw of the law given out (sample, path)
        self._last_noise = None
        self.clone, self.shape, self.per_row = _physical(dist, self.rows, level)
        if antithetic and self.n % 2:
            raise EstimatorError(f"site {name!r}: antithetic draws come in pairs, so n must "
                                 f"be even; got n = {self.n}")

    def _copy_dependent(self):
        """Do the site's parameters differ between copies (a copying site upstream)?"""
        return bool(self.per_row) and any(k in self.param_deps.up for k in self.copies.names)

    def _draw(self, fn):
        """fn(dist, rng, shape) drawn once for the n draws and shared by every copy; per
        copy from the same generator state when the parameters differ between copies."""
        copies = self.copies
        if not copies:
            return fn(self.clone, self.rng, self.shape)
        if not self._copy_dependent():
            n = self.n
            base = _rows(self.clone, slice(0, n), self.per_row) if self.per_row else self.clone
            return copies.tile(fn(base, self.rng, (n,) if not self.per_row else ()))
        start = effects.position(self.rng)  # (under scg.jit: recorded, as the draws are)
        parts = []
        for c in range(copies.count):
            effects.restore(self.rng, start)
            part = _rows(self.clone, slice(c * self.n, (c + 1) * self.n), self.per_row)
            parts.append(fn(part, self.rng, ()))
        return np.concatenate(parts, axis=0)

    def noise(self, antithetic=None):
        """The noise of the sampling path, physical shape (rows, ...); in antithetic pairs
        (draw i + n/2 mirrors draw i) when the estimator asks for them."""
        eps = self._noise(antithetic)
        self._last_noise = eps
        return eps

    def _noise(self, antithetic):
        if antithetic is None:
            antithetic = self.antithetic
        if antithetic:
            half = self.n // 2
            eps = self.dist.noise(self.rng, (half,))
            both = np.concatenate([eps, antithetic_noise(self.dist, eps, self.name)], axis=0)
            return self.copies.tile(both) if self.copies else both
        return self._draw(lambda dist, rng, shape: dist.noise(rng, shape))

    def noise_path(self):
        """`path(noise())`, the traced draw along the sampling path; a family may keep less
        of the noise for the derivatives (`Distribution.fresh_path`), where the noise is
        drawn once for this site's rows (no pairs, no copies) and no handler sees every
        operation."""
        if self.antithetic or self.copies or effects.sees_operations():
            return self.path(self.noise())
        return family_of(self.dist).fresh_path(self.noise, self.path, self.rng)

    def rewrap(self, x, value):
        """The per-draw value x (a traced draw) with its physical value replaced by `value`
        (an operation of its own on it), the same dependencies."""
        return PerSample(value, x.level, x.deps, axes=x.axes, mixed=x.mixed)

    def per_draw(self, value):
        """A plain array of physical shape (rows, ...) as a per-draw value of this run, for
        an estimator that computes its draw with numpy functions (a relaxation)."""
        return PerSample(value, self.level)

    def path(self, noise):
        """The traced draw along the sampling path (a PerSample with derivatives)."""
        x = self.dist.path(PerSample(noise, self.level))
        caveat = self.dist.path_caveat(self.n)
        if caveat is not None:
            warnings.warn(f"site {self.name!r}: {caveat}", VarianceWarning, stacklevel=2)
        if noise is self._last_noise:
            self.handed_out = x
        return x

    def plain_path(self, noise):
        """The same path on plain values: a draw without derivatives."""
        return _plain(self.clone).path(noise)

    def sample(self):
        """Plain draws, physical shape (rows, ...), without derivatives."""
        if self.dist.has_rsample:
            x = effects.asarray(self.plain_path(self.noise()))
        elif self.antithetic:
            raise EstimatorError(
                f"site {self.name!r}: antithetic draws need a sampling path from noise; "
                f"{family_name(self.dist)} has none")
        else:
            x = self._draw(lambda dist, rng, shape: dist._sample(rng, shape))
        self.handed_out = x
        return x

    def uniform(self):
        """U(0, 1) numbers of the site's physical shape (rows, *batch, *event), shared by
        every copy (for estimators that draw through an inverse CDF)."""
        return self._draw(lambda dist, rng, shape: rng.random(dist._extended_shape(shape)))

    def draws(self, fn):
        """fn(plain dist, rng, sample shape) -> an array for the n draws: drawn with the
        common random numbers of `noise` (shared by copies; per copy from one generator
        state when the parameters differ between copies). The plain dist has physical
        parameters; its `_extended_shape(shape)` is the output's shape."""
        return self._draw(lambda dist, rng, shape: fn(_plain(dist), rng, shape))

    def state(self):
        """The state this site's estimator keeps between calls of the expectation (a dict,
        see site_states.py): empty on the first call, and for scg.trace's single run."""
        states = self.run.states
        if states is None:
            states = self.run.states = SiteStates()
        return estimator_of(states, self.name)

    def plain_params(self):
        """The family's parameters as plain arrays of physical shape (rows, ...) or shared."""
        return family_of(_plain(self.clone)).params

    def plain_family(self):
        """The family with those plain physical parameters: what an estimator asks for the
        probabilities of values it chooses itself (the points of a finite support)."""
        return family_of(_plain(self.clone))


def _rows(dist, rows, keys):
    inner = family_of(dist)
    return dist._rebuild({k: (v[rows] if k in keys else v) for k, v in inner.params.items()})


def _apply_plates(dist, name, plates):
    target = list(dist.batch_shape)
    for p in plates:
        if len(target) < -p.dim:
            target = [1] * (-p.dim - len(target)) + target
        if target[p.dim] == 1:
            target[p.dim] = p.size
        elif target[p.dim] != p.size:
            raise ValueError(f"site {name!r}: batch shape {dist.batch_shape} has size "
                             f"{target[p.dim]} at dim {p.dim}, but plate {p.name!r} there has "
                             f"size {p.size}")
    return dist if tuple(target) == dist.batch_shape else dist.expand(tuple(target))


def _captured(dist):
    """dist with its plain array parameters as scg keeps them (see core.tape.kept): the
    log-probability of a score site is computed after the model has run, and the model
    may have changed those arrays in place by then."""
    params = family_of(dist)._params  # (not .params: a copy)
    for v in params.values():
        if type(v) is np.ndarray:
            break
    else:
        return dist
    captured = {k: kept(v) if type(v) is np.ndarray else v for k, v in params.items()}
    if all(captured[k] is v for k, v in params.items()):
        return dist
    return dist._rebuild(captured)


def _plain(dist):
    """dist with the traced parameters of its family replaced by their plain values."""
    inner = family_of(dist)
    params = inner.params
    if not any(isinstance(v, Tracer) for v in params.values()):
        return dist
    return dist._rebuild({k: strip(v) for k, v in params.items()})


def _lifted_params(dist, level):
    """The family's parameters, the per-draw ones (of this run's level) replaced by their
    traced physical values lifted to full rank (rows, *batch, *event); and the names of
    those (empty if none is per-draw)."""
    inner = family_of(dist)
    params = inner.params
    keys = tuple(k for k, v in params.items() if isinstance(v, PerSample) and v.level == level)
    for key in keys:
        c = inner.arg_constraints.get(key)
        params[key] = lift(params[key], len(inner.batch_shape) + (c.event_dim if c else 0),
                           level)
    return params, keys


def _physical(dist, n, level):
    """A copy of dist with plain parameters whose batch shape includes the n draws, and the
    sample shape to draw with, and the names of the per-sample parameters, which are
    lifted to their full rank."""
    params, keys = _lifted_params(dist, level)
    if not keys:
        return dist, (n,), ()
    plain = {k: v if v is None else effects.asarray(v) for k, v in params.items()}
    return dist._rebuild(plain), (), keys


def _traced_physical(dist, level):
    """dist with its per-draw parameters replaced by their traced physical values, lifted
    to full rank (rows, *batch, *event): a distribution over the rows of a run."""
    params, keys = _lifted_params(dist, level)
    return dist._rebuild(params) if keys else dist


# ---------------------------------------------------------------------- cost
def cost(name, value):
    """Add a cost to the model: its value, summed over its shape, enters the objective.

    The objective is the expectation of the sum of all costs (minimize; negate rewards).

    Example:
        >>> scg.cost("penalty", 0.1 * x ** 2)
    """
    if effects.innermost() is None:
        current_run(f"scg.cost({name!r}, ...)")  # (raises: outside a model)
    _send(f"scg.cost({name!r}, ...)", effects.Message("cost", name, value=value))


def add_cost(run, msg):
    """Perform a "cost" message in `run`: check the value and record the cost."""
    name, value = msg.name, msg.fields["value"]
    run.check_new_name(name)
    mask = msg.fields.get("mask")
    if run.marginal is not None:  # (downstream of a marginalized site: a factor, or refused)
        log_value = msg.fields.get("likelihood")
        if log_value is not None and run.marginal.depends(log_value):
            if mask is not None:
                raise EstimatorError(
                    f"likelihood term {name!r} depends on a marginalized site and is given "
                    "inside scg.mask; multiply its log-value by the mask instead "
                    "(scg.factor(name, np.where(alive, log_value, 0.0)))")
            run.marginal.add(name, log_value, run.plates)
            run.factor_names.add(name)
            return None
        if isinstance(value, PerSample):
            refuse_downstream(run, f"cost {name!r}", value.deps.up)
    refuse_lazy(f"cost {name!r}", value)
    if value is None or isinstance(value, (str, bytes, dict, list, tuple)):
        raise TypeError(f"cost {name!r} must be a number or an array of numbers (per draw "
                        f"or shared), got {type(value).__name__} {value!r:.60}")
    raw = strip(value)
    dtype = getattr(raw, "dtype", None)  # (a value scg.jit holds has one without a read)
    kind = (dtype if isinstance(dtype, np.dtype) else np.asarray(raw).dtype).kind
    if kind not in "biuf":
        raise TypeError(f"cost {name!r} must be real numbers (per draw or shared), got "
                        f"{type(raw).__name__} {raw!r:.60}; " + _REAL_ADVICE.get(
                            kind, "give a number or an array of numbers"))
    if mask is not None:  # (scg.mask: the cost counts only where the condition holds)
        value = np.where(mask, value, 0.0)
        raw = strip(value)
    bad = count_nonfinite(raw)
    if bad:
        raise FloatingPointError(f"cost {name!r} is not finite for {bad} of "
                                 f"{np.size(strip(value))} entries" + _relaxed_hint(run, value))
    plates, deps, axes, mixed = (), NO_DEPS, (), frozenset()
    if isinstance(value, PerSample) and value.level == run.level:
        deps = value.deps
        # a cost of the plates along whose axes its value lies, wherever it is given; for the
        # score of a site whose elements of a plate it combined, a cost outside that plate
        axes = tuple(k for k, label in enumerate(value.axes) if label)
        plates = tuple(p for k in axes for p in value.axes[k])
        mixed = value.mixed
        value = value.alias()  # (the model may change its value in place after this call)
    elif type(value) is np.ndarray:
        value = kept(value)  # the model may change its buffer after this call
    for s in check_use(value, f"cost {name!r}", run):  # (an ELBO's log q(z): explain())
        run.sites[s].zero_mean_costs.append(name)
    if run.control:  # (after a branch on draws: whether the cost is here depends on them)
        deps = Deps(deps.up | run.control, deps.smooth, deps.rough | run.control)
    # a subsampled plate's costs stand for all its elements: those given inside it, those
    # along its axis and those that combined its elements
    scaled = set(run.plates) | set(plates) | {p for p, _ in mixed}
    scale = math.prod(p.scale for p in scaled)
    if scale != 1.0:
        value = R.multiply(value, scale)
    run.add_cost(Cost(name, value, plates, deps, axes, mixed))


_REAL_ADVICE = {
    "c": "a complex cost has no order to minimize: give its real part, its modulus "
         "(np.abs) or its squared modulus",
    "M": "convert times to numbers, e.g. (t - t0) / np.timedelta64(1, 's')",
    "m": "convert durations to numbers, e.g. d / np.timedelta64(1, 's')",
}


def refuse_lazy(what, value):
    """A generator, an iterator or a set is not a cost's value: name it (`what`) and say
    how to make the value (numpy would raise about float())."""
    if not isinstance(value, (collections.abc.Iterator, collections.abc.Set)):
        return
    kind = type(value).__name__
    raise TypeError(
        f"{what} is a {kind}, not a number or an array: scg cannot sum a lazy sequence of "
        "values. Make the value itself, e.g. sum(f(x) for x in ...) or np.sum([f(x) for x in "
        f"...]) instead of (f(x) for x in ...), or np.array(list(...)) for the values one by "
        "one (each is then a cost entry)")


def _relaxed_hint(run, value):
    """Why a cost may be non-finite on the relaxed copies of a REBAR or RELAX site."""
    up = value.deps.up if isinstance(value, PerSample) else ()
    names = [n for n in up if n in run.sites and "relaxed" in run.sites[n].aux]
    if not names:
        return ""
    return (f"; site {names[0]!r} is drawn by {run.sites[names[0]].estimator!r}, which also "
            "runs the model at relaxed values of the draw, strictly between 0 and 1: a "
            "Bernoulli or OneHotCategorical log_prob at the site's value takes its "
            "continuous form there, but a log_prob at a value computed from it (1 - z, an "
            "indexing), log(z) or a comparison of it may be -inf or nan. Write such a term "
            "as a formula finite on [0, 1], e.g. z * logits - softplus(logits), or use "
            "scg.DisARM() or scg.Score('loo'), which evaluate only 0 and 1")


# ---------------------------------------------------------------------- plate
@contextmanager
def plate(name, size, dim=-1, subsample_size=None):
    """Declare conditional independence along a batch dimension (counted from the right).

    Inside, element b of a site's score meets only the costs of element b (and costs
    outside the plate), and leave-one-out baselines are formed per element. The context
    gives the indices of the plate's elements, `np.arange(size)`.

    With `subsample_size=m` (a minibatch, as in Pyro), each run draws m distinct indices
    from the expectation's generator; the sites inside have m elements along the plate,
    and the plate's costs are multiplied by size / m: an unbiased estimate of the full
    plate's.

    Example:
        >>> with scg.plate("data", 128):
        ...     z = scg.sample("z", scg.Bernoulli(logits=enc).to_event(1))
        >>> with scg.plate("data", len(x), subsample_size=64) as idx:
        ...     scg.sample("y", scg.Normal(w * x[idx], 1.0), obs=y[idx])
    """
    what = f"scg.plate({name!r}, ...)"
    current_run(what)
    frame = _send(what, effects.Message("plate", name, size=size, dim=dim,
                                        subsample_size=subsample_size))
    handler = PlateHandler(frame)
    effects.push(handler)
    try:
        yield frame.indices
    finally:
        effects.pop(handler)
        _send(what, effects.Message("plate_exit", name, frame=frame))


def open_plate(run, msg):
    """Perform a "plate" message in `run`: check the plate and open it; its frame."""
    name, size, dim = msg.name, msg.fields["size"], msg.fields["dim"]
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"plate {name!r}: size must be a positive int (the number of "
                         f"elements along dim {dim}), got {size!r}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim >= 0:
        raise ValueError(f"plate {name!r}: dim must be a negative int (counted from the "
                         f"right, as in Pyro), got {dim!r}")
    for p in run.plates:
        if p.name == name:
            raise ValueError(f"plate {name!r} is opened inside a plate of the same name; a "
                             f"name used twice in one nesting would make plate={name!r} "
                             "ambiguous (scg.logmeanexp, explain()): give the inner plate "
                             "another name")
        if p.dim == dim:
            raise ValueError(f"plate {name!r}: dim {dim} is already used by the enclosing "
                             f"plate {p.name!r}; pass dim={min(q.dim for q in run.plates) - 1}")
    m = msg.fields.get("subsample_size")
    if m is None:
        frame = Plate(name, int(size), int(dim), indices=np.arange(int(size)))
    else:
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= size:
            raise ValueError(f"plate {name!r}: subsample_size must be an int from 1 to the "
                             f"plate's size {size}, got {m!r}")
        indices = run.rng.choice(int(size), int(m), replace=False)
        run.subsampled = True
        frame = Plate(name, int(m), int(dim), scale=size / m, indices=indices)
    run.enter_plates(run.plates + (frame,))
    return frame


def close_plate(run, msg):
    """Perform a "plate_exit" message in `run`: the plates open before it again."""
    frame = msg.fields["frame"]
    if not run.plates or run.plates[-1] is not frame:
        raise TracingError(f"plate {frame.name!r} was closed while an inner plate was open")
    run.enter_plates(run.plates[:-1])


# ---------------------------------------------------------------------- blackbox
def blackbox(fn, vectorize=False):
    """Wrap a numpy function of physical arrays as a node without derivative.

    Inside a model, `fn` receives per-sample arguments as arrays with a leading axis of
    one row per draw (n rows; n times the number of copies when an estimator such as
    scg.Enumerate() evaluates copies of the run) and must return such an array. Sites
    upstream of a black box are estimated by the score function under estimator="auto".

    With `vectorize=True`, `fn` is written for one draw: it is called on each row (each
    draw's arguments) and the results are stacked.

    Example:
        >>> simulate = scg.blackbox(lambda x: np.round(x))
        >>> step = scg.blackbox(lambda x: 1.0 if x > 0 else 0.0, vectorize=True)
    """
    if not isinstance(vectorize, (bool, np.bool_)):
        raise TypeError(f"scg.blackbox: vectorize must be True or False, got {vectorize!r}")
    return BlackBox(fn, bool(vectorize))


class BlackBox:
    """A numpy function called on the draws' rows, without derivative (see `blackbox`).
    A class rather than a closure, so that a model holding one pickles (for dask)."""

    scg_blackbox = True

    def __init__(self, fn, vectorize=False):
        self.fn = fn
        self.vectorize = vectorize
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        fn = self.fn
        run = innermost_run()
        level = run.level if run is not None else None

        def per_draw(a):
            return isinstance(a, PerSample) and a.level == level and bool(a.deps.up)

        def plain(a):
            # values that depend on no draw (parameters, also when copied once per draw
            # by scg.grad_samples) reach fn as they are, without the draws' axis
            if isinstance(a, PerSample) and a.level == level and not a.deps.up:
                return np.asarray(strip(a))[0]
            return strip(a)

        given = list(args) + list(kwargs.values())
        inputs = [a for a in given if per_draw(a)]
        for a in given:
            if not per_draw(a) and isinstance(a.value if isinstance(a, PerSample) else a, Box):
                raise EstimatorError(
                    f"scg.blackbox {getattr(fn, '__name__', fn)!r} is applied to a "
                    "differentiated value that depends on no draw (a parameter, or a value "
                    "computed from parameters only): a black box has no derivative, so the "
                    "gradient through it would silently be 0. Compute it with numpy "
                    "operations on the traced value (scg differentiates those), or pass "
                    "scg.stop_gradient(value) if a zero derivative is what you mean")
        call_args = [plain(a) for a in args]
        call_kwargs = {k: plain(v) for k, v in kwargs.items()}
        rowwise = {id(a) for a in inputs}
        try:
            if self.vectorize and inputs:
                rows = inputs[0].n
                pick = [i for i, a in enumerate(args) if id(a) in rowwise]
                keys = [k for k, v in kwargs.items() if id(v) in rowwise]

                def row(r):
                    a = [x[r] if i in pick else x for i, x in enumerate(call_args)]
                    kw = {k: (v[r] if k in keys else v) for k, v in call_kwargs.items()}
                    return fn(*a, **kw)
                out = np.array([row(r) for r in range(rows)], dtype=float)
            else:
                # (a copy: fn may return a buffer of its own that it changes on the next call)
                out = np.array(fn(*call_args, **call_kwargs), dtype=float)
        except Exception as error:
            if inputs and not self.vectorize:
                error.add_note(f"(scg.blackbox {getattr(fn, '__name__', fn)!r} receives the n "
                               "draws as rows: arrays of shape (n, ...). If it is written for "
                               "one draw, wrap it as scg.blackbox(fn, vectorize=True))")
            raise
        if not inputs:
            return out
        n = inputs[0].n
        if out.shape[:1] != (n,):
            raise ValueError(f"blackbox {getattr(fn, '__name__', fn)!r} must return an array "
                             f"with a leading axis of length n = {n}, got shape {out.shape}")
        result = PerSample(out, level, Deps.merge([a.deps for a in inputs]).through("jump"))
        effects.operation(self, inputs, args, kwargs, result)
        return result

    def __repr__(self):
        return f"scg.blackbox({getattr(self.fn, '__name__', self.fn)!r})"
