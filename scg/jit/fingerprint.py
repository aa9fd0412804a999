"""Fingerprints of functions: everything a call depends on besides its arguments.

`scg.jit` keys its recordings by the structure of a call's arguments and by the
fingerprint of its function: the values the function closes over, its defaults, the
globals and module settings it reads, recursively through functions, partials, bound
methods, containers and objects' attributes (arrays by content). A `Watch` keeps the
reads a fingerprint was made of, so that on the next call it is computed again only if
one of them gives something else.
"""

import array
import builtins
import collections
import dis
import functools
import hashlib
import importlib
import importlib.util
import io
import keyword
import random
import re
import struct
import sys
import threading
import types

import numpy as np

from ..core.tape import Tracer

_ATOMS = (int, float, bool, str, bytes, complex, type(None))
_BY_IDENTITY = (type, types.ModuleType, types.BuiltinFunctionType, np.ufunc)
# objects without attributes that hold no number a call could read (or none that can
# change): by identity. Any other object without attributes cannot be fingerprinted
# (its contents are out of reach): the call runs afresh.
_INERT = (range, slice, type(Ellipsis), type(NotImplemented), np.dtype, re.Pattern,
          types.CodeType, types.MethodWrapperType, types.WrapperDescriptorType,
          types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
          types.BuiltinMethodType, property, io.IOBase, type(threading.Lock()),
          type(threading.RLock()), threading.Condition, threading.Event,
          types.ClassMethodDescriptorType, type(collections.namedtuple("_", "a").a))


def fingerprint(x):
    """A hashable summary of everything `x` makes a call depend on, besides its arguments:
    the values a function closes over, its defaults and the globals it reads, recursively
    through the functions, partials, bound methods, containers and objects it holds
    (objects by their attributes, or the ones their `__fingerprint_attrs__` name); arrays by
    content; modules, classes, builtins and objects without attributes by identity."""
    out = []
    try:
        _walk_top(x, out, [])
    except TooMuch:
        raise
    except Exception as error:  # (as TooMuch: the callers then run the call afresh)
        raise TooMuch(_unwalkable(error)) from error
    return tuple(out)


def _walk_top(x, out, checks):
    """_walk of x from its top, then of the modules it reached as values by the names of
    every code it walked (see _Reading)."""
    reading = _READING
    outer = reading.names, reading.every, reading.held
    reading.names, reading.every, reading.held = (), {}, []
    try:
        seen = set()
        _walk(x, out, seen, 0, checks)
        done = 0
        while done < len(reading.held):  # (a module's values may hold more modules)
            module = reading.held[done]
            done += 1
            _walk_module(module, _held_names(reading.every, _user_module(module)), out,
                         seen, 0, checks)
        return not _THREAD_NAMES.isdisjoint(reading.every)  # (does it read the thread?)
    finally:
        reading.names, reading.every, reading.held = outer


def _held_names(every, user):
    """The names by which a module reached as a value is read at the end of a walk: those
    every code walked spells; for a user's module, every attribute when some code computes
    a name (getattr(mod, k), vars(mod)[k]), and every setting when no code was walked (a
    module passed as an argument). A library's module only by the names spelled: a
    computed name somewhere must not walk all of numpy."""
    spelled = tuple(k for k in every if type(k) is str)
    if not user:
        return spelled
    if _EVERY_NAME in every:
        return _EVERY_NAME
    if _EVERY_USER in every or not every:
        return _EveryUserName(spelled)
    return spelled


_EVERY_USER = object()  # (in _Reading.every: some code reads vars(mod)[k], mod.__dict__[k])
# names whose reading makes what a function computes depend on the thread calling it
_THREAD_NAMES = frozenset(["current_thread", "currentThread", "get_ident", "get_native_id",
                           "main_thread", "local", "_local", "ident", "native_id"])


def _unwalkable(error):
    """Why a walk stopped on an error of its own, for explain()."""
    return (f"an object its fingerprint could not read ({type(error).__name__}: {error}); "
            "pass what the call needs from it as an argument")


class Watch:
    """The fingerprint of a function, computed again only when something it was made of
    changed: `checks` are the reads the walk made (a closure cell, a global, an attribute,
    a container's item and length, an array's contents), each with what it gave; if every
    read gives the same object again (and arrays the same contents), the walk would give
    the same fingerprint. `per_thread`: the function reads the thread calling it
    (threading.current_thread(), a threading.local), so its recordings are each thread's."""

    __slots__ = ("checks", "value", "tokens", "epoch", "reason", "per_thread")

    def __init__(self):
        self.checks = None
        self.per_thread = False
        self.value = None
        self.epoch = 0
        self.tokens = {}  # fingerprint -> a small number standing for it in keys
        self.reason = None  # why the last walk gave up (the call then ran afresh)

    def get(self, fn):
        unchanged = self.checks
        if unchanged is not None and unchanged():
            return self.value
        out, checks = [], []
        try:
            per_thread = _walk_top(fn, out, checks)
        except Exception as error:  # (TooMuch, or an object the walk does not know how to
            # read: the user's call must not fail for it; it runs afresh, and explain()
            # says why; the reads made up to there, unchanged, would stop a walk there
            # again: they are checked instead of walking again on every call)
            self.reason = (str(error) or None) if isinstance(error, TooMuch) else \
                _unwalkable(error)
            self.value = None
            self.checks = _compiled(checks)
            return None
        tokens = self.tokens
        if len(tokens) >= _TOKENS:  # (a function that changes on every call)
            tokens.clear()
            self.epoch += 1
        self.value = tokens.setdefault(tuple(out), (self.epoch, len(tokens)))
        self.per_thread = per_thread
        self.checks = _compiled(checks)
        return self.value


_TOKENS = 256  # fingerprints a Watch remembers (a function that changes on every call)
_COMPILED_MAX = 500  # reads checked by generated code (more: by the loop)
_MISSING = object()
(_CELL, _ITEM, _LEN, _ARRAY, _ATTR, _INDEX, _DIGEST, _SET, _GENERATOR, _CONTENT, _KEYS,
 _PYTHON_RANDOM, _TYPE) = range(13)
# arrays above this many entries are compared by a digest of their bytes
_DIGEST_LIMIT = 1 << 16
BUDGET = 100_000  # values a fingerprint may visit (more: the function runs afresh)
_ITEMS = 10_000    # items of one container (more: the function runs afresh)


class TooMuch(Exception):
    """The function cannot be fingerprinted (the call runs afresh, without a key)."""


class Opaque(TooMuch):
    """An object the function reads whose contents a fingerprint cannot follow."""


_UNREADABLE = object()
_OBJECT_ARRAY = ("an array of Python objects it reads (its bytes are references, not the "
                 "values: pass the values as arguments, or as arrays of numbers)")


class _Reading(threading.local):
    """`names`: the attribute names the code of the function being walked reads (a module
    it reaches is read by these names; () outside a function). During a walk from its top
    (`_walk_top`), `every` gathers the names every code walked reads, and `held` the
    modules reached as values: each is read again at the end by all of them (a module an
    object holds, `self.cfg = cfg`, is read by a method walked before or after it)."""

    names = ()
    every = None
    held = None


_READING = _Reading()
# the types of Cython's functions (numpy.random's and scipy's methods): compiled code
_COMPILED_FUNCTIONS = frozenset(["cython_function_or_method", "fused_cython_function"])


def _array_like(t):
    return hasattr(t, "__array__") or hasattr(t, "__array_interface__")


_DOUBLE = struct.Struct("<d").pack


def _atom(x):
    """A Python atom as its exact type and bits: values that compare equal but compute
    differently (0.0 and -0.0, 1, 1.0 and True, nans of another sign) must not give the
    same fingerprint (`==` would call them unchanged); and every nan gives the same one
    (a nan is not equal to itself)."""
    t = type(x)
    if t is float:
        return (float, _DOUBLE(x))
    if t is complex:
        return (complex, _DOUBLE(x.real), _DOUBLE(x.imag))
    return (t, x)


def _dtype_key(d):
    """A dtype by everything that changes how its bytes read: its code, byte order and
    size, and a structured dtype's fields (`d.str` of one is only '|V16')."""
    return d.str if d.fields is None else (d.str, str(d))


def _exact(v):
    """A set's element in a form whose == is exact: atoms by type and bits, and tuples and
    frozensets of them likewise ({0.0} and {-0.0} are equal sets)."""
    t = type(v)
    if t in _ATOMS:
        return _atom(v)
    if isinstance(v, tuple):
        return (t,) + tuple(_exact(u) for u in v)
    if t is frozenset:
        return (t, _exact_set(v))
    if isinstance(v, np.generic):
        return _scalar(v)
    return v  # (any other element: by its own ==, and walked itself)


def _exact_set(s):
    """A set's elements in their exact forms (see _exact)."""
    return frozenset(_exact(v) for v in s)


def _scalar(x):
    """A numpy scalar by its type, dtype and bytes (np.float64(-0.0) is not 0.0)."""
    return (type(x), _dtype_key(x.dtype), x.tobytes())


def _content(x):
    """What an array of any kind holds, as bytes (with its type, dtype, shape and mask),
    or _UNREADABLE."""
    try:
        if isinstance(x, array.array):  # (by its typecode too: 'd' and 'q' share bytes)
            return (type(x), x.typecode, bytes(x))
        if isinstance(x, memoryview):
            return (type(x), x.format, x.shape, bytes(x))
        if isinstance(x, bytearray):
            return (type(x), bytes(x))
        a = np.asarray(x)
        mask = np.ma.getmaskarray(x).tobytes() if isinstance(x, np.ma.MaskedArray) else None
        data = _digest(a) if a.size > _DIGEST_LIMIT else a.tobytes()
        return (_dtype_key(a.dtype), a.shape, data, mask)
    except Exception:
        return _UNREADABLE


def _type_name(t):
    module = getattr(t, "__module__", "") or ""
    return t.__qualname__ if module == "builtins" else f"{module}.{t.__qualname__}"


def _compiled(checks):
    """`_unchanged(checks)` as straight-line code: one test per read, the objects read and
    what they gave bound as constants (about half the time of the loop, on every call).
    Above _COMPILED_MAX reads, the loop: compiling the code would cost more than a walk."""
    if len(checks) > _COMPILED_MAX:
        return lambda: _unchanged(checks)
    lines, names = [], {"MISSING": _MISSING, "digest": _digest, "content": _content,
                        "exact_set": _exact_set, "inexact_keys": _inexact_keys}
    for k, (kind, a, b, c) in enumerate(checks):
        names[f"a{k}"], names[f"b{k}"], names[f"c{k}"] = a, b, c
        if kind == _ARRAY or kind == _DIGEST:  # (c: the shape and the dtype)
            names[f"c{k}"], names[f"d{k}"] = c
        if kind == _ITEM:
            lines.append(f"if a{k}.get(b{k}, MISSING) is not c{k}: return False")
        elif kind == _CELL and c is not _MISSING:
            lines.append(f"if a{k}.cell_contents is not c{k}: return False")
        elif kind == _LEN:
            lines.append(f"if len(a{k}) != b{k}: return False")
        elif kind == _ARRAY:
            # (the dtype by identity: `a.dtype = np.int64` keeps the bytes; an equal dtype
            # of another identity only costs a walk, which gives the same fingerprint)
            lines.append(f"if a{k}.shape != c{k} or a{k}.dtype is not d{k} or "
                         f"a{k}.tobytes() != b{k}: return False")
        elif kind == _DIGEST:
            lines.append(f"if a{k}.shape != c{k} or a{k}.dtype is not d{k} or "
                         f"digest(a{k}) != b{k}: return False")
        elif kind == _SET and c is None:
            lines.append(f"if a{k} != b{k}: return False")
        elif kind == _SET:
            lines.append(f"if a{k} != b{k} or exact_set(a{k}) != c{k}: return False")
        elif kind == _CONTENT:
            lines.append(f"if content(a{k}) != b{k}: return False")
        elif kind == _KEYS and c is None:
            lines.append(f"if tuple(map(type, a{k})) != b{k}: return False")
        elif kind == _KEYS:
            lines.append(f"if tuple(map(type, a{k})) != b{k} or inexact_keys(a{k}) != c{k}: "
                         "return False")
        elif kind == _TYPE:
            lines.append(f"if type(a{k}) is not b{k}: return False")
        elif kind == _ATTR and c is not _MISSING and b.isidentifier() and \
                not keyword.iskeyword(b):
            lines.append(f"if a{k}.{b} is not c{k}: return False")
        elif kind == _ATTR:
            lines.append(f"if getattr(a{k}, b{k}, MISSING) is not c{k}: return False")
        elif kind == _INDEX:
            lines.append(f"if a{k}[b{k}] is not c{k}: return False")
        elif kind != _GENERATOR and kind != _PYTHON_RANDOM:  # (an empty cell: the loop's
            # test)
            names[f"check{k}"] = checks[k]
            lines.append(f"if not unchanged((check{k},)): return False")
    names["unchanged"] = _unchanged
    source = "def unchanged():\n    try:\n" + "".join(f"        {line}\n" for line in lines) + \
        "    except Exception:  # (an attribute gone, a cell emptied)\n" \
        "        return False\n    return True\n"
    exec(compile(source, "<scg.jit checks>", "exec"), names)
    return names["unchanged"]


def _unchanged(checks):
    for kind, a, b, c in checks:
        if kind == _ITEM:
            if a.get(b, _MISSING) is not c:
                return False
        elif kind == _CELL:
            try:
                if a.cell_contents is not c:
                    return False
            except ValueError:  # (an empty cell)
                if c is not _MISSING:
                    return False
        elif kind == _LEN:
            if len(a) != b:
                return False
        elif kind == _ARRAY:
            if a.shape != c[0] or a.dtype is not c[1] or a.tobytes() != b:
                return False
        elif kind == _DIGEST:
            if a.shape != c[0] or a.dtype is not c[1] or _digest(a) != b:
                return False
        elif kind == _SET:
            if a != b or (c is not None and _exact_set(a) != c):
                return False
        elif kind == _CONTENT:
            if _content(a) != b:
                return False
        elif kind == _KEYS:
            if tuple(map(type, a)) != b or (c is not None and _inexact_keys(a) != c):
                return False
        elif kind == _TYPE:
            if type(a) is not b:
                return False
        elif kind == _GENERATOR or kind == _PYTHON_RANDOM:
            pass
        elif kind == _ATTR:
            if getattr(a, b, _MISSING) is not c:
                return False
        elif a[b] is not c:  # _INDEX (after the list's _LEN)
            return False
    return True


def _walk(x, out, seen, depth, checks):
    t = type(x)
    if t in _ATOMS:
        out.append(_atom(x))
        return
    if t is np.ndarray:
        if x.dtype.hasobject:
            raise Opaque(_OBJECT_ARRAY)
        if x.size > _DIGEST_LIMIT:
            data = _digest(x)
            out.append((np.ndarray, _dtype_key(x.dtype), x.shape, data))
            checks.append((_DIGEST, x, data, (x.shape, x.dtype)))
            return
        data = x.tobytes()
        out.append((np.ndarray, _dtype_key(x.dtype), x.shape, data))
        checks.append((_ARRAY, x, data, (x.shape, x.dtype)))
        return
    if isinstance(x, np.generic):
        out.append(_scalar(x))
        return
    if isinstance(x, Tracer):
        raise Opaque("a value an earlier call computed, kept where the function reaches it "
                     "(self.params = ... or a list it appends to inside the jitted "
                     "function): return the new state from the function instead")
    if isinstance(x, (np.ndarray, array.array, bytearray, memoryview)) or (
            _array_like(t) and not _user_module_name(t.__module__)):
        # (an array of another kind: np.memmap, a masked array, a torch tensor; by content)
        if getattr(getattr(x, "dtype", None), "hasobject", False):
            raise Opaque(_OBJECT_ARRAY)
        data = _content(x)
        if data is _UNREADABLE:
            raise Opaque(f"the contents of a {_type_name(t)} it reads cannot be read as an "
                         "array (a tensor that requires grad, or on another device?)")
        out.append((t, data))
        checks.append((_CONTENT, x, data, None))
        if _user_module_name(t.__module__):  # (a user's array class: its attributes too)
            checks.append((_TYPE, x, t, None))
            _walk_subclass(x, out, seen, depth, checks)
        return
    if isinstance(x, np.random.Generator):
        out.append(id(x))
        checks.append((_GENERATOR, x, None, None))
        return
    if t is types.BuiltinMethodType or t is types.MethodWrapperType:
        owner = getattr(x, "__self__", None)
        if owner is not None and not isinstance(owner, (types.ModuleType, type)):
            # (a bound method of an object, d.get, w.sum, rng.random: what it reads is its
            # object)
            out.append((t, x.__name__))
            _walk(owner, out, seen, depth, checks)
            return
    if isinstance(x, random.Random):
        if isinstance(x, random.SystemRandom):
            raise Opaque("a random.SystemRandom it reads (its numbers cannot be replayed)")
        out.append(id(x))
        checks.append((_PYTHON_RANDOM, x, None, None))
        return
    if isinstance(x, types.ModuleType):
        out.append(id(x))
        # (held in a container or an object, [cfg], {"m": cfg}, self.cfg: by the names
        # the function reaching it reads, and at the end of the walk by the names every
        # code walked reads, a method's that reads self.cfg.X among them)
        _walk_module(x, _READING.names, out, seen, depth, checks)
        if _READING.held is not None:
            _READING.held.append(x)
        return
    if isinstance(x, type) and _user_module_name(x.__module__) and id(x) not in seen:
        out.append(id(x))  # (a user's class read as a value: its settings and methods too)
        _walk_class(x, out, seen, depth + 1, checks)
        return
    if isinstance(x, _BY_IDENTITY) or t is object:  # (a bare object(), a sentinel, can
        # hold nothing: by identity)
        out.append(id(x))
        return
    if depth > 24:
        raise TooMuch
    if id(x) in seen:
        out.append(("seen", id(x)))
        return
    seen.add(id(x))
    if len(out) > BUDGET:
        raise TooMuch
    depth += 1
    if isinstance(x, dict):
        out.append(t)
        _walk_dict(x, out, seen, depth, checks)
        if t is not dict:
            _walk_subclass(x, out, seen, depth, checks)
        return
    if isinstance(x, (set, frozenset)):
        frozen = frozenset(x)
        exact = _exact_set(frozen)
        out.append((t, exact))
        if t is not frozenset:  # (a set of strings compares exactly by ==; numbers need
            # their bits)
            checks.append((_SET, x, frozen, None if all(type(v) is str for v in frozen)
                           else exact))
        for v in frozen:
            if type(v) not in _ATOMS:
                _walk(v, out, seen, depth, checks)
        if t is not set and t is not frozenset:
            _walk_subclass(x, out, seen, depth, checks)
        return
    if t is types.FunctionType:
        code = x.__code__
        out.append(code)
        checks.append((_ATTR, x, "__code__", code))
        outer = _READING.names
        try:
            _walk_function(x, code, out, seen, depth, checks)
        finally:
            _READING.names = outer
        return
    if isinstance(x, functools.partial):  # (its attributes are read-only)
        _walk(x.func, out, seen, depth, checks)
        _walk(x.args, out, seen, depth, checks)
        _walk(x.keywords, out, seen, depth, checks)
        if t is not functools.partial:
            _walk_subclass(x, out, seen, depth, checks)
        return
    if t is types.MethodType:
        _walk(x.__func__, out, seen, depth, checks)
        _walk(x.__self__, out, seen, depth, checks)
        return
    if isinstance(x, tuple):  # (and namedtuples, and a user's subclasses of them)
        if len(x) > _ITEMS:
            raise TooMuch
        out.append((t, len(x)))
        for v in x:
            _walk(v, out, seen, depth, checks)
        if t is not tuple:
            _walk_subclass(x, out, seen, depth, checks)
        return
    if isinstance(x, (list, collections.deque)):
        if len(x) > _ITEMS:
            raise TooMuch
        out.append((t, len(x)))
        checks.append((_LEN, x, len(x), None))
        for k, v in enumerate(x):
            checks.append((_INDEX, x, k, v))
            _walk(v, out, seen, depth, checks)
        if t is not list and t is not collections.deque:
            _walk_subclass(x, out, seen, depth, checks)
        return
    if _read(x, "__fingerprint_attrs__", None) is not None and not isinstance(x, type):
        out.append(t)
        attrs = vars(x)
        for name in x.__fingerprint_attrs__:
            value = attrs.get(name, _MISSING)
            checks.append((_ITEM, attrs, name, value))
            if value is not _MISSING:
                _walk(value, out, seen, depth, checks)
        return
    if t.__name__ in _COMPILED_FUNCTIONS:  # (compiled code, like a builtin: by identity; a
        # bound method of one is followed through its __self__, a Generator say)
        out.append(id(x))
        return
    if isinstance(x, threading.local) and _READING.every is not None:
        _READING.every["local"] = None  # (its attributes are each thread's: see Watch)
    attrs = _read(x, "__dict__", None)
    slots = [name for c in t.__mro__ for name in getattr(c, "__slots__", ())
             if name not in ("__dict__", "__weakref__")]
    if type(attrs) is dict or slots:  # (a user's object: its attributes, and its class's)
        out.append(t)
        checks.append((_TYPE, x, t, None))  # (obj.__class__ = Other)
        if type(attrs) is dict:
            checks.append((_ATTR, x, "__dict__", attrs))  # (obj.__dict__ = {...})
            _walk_dict(attrs, out, seen, depth, checks)
        for name in slots:
            value = _read(x, name, _MISSING)
            checks.append((_ATTR, x, name, value))
            if value is not _MISSING:
                out.append(name)
                _walk(value, out, seen, depth, checks)
        if _user_module_name(t.__module__):
            _walk_class(t, out, seen, depth, checks)
        return
    if isinstance(x, _INERT):
        out.append(id(x))
        return
    raise Opaque(f"a {_type_name(t)} it reads (its contents are out of scg.jit's reach: "
                 "pass what the call needs from it as an argument)")


def _walk_subclass(x, out, seen, depth, checks):
    """A dict's or a list's subclass: its attributes, and a user's class's methods (a
    __getitem__ or a get of its own may read anything)."""
    if hasattr(x, "__dict__"):
        _walk_dict(vars(x), out, seen, depth, checks)
    t = type(x)
    if _user_module_name(t.__module__):
        _walk_class(t, out, seen, depth, checks)


def _walk_read(value, attributes, out, seen, depth, checks):
    """A value a function's code reads by name (a global, a closure cell, an import): a
    module by the attributes the code names; anything else as any value."""
    if isinstance(value, types.ModuleType):
        out.append(id(value))
        _walk_module(value, attributes, out, seen, depth, checks)
    else:
        _walk(value, out, seen, depth, checks)


def _walk_function(x, code, out, seen, depth, checks):
    """A function's closure, defaults, attributes and the globals its code reads. A module
    reached through any of them is read by the attribute names the code names (set in
    _READING.names for the walk of what the function reaches)."""
    names = _global_names(code)
    attributes = _attribute_names(code)
    dynamic = _dynamic_names(code)  # (almost always empty: nothing more to do)
    alias = False
    if dynamic and attributes is not _EVERY_NAME and not dynamic.isdisjoint(
            ("vars", "__dict__", "__globals__")):
        # vars(mod)[k], mod.__dict__[k]: a user's module's every attribute
        attributes = _EveryUserName(attributes)
    _READING.names = attributes
    every = _READING.every
    if every is not None:
        if attributes is _EVERY_NAME:
            every[_EVERY_NAME] = None
        else:
            every.update(dict.fromkeys(attributes))
            if type(attributes) is _EveryUserName:
                every[_EVERY_USER] = None
    for cell in x.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # (an empty cell: a name not yet assigned)
            out.append("empty")
            checks.append((_CELL, cell, None, _MISSING))
            continue
        checks.append((_CELL, cell, None, value))
        _walk_read(value, attributes, out, seen, depth, checks)
        if id(value) in _LOOKUPS:  # (globals, sys.modules, import_module, ... under
            # another name: what it looks up is out of reach of the names read)
            alias = True
    for name in ("__defaults__", "__kwdefaults__"):
        value = getattr(x, name)
        checks.append((_ATTR, x, name, value))
        _walk(value, out, seen, depth, checks)
        if value and any(id(v) in _LOOKUPS for v in (
                value.values() if type(value) is dict else value)):
            alias = True
    attrs = x.__dict__
    if attrs:  # (attributes set on it, a decorated function's too: `step.lr = 0.1`)
        wrapped = attrs.get("__wrapped__")
        copied = _read(wrapped, "__dict__", None) if wrapped is not None else None
        # (functools.wraps copied the wrapped object's attributes: a snapshot the wrapper
        # does not read; the wrapped object is walked through its closure)
        _walk_dict(attrs, out, seen, depth, checks, skip=copied and {"__wrapped__", *copied})
    g = x.__globals__
    if str(g.get("__name__", "")).startswith("scg."):  # (scg's globals are its code)
        return
    for name in names:
        value = g.get(name, _MISSING)
        checks.append((_ITEM, g, name, value))
        if value is not _MISSING:
            out.append(name)
            _walk_read(value, attributes, out, seen, depth, checks)
            if id(value) in _LOOKUPS:
                alias = True
    for name in _imported_modules(code, g.get("__package__")):
        # (`import cfg` or `from cfg import X` inside the function: the module, by the
        # names the code reads, as for a module it reads through a global)
        module = sys.modules.get(name, _MISSING)
        checks.append((_ITEM, sys.modules, name, module))
        out.append(_atom(name))
        if isinstance(module, types.ModuleType):
            _walk_read(module, attributes, out, seen, depth, checks)
    if dynamic or alias:
        _walk_dynamic(x, dynamic, alias, names, attributes, out, seen, depth, checks)


@functools.lru_cache(maxsize=4096)
def _imported_modules(code, package):
    """The modules that a code object (or a function nested in it) imports by an import
    statement, with their parent packages (`import a.b` reads a, then a.b); relative
    imports resolved against the function's package."""
    found = []
    for c in _codes(code):
        if not c.co_names:
            continue
        ops = list(dis.get_instructions(c))
        for k, ins in enumerate(ops):
            if ins.opname != "IMPORT_NAME":
                continue
            level = next((o.argval for o in reversed(ops[max(0, k - 3):k])
                          if o.opname == "LOAD_CONST" and type(o.argval) is int), 0)
            name = ins.argval
            if level:
                try:
                    name = importlib.util.resolve_name("." * level + name, package)
                except (ImportError, ValueError, AttributeError):
                    continue
            parts = name.split(".")
            found += [".".join(parts[:i + 1]) for i in range(len(parts))]
    return tuple(dict.fromkeys(found))


def _read(x, name, default):
    """getattr(x, name, default), for objects whose __getattr__ raises something else than
    AttributeError for a missing name: such an object cannot be fingerprinted (the call
    then runs afresh, uncached)."""
    try:
        return getattr(x, name, default)
    except Exception as error:
        raise TooMuch(f"a {type(x).__name__} whose lookup of the attribute {name} raised "
                      f"{error!r}, not AttributeError") from error


def _walk_module(module, names, out, seen, depth, checks):
    """The attributes of a module that the code may read by name (`mod.X`, `pkg.sub.X`,
    `getattr(mod, "X")`): a user's module's settings, and a library's data (`os.environ`,
    a library's option objects; its functions, classes and submodules' code are not
    followed)."""
    if depth > 24:
        return
    user = _user_module(module)
    attrs = vars(module)
    wanted = names
    if names is _EVERY_NAME or (user and type(names) is _EveryUserName):
        # (a name computed at run time: any attribute it has)
        if (id(module), _EVERY_NAME) in seen:
            return
        seen.add((id(module), _EVERY_NAME))
        checks.append((_LEN, attrs, len(attrs), None))
        wanted = [k for k in list(attrs) if not (k.startswith("__") and k.endswith("__"))]
    for attr in wanted:
        # (each attribute once per walk, not each module: two functions reading other
        # attributes of one module, cfg.A here and cfg.B in a helper, both count)
        if (id(module), attr) in seen:
            continue
        seen.add((id(module), attr))
        value = attrs.get(attr, _MISSING)
        if not user and value is _MISSING:
            continue
        if not user and callable(value) and not isinstance(value, types.ModuleType):
            # (a library's function or class: by identity, not followed; replaced by a
            # user, np.tanh = np.sin, it is another one; for a name the code spells, not
            # every function of the library a computed getattr could reach)
            if wanted is names:
                checks.append((_ITEM, attrs, attr, value))
                out.append(id(value))
            continue
        if value is sys.modules:  # (what code looks up there: _walk_dynamic's part; as
            # a container of modules, it would be walked by every name the code reads)
            out.append(attr)
            continue
        checks.append((_ITEM, attrs, attr, value))
        if value is _MISSING:
            continue
        out.append(attr)
        if isinstance(value, types.ModuleType):
            out.append(id(value))
            _walk_module(value, names, out, seen, depth + 1, checks)
        elif user:
            _walk(value, out, seen, depth, checks)
        else:
            try:
                _walk(value, out, seen, depth, checks)
            except Opaque:  # (a library's constant of its own kind, a torch.dtype)
                out.append(id(value))


def _walk_class(cls, out, seen, depth, checks):
    """The attributes of a user's classes: settings by value, and methods, properties and
    other callables through what they are (their code, closures and the globals they read),
    so that an attribute added to a subclass, a method replaced on the class or a callable
    setting changed all show."""
    if depth > 24:
        raise TooMuch
    meta = type(cls)
    for c in cls.__mro__[:-1] + (meta.__mro__[:-1] if meta is not type else ()):
        if id(c) in seen or not _user_module_name(c.__module__):
            continue
        seen.add(id(c))
        attrs = c.__dict__
        checks.append((_LEN, attrs, len(attrs), None))
        for name, value in attrs.items():
            if name.startswith("__") and name.endswith("__") and not isinstance(
                    value, (types.FunctionType, staticmethod, classmethod, property)):
                continue  # (__dict__, __module__, __doc__, __weakref__ and the like)
            checks.append((_ITEM, attrs, name, value))
            out.append(name)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = (value.fget, value.fset)
            _walk(value, out, seen, depth, checks)


def _user_module_name(name):
    if type(name) is not str:  # (a compiled type's __module__ can be a descriptor, or
        # None: not a user's Python module)
        return False
    root = name.split(".")[0]
    return root not in _LIBRARIES and root not in sys.stdlib_module_names and \
        not root.startswith("_cython_")  # (the types Cython's modules share)


def _user_module(module):
    # (read from its dict: a module's __getattr__ may import, or raise, for a missing name)
    attrs = vars(module)
    return _user_module_name(attrs.get("__name__")) and "site-packages" not in str(
        attrs.get("__file__", ""))


_LIBRARIES = frozenset(["scg", "numpy", "numba", "scipy", "networkx", "torch", "jax",
                        "dask", "distributed", "tqdm", "matplotlib", "pandas", "builtins",
                        "pytest", "_pytest"])


def _digest(a):
    return hashlib.blake2b(memoryview(np.ascontiguousarray(a)).cast("B")).digest()


def _walk_dict(x, out, seen, depth, checks, skip=None):
    """A dict's items (but the keys in `skip`), and its length and keys."""
    if len(x) > _ITEMS:
        raise TooMuch
    out.append((dict, len(x)))
    checks.append((_LEN, x, len(x), None))
    keys = _key_kinds(x)
    if keys is not None:  # (a key replaced by an equal one, 0.0 by -0.0 or 1 by True, is
        # found by the item's check under the old key: the keys by type and bits too)
        checks.append((_KEYS, x, keys[0], keys[1]))
    for k, v in list(x.items()):
        if skip and k in skip:
            continue
        # (atoms by type and bits: {"s": 0.0} and {"s": -0.0} are equal dicts)
        out.append(_atom(k) if type(k) in _ATOMS else id(k))
        checks.append((_ITEM, x, k, v))
        if type(v) in _ATOMS:
            out.append(_atom(v))
        else:
            _walk(v, out, seen, depth, checks)


def _key_kinds(x):
    """(the types of a dict's keys, in one pass of C: 1, 1.0 and True are one key; the
    float, complex and tuple keys by their bits, or None if it has none: 0.0 and -0.0 are
    one key); None when the keys are all strings, which compare exactly by ==."""
    kinds = tuple(map(type, x))
    distinct = set(kinds)
    if distinct <= _STR:  # (no keys, or strings only)
        return None
    return kinds, _inexact_keys(x) if not _INEXACT_KEYS.isdisjoint(distinct) else None


def _inexact_keys(x):
    return tuple(_exact(k) for k in x if type(k) in _INEXACT_KEYS)


def _exact_keys(x):
    """A dict's keys in a form whose == is exact (see _key_kinds); None for string keys."""
    kinds = _key_kinds(x)
    return kinds if kinds is None else (tuple(x), kinds)


_STR = {str}
_INEXACT_KEYS = frozenset([float, complex, tuple, frozenset])


_EVERY_NAME = None  # (the attributes a module walk reads: all of them)


class _EveryUserName(tuple):
    """The names a code reads, for a code that also reads a module's attributes through
    its __dict__ (vars(mod)[k]): every attribute of a user's module, these of a
    library's."""


# names whose use lets code read a global or a module by a name computed at run time:
# globals()["K"], eval("K"), vars(mod)[k], mod.__dict__[k], f.__globals__[k],
# sys.modules["cfg"], importlib.import_module("cfg"), __import__("cfg")
_DYNAMIC = frozenset(["globals", "eval", "exec", "vars", "__dict__", "__globals__",
                      "modules", "import_module", "__import__"])
_GLOBALS_BY_NAME = ("globals", "eval", "exec")


@functools.lru_cache(maxsize=4096)
def _dynamic_names(code):
    """The names of _DYNAMIC the code (or a function nested in it) loads, as a frozenset
    (empty for nearly every function: then a walk does nothing more)."""
    return frozenset(n for n in _global_names(code) if n in _DYNAMIC)


def _walk_dynamic(fn, dynamic, alias, names, attributes, out, seen, depth, checks):
    """What a function reads by names computed at run time (see _DYNAMIC), made part of its
    fingerprint:

    - through its globals (globals()["K"], eval, exec): every global of its module, and
      its module's length (a global added);
    - through sys.modules, importlib.import_module or __import__: the modules the code
      names there by a constant string (or by `__name__`: its own module), each through
      the attributes the code reads (all of them for a name computed at run time, or
      through vars(mod) or mod.__dict__); a module looked up by a name the code computes
      (or through a function's __globals__, or one of these functions held under another
      name) could be any: every user's module in sys.modules then, and sys.modules'
      length (a module imported).

    The checks of the functions without these names are unchanged (no cost per call)."""
    g = fn.__globals__
    if alias or any(n in dynamic and g.get(n, _BUILTINS.get(n)) is _BUILTINS.get(n)
                    for n in _GLOBALS_BY_NAME):
        checks.append((_LEN, g, len(g), None))
        known = set(names)
        try:
            for name in list(g):
                if name in known or type(name) is not str or (
                        name.startswith("__") and name.endswith("__")):
                    continue
                value = g[name]
                checks.append((_ITEM, g, name, value))
                out.append(name)
                _walk_read(value, attributes, out, seen, depth, checks)
        except TooMuch as error:
            if str(error):
                raise
            raise TooMuch(f"every global of its module (it reads globals(), eval or exec), "
                          f"more than {BUDGET} values: pass the settings it reads as "
                          "arguments") from None
    if not alias and not _reaches_modules(fn, dynamic, names, g):
        return
    if alias and type(attributes) is not _EveryUserName and attributes is not _EVERY_NAME:
        attributes = _EveryUserName(attributes)  # (vars held under another name, say)
    named, own, computed = _module_lookups(fn.__code__)
    modules = sys.modules
    if own and type(g.get("__name__")) is str:
        named = named | {g["__name__"]}
    if not (computed or alias or "__globals__" in dynamic):
        for name in sorted(named):  # (each: the module, or missing until imported)
            module = modules.get(name, _MISSING)
            checks.append((_ITEM, modules, name, module))
            out.append(_atom(name))
            if isinstance(module, types.ModuleType):
                out.append(id(module))
                _walk_module(module, attributes, out, seen, depth, checks)
        return
    checks.append((_LEN, modules, len(modules), None))
    try:
        for name, module in list(modules.items()):
            if not isinstance(module, types.ModuleType) or not (
                    name in named or _user_module(module)):
                continue
            checks.append((_ITEM, modules, name, module))
            out.append(_atom(name))
            out.append(id(module))
            _walk_module(module, attributes, out, seen, depth, checks)
    except TooMuch as error:
        if str(error):
            raise
        raise TooMuch("modules by a name computed at run time (sys.modules[...], "
                      "importlib.import_module, __import__): every user's module is then "
                      f"part of its fingerprint, more than {BUDGET} values; name the module "
                      "by a constant string, or pass the settings as arguments") from None


def _reaches_modules(fn, dynamic, names, g):
    """Can the function look a module up by name: does it read `__import__` or a
    function's `__globals__`, or hold sys (or sys.modules) and read `modules`, or hold
    importlib (or its import_module) and read `import_module`? Decided by what its
    globals, closure and defaults hold, so that an object's own `.modules` does not count."""
    if "__import__" in dynamic or "__globals__" in dynamic:
        return True
    values = [g.get(n) for n in names]
    values += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    values += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    if "modules" in dynamic and any(v is sys or v is sys.modules for v in values):
        return True
    return "import_module" in dynamic and any(
        v is importlib or v is importlib.import_module for v in values)


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


_SKIPPED = ("CACHE", "EXTENDED_ARG", "PUSH_NULL", "NOP")
_CALLS = ("PRECALL", "CALL", "CALL_FUNCTION", "CALL_METHOD")


@functools.lru_cache(maxsize=4096)
def _module_lookups(code):
    """How the code (and the functions nested in it) looks modules up by name:
    (the constant names, whether it uses `__name__` (its own module), whether a name is
    computed). Read from the bytecode: after `modules` (sys.modules), `modules.get`,
    `import_module` or `__import__` must come one constant string (or `__name__`) and the
    subscript or the call; anything else (a computed name, sys.modules stored or passed
    on, more arguments) counts as computed. `name in sys.modules` looks nothing up."""
    named, own, computed = set(), False, False
    for c in _codes(code):
        if _DYNAMIC.isdisjoint(c.co_names):
            continue
        ops = [i for i in dis.get_instructions(c) if i.opname not in _SKIPPED]
        for k, ins in enumerate(ops):
            if not ins.opname.startswith("LOAD_") or ins.argval not in (
                    "modules", "import_module", "__import__"):
                continue
            if ins.opname in ("LOAD_CONST", "LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
                continue  # (a string constant, a local variable: not the lookup)
            rest = ops[k + 1:k + 4]
            if ins.argval == "modules":
                if rest and rest[0].opname == "CONTAINS_OP":
                    continue
                if rest and rest[0].opname in ("LOAD_METHOD", "LOAD_ATTR") and \
                        rest[0].argval in ("get", "__getitem__"):
                    rest = ops[k + 2:k + 5]
                elif rest and rest[0].opname in ("LOAD_METHOD", "LOAD_ATTR"):
                    computed = True  # (sys.modules.items(), .copy(), ...)
                    continue
            key = rest[0] if rest else None
            end = rest[1] if len(rest) > 1 else None
            if key is not None and key.opname == "LOAD_CONST" and type(key.argval) is str \
                    and not key.argval.startswith("."):
                constant = key.argval
            elif key is not None and key.opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
                    key.argval == "__name__":
                constant = None
            else:
                computed = True
                continue
            subscript = end is not None and (end.opname == "BINARY_SUBSCR" or (
                end.opname == "BINARY_OP" and "[" in end.argrepr))  # (3.14: BINARY_OP [])
            if end is None or not (end.opname in _CALLS or (
                    subscript and ins.argval == "modules")):
                computed = True  # (more arguments, or something else done with the name)
                continue
            if constant is None:
                own = True
            else:
                parts = constant.split(".")  # (__import__("a.b") gives a: both named)
                named.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return frozenset(named), own, computed


# the functions that look a global or a module up by a name (held under another name)
_LOOKUPS = frozenset(id(f) for f in (sys.modules, importlib.import_module, builtins.__import__,
                                    builtins.globals, builtins.eval, builtins.exec,
                                    builtins.vars))
_BUILTINS = vars(builtins)


@functools.lru_cache(maxsize=4096)
def _attribute_names(code):
    """The names a code object may read as a module's attributes: the names it loads,
    and strings that could name one (getattr(mod, "X")); _EVERY_NAME if it calls getattr
    with a name it computes (getattr(mod, "X" + k)), which could be any."""
    if _computes_names(code):
        return _EVERY_NAME
    names = list(_global_names(code))
    for c in _codes(code):
        names += [k for k in c.co_consts if type(k) is str and k.isidentifier()]
    return tuple(dict.fromkeys(names))


def _codes(code):
    """A code object and the code of every function nested in it."""
    stack = [code]
    while stack:
        c = stack.pop()
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        yield c


def _computes_names(code):
    """Does the code (or a function nested in it) call getattr with a name that is not a
    constant string? Read from its bytecode: the instructions that push getattr's second
    argument must be one LOAD_CONST of a str."""
    for c in _codes(code):
        if "getattr" not in c.co_names:
            continue
        ops = [i for i in dis.get_instructions(c) if i.opname not in ("CACHE", "EXTENDED_ARG")]
        for k, ins in enumerate(ops):
            if ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME") or ins.argval != "getattr":
                continue
            try:
                depth = 0
                pushed = []  # the instructions of each argument, in order
                for nxt in ops[k + 1:]:
                    if nxt.opname in ("PRECALL", "CALL", "CALL_FUNCTION", "KW_NAMES"):
                        break
                    if not pushed or depth == len(pushed):
                        pushed.append([])
                    pushed[-1].append(nxt)
                    depth_before = depth
                    depth += dis.stack_effect(nxt.opcode, nxt.arg, jump=False)
                    if depth < depth_before and depth < len(pushed) - 1:
                        return True  # (an argument built in a way not followed here)
                    if depth == len(pushed) - 1:
                        pushed.pop()  # (not an argument after all)
                name = pushed[1] if len(pushed) >= 2 else None
            except (ValueError, IndexError):
                return True
            if not name or len(name) != 1 or name[0].opname != "LOAD_CONST" or \
                    type(name[0].argval) is not str:
                return True
    return False


@functools.lru_cache(maxsize=4096)
def _global_names(code):
    """The global names a code object (and the code of its nested functions) loads."""
    names = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names += _global_names(c)
    return tuple(dict.fromkeys(names))


def generators_reachable(x):
    """The numpy Generators and Python random.Random instances a call can reach through
    its function and arguments, as two lists."""
    checks = []
    try:
        _walk_top(x, [], checks)
    except Exception:  # (TooMuch, or an object the walk cannot read: the ones found)
        pass
    return ([c[1] for c in checks if c[0] == _GENERATOR],
            list({id(c[1]): c[1] for c in checks if c[0] == _PYTHON_RANDOM}.values()))
