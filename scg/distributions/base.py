"""The base class of every distribution: shapes, validation, sampling paths, to_event.

A family subclass declares `arg_constraints`, `support`, `has_rsample`, and
implements `log_prob`, `mean`, `variance`, and either `noise` + `path` (a
reparameterization: value = path(noise), differentiable in the parameters) or
`_sample` (draws without a path). Parameters may be traced values; everything
a family computes is written with numpy calls on them, so gradients and the
per-sample batching of the stochastic layer apply unchanged.
"""

import functools

import numpy as np

from ..core import effects
from ..core.tape import Box, Tracer, strip
from ..errors import TracingError
from ..kernels.parallel import all_finite
from ..numpy import rules as R

_VALIDATE = [True]


def _validation():
    return _VALIDATE[0]


def set_validation(enabled):
    """Turn parameter validation on (the default) or off, for speed, for every new distribution."""
    _VALIDATE[0] = bool(enabled)


class Distribution:
    """A probability distribution with batch and event shapes.

    `finite_log_prob_of_draws`: a family sets it when the log-probability of its own draws
    is finite for every parameter that passes its constraints (a coin's is). The sites
    then do not check the log-probability of an estimator's own draws when the
    parameters were checked."""

    arg_constraints = {}
    support = None
    has_rsample = False
    finite_log_prob_of_draws = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if ("log_prob" in cls.__dict__ or "_sample" in cls.__dict__) and \
                "finite_log_prob_of_draws" not in cls.__dict__:
            cls.finite_log_prob_of_draws = False  # (its own formulas: not promised here)
        if ("log_prob" in cls.__dict__ or "enumerate_support" in cls.__dict__) and \
                "log_odds" not in cls.__dict__:
            cls.log_odds = Distribution.log_odds  # (its own law: the odds are not promised)
        if "log_prob" in cls.__dict__:
            cls.log_prob = _reuse_last(cls.__dict__["log_prob"])
        if "__init__" in cls.__dict__:
            cls.__init__ = _naming_shapes(cls.__dict__["__init__"])

    def __init__(self, params, batch_shape, event_shape=(), validate_args=None):
        self._params = params
        self.batch_shape = tuple(batch_shape)
        self.event_shape = tuple(event_shape)
        # (the switch read as state kept between calls: a repeated call whose switch was
        # turned since checks the parameters as a fresh one would)
        self._validate_args = effects.kept(_validation) if validate_args is None \
            else validate_args
        self._checked = False  # (the parameters passed their constraints)
        if self._validate_args:
            self._validate()
            self._checked = True

    # ------------------------------------------------------------ parameters
    @property
    def params(self):
        """The parameters given to the constructor, by name (possibly traced)."""
        return dict(self._params)

    def _rebuild(self, params):
        """The same family with other parameter values, not validated again."""
        cls = type(self)
        init = getattr(cls.__init__, "__wrapped__", None)  # (below `_naming_shapes`)
        if init is None:
            out = cls(**params, validate_args=False)
        else:
            # this distribution's own parameters, indexed, lifted or made plain: numbers, so
            # the wrapper's check of each argument is skipped (every site rebuilds its family
            # twice); shapes that do not broadcast still get its message
            out = cls.__new__(cls)
            try:
                init(out, **params, validate_args=False)
            except ParameterShapes:
                out = cls(**params, validate_args=False)
        out._checked = self._checked  # (the same parameters, indexed, captured or plain)
        return out

    def _validate(self):
        name_of = type(self).__name__
        for name, value in self._params.items():
            constraint = self.arg_constraints.get(name)
            if constraint is None:
                continue
            plain = strip(value)
            if effects.is_held(plain) and effects.check(
                    all_finite if constraint.finiteness else constraint.holds, plain,
                    f"the constraint on {name_of}'s {name}"):
                continue  # (under scg.jit: checked again on every replay)
            raw = _without_repeats(np.asarray(strip(plain), dtype=float))
            ok = np.asarray(constraint.check(raw))
            if not ok.all():
                bad = int(ok.size - np.count_nonzero(ok))
                # ok has one entry per batch element: add unit axes for the event dimensions
                ok_full = np.reshape(ok, ok.shape + (1,) * max(raw.ndim - ok.ndim, 0))
                first = raw[~np.broadcast_to(ok_full, raw.shape)].ravel()[:3] if raw.ndim else raw
                example = np.array2string(np.asarray(first), precision=6)  # (no overflow)
                raise ValueError(
                    f"{name_of}: parameter '{name}' must be {constraint.text}; "
                    f"{bad} of {ok.size} entries are not (for example {example}). "
                    f"Fix the value passed as {name}=, or pass validate_args=False "
                    "if you know what you are doing")

    @property
    def moving_support(self):
        """The names of the parameters that the support depends on (empty if fixed)."""
        s = self.support
        return tuple(getattr(s, a) for a in ("low_name", "high_name", "upper_name")
                     if hasattr(s, a))

    # ------------------------------------------------------------ sampling
    def sample(self, rng, shape=()):
        """Draw plain numpy samples of shape `shape + batch_shape + event_shape`.

        For numpy use outside models: the draw has no derivative. Inside a model, draw with
        `scg.sample("name", dist)`. A parameter that scg is differentiating, or that
        differs between the draws of a model, raises `scg.TracingError`.

        Example:
            >>> scg.Normal(0.0, 1.0).sample(np.random.default_rng(0), (3,))
        """
        if any(isinstance(v, Tracer) for v in self._params.values()):
            return self._rebuild({k: _plain_parameter(self, k, v) if isinstance(v, Tracer)
                                  else v for k, v in self._params.items()}).sample(rng, shape)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"{type(self).__name__}.sample(rng): rng must be a numpy "
                            f"Generator (np.random.default_rng(seed)), got {rng!r}")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if self.has_rsample:
            return effects.asarray(self.path(self.noise(rng, shape)))
        return self._sample(rng, shape)

    def last_log_prob(self, value):
        """The log-probability this distribution gave last for the per-draw `value` (the
        same object), if its parameters are still the same objects; else None."""
        last = self.__dict__.get("_last_log_prob")
        if last is None or last[1] is not _held(value) or last[4] is not _deps(value):
            return None
        return _unchanged(last) if _same_state(last, state_of(self)) else None

    def noise(self, rng, shape=()):
        """Draw the noise of the reparameterization path, shape `shape + batch + event`."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterization path")

    def path(self, noise):
        """Map noise to a draw, differentiably in the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterization path")

    def entropy(self):
        """The entropy -E[log p(x)], shape batch_shape, where the family has it in closed form
        (differentiable in the parameters)."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form entropy in scg")

    def cdf(self, value):
        """P(X <= value), where the family has it in closed form (differentiable)."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form cdf in scg")

    def icdf(self, u):
        """The quantile: the x with cdf(x) = u, where the family has it in closed form."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form icdf in scg")

    # ------------------------------------------------------------ capabilities
    # What estimators ask of a family (scg.estimators never test a family's name): a family
    # declares a capability by defining the method; `declares(dist, name)` tells.
    def enumerate_support(self, expand=True):
        """Every value of a finite support, in a fixed order: shape (S,) + event_shape, or
        with `expand` (S,) + batch_shape + event_shape (as torch.distributions). Declared by
        the families with a finite support; Enumerate, Marginalize, UnorderedSet and
        IndeCateR serve every family that declares it."""
        raise NotImplementedError(f"{type(self).__name__} declares no finite support "
                                  "(enumerate_support)")

    def log_prob_of_support(self):
        """log_prob at every value of `enumerate_support()` at once: shape (S,) +
        batch_shape, the values along the first axis. By default log_prob of the values
        laid along that axis; a family may give it another way, with the same numbers to
        the last bit eagerly and under scg.jit. Marginalize asks it for a site's own
        factor."""
        values = np.asarray(self.enumerate_support(expand=False))
        return self.log_prob(values.reshape(values.shape[:1] + (1,) * len(self.batch_shape) +
                                            tuple(self.event_shape)))

    def relaxed(self, temperature):
        """The concrete relaxation at `temperature`: a `scg.distributions.relaxed`
        distribution with a path from uniform noise, whose hard value (`.hard(y)`) is
        distributed as this one. Declared by Bernoulli and OneHotCategorical; the
        relaxation estimators (GumbelSoftmax, ReinMax, GumbelRao, GappedST, REBAR, RELAX)
        serve every family that declares it."""
        raise NotImplementedError(f"{type(self).__name__} declares no concrete relaxation "
                                  "(relaxed)")

    def weak_derivative(self, param):
        """The measure-valued derivative in parameter `param`: a `WeakDerivative` (the
        constant c and the positive and negative parts, d/dparam p = c (p+ - p-)), or None
        when the family has none in that parameter. MeasureValued serves every family that
        declares it."""
        raise NotImplementedError(f"{type(self).__name__} declares no weak derivative "
                                  "(weak_derivative)")

    def antithetic_noise(self, noise):
        """The mirror image of noise drawn by `noise()`: a draw of the same law whose errors
        cancel the first's for functions close to linear in the noise (eps -> -eps,
        u -> 1 - u). Declared by families with symmetric or uniform noise; antithetic=True
        serves every family that declares it."""
        raise NotImplementedError(f"{type(self).__name__} declares no antithetic noise "
                                  "(antithetic_noise)")

    def log_odds(self):
        """A coin's log p(second value) - log p(first value) (its values in the order of
        `enumerate_support`), traced in the parameters, broadcastable to batch_shape.
        Declared by Bernoulli (its logits); DisARM and ARMS take a coin's probabilities
        from it, and from `log_prob` of its two values when a coin does not declare it.
        The promise is about the family's own log_prob and support: a subclass that
        defines either of its own does not inherit it."""
        raise NotImplementedError(f"{type(self).__name__} declares no log-odds (log_odds)")

    def path_caveat(self, draws):
        """None, or why a pathwise derivative from `draws` draws of this distribution (with
        traced parameters) cannot be trusted: the sites warn with it (VarianceWarning)."""
        return None

    def fresh_path(self, noise, path, rng):
        """`path(noise())`: the traced draw of fresh noise from `rng`, where `noise()`
        draws the site's noise and `path` maps it (a family may keep less of the noise
        for the derivatives: Normal's draws it again)."""
        return path(noise())

    def _sample(self, rng, shape):
        raise NotImplementedError

    def _extended_shape(self, shape):
        return tuple(shape) + self.batch_shape + self.event_shape

    # ------------------------------------------------------------ shapes
    def expand(self, batch_shape):
        """The same distribution with parameters broadcast to `batch_shape`."""
        batch_shape = tuple(batch_shape)
        if batch_shape == self.batch_shape:
            return self
        params = {}
        for name, value in self._params.items():
            constraint = self.arg_constraints.get(name)
            event_dim = constraint.event_dim if constraint is not None else 0
            tail = R.shape(value)[len(R.shape(value)) - event_dim:] if event_dim else ()
            params[name] = np.broadcast_to(value, batch_shape + tuple(tail))
        return self._rebuild(params)

    def to_event(self, reinterpreted_batch_ndims=1):
        """Treat the rightmost batch dimensions as event dimensions (log_prob sums them)."""
        if reinterpreted_batch_ndims == 0:
            return self
        return Independent(self, reinterpreted_batch_ndims)

    def __repr__(self):
        shapes = f"batch_shape={self.batch_shape}, event_shape={self.event_shape}"
        return f"{type(self).__name__}({shapes})"

    def __getstate__(self):
        """What pickle and copy keep: everything but the log_prob cache of a model run."""
        state = self.__dict__.copy()
        state.pop("_last_log_prob", None)
        return state


def _plain_parameter(dist, name, value):
    """The plain value of a traced parameter for `Distribution.sample`, or TracingError.

    Only a parameter copied once per draw (scg.grad_samples) and passed through
    scg.stop_gradient is accepted: it depends on no draw and has no derivative, so its
    rows are the same and the first is the value (as under scg.grad, where it is plain).
    """
    inner = getattr(value, "value", None)
    draws = sorted(getattr(getattr(value, "deps", None), "up", None) or ())
    if type(value) is not Box and not draws and inner is not None and \
            not isinstance(inner, Tracer):
        return np.asarray(inner)[0]
    family = type(family_of(dist)).__name__
    site = f"scg.sample(\"name\", {family}(...))"
    if draws:
        raise TracingError(
            f"{family}.sample(rng): parameter {name!r} differs between the draws of the "
            f"model (it depends on site(s) {', '.join(map(repr, draws))}), which a plain "
            "draw cannot follow: it would take the n draws' values for one batch, and it "
            f"has no derivative. Draw with {site} instead: each of the n draws gets its own "
            "value, and the gradient flows through the site (scg.stop_gradient would not "
            "help: the value would still differ between draws)")
    raise TracingError(
        f"{family}.sample(rng): parameter {name!r} is a traced value that scg is "
        "differentiating, but a plain draw has no derivative, and inside a model it is one "
        "draw shared by all n draws of the expectation, so the estimate would be wrong. "
        f"Inside a model, draw with {site} instead: each of the n draws gets its own value "
        "and the gradient flows through the site. Only if one constant draw is really "
        "intended, pass the parameters through scg.stop_gradient first")


def _naming_shapes(init):
    """__init__ whose parameters of shapes that do not broadcast get an error naming the
    family and the shapes."""
    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        _require_numbers(type(self), init, args, kwargs)
        try:
            init(self, *args, **kwargs)
        except ParameterShapes as e:
            shapes = " and ".join(str(tuple(s)) for s in e.shapes)
            raise ValueError(f"{type(self).__name__}: the parameters have shapes {shapes}, "
                             "which do not "
                             "broadcast against each other (numpy's rules: equal sizes or 1, "
                             "aligned on the right); give them matching shapes") from None
    return checked


_NUMERIC_KINDS = frozenset("fiub")
_FLOAT = np.dtype(float)


def _require_numbers(cls, init, args, kwargs):
    """Raise TypeError naming the family and the parameter when a parameter (a name in
    `arg_constraints`) is None where the family has no default of None, a string, or
    something numpy cannot read as numbers (numpy's own error names neither)."""
    for i, value in enumerate(args):
        if not _plainly_numeric(value):
            _check_parameter(cls, init, _positional_names(init)[i] if i < len(
                _positional_names(init)) else None, value)
    for name, value in kwargs.items():
        if not _plainly_numeric(value):
            _check_parameter(cls, init, name, value)


def _plainly_numeric(value):
    """The common parameters, recognised at once: numbers, numeric arrays, traced values."""
    t = type(value)
    if t is float or t is int:
        return True
    if isinstance(value, Tracer):  # (its dtype, without reading a value scg.jit holds)
        return getattr(strip(value), "dtype", _FLOAT).kind in _NUMERIC_KINDS
    if t is np.ndarray or isinstance(value, np.generic):
        return value.dtype.kind in _NUMERIC_KINDS
    return False


@functools.lru_cache(maxsize=None)
def _positional_names(init):
    import inspect
    return [p.name for p in list(inspect.signature(init).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@functools.lru_cache(maxsize=None)
def _defaults(init):
    import inspect
    return {p.name: p.default for p in inspect.signature(init).parameters.values()}


def _check_parameter(cls, init, name, value):
    declared = cls.__dict__.get("arg_constraints", getattr(cls, "arg_constraints", None))
    if not isinstance(declared, dict) or name not in declared:
        return  # (not a parameter: validate_args, a base distribution)
    family = cls.__name__
    if value is None:
        if _defaults(init).get(name, ...) is None:
            return  # (an optional parameter left out: the family says which it needs)
        what = "is None"
    else:
        what = _non_numeric(value)
        if what is None:
            return
    raise TypeError(
        f"{family}: parameter '{name}' {what}; a distribution's parameters are real "
        f"numbers: pass {name}= a number, an array of numbers, or a value computed from the "
        "arguments being differentiated")


def _non_numeric(value):
    """What is not real numbers about `value` (for a message), or None if numpy reads it
    as real numbers."""
    if isinstance(value, (str, bytes)):
        return f"is the string {value!r:.40}"
    if isinstance(value, Tracer):
        value = np.empty((), dtype=getattr(strip(value), "dtype", _FLOAT))
    if isinstance(value, (list, tuple)) and _holds_tracer(value):
        return None  # (traced entries: what the family makes of them is its business)
    try:
        a = np.asarray(value)
    except Exception:  # (a ragged nesting, an object numpy refuses)
        return f"is a {type(value).__name__} that numpy cannot read as an array of numbers"
    if a.dtype.kind in "US":
        return f"is an array of strings (dtype {a.dtype})"
    if a.dtype.kind in "cMm":  # (no order: a log-density of complex numbers or times)
        what = {"c": "complex numbers", "M": "datetimes", "m": "durations"}[a.dtype.kind]
        return f"holds {what} (dtype {a.dtype})"
    if a.dtype.kind != "O":
        return None
    for entry in a.ravel():
        if isinstance(entry, Tracer) or isinstance(entry, (int, float, complex, np.number)):
            continue
        if entry is None:
            return "holds None"
        if isinstance(entry, (str, bytes)):
            return f"holds the string {entry!r:.40}"
        try:
            float(entry)
        except Exception:
            return f"holds a {type(entry).__name__}, not a number"
    return None


def _holds_tracer(seq):
    return any(isinstance(v, Tracer) or (isinstance(v, (list, tuple)) and _holds_tracer(v))
               for v in seq)


def _reuse_last(log_prob):
    """log_prob that gives its last result again for the same per-draw value: a model that
    computes log q(z) of a site's draw z (an ELBO) and the score term of the site then share
    one evaluation. Only per-draw values of a model run are remembered (plain arrays may
    change in place), and only while the distribution's attributes are the same objects
    (its writable plain arrays with the same entries) and the model has not changed the
    result in place; each caller gets an object of its own."""
    @functools.wraps(log_prob)
    def reuse(self, *args, **kwargs):
        if kwargs or len(args) != 1 or not _is_per_draw(args[0]):
            return log_prob(self, *args, **kwargs)
        value = args[0]
        law = getattr(value, "law", None)  # (what the site's estimator makes of log_prob at its draw)
        if law is not None:
            lp = law.log_prob(self, value, log_prob)
            if lp is not None:
                return lp
        state = state_of(self)
        last = self.__dict__.get("_last_log_prob")
        if last is not None and last[0] is log_prob and last[1] is _held(value) and \
                last[4] is _deps(value) and _same_state(last, state):
            kept = _unchanged(last)
            if kept is not None:  # (its own object: the model may change it in place)
                alias = getattr(kept, "alias", None)
                return kept if alias is None else alias()
        lp = log_prob(self, value)
        self._last_log_prob = (log_prob, _held(value), state, lp, _deps(value),
                               _writable_entries(state), getattr(lp, "version", 0))
        return lp
    return reuse


def _unchanged(last):
    """The log-probability kept in `last`, unless the model changed it in place since it
    was given (`lp += 1`: a new version of the same object); else None."""
    lp = last[3]
    return lp if getattr(lp, "version", 0) == last[6] else None


def _same_state(last, state):
    """Are the distribution's attributes the objects its last log_prob saw, and do the
    plain arrays among them anyone may write into hold the same entries (a parameter
    changed in place since: `loc += 1`)?"""
    seen = last[2]
    if len(seen) != len(state) or not all(a is b for a, b in zip(seen, state)):
        return False
    return _writable_entries(state) == last[5]


def _writable_entries(state):
    """The entries of the writable plain arrays among the attributes (one level into
    dicts, lists and tuples: a family's table of parameters), each array once."""
    out, seen = [], set()
    for v in state:
        for a in (v.values() if type(v) is dict else v if type(v) in (list, tuple) else (v,)):
            if type(a) is np.ndarray and id(a) not in seen and _may_change(a):
                seen.add(id(a))
                out.append((a.shape, a.dtype.str, a.tobytes()))
    return tuple(out)


def _may_change(a):
    """Could anyone write into the array (it, or the array that owns its memory, is
    writable)?"""
    while type(a) is np.ndarray:
        if a.flags.writeable:
            return True
        a = a.base
    return False


def _held(value):
    """What a per-draw value holds: the same for the model's value and the site's own copy
    of it (PerSample.alias), a new object once an in-place operator changed it. (A value
    an effect handler holds, below every transformation, is itself.)"""
    if not isinstance(value, Tracer) or type(value).floor:
        return value
    return value.value


def _deps(value):
    """The sites a per-draw value depends on (its `deps`, shared by its aliases): two
    values of the marginalized sites of a chain's steps may hold the same array
    (scg/stochastic/reuse.py) and depend on different sites."""
    return getattr(value, "deps", None)


def _is_per_draw(value):
    # the tracers are boxes (derivatives), per-draw values (scg/stochastic/persample.py)
    # and scg.jit's recorded values (below every transformation: `floor`), whose in-place
    # operators write into their arrays, so that a result kept could change
    return isinstance(value, Tracer) and type(value) is not Box and not type(value).floor


def state_of(dist):
    """The values of the distribution's attributes (an attribute set since: another one)."""
    return tuple(v for k, v in vars(dist).items() if k != "_last_log_prob")


def _without_repeats(a):
    """A broadcast view checked once per distinct entry (per-draw parameter copies are
    broadcast views of one value)."""
    if 0 not in a.strides or a.size == 0:
        return a
    return a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)]


class Independent(Distribution):
    """A distribution whose rightmost k batch dimensions are event dimensions."""

    def __init__(self, base, reinterpreted_batch_ndims, validate_args=None):
        k = int(reinterpreted_batch_ndims)
        if not 0 < k <= len(base.batch_shape):
            raise ValueError(f"to_event({k}) on {base!r}: it has only "
                             f"{len(base.batch_shape)} batch dimensions")
        self.base = base
        self.k = k
        cut = len(base.batch_shape) - k
        super().__init__(base.params, base.batch_shape[:cut],
                         base.batch_shape[cut:] + base.event_shape, validate_args=False)

    # the base's own, not copies: an Independent pickles as its base and k
    @property
    def has_rsample(self):
        return self.base.has_rsample

    @property
    def support(self):
        return self.base.support

    @property
    def arg_constraints(self):
        return self.base.arg_constraints

    def _rebuild(self, params):
        return Independent(self.base._rebuild(params), self.k)

    def expand(self, batch_shape):
        """Broadcast the batch dimensions; the event dimensions stay as they are."""
        if tuple(batch_shape) == self.batch_shape:
            return self
        events = self.base.batch_shape[len(self.base.batch_shape) - self.k:]
        return Independent(self.base.expand(tuple(batch_shape) + events), self.k)

    def log_prob(self, value):
        lp = self.base.log_prob(value)
        return R.sum_(lp, axis=tuple(range(-self.k, 0)))

    def relaxed_log_prob(self, value):
        lp = self.base.relaxed_log_prob(value)
        return R.sum_(lp, axis=tuple(range(-self.k, 0)))

    def noise(self, rng, shape=()):
        return self.base.noise(rng, shape)

    def antithetic_noise(self, noise):
        return self.base.antithetic_noise(noise)

    def path_caveat(self, draws):
        return self.base.path_caveat(draws)

    def path(self, noise):
        return self.base.path(noise)

    def _sample(self, rng, shape):
        return self.base._sample(rng, shape)

    @property
    def mean(self):
        return self.base.mean

    @property
    def variance(self):
        return self.base.variance

    def entropy(self):
        h = self.base.entropy()
        return np.sum(h, axis=tuple(range(-self.k, 0))) if self.k else h

    def __repr__(self):
        return f"Independent({self.base!r}, {self.k})"


def family_of(dist):
    """The distribution under any to_event wrappers (it holds the parameters)."""
    while isinstance(dist, Independent):
        dist = dist.base
    return dist


def declares(dist, capability):
    """Does the family of `dist` declare `capability` ("enumerate_support", "relaxed",
    "weak_derivative", "antithetic_noise", "log_odds"): does it define the method?"""
    family = family_of(dist)
    own = getattr(type(family), capability, None)
    return own is not None and own is not getattr(Distribution, capability)


def family_name(dist):
    """The name of the scg family of `dist`, under any to_event wrappers: a user's subclass
    of a family (`class Coin(scg.Bernoulli)`) is served as that family ("Bernoulli"); a
    distribution of the user's own (a subclass of the base classes only) by its name."""
    cls = type(family_of(dist))
    for c in cls.__mro__:
        if c.__module__.startswith("scg.distributions.") and c.__module__ not in _BASES:
            return c.__name__
    return cls.__name__


_BASES = ("scg.distributions.base", "scg.distributions.location_scale")


def broadcast_shape(*values):
    """The broadcast of the (logical) shapes of plain or traced values."""
    shapes = [R.shape(v) for v in values]
    if all(s == shapes[0] for s in shapes):  # (np.broadcast_shapes costs microseconds)
        return tuple(shapes[0])
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ParameterShapes(shapes) from None


class ParameterShapes(ValueError):
    """A family's parameters whose shapes do not broadcast (the family adds its name)."""

    def __init__(self, shapes):
        super().__init__(shapes)
        self.shapes = shapes
