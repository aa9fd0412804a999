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

from ..core.tape import Tracer, strip
from ..distributions.multivariate_normal import triangular_solve
from ..errors import TracingError
from ..numpy import rules as R
from ..numpy.dispatch import FUNCTIONS, array_function, install_array_methods
from .runtime import RUNTIME


class Deps:
    """The sample sites a value depends on: all of them, along smooth paths, across jumps."""

    __slots__ = ("up", "smooth", "rough")

    def __init__(self, up=frozenset(), smooth=frozenset(), rough=frozenset()):
        self.up, self.smooth, self.rough = up, smooth, rough

    @staticmethod
    def merge(deps):
        deps = [d for d in deps if d is not None]
        if len(deps) == 1:
            return deps[0]
        if not deps:
            return NO_DEPS
        return Deps(frozenset().union(*[d.up for d in deps]),
                    frozenset().union(*[d.smooth for d in deps]),
                    frozenset().union(*[d.rough for d in deps]))

    def through(self, kind):
        """The dependencies after an operation of this primitive kind."""
        if kind == "jump":
            return Deps(self.up, frozenset(), self.rough | self.smooth)
        if kind == "cut":
            return Deps(self.up, frozenset(), self.rough)
        return self


NO_DEPS = Deps()


class PerSample(Tracer):
    """A value that differs between draws: physical shape (n, *shape).

    `plates` are the plates open where it was computed, by operations that keep their
    elements apart (`Mixed` plates if an operation there may have mixed them): such a value,
    returned from the model, is a cost of those plates."""

    __slots__ = ("value", "shape", "deps", "node", "plates")
    __array_priority__ = 200.0

    def __init__(self, value, level, deps=NO_DEPS, node=None, plates=()):
        self.value = value
        self.level = level
        self.shape = R.shape(strip(value))[1:]
        self.deps = deps
        self.node = node  # graph node id when the run records operations
        self.plates = plates

    @property
    def n(self):
        return np.shape(strip(self.value))[0]

    @property
    def dtype(self):
        return np.result_type(strip(self.value))

    def __bool__(self):
        if not self.deps.up:  # depends on no draw: the same in every row (parameter copies)
            return bool(np.asarray(strip(self.value))[0])
        raise TracingError(
            "Python control flow on a value that differs between draws (for example "
            "`if x > 0:`) cannot be evaluated for all draws at once; write it with "
            "np.where(condition, a, b), or np.maximum / np.minimum / np.clip")

    def __repr__(self):
        return f"PerSample(shape={self.shape}, n={self.n})"

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
        rule = prim.batch
        if rule is None:
            raise TypeError(f"scg has no rule to evaluate '{prim.name}' on values that differ "
                            "between draws")
        if rule == "elementwise":
            out = _elementwise(prim, args, kwargs, level)
        else:
            out = rule(prim, args, kwargs, level)
        inputs = [a for a in args if _is_ps(a, level)]
        deps = Deps.merge([a.deps for a in inputs]).through(prim.kind)
        result = PerSample(out, level, deps)
        on_op = RUNTIME.on_op
        if on_op is not None:
            on_op(prim, inputs, args, kwargs, result)
        return result


install_array_methods(PerSample)

class Mixed(tuple):
    """The `plates` of a value computed in these plates by an operation that may mix their
    elements (a reduction over a plate's axis, an index, a black box)."""


def _is_ps(a, level):
    return type(a) is PerSample and a.level == level


def _phys(a, level):
    return a.value if _is_ps(a, level) else a


def _lshape(a, level):
    return a.shape if _is_ps(a, level) else R.shape(a)


def lift(a, rank, level):
    """The physical value of a per-sample `a`, with logical rank raised to `rank` by
    inserting unit axes after the sample axis (so it broadcasts like its logical shape)."""
    v = a.value
    k = rank - len(a.shape)
    if k <= 0:
        return v
    return R.reshape(v, (R.shape(strip(v))[0],) + (1,) * k + a.shape)


def _elementwise(prim, args, kwargs, level):
    rank = 0
    for a in args:
        if a is not None:
            rank = max(rank, len(_lshape(a, level)))
    if rank == 0:  # scalars per draw: the physical values broadcast as they are
        return prim(*[_phys(a, level) for a in args], **kwargs)
    phys = [lift(a, rank, level) if _is_ps(a, level) else a for a in args]
    return prim(*phys, **kwargs)


def _n_of(args, level):
    for a in args:
        if _is_ps(a, level):
            return np.shape(strip(a.value))[0]
    raise AssertionError("no per-sample argument")


# ------------------------------------------------------------------ axes
def _axis_in(axis, nd):
    """A logical axis argument as a physical one (the sample axis is 0)."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd + 1 for a in axis)
    return axis % nd + 1


def _reduction(prim, args, kwargs, level):
    x = args[0]
    kw = dict(kwargs)
    nd = len(x.shape)
    if prim in (R.argmax, R.argmin) and kw.get("axis") is None:
        flat = R.reshape(x.value, (-1, int(np.prod(x.shape))))
        return prim(flat, axis=-1, keepdims=kw.get("keepdims", False))
    kw["axis"] = _axis_in(kw.get("axis"), nd)
    return prim(x.value, *args[1:], **kw)


def _softmax_like(prim, args, kwargs, level):
    x = args[0]
    return prim(x.value, axis=_axis_in(kwargs.get("axis", -1), len(x.shape)))


def _reshape(prim, args, kwargs, level):
    x, newshape = args
    return R.reshape(x.value, (_n_of(args, level),) + tuple(newshape))


def _transpose(prim, args, kwargs, level):
    x = args[0]
    axes = args[1] if len(args) > 1 else kwargs.get("axes")
    nd = len(x.shape)
    if axes is None:
        axes = tuple(range(nd - 1, -1, -1))
    return R.transpose(x.value, (0,) + tuple(a % nd + 1 for a in axes))


def _swapaxes(prim, args, kwargs, level):
    x, a, b = args
    nd = len(x.shape)
    return R.swapaxes(x.value, a % nd + 1, b % nd + 1)


def _expand_dims(prim, args, kwargs, level):
    x, axis = args
    axes = axis if isinstance(axis, tuple) else (axis,)
    out_nd = len(x.shape) + len(axes)
    return R.expand_dims(x.value, tuple(a % out_nd + 1 for a in axes))


def _squeeze(prim, args, kwargs, level):
    x = args[0]
    axis = args[1] if len(args) > 1 else kwargs.get("axis")
    if axis is None:
        axis = tuple(i for i, s in enumerate(x.shape) if s == 1)
    return R.squeeze(x.value, _axis_in(axis, len(x.shape)))


def _broadcast_to(prim, args, kwargs, level):
    x, shape = args
    return R.broadcast_to(lift(x, len(shape), level), (_n_of(args, level),) + tuple(shape))


def _joined(prim, args, kwargs, level):
    """concatenate / stack: every argument made physical, the axis moved past the samples."""
    n = _n_of(args, level)
    rank = max(len(_lshape(a, level)) for a in args)
    phys = [lift(a, rank, level) if _is_ps(a, level)
            else R.broadcast_to(a, (n,) + R.shape(a)) for a in args]
    out_nd = rank + (prim is R.stack)
    return prim(*phys, axis=kwargs.get("axis", 0) % out_nd + 1)


def _matmul(prim, args, kwargs, level):
    a, b = args
    a_vec, b_vec = len(_lshape(a, level)) == 1, len(_lshape(b, level)) == 1
    if a_vec:
        a = R.expand_dims(a, -2)  # (k,) -> (1, k), itself batched
    if b_vec:
        b = R.expand_dims(b, -1)
    rank = max(len(_lshape(a, level)), len(_lshape(b, level)))
    out = R.matmul(*[lift(x, rank, level) if _is_ps(x, level) else x for x in (a, b)])
    if b_vec:
        out = R.squeeze(out, -1)
    if a_vec:
        out = R.squeeze(out, -1 if b_vec else -2)
    return out


def _core_dims(*ranks):
    """The batch rule of a primitive whose array arguments have `ranks` core dimensions
    (2 for a matrix, 1 for a vector) and broadcast over the leading ones: per-draw
    arguments are lifted to the common batch rank, numpy's broadcasting does the rest."""
    def rule(prim, args, kwargs, level):
        batch = max(len(_lshape(a, level)) - r for a, r in zip(args, ranks))
        phys = [lift(a, batch + r, level) if _is_ps(a, level) else a
                for a, r in zip(args, ranks)]
        return prim(*phys, *args[len(ranks):], **kwargs)
    return rule


def _take_along_axis(prim, args, kwargs, level):
    x, idx = args[0], args[1]
    axis = args[2] if len(args) > 2 else kwargs.get("axis", -1)
    n, rank = _n_of(args, level), len(_lshape(x, level))
    # the table is broadcast over draws (a view), so its gradient sums over them
    table = lift(x, rank, level) if _is_ps(x, level) else R.broadcast_to(x, (n,) + R.shape(x))
    idx = strip(lift(idx, rank, level)) if _is_ps(idx, level) else np.expand_dims(idx, 0)
    return R.take_along_axis(table, R._as_index(np.asarray(idx)), axis % rank + 1)


def _einsum(prim, args, kwargs, level):
    subscripts, *operands = args
    ins, out = R._parse_einsum(subscripts, [_lshape(o, level) for o in operands])
    s = next(c for c in "zyxwvutsrqponmlkjihgfedcba" if c not in "".join(ins) + out)
    ins = [s + i if _is_ps(o, level) else i for i, o in zip(ins, operands)]
    return R.einsum(",".join(ins) + "->" + s + out, *[_phys(o, level) for o in operands])


def _expand_ellipsis(index, nd):
    if not any(i is Ellipsis for i in index):
        return index
    k = sum(1 for i in index if i is not None and i is not Ellipsis)
    at = next(j for j, i in enumerate(index) if i is Ellipsis)
    return index[:at] + (slice(None),) * (nd - k) + index[at + 1:]


def _is_advanced(i):
    return isinstance(i, (np.ndarray, list, PerSample)) or R._unbox(i) is not i


def _check_adjacent(index):
    flags = [_is_advanced(i) for i in index]
    if any(flags):  # beside index arrays, integers are advanced indices too
        flags = [f or isinstance(i, (int, np.integer)) for f, i in zip(flags, index)]
    if True in flags:
        first = flags.index(True)
        last = len(flags) - 1 - flags[::-1].index(True)
        if not all(flags[first:last + 1]):
            raise TracingError("indexing a per-sample value with array indices separated by "
                               "slices is not supported; index in two steps")
        return first
    return None


def _getitem(prim, args, kwargs, level):
    x, index = args
    index = _expand_ellipsis(index, len(x.shape))
    _check_adjacent(index)
    return R.getitem(x.value, (slice(None),) + index)


def _gather(prim, args, kwargs, level):
    x, template, *arrays = args
    index = _expand_ellipsis(R._fill(template, arrays), len(_lshape(x, level)))
    first = _check_adjacent(index)
    if any(not isinstance(i, slice) or i != slice(None) for i in index[:first]):
        raise TracingError("a per-sample index array may only follow full slices (x[:, a]); "
                           "index in two steps")
    n = _n_of(args, level)
    advanced = [i for i in index if _is_advanced(i)]
    rank = max(len(_lshape(i, level)) if _is_ps(i, level) else np.ndim(i) for i in advanced)
    index = tuple(R._as_index(strip(lift(i, rank, level))) if _is_ps(i, level) else i
                  for i in index)
    if not _is_ps(x, level):  # shared table: the sample axis appears where the arrays were
        out = R.getitem(x, index)
        return R.transpose(out, _move_to_front(first, R.ndim(out)))
    samples = np.arange(n).reshape((n,) + (1,) * rank)
    out = R.getitem(x.value, (samples,) + index)
    if first == 0:
        return out
    # numpy puts the broadcast array axes first: (n, *arrays, *sliced, *rest)
    nd = R.ndim(out)
    order = [0] + list(range(1 + rank, 1 + rank + first)) + list(range(1, 1 + rank)) + \
        list(range(1 + rank + first, nd))
    return R.transpose(out, tuple(order))


def _move_to_front(axis, nd):
    return (axis,) + tuple(i for i in range(nd) if i != axis)


for _p in (R.sum_, R.mean, R.max_, R.min_, R.argmax, R.argmin, R.logsumexp):
    _p.batch = _reduction
for _p in (R.softmax, R.log_softmax):
    _p.batch = _softmax_like
for _p, _rule in ((R.reshape, _reshape), (R.transpose, _transpose), (R.swapaxes, _swapaxes),
                  (R.expand_dims, _expand_dims), (R.squeeze, _squeeze),
                  (R.broadcast_to, _broadcast_to), (R.concatenate, _joined),
                  (R.stack, _joined), (R.matmul, _matmul),
                  (R.take_along_axis, _take_along_axis), (R.einsum, _einsum),
                  (R.getitem, _getitem), (R.gather, _gather),
                  (triangular_solve, _core_dims(2, 1))):
    _p.batch = _rule


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
for _f in (np.all, np.any, np.isclose, np.allclose, np.array_equal, np.nonzero,
           np.count_nonzero):
    _PER_SAMPLE_FUNCTIONS[_f] = _no_collapse(_f.__name__)
assert all(f in FUNCTIONS for f in _PER_SAMPLE_FUNCTIONS)
