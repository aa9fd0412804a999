"""Recording a call as a straight-line program of primitive operations, and replaying it.

`scg.jit` (scg/jit/jitted.py) runs a function once with its numeric inputs wrapped in `Var`s: a
tracer at the lowest level of the tape, holding the concrete value and a slot number.
Every primitive applied to a Var (the model's own operations, the gradient rules run by
the backward pass, an optimizer's update) computes its value as usual and appends one
line to a `Recording`. The recording becomes Python source, one call per line, compiled
once: replaying it costs one function call per operation and nothing else, none of the
bookkeeping of the tape or the stochastic layer.

A replay is only as valid as the recording. Everything that could make it differ from a
fresh run is either part of the program or stops it:

- reading a Var as a Python value (`bool`, `float`, `int`, an index, `np.asarray`, a
  numpy function without a rule, scg's own `strip`) records a *guard*: the replay
  checks that the value is the same, and raises `Miss` if not (the caller then runs the
  function afresh and records it again);
- random numbers, and reads of state kept between calls (a baseline's moving average),
  are *sources*: operations replayed every time, never constants (the messages
  `generator` and `stateful` of the effect stack, scg/core/effects.py, which the open
  recording handles);
- writes to such state are *effects*, run at the end of a replay, after every guard
  (the message `after`);
- a check that must hold on every call (a finite log-probability) is an `expect`: a
  guard on a predicate (the message `check`).

Code that cannot be expressed this way marks the recording `invalid` with the reason
(`_Recording.refuse`); it is then never replayed.
"""

import cmath
import itertools
import operator
import re

import numpy as np

from ..core import pytree
from ..core.effects import Handler, State
from ..core.lowering import INLINE, is_fresh, writes_out
from ..core.random_state import restore_position, save_position
from ..core.tape import RULES, THREAD, Tracer, strip
from . import buffers


class Miss(Exception):
    """A replay's guard failed: the recorded program does not apply to this call."""


class _Recording(Handler):
    """The program being recorded at one trace level (see module docstring), and the
    handler of the effect stack (scg/core/effects.py) that records the effects too. Its
    Vars record only while it is this thread's recording on the stack (`records`)."""

    records = True

    def __init__(self, level):
        self.level = level
        self.lines = []       # source lines of the body
        self.consts = []      # the namespace's constants, c0, c1, ... (compared by value)
        self.refs = []        # objects used by identity (state dicts, generators, functions)
        self.effects = []     # source lines run after the body
        self.guards = []      # (line number, kind, where) for explain(): a "read" of a
        # value (the call is recorded again if it differs), or a "check" that must hold
        self.invalid = None   # why this recording must not be replayed
        self.grouped = {}     # predicate with a `many` form -> slots it must hold for
        self.generators = {}  # id -> (generator, its state before the recording drew)
        self.own = set()      # names of refs made by this recording (not compared)
        self.pending = []     # effects to run when the recorded call returns
        self.written = set()  # ids of the objects that effects update
        self.immediate = False
        self.n_slots = 0
        self.changes = 0  # values changed in place during the call (see Var.version)
        self.kept_lines = set()  # the checks of state kept between calls, once each
        self.reshaped = {}  # slot of a value recorded as a reshape -> its input's name
        self.watch = None  # what watches the calls of the user's code (jit/watch.py)
        self.buffered = {}    # slot -> the layout of a large ufunc result (jit/buffers.py)
        self.fresh = set()    # slots of results that share no memory with their arguments
        self.open = True
        self._const_ids = {}
        self._ref_ids = {}
        self._keep = []
        self.errstate = np.geterr()
        self.numpy_errors = _numpy_errors()

    # ------------------------------------------------------------ names in the source
    def const(self, x):
        """The name of a constant argument: compared by value between recordings."""
        key = id(x)
        name = self._const_ids.get(key)
        if name is None:
            name = f"c{len(self.consts)}"
            frozen = _frozen(x)
            self.consts.append(frozen)
            # (one name per object, unless it is an array that may change between uses)
            if type(x) is not np.ndarray or frozen is x:
                self._const_ids[key] = name
                self._keep.append(x)  # (so that its id is not reused while recording)
        return name

    def ref(self, x):
        """The name of an object used by identity (its contents may change between calls)."""
        name = self._ref_ids.get(id(x))  # (refs are kept: their ids are not reused)
        if name is None:
            name = self._ref_ids[id(x)] = f"r{len(self.refs)}"
            self.refs.append(x)
        return name

    def _expr(self, a):
        t = type(a)
        if t is Var:
            if a.rec is self:
                return f"v{a.slot}"
            if not a.rec.open:  # (kept from an earlier call: its value, like any constant)
                return self.const(a.concrete)
            raise ValueError("a value recorded by another scg.jit call was used here: a "
                             "jitted function called inside another one's recording shares "
                             "no values with it")
        if t is tuple or t is list:
            if not any(_holds_var(x) for x in a):
                return self.const(a)
            inner = ", ".join(self._expr(x) for x in a)
            return f"({inner},)" if t is tuple else f"[{inner}]"
        if t is State:
            name = self.ref(a.obj)
            if a.own:
                self.own.add(name)
            return name
        if isinstance(a, Tracer):
            raise TypeError("scg.jit: a traced value of an outer transformation reached a "
                            "jitted function's operations; apply scg.jit outside scg.grad "
                            "and the other transformations, not inside them")
        if (t in _PLAIN_CONSTANTS and (t not in (float, complex) or cmath.isfinite(a))) or \
                a is None:
            return repr(a)  # (inf and nan are not names in a program: constants, below)
        return self.const(a)

    def _new(self, value):
        slot = self.n_slots
        self.n_slots += 1
        v = _new_var(Var)
        v.level = self.level
        v.rec = self
        v.slot = slot
        v.concrete = value
        return v

    # ------------------------------------------------------------ recording
    def apply(self, fn, args, kwargs, source=False, guard_shape=False):
        """Record fn(*args, **kwargs) and return its value, with Vars for Var results.

        Without `source`, a call whose arguments hold no Var is computed and its value
        returned as a constant; a source is always recorded (random numbers, state).
        `guard_shape`: the result's shape may depend on values (a boolean mask, a size
        or an axis given by a value): replays check it."""
        if _numpy_errors() is not self.numpy_errors and np.geterr() != self.errstate:
            self.refuse("numpy's error handling was changed inside the call (np.errstate or "
                        "np.seterr): a replay would run under the caller's")
        held = False  # (does an argument hold a Var: a Var, or one in a tuple or list)
        raw = []
        for a in args:
            t = type(a)
            if t is Var:
                held = True
                raw.append(a.concrete)
            elif t is tuple or t is list or t is State:
                if t is not State and _holds_var(a):
                    held = True
                raw.append(_concrete(a))
            else:
                raw.append(a)
        if kwargs:
            kw = {k: _concrete(v) for k, v in kwargs.items()}
            held = held or any(_holds_var(v) for v in kwargs.values())
        else:
            kw = {}
        if self.written and any(type(a) is State and id(a.obj) in self.written for a in args):
            self.refuse("state updated during the call is read again in the same call (an "
                        "expectation with a stateful baseline called twice in one call): its "
                        "updates are applied when the call returns")
            self.run_effects()  # (this call then runs as without scg.jit)
            self.immediate = True
        ans = fn(*raw, **kw)
        if not source:
            if not held:
                return ans
            if type(ans) is np.ndarray and type(args[0]) is Var and (
                    ans is raw[0] or ans.base is not None and _same_view(ans, raw[0])):
                return args[0]  # (a reshape or broadcast to the same shape: nothing to do)
        call = self.ref(fn) if source or not _is_plain_function(fn) else self.const(fn)
        parts = [f"v{a.slot}" if type(a) is Var and a.rec is self else self._expr(a)
                 for a in args]
        inline = INLINE.get(fn) if not source and not guard_shape else None
        if inline is not None and getattr(inline, "constant_settings", False) and (
                any(_holds_var(a) for a in args[1:]) or
                any(_holds_var(v) for v in kwargs.values())):
            inline = None  # (a shape, an axis given by a value: the call and its guard)
        if inline is not None:
            named = {k: self._expr(v) for k, v in kwargs.items()} if kwargs else {}
            expr = inline(raw, kw, ans, parts, named, self.const)
        else:
            expr = None
        if kwargs:
            parts += [f"{k}={self._expr(v)}" for k, v in kwargs.items()]
        if expr is not None:
            out = self._new(ans)
            if getattr(inline, "reshapes_first", False) and type(args[0]) is Var:
                # (a reshape of a reshape: one reshape of the first one's input)
                base = self.reshaped.get(args[0].slot, parts[0])
                expr = f"{base}.reshape({np.shape(ans)!r})"
                self.reshaped[out.slot] = base
            self.lines.append(f"v{out.slot} = {expr}")
            return out
        if type(ans) is tuple:
            outs = tuple(self._new(x) for x in ans)
            targets = "".join(f"v{o.slot}, " for o in outs)
            self.lines.append(f"{targets}= {call}({', '.join(parts)})")
        else:
            outs = (self._new(ans),)
            self.lines.append(f"v{outs[0].slot} = {call}({', '.join(parts)})")
            if type(fn) is np.ufunc and not kwargs and len(args) == fn.nin:
                self.fresh.add(outs[0].slot)
                buffers.note_output(self.buffered, outs[0].slot, fn, ans, raw)
            elif is_fresh(fn):
                self.fresh.add(outs[0].slot)
                if writes_out(fn) and not (kwargs and "out" in kwargs):
                    buffers.note_output(self.buffered, outs[0].slot, None, ans,
                                        raw + list(kw.values()))
        if guard_shape:
            for o in outs:
                self.lines.append(f"if shape(v{o.slot}) != {np.shape(o.concrete)!r}: "
                                  f"raise Miss({len(self.guards)})")
                self.guards.append((len(self.lines), "read", "the shape of a value that "
                                    "depends on values (a mask, an index, a size or an axis)"))
        return outs if type(ans) is tuple else outs[0]

    def guard(self, var, kind, where):
        """Record that this call read `var` as a Python value; return the value."""
        value = var.concrete
        if kind == "bool":
            got = bool(value)
            self.lines.append(f"if bool(v{var.slot}) is not {got}: raise Miss({len(self.guards)})")
            self.guards.append((len(self.lines), "read", where))
            return got
        name = self.const(value)  # (a snapshot: see _frozen)
        self.lines.append(f"if not same(v{var.slot}, {name}): raise Miss({len(self.guards)})")
        self.guards.append((len(self.lines), "read", where))
        return value

    def expect(self, predicate, var, where):
        ok = bool(predicate(var.concrete))
        if ok and hasattr(predicate, "many"):  # (checked with the others of its kind)
            self.grouped.setdefault(predicate, []).append((var.slot, where))
        elif ok:
            name = self.ref(predicate)
            self.lines.append(f"if not {name}(v{var.slot}): raise Miss({len(self.guards)})")
            self.guards.append((len(self.lines), "check", where))
        return ok

    def effect(self, fn, args):
        # run when the recorded call has returned, as in a replay: a call that fails
        # after it has updated nothing, and its run afresh updates once
        self.pending.append((fn, [_concrete(a) for a in args]))
        if self.immediate:
            self.run_effects()
        for a in args:
            if type(a) is State:
                self.written.add(id(a.obj))
        parts = ", ".join(self._expr(a) for a in args)
        self.effects.append(f"{self.ref(fn)}({parts})")

    def run_effects(self):
        for fn, raw in self.pending:
            fn(*raw)
        self.pending = []

    def refuse(self, reason):
        if self.invalid is None:
            self.invalid = reason

    def restore_generators(self):
        """Put the generators back where they were before the recording drew from them."""
        for rng, position in self.generators.values():
            restore_position(rng, position)

    # ------------------------------------------------------------ effect messages
    def opaque(self, fn, args):
        # (a function of its arguments: one operation when an argument is recorded)
        if not any(_holds_var(a) for a in args):
            return fn(*args)
        return self.apply(fn, args, None)

    def stateful(self, fn, args):
        # (a read of state: a source, replayed on every call)
        return self.apply(fn, args, None, source=True)

    def after(self, fn, args):
        self.effect(fn, args)

    def kept(self, getter, args):
        # (looked up again on every replay: a replaced object is a miss, then a recording)
        obj = getter(*args)
        parts = ", ".join(self.ref(a) if not isinstance(a, (str, int)) else repr(a)
                          for a in args)
        line = f"if {self.ref(getter)}({parts}) is not {self.ref(obj)}: raise Miss"
        if line in self.kept_lines:  # (checked once: nothing a replay runs replaces it)
            return obj
        self.kept_lines.add(line)
        self.lines.append(f"{line}({len(self.guards)})")
        self.guards.append((len(self.lines), "state", "state kept between calls was "
                            "replaced (a restored checkpoint)"))
        return obj

    def check(self, predicate, x, where):
        if type(x) is Var:
            if x.rec is self and self.open:
                return self.expect(predicate, x, where)
            x = x.concrete  # (a value of another call, kept outside it: its number)
        return bool(predicate(x))

    def generator(self, rng):
        return generator.wrap(rng, self)

    def position(self, rng):
        # (sources: a replay saves and restores the generator's position where the
        # recorded call did, between the same draws)
        if isinstance(rng, generator):
            return self.apply(save_position, (State(rng._rng),), None, source=True)
        return save_position(rng)

    def restore(self, rng, position):
        if isinstance(rng, generator):
            self.apply(restore_position, (State(rng._rng), position), None, source=True)
        else:
            restore_position(rng, _concrete(position))

    def asarray(self, x, dtype):
        x = strip(x)
        if type(x) is Var:
            if dtype is None or np.result_type(x.concrete) == np.dtype(dtype):
                return x
            return self.apply(np.asarray, (x, dtype), None)
        return np.asarray(x, dtype=dtype)

    def read(self, x, why):
        return x.read(why)  # (a guard while this recording is open: Var.read)

    def unrepeatable(self, reason):
        self.refuse(reason)

    def sees_operations(self):
        return True

    def scg_only(self, fn, args):
        # (scg's own code: the watch of the user's calls looks away meanwhile, unless a
        # rule of the user's may run in it)
        watch = self.watch
        if watch is None or RULES.of_users:
            return fn(*args)
        watch.pause()
        try:
            return fn(*args)
        finally:
            watch.resume()

    def floor(self):
        return self.level

    def close(self):
        """End the recording: the grouped checks become one guard per predicate, at the
        end of the body (a check changes nothing: it may run after the operations)."""
        self.open = False
        for predicate, uses in self.grouped.items():
            name = self.ref(predicate.many)
            slots = ", ".join(f"v{slot}" for slot, _ in uses)
            self.lines.append(f"if not {name}({slots}): raise Miss({len(self.guards)})")
            self.guards.append((len(self.lines), "check", "; ".join(sorted({w for _, w in uses}))))
        self.grouped = {}


_PLAIN_CONSTANTS = (int, float, bool, str, complex)

# primitives whose result's shape may depend on the values of their arguments
_VALUE_SHAPED = frozenset(["getitem", "gather", "take", "take_along_axis"])
_new_var = object.__new__


try:  # (numpy's error state: a new object whenever np.errstate or np.seterr changes it)
    from numpy._core._ufunc_config import _extobj_contextvar as _numpy_error_state
    _numpy_errors = _numpy_error_state.get
except ImportError:  # pragma: no cover  (another numpy: compared by np.geterr each time)
    def _numpy_errors():
        return object()  # (never the same: np.geterr compares)


def _is_plain_function(fn):
    # primitives' implementations (ufuncs, module functions) are constants compared by
    # identity or equality; bound methods of objects with state are references
    return not hasattr(fn, "__self__") or isinstance(getattr(fn, "__self__", None),
                                                     type(np))


def _holds_var(a):
    t = type(a)
    if t is Var:
        return True
    if t is tuple or t is list:
        return any(_holds_var(x) for x in a)
    return False


def _concrete(a):
    t = type(a)
    if t is Var:
        return a.concrete
    if (t is tuple or t is list) and any(_holds_var(x) for x in a):
        return t(_concrete(x) for x in a)
    if t is State:
        return a.obj
    return a


def _same_view(a, b):
    """Is array a the same entries of the same memory as b (a view of b with b's shape)?"""
    return type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype and \
        a.strides == b.strides and (a is b or a.__array_interface__["data"][0] ==
                                    b.__array_interface__["data"][0])


def _frozen(x):
    """A constant as the program keeps it: an array anyone could still change in place is
    copied (the function may change its own buffer after using it), in its own layout."""
    if type(x) is not np.ndarray:
        return x
    owner = x
    while True:
        if owner.flags.writeable:
            return _copy_in_layout(x)
        if type(owner.base) is not np.ndarray:
            return x
        owner = owner.base


def _copy_in_layout(x):
    """A copy of x in x's layout: its broadcast (stride-0) axes broadcast again, the others
    in x's memory order. The layout of an operand decides that of a ufunc's result (a
    broadcast cotangent times a Fortran-order value is Fortran-order), and a sum adds its
    terms in memory order: a C-order copy would make the replay round as the recorded call
    did not."""
    repeated = [st == 0 and n > 1 for st, n in zip(x.strides, x.shape)]
    if not any(repeated):
        return x.copy(order="K")
    one = x[tuple(slice(0, 1) if r else slice(None) for r in repeated)]
    return np.broadcast_to(one.copy(order="K"), x.shape)  # (read-only, as a broadcast is)


def same(a, b):
    """Are two concrete values equal for a guard (same shape, dtype kind and entries)?"""
    if type(a) is np.ndarray or type(b) is np.ndarray or isinstance(a, np.generic):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if type(a) is not type(b):
        return False
    if type(a) is float:  # (bit for bit: -0.0 is not 0.0, nan is nan)
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b


class Var(Tracer):
    """A value of a call being recorded: its concrete value and its slot in the program.

    Reading it as a Python value (its `.value`, `bool`, `float`, `np.asarray`) records a
    guard; operations on it are recorded (see module docstring)."""

    __slots__ = ("concrete", "slot", "rec")
    floor = True  # (tracers below every transformation: see strip)
    __array_priority__ = 50.0

    def __reduce__(self):  # (copied or pickled, as a value kept after the call: its value)
        return _itself, (self.concrete,)

    @staticmethod
    def process(prim, args, kwargs, level):
        rec = None
        nested = False  # a Var inside a tuple (an index, a shape) or a keyword (an axis)
        for a in args:
            if type(a) is Var and a.level == level:
                rec = a.rec
            elif (type(a) is tuple or type(a) is list) and _holds_var(a):
                nested = True
                rec = rec or _first_var(a).rec
        if kwargs and any(_holds_var(v) for v in kwargs.values()):
            nested = True
        if rec is None or not rec.open or THREAD.recording is not rec:
            # a value kept from a finished recording (or another thread's, or one whose
            # recording is off this thread's effect stack): computed as it is
            return prim.fn(*[_concrete(a) for a in args],
                           **{k: _concrete(v) for k, v in kwargs.items()})
        # (an index of constants gives a result of a fixed shape: the constants are
        # part of the program; a recorded index may be a mask, whose count is a value)
        return rec.apply(prim.fn, args, kwargs, guard_shape=nested or (
            prim.name in _VALUE_SHAPED and any(_holds_var(a) for a in args[1:])))

    @property
    def value(self):
        return self.read("its value was read")

    def read(self, why):
        """The concrete value, recording a guard on it while the recording is open."""
        if not self.rec.open:
            return self.concrete
        return self.rec.guard(self, "value", _where(why))

    @property
    def shape(self):
        c = self.concrete
        return c.shape if type(c) is np.ndarray else np.shape(c)

    @property
    def version(self):
        """How many values of the call were changed in place so far: the results of
        operations on this value may differ from earlier ones' once it changes."""
        return self.rec.changes

    @property
    def dtype(self):
        return np.result_type(self.concrete)

    def __bool__(self):
        if not self.rec.open:
            return bool(self.concrete)
        return self.rec.guard(self, "bool", _where("it was used as a truth value"))

    def __float__(self):
        return float(self.read("it was converted with float()"))

    def __int__(self):
        return int(self.read("it was converted with int()"))

    def __index__(self):
        return operator.index(self.read("it was used as an index or a size"))

    def __hash__(self):
        return hash(self.read("it was hashed (a dict key, a set member)"))

    def __str__(self):
        return str(self.read("it was converted to text"))

    def __format__(self, spec):
        return format(self.read("it was formatted as text"), spec)

    def _in_place(self, op, other):
        """x op= y on a recorded value: done on the array itself, as without scg.jit, and
        the recording is not replayed (a replay cannot change the caller's array)."""
        value = self.concrete
        if type(value) is np.ndarray:
            if self.rec.open:
                self.rec.refuse("a value was changed in place (x -= ..., x[i] = ...): a "
                                "replay cannot change the caller's array")
            op(value, _concrete(other), out=value)
            self.rec.changes += 1
            return self
        return getattr(self, f"__{op.__name__}__")(other)

    def __iadd__(self, other):
        return self._in_place(np.add, other)

    def __isub__(self, other):
        return self._in_place(np.subtract, other)

    def __imul__(self, other):
        return self._in_place(np.multiply, other)

    def __itruediv__(self, other):
        return self._in_place(np.true_divide, other)

    def __setitem__(self, index, other):
        value = self.concrete
        if self.rec.open:
            self.rec.refuse("a value was changed in place (x[i] = ...): a replay cannot "
                            "change the caller's array")
        value[_concrete(index)] = _concrete(other)
        self.rec.changes += 1

    def __array__(self, dtype=None, copy=None):
        value = np.asarray(self.read("it became a plain numpy array"))
        return value if dtype is None else value.astype(dtype)

    def item(self):
        return np.asarray(self.read("item() was called")).item()

    def tolist(self):
        return np.asarray(self.read("tolist() was called")).tolist()

    def astype(self, dtype, copy=True):
        return self.rec.apply(_astype, (self, dtype), None)

    def copy(self):
        return self.rec.apply(_copy, (self,), None)

    def __repr__(self):
        return repr(self.read("it was converted to text"))


def _astype(x, dtype):
    return np.asarray(x).astype(dtype)


def _first_var(a):
    if type(a) is Var:
        return a
    for x in a:
        if _holds_var(x):
            return _first_var(x)
    return None


_PLUMBING = ("/scg/jit/recording.py", "/scg/core/effects.py", "/scg/numpy/dispatch.py",
             "/numpy/_core/fromnumeric.py")


def _where(why):
    """`why`, the line of the user's code that led to the read, and the line of scg that
    read it if any (for explain())."""
    import traceback
    frames = [f for f in traceback.extract_stack()[:-3]
              if not f.filename.replace("\\", "/").endswith(_PLUMBING)]
    inside = None
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/scg/" not in path:
            at = f"{why} at {frame.filename}:{frame.lineno}"
            return at if inside is None else f"{at} (in scg/{inside})"
        if inside is None:
            inside = f"{path.rsplit('/scg/', 1)[-1]}:{frame.lineno}"
    return why if inside is None else f"{why} in scg/{inside}"


class generator:
    """A numpy Generator seen through the open recording: every draw is a source.

    Outside a recording `generator(rng)` is `rng` itself (see `wrap`)."""

    __slots__ = ("_rng", "_rec")

    @staticmethod
    def wrap(rng, rec):
        if isinstance(rng, generator):
            return rng
        if id(rng) not in rec.generators:  # (restored if the recorded call fails)
            rec.generators[id(rng)] = (rng, save_position(rng))
        g = object.__new__(generator)
        g._rng, g._rec = rng, rec
        return g

    def __reduce__(self):  # (copied or pickled: the generator itself, seen plainly)
        return _itself, (self._rng,)

    def __getattr__(self, name):
        if name in generator.__slots__:  # (not set: an instance made without wrap)
            raise AttributeError(name)
        method = getattr(self._rng, name)
        if name == "bit_generator":
            self._rec.refuse("a generator's state was saved and restored during the call "
                             "(copies of a run drawn with common random numbers, or a "
                             "run repeated to choose estimators)")
            return method
        if not callable(method):
            return method
        rec = self._rec

        def draw(*args, **kwargs):
            return rec.apply(method, args, kwargs, source=True)
        return draw


def _itself(value):
    return value


def generators_of(rec):
    """The numpy Generators the recording draws from (their positions are restored when a
    replay misses, so that the call run afresh draws the same numbers)."""
    found = []
    for r in rec.refs:
        g = getattr(r, "__self__", None)
        if isinstance(g, np.random.Generator) and not any(g is x for x in found):
            found.append(g)
    return found


# ---------------------------------------------------------------- compiling a recording
_program_ids = itertools.count()


def compile_program(rec, inputs, outputs, treedef):
    """The recording as a function of the input slots returning the output expressions.

    `inputs`: the Vars of the traced input leaves, in order; `outputs`: the flat output
    leaves (Vars or constants), returned in the structure `treedef` when
    `pytree.build_source` can write it, else as the flat tuple. Returns (function, source,
    whether the result is built)."""
    body = list(rec.lines) + list(rec.effects)
    out_exprs = []
    input_slots = {v.slot for v in inputs}
    for o in outputs:
        if type(o) is Var and o.rec is rec:
            expr = f"v{o.slot}"
            if o.slot in input_slots:
                expr = f"copy({expr})"
        else:
            expr = f"copy({rec.const(o)})"
        out_exprs.append(expr)
    args = ", ".join(f"v{v.slot}" for v in inputs)
    name = f"_replay_{next(_program_ids)}"
    built = pytree.build_source(treedef, out_exprs)
    live = _live(body, out_exprs)
    planned, held = buffers.plan(live, out_exprs, rec.buffered, rec.fresh)
    ret = (f"    return {built}" if built is not None else
           f"    return ({''.join(e + ', ' for e in out_exprs)})")
    source = _source(name, args, _freed_after_last_use(planned, out_exprs), ret)
    namespace = {"Miss": Miss, "same": same, "copy": _copy, "shape": np.shape,
                 "into": buffers.into}
    namespace.update({f"c{k}": c for k, c in enumerate(rec.consts)})
    namespace.update({f"r{k}": r for k, r in enumerate(rec.refs)})
    namespace.update(held)
    exec(compile(source, f"<scg.jit {name}>", "exec"), namespace)
    program = namespace[name]
    if held:  # (the buffers serve one replay at a time; another runs the program without)
        plain = _source(name, args, _freed_after_last_use(live, out_exprs), ret)
        space = dict(namespace)
        exec(compile(plain, f"<scg.jit {name}>", "exec"), space)
        program = buffers.one_at_a_time(program, space[name], held)
    return program, source, built is not None


def _source(name, args, body, ret):
    return "\n".join([f"def {name}({args}):"] + [f"    {line}" for line in body] + [ret])


def _freed_after_last_use(body, out_exprs):
    """`body` with each value deleted after the line that uses it last: a replay then holds
    only the values still needed, as an eager run does once its tape lets them go, instead
    of every intermediate until it returns. The allocator hands the memory of the values
    let go to the next ones; kept to the end, a step's large temporaries are fresh memory on
    every call (an RL step's (4096, 64) arrays: 4,600 page faults, half its time)."""
    token = re.compile(r"\bv(\d+)\b")
    returned = {n for e in out_exprs for n in token.findall(e)}
    last = {}
    for k, line in enumerate(body):
        for n in token.findall(line):
            last[n] = k
    freed = [[] for _ in body]
    for n, k in last.items():
        if n not in returned:
            freed[k].append(n)
    out = []
    for line, names in zip(body, freed):
        out.append(line)
        if names:
            out.append("del " + ", ".join(f"v{n}" for n in sorted(names, key=int)))
    return out


def _copy(x):
    return x.copy() if type(x) is np.ndarray else x


def _live(body, out_exprs):
    """The lines that outputs, guards, sources and effects need (dead code removed:
    the forward values a gradient does not use, the backward pass's unused branches)."""
    import re
    token = re.compile(r"\bv(\d+)\b")
    needed = set()
    for e in out_exprs:
        needed.update(token.findall(e))
    keep = []
    for line in reversed(body):
        if "=" in line.split("(")[0] and not line.startswith("if "):
            targets, _, rhs = line.partition(" = ")
            defined = token.findall(targets)
            impure = rhs.startswith("r")  # sources and state reads always run
            if impure or any(d in needed for d in defined):
                needed.update(token.findall(rhs))
                keep.append(line)
        else:  # guards and effects
            needed.update(token.findall(line))
            keep.append(line)
    return list(reversed(keep))
