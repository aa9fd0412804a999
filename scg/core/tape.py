"""The tape: primitives, tracers, trace levels and the backward pass.

Every differentiable operation is a `Primitive`. Calling a primitive on plain
values runs its numpy implementation; calling it on a `Tracer` hands the call
to the tracer's interpretation (`Box` records it for reverse mode; the
stochastic layer's per-sample values batch it). Tracers carry a *level*: the
innermost transformation has the highest level and is processed first, so
nested `grad` calls and batching compose (as in JAX). Gradient rules are
written with primitives themselves, so they are recorded by outer levels and
derivatives of any order work.
"""

import itertools
import os
import threading
from heapq import heappop, heappush

import numpy as np

from . import collector

_node_ids = itertools.count()  # (next() on a count is atomic: boxes of all threads share it)


class _ThreadState(threading.local):
    """What the tape keeps per thread: gradients taken in several threads at once each have
    their own levels. `level` is the innermost open trace level (0: none); `dropped`
    maps a level to the names of the jumps and cuts its values went through (for the
    message when no derivative reaches an argument)."""

    def __init__(self):
        self.level = 0
        self.dropped = {}
        self.locked = []  # (level, array) made read-only while that level's tape lives
        self.handler = None  # the innermost handler of the effect stack (core/effects.py)
        self.values = None  # the innermost one that takes its value messages
        self.ops = None  # the innermost one that watches per-draw operations
        self.recording = None  # the innermost one that records operations (scg.jit)
        self.checks = 0  # conditions checked so far (core/effects.py `check`)
        self.counts = {}  # non-finite counts noted by fused kernels (core/facts.py)
        self.sums = {}  # sums of large vectors noted in this gradient call (core/facts.py)
        self.keyed = {}  # what a pass noted about an array it wrote (core/facts.py)


THREAD = _ThreadState()


class new_level:
    """Open a fresh trace level, higher than every level currently open in this thread.

    Use as ``with new_level() as level:``. (A class rather than a generator-based context
    manager: it is entered once per gradient call, and this is several times cheaper.)
    """

    __slots__ = ()

    def __enter__(self):
        state = THREAD
        level = state.level = state.level + 1
        if state.dropped:
            state.dropped.pop(level, None)
        if level == 1:
            collector.hold()  # (its tape's values are freed by counting: core/collector.py)
            if state.counts or state.keyed:  # (an outermost call: the notes of earlier
                state.counts.clear()          # ones go)
                state.keyed.clear()
        return level

    def __exit__(self, *exc):
        state = THREAD
        if state.locked:
            _unlock(state, state.level)
        state.level -= 1
        if not state.level:
            collector.release(collect_due=True)  # (another thread's call may still hold it)
            if state.sums:  # (the sums of this call go with it)
                state.sums.clear()
        return False


def current_level():
    """The innermost open trace level of this thread: 0 when no transformation is running."""
    return THREAD.level


def dropped_at(level):
    """The jumps and cuts (primitive names, in order of first use) that values of `level`
    went through: where their derivative stopped."""
    return list(THREAD.dropped.get(level, ()))


# A plain array the tape keeps is copied when small; a large one is made read-only until
# its level closes instead (copying a data matrix on every call would cost more than the
# call), so that changing it in place raises numpy's "assignment destination is
# read-only" error rather than giving a wrong derivative.
_COPY_LIMIT = 1 << 16  # elements


def kept(a, level=None):
    """The plain array `a` as the tape (or a site) may keep it: a copy if someone could
    still change it in place (it or the array it views is writeable), or `a` itself
    (read-only until `level`, by default the innermost open one, closes)."""
    owner = a
    while not owner.flags.writeable:
        base = owner.base
        if type(base) is not np.ndarray:
            # read-only all the way down: nobody can change it, unless it is read-only
            # because a higher level locked it: then it stays locked for this level too
            locked = THREAD.locked
            if locked and any(x is owner for _, x in locked):
                locked.append((THREAD.level if level is None else level, owner))
            return a
        owner = base
    if a.size <= _COPY_LIMIT:
        return a.copy(order="K")  # (its layout kept: a kernel or reduction downstream may
        # round by it, as it does on the array itself under scg.jit's recording)
    state = THREAD
    owner.flags.writeable = False
    state.locked.append((state.level if level is None else level, owner))
    return a


def unkept(a):
    """The tape no longer keeps the array `a` (a node's argument was replaced): it is
    unlocked if `kept` locked it, and nothing here holds it any more."""
    state = THREAD
    if state.locked and any(x is a for _, x in state.locked):
        state.locked = [(at, x) for at, x in state.locked if x is not a]
        if not any(x is a for _, x in state.locked):
            a.flags.writeable = True


def read_only(a):
    """Mark an array that scg made itself (noise, a draw, an advantage; often a view of a
    kernel's output) read-only down to the array that owns its memory: nobody changes it,
    and `kept` then keeps it without a copy."""
    x = a
    while type(x) is np.ndarray:
        x.flags.writeable = False
        x = x.base
    return a


def _kept_index(index, level):
    return tuple(kept(i, level) if type(i) is _ndarray else i for i in index)


def _unlock(state, level):
    keep = [(at, array) for at, array in state.locked if at < level]
    for at, array in reversed(state.locked):  # (a view locked before its base: base first)
        if at >= level and not any(x is array for _, x in keep):  # (a lower level's too)
            try:
                array.flags.writeable = True
            except ValueError:  # (its base was made read-only by someone else meanwhile)
                pass
    state.locked = keep


def _note_dropped(prim, level):
    names = THREAD.dropped.setdefault(level, {})
    names[prim.name] = None


class Tracer:
    """Base of values that intercept primitive calls (Box, per-sample values).

    Every tracer has `.value` (the value it wraps) and `.level`. Its Python operators,
    array methods and numpy protocols are the array layer's (`register_array_methods`):
    each tracer class takes those it does not define itself.
    """

    __slots__ = ("level",)
    floor = False  # a value held by an effect handler (core/effects.py): loops that
    # unwrap tracers stop at it

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _take_array_methods(cls, _ARRAY_METHODS)

    @staticmethod
    def process(prim, args, kwargs, level):  # pragma: no cover - abstract
        raise NotImplementedError


_ARRAY_METHODS = {}   # name -> method or property of every tracer class


def register_array_methods(methods, cls=None):
    """The layer that defines the array operations (scg/numpy) gives traced values their
    Python operators (`x + y`), array methods (`x.sum()`, `x.T`) and numpy protocols:
    `methods` maps names to functions or properties. Every tracer class, those defined
    later included, takes the ones that neither it nor a tracer class it derives from
    defines; with `cls`, that class takes them over the others (Box's direct recording
    path for `+`), and so do its subclasses."""
    if cls is not None:
        for name, method in methods.items():
            setattr(cls, name, method)
        return
    _ARRAY_METHODS.update(methods)
    stack = list(Tracer.__subclasses__())
    while stack:
        c = stack.pop()
        _take_array_methods(c, methods)
        stack += c.__subclasses__()


def _take_array_methods(cls, methods):
    tracers = [c for c in cls.__mro__ if c is not Tracer and issubclass(c, Tracer)]
    for name, method in methods.items():
        if not any(name in c.__dict__ for c in tracers):
            setattr(cls, name, method)


class Primitive:
    """A named operation with a numpy implementation and one VJP rule per argument.

    `kind` is "smooth" (differentiable), "jump" (piecewise constant: derivative
    zero almost everywhere, but a pathwise estimator across it is biased), or
    "cut" (stop_gradient). Jumps and cuts return untraced values.
    """

    __jit_attrs__ = ()  # (scg.jit: by identity; its rules are scg's, not settings)

    def __init__(self, name, fn, kind="smooth", doc=None, batch=None):
        self.name = name
        self.__doc__ = doc or f"The primitive {name}."
        self.fn = fn
        self.vjps = {}
        self.plain_vjps = None  # first-order twins of the rules (see defvjp_plain)
        self.kind = kind
        # How it runs on arguments batched along a leading axis (the draws of
        # scg/stochastic/persample.py): "elementwise" for broadcasting elementwise functions,
        # or a rule `rule(prim, args, kwargs, batched)` ("batching rules", scg/numpy/rules.py).
        self.batch = batch
        # Which axes of its result carry which labels of its arguments' axes (the plates of
        # the stochastic layer): a rule `rule(args, kwargs, labels, shapes, out_shape)`, or
        # None ("axis-label rules", scg/numpy/rules.py).
        self.axes = None
        # Whether it acts on each row of its first axis apart, for a call: a rule
        # `rule(args, kwargs, ans)` giving, per argument, whether its rows are the result's
        # rows (True) or it is shared by every row (False); None when that call mixes rows.
        # The backward pass then takes a cotangent that is zero off a few rows on those rows
        # only (`Rows`). None: the cotangent is made whole first.
        self.rows = None

    def __call__(self, *args, **kwargs):
        # The hot path of every operation, traced or not: kept to one loop and one call.
        top = None
        for a in args:
            if isinstance(a, Tracer) and (top is None or a.level > top.level):
                top = a
        if top is None:
            return self.fn(*args, **kwargs)
        return top.process(self, args, kwargs, top.level)

    def __repr__(self):
        return f"<primitive {self.name}>"


_SCG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


class RULES:
    """`of_users`: has code outside scg attached a rule (docs/autodiff.md)? A backward pass
    then may run the user's code, which scg.jit's recording must watch."""

    of_users = False


def _note_whose(rules):
    for rule in rules:
        code = getattr(rule, "__code__", None)
        if rule is not None and (code is None or not code.co_filename.startswith(_SCG_DIR)):
            RULES.of_users = True


def defvjp(prim, *rules):
    """Attach VJP rules: rule i maps (g, ans, *args, **kwargs) to the cotangent of arg i.

    A rule given as None marks a non-differentiable argument.
    """
    if prim.plain_vjps is not None:
        raise ValueError(f"{prim.name}: attach the traced rules before their plain twins")
    _note_whose(rules)
    for i, rule in enumerate(rules):
        if rule is not None:
            prim.vjps[i] = rule


def defvjp_plain(prim, *rules):
    """Attach first-order twins of prim's VJP rules, written in plain numpy.

    The backward pass uses a twin instead of the rule when neither the cotangent nor the
    call's inputs are traced, which is every step of a first-order gradient: the rule
    written in primitives would pay a primitive call per operation there, for nothing to
    record. A rule given as None keeps the traced rule for that argument.
    """
    _note_whose(rules)
    prim.plain_vjps = dict(prim.vjps)
    for i, rule in enumerate(rules):
        if rule is not None:
            prim.plain_vjps[i] = rule


def _only_held(args, kwargs):
    """Are the tracers among args (and in their tuples) values held by a handler, and
    kwargs free of tracers?"""
    for a in args:
        t = type(a)
        if t is tuple or t is list:
            if not _only_held(a, None):
                return False
        elif isinstance(a, Tracer) and not t.floor:
            return False
    return not kwargs or not any(isinstance(v, Tracer) for v in kwargs.values())


class Box(Tracer):
    """A value being differentiated at one trace level, and the recorded call that made it.

    The box is its own tape node: `prim` was called on `args` (the unboxed inputs) and
    `kwargs` to give `value`; `parents` lists (argnum, Box) for the traced inputs that
    have a VJP rule. `order` increases with creation, so a box's parents are older than
    it, and visiting boxes by decreasing `order` visits each after everything that uses it.
    `rules` are the VJP rules for a plain cotangent: the plain twins when no input is traced.
    Boxes are made by `new_root` and by recording a call, not by calling the class.
    """

    __slots__ = ("value", "prim", "args", "kwargs", "parents", "order", "rules")
    __array_priority__ = 100.0

    @staticmethod
    def process(prim, args, kwargs, level):
        if len(args) == 1 and prim.kind == "smooth":  # (relu, exp, sum, ...: the common case)
            box = args[0]  # the tracer of the top level: a box of this level
            value = box.value
            if not isinstance(value, Tracer):
                ans = prim.fn(value, **kwargs) if kwargs else prim.fn(value)
                if 0 not in prim.vjps:
                    return ans
                return _record(prim, (value,), kwargs, ((0, box),),
                               prim.plain_vjps or prim.vjps, ans, level)
        raw = list(args)
        parents = []
        vjps = prim.vjps
        lower = False  # are tracers of lower levels left among the unboxed arguments?
        for i, a in enumerate(args):
            if type(a) is Box and a.level == level:
                raw[i] = v = a.value
                if i in vjps:
                    parents.append((i, a))
                if isinstance(v, Tracer):
                    lower = True
            elif isinstance(a, Tracer):
                lower = True
            elif type(a) is _ndarray:
                raw[i] = kept(a, level)  # the caller may change its array in place later
            elif type(a) is tuple:
                for x in a:  # (index arrays of x[idx]; most index tuples hold none)
                    if type(x) is _ndarray:
                        raw[i] = _kept_index(a, level)
                        break
        if lower:
            ans = prim(*raw, **kwargs)
            rules = prim.vjps
            if prim.plain_vjps is not None and _only_held(raw, kwargs):
                # (values a handler holds, scg.jit's recording: the twins, written in numpy,
                # run on them as on plain arrays and the recording records their numpy
                # calls, so a replay rounds as an eager first-order gradient does)
                rules = prim.plain_vjps
        else:
            ans = prim.fn(*raw, **kwargs)
            rules = prim.plain_vjps or prim.vjps
        if prim.kind != "smooth":
            _note_dropped(prim, level)
            return ans
        if not parents:
            return ans
        return _record(prim, raw, kwargs, parents, rules, ans, level)

    def __repr__(self):
        return f"Box({self.value!r}, level={self.level})"


_new_object = object.__new__


def _record(prim, args, kwargs, parents, rules, value, level):
    """A new box (see Box): `prim` called on `args` gave `value`. Boxes are made by this
    function, not by calling the class: a plain function call is cheaper than a class's
    __init__, and this is every recorded operation."""
    box = _new_object(Box)
    box.value = value
    box.level = level
    box.prim = prim
    box.args = args
    box.kwargs = kwargs
    box.parents = parents
    box.rules = rules
    box.order = next(_node_ids)
    return box


def new_root(value, level):
    """Box `value` as an independent variable of the trace at `level`."""
    return _record(None, (), None, (), None, value, level)


_ndarray = np.ndarray
_F64 = np.float64
_SCALARS = (np.float64, float, int)
_NO_KWARGS = {}  # (shared by the boxes of operators: rules never change their kwargs)


def box_operator(prim, python_operator=None, reflected=False):
    """A Python operator method of Box for a two-argument primitive with two VJP rules.

    `a + b` is the most frequent call on the tape, so the common cases are recorded here
    without the general dispatch: the other operand plain or a box of the same level, and
    no tracer of a lower level inside either. Everything else goes through `prim`.
    `python_operator` (operator.add for np.add), if given, computes the value when one
    operand is a numpy float64 scalar and the other a number: ten times faster than the
    ufunc (a loss after a full reduction is such a scalar). Give it only where it has the
    ufunc's value and warnings.
    `reflected` gives `__radd__` and the like: `other <op> self`.
    """
    if prim.kind != "smooth" or not (0 in prim.vjps and 1 in prim.vjps):
        raise ValueError(f"box_operator needs a smooth primitive with two rules, not {prim}")
    fn = prim.fn

    def operator(self, other):
        value, level = self.value, self.level
        if isinstance(value, Tracer):
            return prim(other, self) if reflected else prim(self, other)
        if type(other) is Box:
            other_value = other.value
            if other.level != level or isinstance(other_value, Tracer):
                return prim(other, self) if reflected else prim(self, other)
            if reflected:
                a, b, parents = other_value, value, ((0, other), (1, self))
            else:
                a, b, parents = value, other_value, ((0, self), (1, other))
        elif isinstance(other, Tracer):
            return prim(other, self) if reflected else prim(self, other)
        else:
            if type(other) is _ndarray:
                other = kept(other, level)  # the caller may change its array in place later
            if reflected:
                a, b, parents = other, value, ((1, self),)
            else:
                a, b, parents = value, other, ((0, self),)
        if (python_operator is not None and type(a) in _SCALARS and type(b) in _SCALARS
                and (type(a) is _F64 or type(b) is _F64)):
            ans = python_operator(a, b)
        else:
            ans = fn(a, b)
        return _record(prim, (a, b), _NO_KWARGS, parents, prim.plain_vjps or prim.vjps,
                       ans, level)

    return operator


def strip(x, level=0):
    """Remove every tracer above `level` from x (all of them by default): its plain value.

    Under an effect handler the plain value may be the handler's own (a recorded value of
    scg.jit, see core/effects.py): strip
    stops there, so that what is computed from it is recorded too."""
    while isinstance(x, Tracer) and x.level > level and not x.floor:
        x = x.value
    return x


class Rows:
    """A plain cotangent that is zero outside the rows `start:stop` of its first axis:
    `value` holds those rows, `shape` is the whole cotangent's. The backward pass keeps it
    so through the primitives that act on each row apart (`Primitive.rows`), calling their
    rules on those rows of the arguments: the derivative of a computation on many rows of
    which a few carry a cost is taken on those few (the branches of a copying estimator,
    whose costs enter its terms as values, scg/stochastic/surrogate.py). Elsewhere it is
    made whole (`dense`)."""

    __slots__ = ("value", "start", "stop", "shape")

    def __init__(self, value, start, stop, shape):
        self.value, self.start, self.stop, self.shape = value, start, stop, tuple(shape)

    def dense(self):
        return rows_placed(self.value, self.start, self.stop, self.shape)


def _rows_placed(value, start, stop, shape):
    out = np.zeros(shape, dtype=np.result_type(value, np.float64))
    out[start:stop] = value
    return out


rows_placed = Primitive("rows_placed", _rows_placed, doc="""Zeros of `shape` with `value` in
rows start:stop of the first axis (a `Rows` cotangent made whole).""")
rows_placed.vjps[0] = lambda g, ans, value, start, stop, shape: g[start:stop]


def _dense(g):
    return g.dense() if type(g) is Rows else g


def _sum_cotangents(a, b):
    """a + b, where either may be a `Rows`: kept on rows where both are on the same ones."""
    if type(a) is Rows and type(b) is Rows and (a.start, a.stop) == (b.start, b.stop):
        return Rows(a.value + b.value, a.start, a.stop, a.shape)
    return _dense(a) + _dense(b)


def _on_rows(node, g):
    """The arguments, result and cotangent for the rules of `node`, on the rows of a `Rows`
    cotangent g where the primitive acts on each row apart, and which arguments were cut
    to those rows; else g made whole, and no argument cut."""
    rule = node.prim.rows
    cut = rule(node.args, node.kwargs, node.value) if rule is not None else None
    if cut is None:
        return node.args, node.value, g.dense(), None
    rows = slice(g.start, g.stop)
    args = tuple(a[rows] if c else a for a, c in zip(node.args, cut))
    return args, node.value[rows], g.value, cut


def backward(out_node, g, roots):
    """Propagate cotangent g from out_node; return the cotangents of `roots` (None if unreached).

    Boxes are visited by decreasing `order` (a heap of the ones that have received a
    cotangent), so each is visited after every box that uses it, and only once. Roots (no
    parents) never enter the heap: their cotangents stay in `grads` for the caller.
    A box that got its first cotangent from the box just visited, and is newer than every
    box in the heap, is visited next without entering the heap: nothing visited later can
    add to its cotangent, since boxes send cotangents only to older boxes. (A chain of
    operations, the common case, never touches the heap.)
    """
    grads = {out_node: g}
    heap = []
    node = out_node if out_node.parents else None
    pop, push, traced = heappop, heappush, Tracer  # (locals: this loop is the hot path)
    while node is not None or heap:
        if node is None:
            node = pop(heap)[1]
        g = grads.pop(node)
        vjps = node.rules
        args, kwargs, ans = node.args, node.kwargs, node.value
        if type(g) is Rows:
            rows = g
            args, ans, g, cut = _on_rows(node, g)
        else:
            cut = None
        if isinstance(g, traced) and not (type(g).floor and vjps is node.prim.plain_vjps):
            vjps = node.prim.vjps  # (a traced cotangent: the rules an outer level records)
        newest = None  # the newest box that got its first cotangent here
        # (calls without * and ** for one or two arguments: unpacking costs more than the rest)
        n_args = -1 if kwargs else len(args)
        for i, parent in node.parents:
            if n_args == 2:
                gi = vjps[i](g, ans, args[0], args[1])
            elif n_args == 1:
                gi = vjps[i](g, ans, args[0])
            else:
                gi = vjps[i](g, ans, *args, **kwargs)
            if cut is not None and cut[i]:
                gi = Rows(gi, rows.start, rows.stop, node.args[i].shape)
            prev = grads.get(parent)
            if prev is None:
                grads[parent] = gi
                if parent.parents:
                    if newest is None:
                        newest = parent
                    elif parent.order > newest.order:
                        push(heap, (-newest.order, newest))
                        newest = parent
                    else:
                        push(heap, (-parent.order, parent))
            elif type(prev) is Rows or type(gi) is Rows:
                grads[parent] = _sum_cotangents(prev, gi)
            else:
                grads[parent] = prev + gi
        if newest is not None and heap and newest.order < -heap[0][0]:
            push(heap, (-newest.order, newest))
            newest = None
        node = newest
    return [_dense(grads.get(r)) for r in roots]
