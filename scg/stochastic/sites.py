"""What a model calls: scg.sample, scg.cost, scg.plate and scg.blackbox.

Each call records a site in the `Trace` of the model run in progress (the innermost
of this thread's `RUNTIME.runs`); outside a model they raise a clear error.
"""

import functools
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..core.tape import Box, Tracer, kept, read_only, strip
from ..distributions.base import Distribution, family_of
from ..errors import BiasWarning, EstimatorError, TracingError
from ..estimators import Pathwise, Score, as_estimator
from ..estimators.baselines import LeaveOneOut
from ..kernels.parallel import count_nonfinite
from ..numpy import rules as R
from .memory import check_fits
from .persample import NO_DEPS, Deps, Mixed, PerSample, lift
from .runtime import RUNTIME


def current_run(what):
    runs = RUNTIME.runs
    if not runs:
        raise TracingError(f"{what} was called outside a model; call the model through "
                           "scg.expectation(model, n=...) or scg.trace(model, ...)")
    return runs[-1]


@dataclass(frozen=True)
class Plate:
    """A batch dimension along which sites and costs are conditionally independent."""

    name: str
    size: int
    dim: int


@dataclass
class Site:
    """A sample site: its distribution, draws and estimator.

    `value` is the plain array of draws, physical shape (n, *shape); `draw` is the traced
    per-sample value the model saw.
    """

    name: str
    dist: Distribution
    draw: PerSample
    kind: str  # "pathwise" or "score"
    estimator: object  # Pathwise() or Score(...)
    reason: str
    plates: tuple
    param_deps: Deps
    _log_prob: object = field(default=None, repr=False)

    @property
    def value(self):
        return np.asarray(strip(self.draw))

    @property
    def baseline(self):
        return getattr(self.estimator, "baseline", None)

    def log_prob(self):
        """log p(value | parents), physical shape (n, *batch_shape), computed once."""
        if self._log_prob is None:
            with _no_recording():
                lp = self.dist.log_prob(self.draw)
            self._log_prob = lp.value if isinstance(lp, PerSample) else lp
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
    """A cost site: its value, of physical shape (n, *shape) or shared."""

    name: str
    value: object
    plates: tuple
    deps: Deps
    mixed: tuple = ()  # plates whose elements the value's computation may have mixed

    def plate_split(self):
        """(plates the cost has element by element, plates whose elements it mixes): a
        cost computed inside a plate but summed over its elements is outside that plate."""
        shape = self.value.shape if isinstance(self.value, PerSample) else R.shape(self.value)
        kept = tuple(p for p in self.plates if len(shape) >= -p.dim and shape[p.dim] == p.size)
        return kept, tuple(dict.fromkeys(
            [p for p in self.plates if p not in kept] + list(self.mixed)))


# ---------------------------------------------------------------------- sample
def sample(name, dist, *, estimator="auto"):
    """Draw from `dist` at a named site of the model and return the draw.

    Args:
        name: unique within the model.
        dist: a scg distribution; its parameters may depend on parameters and earlier draws.
        estimator: "auto" (pathwise where valid, else score with a leave-one-out baseline),
            "pathwise", "score", scg.Pathwise() or scg.Score(baseline=...).
    Returns:
        The draw, of shape dist.batch_shape + dist.event_shape (one value per draw).

    Example:
        >>> def model(mu):
        ...     x = scg.sample("x", scg.Normal(mu, 1.0))
        ...     return x ** 2
    """
    run = current_run(f"scg.sample({name!r}, ...)")
    if not isinstance(dist, Distribution):
        raise TypeError(f"site {name!r}: expected a scg distribution, got {type(dist).__name__}")
    run.check_new_name(name)
    dist = _apply_plates(_captured(dist), name, run.plates)
    check_fits(run, dist.batch_shape + dist.event_shape, name)
    spec = as_estimator(estimator)
    kind, est, reason = _choose(run, name, dist, spec)
    level = run.level
    params = [v for v in family_of(dist).params.values()
              if isinstance(v, PerSample) and v.level == level]
    param_deps = Deps.merge([p.deps for p in params])
    clone, shape = _physical(dist, run.n, level)
    with _no_recording():
        if dist.has_rsample:
            noise = read_only(clone.noise(run.rng, shape))
            if kind == "pathwise":
                draw = dist.path(PerSample(noise, level))
                value = draw.value
            else:  # the same path on plain values: a score site's draw has no derivative
                value = _plain(clone).path(noise)
        else:
            value = clone._sample(run.rng, shape)
        read_only(value)
    if kind == "pathwise":
        d = draw.deps
        deps = Deps(d.up | {name}, d.smooth | {name}, d.rough)
    else:  # a score site's value depends on its parents only through its score
        deps = Deps(param_deps.up | {name}, frozenset({name}), frozenset())
    out = PerSample(value, level, deps, plates=run.plates)
    site = Site(name, dist, out, kind, est, reason, run.plates, param_deps)
    if kind == "score":
        _warn_moving_support(site, run)
    run.add_site(site)
    return out


def _choose(run, name, dist, spec):
    """(kind, estimator object, reason) for a site."""
    family = type(family_of(dist)).__name__
    if isinstance(spec, Pathwise):
        if not dist.has_rsample:
            raise EstimatorError(
                f"site {name!r}: estimator='pathwise' but {family} has no reparameterization "
                "path (its draws are discrete or have no differentiable map from noise); "
                "use estimator='score' or 'auto'")
        return "pathwise", spec, "requested"
    if isinstance(spec, Score):
        return "score", spec, "requested"
    loo = LeaveOneOut() if run.n > 1 else None
    if not dist.has_rsample:
        return "score", Score(loo), f"{family} has no reparameterization path"
    if run.decisions.get(name) == "score":
        return "score", Score(loo), run.reasons[name]
    return "pathwise", Pathwise(), (f"{family} has a reparameterization path and every path "
                                    "from the draw to a cost is differentiable")


def _warn_moving_support(site, run):
    names = site.dist.moving_support
    if not names:
        return
    dist = family_of(site.dist)
    moving = [p for p in names if _carries_gradient(dist.params.get(p), run)]
    if moving:
        warnings.warn(
            f"site {site.name!r}: the score-function estimator is biased here: the support of "
            f"{dist!r} moves with {', '.join(moving)}, and the score misses the boundary term. "
            "Use a pathwise estimator (estimator='pathwise', valid when no jump lies downstream)",
            BiasWarning, stacklevel=3)


def _carries_gradient(v, run):
    """Can a derivative reach v: is it differentiated, or smooth in a pathwise draw? (A
    score site's draw is smooth in itself, but carries no derivative.)"""
    if isinstance(v, PerSample):
        return isinstance(v.value, Box) or any(
            run.sites[s].kind == "pathwise" for s in v.deps.smooth if s in run.sites)
    return isinstance(v, Box)


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


def _physical(dist, n, level):
    """A copy of dist with plain parameters whose batch shape includes the n draws, and the
    sample shape to draw with: per-sample parameters are lifted to their full rank."""
    inner = family_of(dist)
    params = inner.params
    if not any(isinstance(v, PerSample) and v.level == level for v in params.values()):
        return dist, (n,)
    plain = {}
    for key, v in params.items():
        if isinstance(v, PerSample) and v.level == level:
            c = inner.arg_constraints.get(key)
            rank = len(inner.batch_shape) + (c.event_dim if c is not None else 0)
            plain[key] = np.asarray(strip(lift(v, rank, level)))
        else:
            plain[key] = v if v is None else np.asarray(strip(v))
    return dist._rebuild(plain), ()


# ---------------------------------------------------------------------- cost
def cost(name, value):
    """Add a cost to the model: its value, summed over its shape, enters the objective.

    The objective is the expectation of the sum of all costs (minimize; negate rewards).

    Example:
        >>> scg.cost("penalty", 0.1 * x ** 2)
    """
    run = current_run(f"scg.cost({name!r}, ...)")
    run.check_new_name(name)
    bad = count_nonfinite(strip(value))
    if bad:
        raise FloatingPointError(f"cost {name!r} is not finite for {bad} of "
                                 f"{np.size(strip(value))} entries")
    plates, deps, mixed = run.plates, NO_DEPS, ()
    if isinstance(value, PerSample) and value.level == run.level:
        deps = value.deps
        # a value computed inside a plate, keeping its elements apart, is a cost of that
        # plate wherever it is given; one that may mix them is a cost outside it
        if type(value.plates) is Mixed:
            mixed = value.plates
            plates = tuple(p for p in plates if p not in mixed)
        else:
            plates = plates + tuple(p for p in value.plates if p not in plates)
    elif type(value) is np.ndarray:
        value = kept(value)  # the model may change its buffer after this call
    run.add_cost(Cost(name, value, plates, deps, mixed))


# ---------------------------------------------------------------------- plate
@contextmanager
def plate(name, size, dim=-1):
    """Declare conditional independence along a batch dimension (counted from the right).

    Inside, element b of a site's score meets only the costs of element b (and costs
    outside the plate), and leave-one-out baselines are formed per element.

    Example:
        >>> with scg.plate("data", 128):
        ...     z = scg.sample("z", scg.Bernoulli(logits=enc).to_event(1))
    """
    run = current_run(f"scg.plate({name!r}, ...)")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"plate {name!r}: size must be a positive int (the number of "
                         f"elements along dim {dim}), got {size!r}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim >= 0:
        raise ValueError(f"plate {name!r}: dim must be a negative int (counted from the "
                         f"right, as in Pyro), got {dim!r}")
    for p in run.plates:
        if p.dim == dim:
            raise ValueError(f"plate {name!r}: dim {dim} is already used by the enclosing "
                             f"plate {p.name!r}; pass dim={min(q.dim for q in run.plates) - 1}")
    frame = Plate(name, int(size), int(dim))
    outer = run.plates
    run.enter_plates(outer + (frame,))
    try:
        yield frame
    finally:
        run.enter_plates(outer)


# ---------------------------------------------------------------------- blackbox
def blackbox(fn):
    """Wrap a numpy function of physical arrays as a node without derivative.

    Inside a model, `fn` receives per-sample arguments as arrays with a leading axis of
    length n (one row per draw) and must return such an array. Sites upstream of a black
    box are estimated by the score function under estimator="auto".

    Example:
        >>> simulate = scg.blackbox(lambda x: np.round(x))
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        runs = RUNTIME.runs
        level = runs[-1].level if runs else None

        def per_draw(a):
            return isinstance(a, PerSample) and a.level == level and bool(a.deps.up)

        def plain(a):
            # values that depend on no draw (parameters, also when copied once per draw
            # by scg.grad_samples) reach fn as they are, without the draws' axis
            if isinstance(a, PerSample) and a.level == level and not a.deps.up:
                return np.asarray(strip(a))[0]
            return strip(a)

        inputs = [a for a in list(args) + list(kwargs.values()) if per_draw(a)]
        # (a copy: fn may return a buffer of its own that it changes on the next call)
        out = np.array(fn(*[plain(a) for a in args],
                          **{k: plain(v) for k, v in kwargs.items()}), dtype=float)
        if not inputs:
            return out
        n = inputs[0].n
        if out.shape[:1] != (n,):
            raise ValueError(f"blackbox {getattr(fn, '__name__', fn)!r} must return an array "
                             f"with a leading axis of length n = {n}, got shape {out.shape}")
        result = PerSample(out, level, Deps.merge([a.deps for a in inputs]).through("jump"))
        if RUNTIME.on_op is not None:
            RUNTIME.on_op(wrapper, inputs, args, kwargs, result)
        return result

    wrapper.scg_blackbox = True
    return wrapper


class _no_recording:
    """Per-draw operations in this block (a site's own sampling and log-density) report to
    no hook. (A class rather than a generator-based context manager: entered twice per
    site, and this is several times cheaper.)"""

    __slots__ = ("saved",)

    def __enter__(self):
        runtime = RUNTIME
        self.saved = runtime.on_op
        runtime.on_op = None

    def __exit__(self, *exc):
        RUNTIME.on_op = self.saved
        return False

