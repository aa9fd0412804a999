"""What a replay checks: the second half of scg.jit's contract (watch.py is the first).

`guards` turns what a recorded call ran (watch.py) into one predicate, generated code
checked before each replay: the jitted function, the closure cells, defaults and
attributes of the user's functions whose code ran, the globals that code names, the
modules it imports, and the arguments that are not arrays. Values are compared when scg
can compare them cheaply (atoms by type and bits, arrays by dtype, shape and bytes,
containers and the user's objects by their contents, bounded in size); functions,
classes and generators by identity; modules by identity and the attributes the code
spells; scg's objects by identity and the attributes they declare (`__jit_attrs__`; their
state goes through the effect stack). Anything else raises `Refused`: the call runs
afresh, never guessed equal.
"""

import builtins
import collections
import functools
import struct
import sys
import types

import numpy as np

from ..core.tape import Tracer
from .watch import USER, _in_scg, _kind_of_file, _names, _nested, compares_identity, kind_of

MISSING = object()
_LIMIT = 10_000  # values compared for one recording (more: the call runs afresh)


class Refused(Exception):
    """The recorded call read something a guard cannot compare (the reason, for explain())."""


# ---------------------------------------------------------------- guards
_DOUBLE = struct.Struct("<d").pack


def same_float(a, b):
    """Bit for bit (-0.0 is not 0.0, every nan of one sign is one value)."""
    if type(a) is complex:
        return _DOUBLE(a.real) == _DOUBLE(b.real) and _DOUBLE(a.imag) == _DOUBLE(b.imag)
    return _DOUBLE(a) == _DOUBLE(b)


_ATOMS = (int, str, bytes, bool, type(None))
_IDENTITY = (type(len), np.ufunc, np.dtype, np.random.Generator, np.random.BitGenerator,
             np.random.RandomState,
             types.BuiltinMethodType, types.MethodDescriptorType, types.WrapperDescriptorType,
             types.MethodWrapperType, types.GetSetDescriptorType, types.MemberDescriptorType,
             types.CodeType, type(collections.namedtuple("_", "a").a), type(Ellipsis),
             type(NotImplemented))


def _exact(v):
    t = type(v)
    if t in _ATOMS:
        return (t, v)
    if t is float or t is complex:
        return (t, repr(v), _DOUBLE(v.real), _DOUBLE(v.imag) if t is complex else b"")
    if t is tuple:
        items = tuple(_exact(u) for u in v)
        return None if None in items else (t, items)
    return None


def _exact_keys(d):
    keys = tuple(_exact(k) for k in dict.keys(d))
    return None if None in keys else keys


def _exact_set(s):
    """The elements of a set by type and bits ({0.0} and {-0.0} are equal sets), or None
    for elements of other kinds."""
    items = frozenset(_exact(v) for v in s)
    return None if None in items else items


class _Guards:
    """Builds the source of the guard predicate (`lines`, with its constants `names`)."""

    def __init__(self, attributes, ran, kinds, trusted):
        self.attributes = attributes
        self.trusted = trusted
        self.ran = ran
        self.kinds = kinds
        self.lines = []
        self.names = {"MISSING": MISSING, "same_float": same_float, "dict_get": dict.get,
                      "dict_len": dict.__len__, "dict_keys": dict.keys,
                      "item": _item, "length": _length, "exact_set": _exact_set,
                      "exact_keys": _exact_keys}
        self.seen = set()
        self.covered = set()
        self.count = 0
        self.arrays = []  # (the arrays compared: an argument may be one of them)

    def const(self, x):
        name = f"k{len(self.names)}"
        self.names[name] = x
        return name

    def temp(self, expr):
        if expr.isidentifier():
            return expr
        name = f"t{len(self.lines)}"
        self.lines.append(f"{name} = {expr}")
        return name

    def fail_if(self, condition):
        self.lines.append(f"if {condition}: return False")

    def identity(self, e, x, where):
        k = self.const(x)
        self.fail_if(f"{e} is not {k}")
        self.count += 1
        return k

    def value(self, expr, x, where):
        self.count += 1
        if self.count > _LIMIT:
            raise Refused(f"it reads more than {_LIMIT} values outside its arguments (the "
                          f"last: {where}); pass them as arguments")
        t = type(x)
        if x is MISSING:
            self.fail_if(f"{expr} is not MISSING")
            return
        if x is None or t is bool:
            self.fail_if(f"{expr} is not {x!r}")
            return
        by_identity = t in self.trusted or t in _BY_IDENTITY or isinstance(x, _IDENTITY) or \
            isinstance(x, type) or _library_callable(t)
        e = expr if by_identity else self.temp(expr)
        if t in _ATOMS:
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e} != {self.const(x)}")
        elif t is float or t is complex:
            k = self.const(x)
            self.fail_if(f"{e} is not {k} and ({e}.__class__ is not {self.const(t)} or not "
                         f"same_float({e}, {k}))")
        elif t is np.ndarray or t is np.memmap:
            if x.dtype.hasobject:
                raise Refused(f"{where} is an array of Python objects, which scg.jit cannot "
                              "compare")
            data = x.tobytes()
            self.arrays.append((x, where))
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e}.dtype != "
                         f"{self.const(x.dtype)} or {e}.shape != {x.shape!r} or "
                         f"{e}.tobytes() != {self.const(data)}")
        elif isinstance(x, np.generic):
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e}.tobytes() != "
                         f"{self.const(x.tobytes())}")
        elif t is tuple or t is list or t is dict or t is set or t is frozenset or \
                t is range or t is slice:
            self.container(e, x, t, where)
        elif t in _LIBRARY_CONTAINERS:
            self.library_container(e, x, t, where)
        elif isinstance(x, Tracer):
            raise Refused(f"{where} is a value an earlier call computed (kept outside the "
                          "call): return the new state from the function instead")
        elif by_identity:
            # by identity; what it holds, through the constant (the same object)
            k = self.identity(e, x, where)
            if id(x) in self.seen:
                return
            self.seen.add(id(x))
            if t is types.FunctionType:
                self.function(k, x, where)
            elif t is types.ModuleType:
                self.module(k, x, where)
            elif isinstance(x, type):
                self.cls(k, x, where)
            elif t is types.MethodType or t is staticmethod or t is classmethod:
                self.value(f"{k}.__func__", x.__func__, where)
                if t is types.MethodType:
                    self.value(f"{k}.__self__", x.__self__, f"the object of {where}")
            elif t is property:
                for part in ("fget", "fset", "fdel"):
                    self.value(f"{k}.{part}", getattr(x, part), f"{where}.{part}")
            elif t is functools.partial:
                self.value(f"{k}.args", x.args, f"{where}.args")
                self.value(f"{k}.keywords", x.keywords, f"{where}.keywords")
                self.value(f"{k}.func", x.func, f"{where}.func")
            elif isinstance(x, types.BuiltinMethodType) and x.__self__ is not None and \
                    not isinstance(x.__self__, (types.ModuleType, type)):
                self.value(f"{k}.__self__", x.__self__, f"the object of {where}")
            elif _is_scg(t):
                self.scg_object(k, x, where)
        else:
            self.obj(e, x, t, where)

    def container(self, e, x, t, where):
        k = self.const(t)
        if t is set or t is frozenset:
            exact = _exact_set(x)
            if exact is None:
                raise Refused(f"{where} is a set of other values than numbers, strings, "
                              "bytes and tuples of them, which scg.jit does not compare")
            self.fail_if(f"{e}.__class__ is not {k} or exact_set({e}) != {self.const(exact)}")
            return
        if t is range or t is slice:
            self.fail_if(f"{e}.__class__ is not {k} or {e} != {self.const(x)}")
            return
        self.fail_if(f"{e}.__class__ is not {k} or len({e}) != {len(x)}")
        self.items(e, x, where)

    def library_container(self, e, x, t, where):
        """collections' OrderedDict, defaultdict, Counter and deque: by their items."""
        self.fail_if(f"{e}.__class__ is not {self.const(t)} or length({e}) != {len(x)}")
        if t is collections.defaultdict:
            self.value(f"{e}.default_factory", x.default_factory, f"{where}.default_factory")
        elif t is collections.deque:
            self.value(f"{e}.maxlen", x.maxlen, f"{where}.maxlen")
        self.items(e, x, where)

    def items(self, e, x, where):
        # (a subclass's items through its base's methods: a guard runs no user code)
        if isinstance(x, dict):
            keys = list(dict.keys(x))
            if _exact_keys(x) is None:
                raise Refused(f"{where} is a dict with keys of other kinds than numbers, "
                              "strings, bytes and tuples of them, which scg.jit does not "
                              "compare")
            plain = type(x) is dict
            if not keys:
                pass  # (its length, checked)
            elif all(type(key) is str for key in keys):
                self.fail_if(f"list({e}) != {self.const(keys)}" if plain else
                             f"list(dict_keys({e})) != {self.const(keys)}")
            else:  # (by type and bits: 1 and True, 0.0 and -0.0 are one key to a dict)
                self.fail_if(f"exact_keys({e}) != {self.const(_exact_keys(x))}")
            for key, v in dict.items(x):
                k = self.const(key)
                self.value(f"{e}.get({k}, MISSING)" if plain else f"dict_get({e}, {k}, MISSING)",
                           v, f"{where}[{key!r}]")
        else:
            plain = type(x) is list or type(x) is tuple
            for i, v in enumerate(_base(x).__iter__(x)):
                self.value(f"{e}[{i}]" if plain else f"item({e}, {i})", v, f"{where}[{i}]")

    # (function, module, cls and scg_object: x is the constant k, checked by identity)
    def function(self, k, x, where):
        code = x.__code__
        kind = self.kinds.get(code)
        if kind is None:
            kind = kind_of(code, self.kinds)
        scg = _in_scg(code.co_filename)
        if not (kind == USER and code in self.ran) and not scg:
            return  # (its code did not run: its values were not read)
        self.covered.add(code)
        for name, cell in zip(code.co_freevars, x.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue  # (a name not assigned yet: read as empty on replay too)
            self.value(f"{self.const(cell)}.cell_contents", value,
                       f"the closure variable {name!r} of {x.__qualname__}")
        if not scg:
            if x.__dict__:
                self.value(f"{k}.__dict__", x.__dict__, f"the attributes of {x.__qualname__}")
            else:
                self.fail_if(f"{k}.__dict__")
            self.value(f"{k}.__defaults__", x.__defaults__, f"the defaults of {x.__qualname__}")
            self.value(f"{k}.__kwdefaults__", x.__kwdefaults__,
                       f"the defaults of {x.__qualname__}")

    def module(self, k, x, where):
        d = vars(x)
        kd = self.const(d)
        user = _kind_of_file(getattr(x, "__file__", None) or "<module>") == USER and \
            not x.__name__.split(".")[0] in ("scg", "numpy")
        if user:  # (a setting added later could be read by a computed name)
            self.fail_if(f"len({kd}) != {len(d)}")
        for name in list(d) if user else sorted(self.attributes & d.keys()):
            if name.startswith("__"):
                continue
            if name in self.attributes:
                self.value(f"{kd}.get({name!r}, MISSING)", d[name], f"{x.__name__}.{name}")
            else:  # (a user module's other settings: by identity, in case of getattr)
                self.identity(f"{kd}.get({name!r}, MISSING)", d[name], f"{x.__name__}.{name}")

    def cls(self, k, x, where):
        for c in x.__mro__:
            if not _user_type(c):
                continue
            d = c.__dict__
            kd = self.const(d)
            self.fail_if(f"len({kd}) != {len(d)}")
            for name, v in d.items():
                if name in _CLASS_BOOKKEEPING:
                    continue
                if name in self.attributes or type(v) is types.FunctionType:
                    self.value(f"{kd}.get({name!r}, MISSING)", v, f"{c.__qualname__}.{name}")
                else:
                    self.identity(f"{kd}.get({name!r}, MISSING)", v, f"{c.__qualname__}.{name}")
            meta = type(c)
            if meta is not type:
                self.value(f"{self.const(c)}.__class__", meta,
                           f"the metaclass of {c.__qualname__}")

    def scg_object(self, k, x, where):
        """scg's own object: the attributes its class declares (`__jit_attrs__`), or all
        of them when they are comparable (settings); its state goes through effects."""
        declared = getattr(type(x), "__jit_attrs__", None)
        d = getattr(x, "__dict__", None)
        if declared is not None:
            kd = self.const(d) if type(d) is dict else None
            for name in declared:
                expr = f"{kd}.get({name!r}, MISSING)" if kd and name in d else \
                    f"getattr({k}, {name!r}, MISSING)"
                self.value(expr, getattr(x, name, MISSING), f"{where}.{name}")
        elif type(d) is dict:
            mark = (len(self.lines), self.count)
            try:
                self.value(f"{k}.__dict__", d, where)
            except Refused:
                del self.lines[mark[0]:]
                self.count = mark[1]

    def obj(self, e, x, t, where):
        """A user's object (by value: an equal one made anew replays): its class, its
        attributes (or slots), or its items."""
        if t is types.SimpleNamespace:
            self.fail_if(f"{e}.__class__ is not {self.const(t)}")
            self.value(f"{e}.__dict__", vars(x), where)
            return
        if not _user_type(t):
            raise Refused(f"{where} is a {t.__module__}.{t.__qualname__}, which scg.jit "
                          "cannot compare (pass what the function needs from it as "
                          "arguments, or vouch for the function with trust=)")
        self.value(f"{e}.__class__", t, f"the class of {where}")
        if isinstance(x, (list, tuple, dict)):
            self.fail_if(f"length({e}) != {len(x)}")
            self.items(e, x, where)
        elif isinstance(x, (set, frozenset)):
            exact = _exact_set(x)
            if exact is None:
                raise Refused(f"{where} is a set of values scg.jit does not compare")
            self.fail_if(f"exact_set({e}) != {self.const(exact)}")
        elif isinstance(x, functools.partial):
            self.value(f"{e}.func", x.func, f"{where}.func")
            self.value(f"{e}.args", x.args, f"{where}.args")
            self.value(f"{e}.keywords", x.keywords, f"{where}.keywords")
        elif isinstance(x, np.ndarray):
            self.value(f"{self.const(np.asarray)}({e})", np.asarray(x), where)
        d = getattr(x, "__dict__", None)
        if d is not None:
            if type(d) is not dict:
                raise Refused(f"{where} is an object whose attributes are not a dict")
            self.value(f"{e}.__dict__", d, where)
        for c in t.__mro__:
            for name in c.__dict__.get("__slots__", ()):
                if name not in ("__dict__", "__weakref__"):
                    self.value(f"getattr({e}, {name!r}, MISSING)", getattr(x, name, MISSING),
                               f"{where}.{name}")

    def compile(self):
        source = "def check(A, I):\n    try:\n" + \
            "".join(f"        {line}\n" for line in self.lines) + \
            "    except Exception:  # (a cell emptied, an attribute gone)\n" \
            "        return False\n    return True\n"
        exec(compile(source, "<scg.jit guards>", "exec"), self.names)
        return self.names["check"]


_CLASS_BOOKKEEPING = frozenset([
    "__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__annotations__",
    "__dataclass_fields__", "__slots__", "__match_args__", "__dataclass_params__"])
_BY_IDENTITY = (types.FunctionType, types.ModuleType, types.MethodType, functools.partial,
                staticmethod, classmethod, property)


def _is_scg(t):
    module = type.__dict__["__module__"].__get__(t)
    return type(module) is str and (module == "scg" or module.startswith("scg."))


def _library_callable(t):
    """numpy's functions and types (dispatchers, finfo), compiled functions (Cython's:
    numpy.random's methods), operator's itemgetter, and scg's objects: compared by
    identity. (Named, not called: a call of one from the user's code is the watch's.)"""
    module = type.__dict__["__module__"].__get__(t)
    module = module.split(".")[0] if type(module) is str else ""
    return module in ("numpy", "operator", "_operator") and not issubclass(t, np.ndarray) \
        or module == "scg" or type.__dict__["__name__"].__get__(t) in _COMPILED_FUNCTIONS


# (Cython's function types, whose module is named by Cython's version)
_COMPILED_FUNCTIONS = frozenset(["cython_function_or_method", "fused_cython_function"])


_LIBRARY_CONTAINERS = (collections.OrderedDict, collections.defaultdict, collections.Counter,
                       collections.deque)


def _base(x):
    """The builtin container class of x (whose methods a guard calls)."""
    for base in (dict, list, tuple, collections.deque):
        if isinstance(x, base):
            return base
    raise TypeError(type(x).__name__)


def _item(x, i):
    return _base(x).__getitem__(x, i)


def _length(x):
    return _base(x).__len__(x)


def _user_type(t):
    """Is t a class of the user's code (a class of a library or a C type is not)?"""
    for v in type.__dict__["__dict__"].__get__(t).values():
        # (a method written in the user's code says so: the module's name may not, for a
        # class made by exec() in a module named __main__ that is a library's)
        f = getattr(v, "__func__", v)
        f = getattr(f, "__wrapped__", f)
        if type(f) is types.FunctionType and _kind_of_file(f.__code__.co_filename) == USER:
            return True  # (Python's own functions only: a compiled one's file is its source's)
    name = type.__dict__["__module__"].__get__(t)
    name = name if type(name) is str else ""
    path = getattr(sys.modules.get(name), "__file__", None)
    if path:
        return _kind_of_file(path) == USER
    return bool(t.__flags__ & (1 << 9)) and name not in sys.builtin_module_names \
        and name.split(".")[0] not in ("scg", "numpy", "builtins", "")


def guards(fn, ran, kinds, arguments, inputs, trusted=frozenset()):
    """(the guard predicate of a recorded call, the number of values it compares, a
    conflict of identities or None): `ran` maps the user's code objects that ran to their
    globals; `arguments` are (index, object) of the call's leaves that are not arrays or
    atoms (checked as `A[index]`), `inputs` its array leaves (`I[j]`); `trusted`, the
    classes whose objects the user vouched for. Raises Refused.

    Arrays passed in are stand-ins while recorded: when the code that ran compares
    identities (`data is G`), an argument that is another argument or an array the
    function reads otherwise would test differently (the conflict, in words: the call runs
    afresh), and the guards check that no later argument is."""
    attributes = set()
    for code in ran:
        attributes |= _names(code)[1]
    b = _Guards(frozenset(attributes), ran, kinds, trusted)
    b.value(b.const(fn), fn, "the function")
    by_globals = {}
    for code, g in ran.items():
        by_globals.setdefault(id(g), (g, []))[1].append(code)
    for g, codes in by_globals.values():
        kg = b.const(g)
        module = g.get("__name__", "?")
        for name in dict.fromkeys(n for code in codes for n in _names(code)[0]):
            value = g.get(name, MISSING)
            if value is MISSING:
                if name in vars(builtins):  # (a builtin: still one if no global takes it)
                    b.fail_if(f"{name!r} in {kg}")
                continue
            b.value(f"{kg}.get({name!r}, MISSING)", value, f"the global {name!r} of {module}")
    modules = b.const(sys.modules)
    for name in dict.fromkeys(n for code in ran for n in _names(code)[3]):
        parts = name.split(".")  # (`import a.b` binds a, and reads a.b)
        for k in range(1, len(parts) + 1):
            full = ".".join(parts[:k])
            b.value(f"{modules}.get({full!r}, MISSING)", sys.modules.get(full, MISSING),
                    f"the module {full} it imports")
    for index, x in arguments:
        b.value(f"A[{index}]", x, f"argument {index + 1} (a {type(x).__name__})")
    for code in ran:
        if code.co_freevars and code not in b.covered and \
                not any(code in _nested(c) for c in ran):
            raise Refused(f"it runs {code.co_qualname} ({code.co_filename}:"
                          f"{code.co_firstlineno}), a closure scg.jit did not reach through "
                          "the function, its globals or its arguments (its variables are not "
                          "guarded)")
    conflict = None
    line = compares_identity(ran) if inputs else None
    if line is not None:
        held = b.arrays + [(x, f"argument array {j + 1}") for j, x in enumerate(inputs)]
        for j, x in enumerate(inputs):
            same = [w for y, w in held if y is x and w != f"argument array {j + 1}"]
            if same and conflict is None:
                conflict = (f"it compares identities (`is`) at {line}, and argument array "
                            f"{j + 1} is {same[0]}: while recorded, an argument is a "
                            "stand-in, so the test would read otherwise")
            for y, _ in held[:len(b.arrays) + j]:
                b.fail_if(f"I[{j}] is {b.const(y)}")
    return b.compile(), b.count, conflict
