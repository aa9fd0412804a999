"""Per-sample values: a model written for one draw, evaluated for n draws at once.

A `PerSample` holds a physical array of shape (n, *logical_shape) and behaves
as a value of its logical shape: broadcasting, reductions, `axis=` arguments,
indexing and matrix products act on logical axes, so the sample axis can never
be mistaken for a batch axis. Values that depend on no draw stay plain (shared).

Each PerSample also carries `Deps`: which sample sites it depends on, and
whether along a differentiable path ("smooth") or across a jump or black box
("rough"). The stochastic layer reads them to decide, and to check, estimators.
"""

import numpy as np

from ..core import effects
from ..core.tape import THREAD, Tracer, register_array_methods, strip
from ..errors import TracingError
from ..numpy import rules as R
from ..numpy.dispatch import FUNCTIONS, array_function
from .runtime import innermost_run


class Deps:
    """The sample sites a value depends on: all of them, along smooth paths, across jumps."""

    __slots__ = ("up", "smooth", "rough", "last", "passed")

    def __init__(self, up=frozenset(), smooth=frozenset(), rough=frozenset()):
        self.up, self.smooth, self.rough = up, smooth, rough
        self.last = None  # (the last `joined`: the other Deps and the result)
        self.passed = None  # (the last `through` a jump or a cut: the kind and the result)

    @staticmethod
    def merge(deps):
        deps = [d for d in deps if d is not None]
        if not deps:
            return NO_DEPS
        out = deps[0]
        for d in deps[1:]:
            out = out.joined(d)
        return out

    def joined(self, other):
        """The dependencies of both: one of the two when it holds the other's (most
        operations combine values of the same draws), else their union; the same pair
        again, the same result (a loop's state depends on every step before: its sets
        grow with the loop, and the values of one step combine the same few)."""
        if other is self or other is NO_DEPS:
            return self
        if self is NO_DEPS:
            return other
        last = self.last
        if last is not None and last[0] is other:
            return last[1]
        up, other_up = self.up, other.up
        if len(other_up) <= len(up) and other_up <= up and other.smooth <= self.smooth \
                and other.rough <= self.rough:
            out = self
        elif len(up) <= len(other_up) and up <= other_up and self.smooth <= other.smooth \
                and self.rough <= other.rough:
            out = other
        else:
            out = Deps(up | other_up, self.smooth | other.smooth, self.rough | other.rough)
        self.last = (other, out)
        other.last = (self, out)
        return out

    def through(self, kind):
        """The dependencies after an operation of this primitive kind (the same object for
        the same kind again)."""
        if kind != "jump" and kind != "cut" or not self.smooth:
            return self  # (no smooth path left to cut: the same sets)
        passed = self.passed
        if passed is not None and passed[0] == kind:
            return passed[1]
        out = Deps(self.up, frozenset(), self.rough | self.smooth if kind == "jump"
                   else self.rough)
        self.passed = (kind, out)
        return out


NO_DEPS = Deps()


class PerSample(Tracer):
    """A value that differs between draws: physical shape (n, *shape).

    Plates are known by position: `axes` has one frozenset per logical axis, the plate
    whose elements lie along it (empty for other axes; `()` when no axis has a plate), and
    `mixed` holds the pairs (plate, site) whose elements the value has combined (a
    reduction, a contraction or an index across the plate's axis, a black box): for that
    site's score, the value is not per element of that plate. See `scg.stochastic.plates`."""

    __slots__ = ("value", "shape", "deps", "node", "axes", "mixed", "law", "version",
                 "held", "bent")
    __array_priority__ = 200.0

    def __init__(self, value, level, deps=NO_DEPS, node=None, axes=(), mixed=frozenset()):
        self.value = value
        self.level = level
        self.shape = R.shape(strip(value))[1:]
        self.deps = deps
        self.node = node  # graph node id when the run records operations
        self.axes = axes
        self.mixed = mixed
        # (the site's own draw: what its estimator makes of a log_prob at it, an object
        # with log_prob(dist, value, log_prob) giving an array or None for the plain one;
        # DReG's Proposal, REBAR's relaxed copies)
        self.law = None
        self.version = 0  # (how many in-place operators changed it)
        # the sites whose own log-probability at their draw, taken with its parameters held
        # (scg/stochastic/zero_mean.py), the value holds: linearly, with coefficients that
        # do not depend on the site's draw (`held`: its dropped derivative has mean zero),
        # or otherwise (`bent`: the derivative is needed)
        self.held = self.bent = _NONE

    @property
    def plates(self):
        """The plates along whose axes the value lies, in the order of its axes."""
        return tuple(p for label in self.axes for p in label)

    @property
    def n(self):
        return np.shape(strip(self.value))[0]

    @property
    def dtype(self):
        return np.result_type(strip(self.value))

    def __bool__(self):
        if not self.deps.up:  # depends on no draw: the same in every row (parameter copies)
            return bool(np.asarray(strip(self.value))[0])
        if self.n == 1 and not self.shape and _branch_on(self):
            # one draw: its own branch, a function of score-function sites only (their
            # estimate needs no derivative through it; the costs after it depend on them)
            return bool(effects.read(self.value, "it was used as a truth value")[0])
        raise TracingError(
            "Python control flow on a value that differs between draws (for example "
            "`if x > 0:`) cannot be evaluated for all draws at once; write it with "
            "np.where(condition, a, b), or np.maximum / np.minimum / np.clip. To end a loop "
            "of episodes, count each step with `with scg.mask(alive):` and leave the loop "
            "with `if scg.all(done): break`" + (
                "" if self.n != 1 else "; with one draw, a branch is allowed on values of "
                "score-function sites only, not on a pathwise draw (a jump its derivative "
                "would miss): draw it with estimator='score' to branch on it"))

    def __repr__(self):
        return f"PerSample(shape={self.shape}, n={self.n})"

    def alias(self):
        """Another object for the same value: what scg keeps of a value it has used, so that
        an in-place operator on the model's object leaves it as it was."""
        other = PerSample.__new__(PerSample)
        for k in ("value", "level", "shape", "deps", "node", "axes", "mixed", "law", "held",
                  "bent"):
            setattr(other, k, getattr(self, k))
        other.version = 0
        return other

    # In-place operators follow numpy's aliasing (`y = x; y += 1` changes x): the object
    # takes the result's value. scg's own records hold aliases (a site's draw, a cost).
    def _assign(self, result, op):
        if result is NotImplemented:
            return result
        if not (type(result) is PerSample and result.level == self.level):
            return result  # (another level's value: Python rebinds the name)
        if result.shape != self.shape:
            raise ValueError(f"non-broadcastable output operand with shape {self.shape} "
                             f"doesn't match the broadcast shape {result.shape} (x {op}= y "
                             "writes into x, as numpy does; write x = x " + op + " y for a "
                             "new value)")
        for k in ("value", "deps", "node", "axes", "mixed", "held", "bent"):
            setattr(self, k, getattr(result, k))
        self.law = None  # (no longer a site's own draw)
        self.version += 1
        return self

    def __iadd__(self, other):
        return self._assign(self + other, "+")

    def __isub__(self, other):
        return self._assign(self - other, "-")

    def __imul__(self, other):
        return self._assign(self * other, "*")

    def __itruediv__(self, other):
        return self._assign(self / other, "/")

    def __ipow__(self, other):
        return self._assign(self ** other, "**")

    def __imatmul__(self, other):
        return self._assign(self @ other, "@")

    def __setitem__(self, index, value):
        raise TypeError(
            "a value that differs between draws cannot be assigned into by index (x[i] = v, "
            "x[i] += v): build the new value instead, e.g. x = np.where(np.arange(x.shape[-1]) "
            "== i, v, x), or np.concatenate / np.stack of its parts")

    def __array__(self, dtype=None, copy=None):
        raise TracingError(
            "a value that differs between draws cannot become a plain numpy array (np.asarray, "
            "np.array, a numpy random generator). If you are drawing random numbers from it "
            "(rng.normal(x, 1.0)), write scg.sample(\"name\", scg.Normal(x, 1.0)): each draw "
            "then gets its own value and the derivative flows. If it indexes a plain array "
            "(table[k], np.take(table, k)), write scg.take(table, k, axis=0); for code outside "
            "scg's rules, wrap it in scg.blackbox(fn); otherwise apply numpy functions to it "
            "directly")

    def __array_function__(self, func, types, args, kwargs):
        impl = _PER_SAMPLE_FUNCTIONS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return array_function(self, func, types, args, kwargs)

    @staticmethod
    def process(prim, args, kwargs, level):
        # (every per-draw operation: one pass over the arguments, and the result made
        # without __init__'s defaults and shape lookup where they are known)
        rule = prim.batch
        if rule is None:
            raise TypeError(f"scg has no rule to evaluate '{prim.name}' on values that differ "
                            "between draws")
        ops = THREAD.ops  # (the innermost run, which effects.operation would reach)
        key = out = None
        if ops is not None and ops.marginal is not None:  # (marginalized sites: reuse.py)
            reuse = ops.marginal.reuse
            key = reuse.key(prim, args, kwargs, level)
            if key is not None:
                out = reuse.results.get(key)  # (the value computed before in this run)
        reused = out is not None
        if reused:
            inputs = [a for a in args if type(a) is PerSample and a.level == level]
        elif rule == "elementwise":
            out, inputs = _elementwise(prim, args, kwargs, level)
        else:  # the rule sees arrays: the physical values and the logical shapes
            arrays, batched, inputs = [], [], []
            for a in args:
                if type(a) is PerSample and a.level == level:
                    arrays.append(a.value)
                    batched.append(a.shape)
                    inputs.append(a)
                else:
                    arrays.append(a)
                    batched.append(None)
            out = rule(prim, arrays, kwargs, batched)
        if len(inputs) == 1:
            first = inputs[0]
            deps = first.deps
            follow = first.held or first.bent
        else:
            deps = inputs[0].deps.joined(inputs[1].deps) if len(inputs) == 2 else \
                Deps.merge([a.deps for a in inputs])
            follow = False
            for a in inputs:
                if a.held or a.bent:
                    follow = True
                    break
        if prim.kind != "smooth":
            deps = deps.through(prim.kind)
        result = _made(out, level, deps)
        if key is not None and not reused:
            reuse.keep(key, out, result.shape)
        if follow:  # (rare: an ELBO's log q(z), see zero_mean.py)
            _follow_held(prim, args, inputs, result, level)
        if ops is not None:  # (effects.operation, inlined: every per-draw operation)
            ops.operation(prim, inputs, args, kwargs, result)
        return result


def _operator(prim, reflected=False):
    """A Python operator of per-draw values (`x * 0.5`, `0.5 * x`, `x + y`): the
    primitive's call without its dispatch when no operand is a tracer of a higher level."""
    process = PerSample.process

    def operator(self, other):
        if isinstance(other, Tracer) and other.level > self.level:
            return prim(other, self) if reflected else prim(self, other)
        return process(prim, (other, self) if reflected else (self, other), {}, self.level)
    return operator


def _unary(prim):
    process = PerSample.process

    def operator(self):
        return process(prim, (self,), {}, self.level)
    return operator


_OPERATORS = {"add": R.add, "sub": R.subtract, "mul": R.multiply, "truediv": R.divide,
              "pow": R.power, "matmul": R.matmul, "and": R.bitwise_and, "or": R.bitwise_or}
register_array_methods(
    {**{f"__{name}__": _operator(p) for name, p in _OPERATORS.items()},
     **{f"__r{name}__": _operator(p, reflected=True) for name, p in _OPERATORS.items()},
     "__lt__": _operator(R.less), "__le__": _operator(R.less_equal),
     "__gt__": _operator(R.greater), "__ge__": _operator(R.greater_equal),
     "__neg__": _unary(R.negative), "__invert__": _unary(R.invert)}, cls=PerSample)

_new_object = object.__new__
_ndarray = np.ndarray


def _made(value, level, deps):
    """PerSample(value, level, deps), without the call of __init__ (every operation makes
    one: this is its hot path)."""
    result = _new_object(PerSample)
    result.value = value
    result.level = level
    result.shape = value.shape[1:] if type(value) is _ndarray else R.shape(strip(value))[1:]
    result.deps = deps
    result.node = None
    result.axes = ()
    result.mixed = _NONE
    result.law = None
    result.version = 0
    result.held = result.bent = _NONE
    return result


_NONE = frozenset()
# the primitives linear in each of their per-draw arguments, and those linear in some
# arguments where the others do not depend on the site (multiplication, division's
# numerator, the branches of np.where); stop_gradient drops the derivative altogether
_LINEAR = frozenset({"add", "subtract", "negative", "sum", "mean", "reshape", "transpose",
                     "swapaxes", "expand_dims", "squeeze", "broadcast_to", "concatenate",
                     "stack", "getitem", "gather", "take_along_axis", "cast"})
_LINEAR_WHERE_OTHERS_ARE_NOT = {"multiply": (0, 1), "matmul": (0, 1), "einsum": None,
                                "divide": (0,), "where": (1, 2)}


def _follow_held(prim, args, inputs, result, level):
    """Which held log-probabilities the result of `prim` holds linearly (`held`) and which
    otherwise (`bent`)."""
    name = prim.name
    if name == "stop_gradient":
        return
    bent = _NONE.union(*[a.bent for a in inputs])
    held = _NONE
    if name in _LINEAR:
        held = _NONE.union(*[a.held for a in inputs])
    elif name in _LINEAR_WHERE_OTHERS_ARE_NOT:
        slots = _LINEAR_WHERE_OTHERS_ARE_NOT[name]
        per_draw = [(i, a) for i, a in enumerate(args) if _is_ps(a, level)]
        for i, a in per_draw:
            others = [b for j, b in per_draw if j != i]
            for s in a.held:
                if (slots is None or i in slots) and not any(
                        s in b.deps.up or s in b.held or s in b.bent for b in others):
                    held = held | {s}
                else:
                    bent = bent | {s}
    else:
        bent = bent.union(*[a.held for a in inputs])
    result.held, result.bent = held - bent, bent


def _is_ps(a, level):
    return type(a) is PerSample and a.level == level


def lift(a, rank, level):
    """The physical value of a per-sample `a`, with logical rank raised to `rank` by
    inserting unit axes after the sample axis (so it broadcasts like its logical shape)."""
    v = a.value
    k = rank - len(a.shape)
    if k <= 0:
        return v
    return R.reshape(v, (R.shape(strip(v))[0],) + (1,) * k + a.shape)


def _elementwise(prim, args, kwargs, level):
    """prim on the physical values, each per-draw one lifted to the rank of the widest
    argument; and the per-draw arguments (of this level)."""
    inputs = []
    rank = 0
    for a in args:
        if type(a) is PerSample and a.level == level:
            inputs.append(a)
            r = len(a.shape)
        elif a is None or type(a) in _NUMBERS:
            continue
        else:
            r = len(R.shape(a))
        if r > rank:
            rank = r
    if rank == 0:  # scalars per draw: the physical values broadcast as they are
        phys = [a.value if type(a) is PerSample and a.level == level else a for a in args]
    else:
        phys = [lift(a, rank, level) if type(a) is PerSample and a.level == level else a
                for a in args]
    return (prim(*phys, **kwargs) if kwargs else prim(*phys)), inputs


_NUMBERS = (float, int, bool)


# (Batching rules are given where their primitives are defined: `batch`, see "batching
# rules" in scg/numpy/rules.py.)


# ------------------------------------------------------------------ numpy functions that
# only read values: on per-sample values they answer for the logical value
def _like(fn):
    def impl(a, *args, **kwargs):
        return fn(np.empty(a.shape), *args, **kwargs) if isinstance(a, PerSample) else \
            fn(a, *args, **kwargs)
    return impl


def _no_collapse(name):
    def impl(*args, **kwargs):
        raise TracingError(f"np.{name} of a value that differs between draws would mix the "
                           "draws into one Python answer; keep the computation per draw "
                           "(np.where, comparisons) instead")
    return impl


_PER_SAMPLE_FUNCTIONS = {
    np.zeros_like: _like(np.zeros_like), np.ones_like: _like(np.ones_like),
    np.full_like: _like(np.full_like), np.empty_like: _like(np.empty_like),
}
for _f in (np.isclose, np.allclose, np.array_equal, np.nonzero,
           np.count_nonzero):
    _PER_SAMPLE_FUNCTIONS[_f] = _no_collapse(_f.__name__)
assert all(f in FUNCTIONS for f in _PER_SAMPLE_FUNCTIONS)


def _branch_on(value):
    """May Python branch on this one-draw value? Where no site with a derivative along its
    draw (pathwise) lies upstream: then the run notes that every later cost depends on the
    sites it came from (the branch decides which costs there are)."""
    run = innermost_run()
    if run is None or any(s not in run.sites or run.sites[s].estimator.differentiable
                          for s in value.deps.up):
        return False
    run.control = run.control | value.deps.up
    return True
