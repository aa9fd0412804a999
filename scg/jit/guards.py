"""The contract of scg.jit: what a recorded call ran, and the guards a replay checks.

A replay is used only when scg knows everything the recorded call read (docs/performance.md,
"The contract"). Two parts, both made while a call is recorded and never during replays:

- `Watch`, a profiler (`sys.setprofile`) that sees every call the run makes, Python and C
  functions alike. Each code object is classified once: scg's own and numpy's array
  mathematics (trusted), the standard library and installed packages (libraries), and
  the user's code. A call *made by the user's code* to a library function, or to a C
  function outside the allowlist (`_allowed_c`: pure builtins, `math`, `operator`,
  methods of builtin containers and arrays, numpy's C functions but its I/O), makes the
  function run afresh on every call, and `explain()` names the call and its line. The
  user's code objects that ran are kept, with their globals.
- `guards`, which turns what ran into one compiled predicate checked before each replay:
  the jitted function and the closure cells and defaults of the user's functions whose
  code ran, the globals that code names, and the arguments that are not arrays, each by
  value when scg can compare it cheaply (atoms by type and bits, arrays by dtype, shape
  and bytes, containers and plain objects by their contents, bounded in size), functions,
  classes and generators by identity, modules by identity and the attributes the code
  names, scg's objects by identity and the attributes they declare (`__jit_attrs__`;
  their state goes through the effect stack). Anything else raises `Refused`: the call
  runs afresh, never guessed equal.
"""

import builtins
import collections
import dis
import functools
import os
import struct
import sys
import sysconfig
import types

import numpy as np

from ..core.tape import Tracer

TRUSTED, LIBRARY, USER = 0, 1, 2
MISSING = object()
_LIMIT = 10_000  # values compared for one recording (more: the call runs afresh)


class Refused(Exception):
    """The recorded call read something a guard cannot compare (the reason, for explain())."""


# ---------------------------------------------------------------- whose code is it
def _dir(path):
    return os.path.join(os.path.realpath(path), "")


_SCG = _dir(os.path.join(os.path.dirname(__file__), os.pardir))
_NUMPY = _dir(os.path.dirname(np.__file__))
# numpy's files that read or write files, or draw random numbers outside scg.sample
_NUMPY_OUTSIDE = tuple(_NUMPY + p for p in (
    "lib/_npyio_impl.py", "lib/npyio.py", "lib/format.py", "lib/_datasource.py",
    "_core/memmap.py", "_core/records.py", "random/", "testing/", "ctypeslib", "f2py/"))
_LIBRARIES = tuple(sorted({_dir(p) for k, p in sysconfig.get_paths().items()
                           if k in ("stdlib", "platstdlib", "purelib", "platlib")},
                          key=len, reverse=True))
# the standard library's pure Python modules a function may call (abstract classes,
# dataclasses, enums, copies, functools' wrappers and the import of a module imported)
_PURE_STDLIB = frozenset(["abc.py", "_collections_abc.py", "functools.py", "dataclasses.py",
                          "collections/__init__.py", "typing.py", "enum.py", "numbers.py",
                          "copy.py", "contextlib.py", "operator.py", "types.py", "keyword.py",
                          "reprlib.py", "_weakrefset.py"])
_FROZEN = ("<frozen importlib._bootstrap>",)


def _kind_of_file(filename):
    path = os.path.realpath(filename) if filename[:1] != "<" else filename
    if path.startswith(_SCG):
        return TRUSTED
    if path.startswith(_NUMPY):
        return LIBRARY if path.startswith(_NUMPY_OUTSIDE) else TRUSTED
    if filename in _FROZEN or filename.startswith("<scg."):
        return TRUSTED
    if filename.startswith("<frozen "):  # (the standard library's frozen modules)
        return LIBRARY
    for lib in _LIBRARIES:
        if path.startswith(lib):
            return TRUSTED if path[len(lib):] in _PURE_STDLIB else LIBRARY
    return USER


_FILES = {}  # file name -> kind


@functools.lru_cache(maxsize=1024)
def _in_scg(filename):
    return os.path.realpath(filename).startswith(_SCG)


def kind_of(code, kinds, frame=None):
    """The kind of a code object (TRUSTED, LIBRARY or USER), cached in `kinds`. Code
    compiled from a string is its module's (`frame`'s globals), but the methods that
    dataclasses write from a class's fields (the fields are the class's, guarded there)."""
    name = code.co_filename
    if name[:1] == "<" and not name.startswith(("<frozen", "<scg.")):
        module = frame.f_globals.get("__name__", "") if frame is not None else ""
        if code.co_qualname.startswith("__create_fn__.") or module.startswith("namedtuple_"):
            kind = TRUSTED  # (dataclasses' and namedtuple's methods made from fields)
        else:
            path = getattr(sys.modules.get(module), "__file__", None)
            kind = _kind_of_file(path) if path else USER
    else:
        kind = _FILES.get(name)
        if kind is None:
            kind = _FILES[name] = _kind_of_file(name)
    kinds[code] = kind
    return kind


# ---------------------------------------------------------------- C functions
_PURE_BUILTINS = frozenset(
    "abs all any ascii bin bool callable chr divmod format getattr hasattr hash hex isinstance "
    "issubclass iter len max min next oct ord pow repr round sorted sum __build_class__ "
    "setattr delattr".split())
_PURE_MODULES = frozenset(["math", "cmath", "_operator", "operator", "itertools", "_functools",
                           "functools", "_abc", "abc", "_collections", "_bisect", "_heapq"])
_CONTAINERS = (list, dict, tuple, set, frozenset, str, bytes, bytearray, int, float, complex,
               range, slice, np.ndarray, np.generic, np.dtype, np.ufunc)
_ARRAY_IO = frozenset(["tofile", "dump", "dumps", "fromfile", "load", "save", "savez",
                       "loadtxt", "memmap", "fromregex"])


def _allowed_c(fn, trusted):
    """May the user's code call the C function `fn` inside a replayed function?"""
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if owner is None or type(owner) is types.ModuleType:
        module = owner.__name__ if owner is not None else (getattr(fn, "__module__", "") or "")
        if module == "builtins":
            return name in _PURE_BUILTINS
        if module in _PURE_MODULES:
            return True
        if module.startswith("numpy") and not module.startswith("numpy.random"):
            return name not in _ARRAY_IO
        return fn in trusted or module in trusted
    if isinstance(owner, _CONTAINERS):
        return name not in _ARRAY_IO
    if isinstance(owner, type):  # (a class's C method: dict.fromkeys, int.from_bytes)
        return owner.__module__ == "builtins" or owner in trusted
    if type(owner) in trusted:
        return True
    module = type(owner).__module__ or ""
    return module.startswith("scg.") or module in trusted or fn in trusted


def _where(frame):
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Watch:
    """While the recorded call runs (`with Watch(kinds, trusted):`): the user's code
    objects that ran, with their globals (`ran`), and the first call outside the contract
    (`denied`, in words)."""

    __slots__ = ("kinds", "trusted", "ran", "denied", "_previous")

    def __init__(self, kinds, trusted):
        self.kinds = kinds
        self.trusted = trusted
        self.ran = {}
        self.denied = None

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        return False

    def _event(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            kind = self.kinds.get(code)
            if kind is None:
                kind = kind_of(code, self.kinds, frame)
            if kind == USER:
                if code not in self.ran:
                    self.ran[code] = frame.f_globals
            elif kind == LIBRARY and self.denied is None:
                caller = frame.f_back
                if caller is not None and self._kind(caller) == USER:
                    self.denied = f"it calls {code.co_qualname} ({code.co_filename}) at " \
                                  f"{_where(caller)}"
        elif event == "c_call" and self.denied is None:
            if self._kind(frame) == USER and not _allowed_c(arg, self.trusted):
                owner = getattr(arg, "__self__", None)
                module = owner.__name__ if type(owner) is types.ModuleType else \
                    type(owner).__name__ if owner is not None else \
                    getattr(arg, "__module__", None)
                self.denied = f"it calls {module}.{getattr(arg, '__name__', arg)} at " \
                              f"{_where(frame)}"

    def _kind(self, frame):
        kind = self.kinds.get(frame.f_code)
        return kind_of(frame.f_code, self.kinds, frame) if kind is None else kind


def trusted_kinds(trust):
    """(code kinds, C functions, classes and module names) that `trust=` vouches for: a
    function, a class (its methods) or a module (its functions and its C functions)."""
    kinds, c = {}, set()

    def vouch(v):
        code = getattr(getattr(v, "__func__", v), "__code__", None)
        if code is not None:
            kinds[code] = TRUSTED
            for nested in _nested(code):
                kinds[nested] = TRUSTED
        else:
            c.add(v)

    for t in trust:
        if type(t).__name__ == "Jitted":
            t = t.fn
        if isinstance(t, types.ModuleType):
            c.add(t.__name__)
            for v in vars(t).values():
                if isinstance(v, types.FunctionType) and v.__module__ == t.__name__:
                    vouch(v)
                elif isinstance(v, type) and v.__module__ == t.__name__:
                    c.add(v)
                    for m in vars(v).values():
                        if hasattr(getattr(m, "__func__", m), "__code__"):
                            vouch(m)
        elif isinstance(t, type):
            c.add(t)
            for m in vars(t).values():
                if hasattr(getattr(m, "__func__", m), "__code__"):
                    vouch(m)
        elif callable(t):
            vouch(t)
        else:
            raise TypeError(f"scg.jit: trust= takes functions, classes and modules, got "
                            f"{type(t).__name__}")
    return kinds, frozenset(c)


# ---------------------------------------------------------------- what code reads
@functools.lru_cache(maxsize=4096)
def _names(code):
    """(the globals the code names, the attribute names and strings it spells, the line
    of its first `is` between two values that are not constants or None, the modules it
    imports)."""
    globals_, attributes, identity, imports = [], set(), None, []
    previous = None
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME"):
            globals_.append(ins.argval)
        elif op == "IMPORT_NAME":
            imports.append(ins.argval)
        elif op in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM", "STORE_ATTR"):
            attributes.add(ins.argval)
        elif op == "LOAD_CONST" and type(ins.argval) is str and ins.argval.isidentifier():
            attributes.add(ins.argval)
        elif op == "IS_OP" and identity is None and previous != "LOAD_CONST":
            identity = ins.positions.lineno if ins.positions else code.co_firstlineno
        if op not in ("CACHE", "EXTENDED_ARG"):
            previous = op
    return tuple(dict.fromkeys(globals_)), frozenset(attributes), identity, tuple(imports)


def compares_identity(ran):
    """Where the code that ran compares two values by identity (`a is b`, neither a
    constant), or None."""
    for code in ran:
        line = _names(code)[2]
        if line is not None:
            return f"{code.co_filename}:{line}"
    return None


# ---------------------------------------------------------------- guards
_DOUBLE = struct.Struct("<d").pack


def same_float(a, b):
    """Bit for bit (-0.0 is not 0.0, every nan of one sign is one value)."""
    if type(a) is complex:
        return _DOUBLE(a.real) == _DOUBLE(b.real) and _DOUBLE(a.imag) == _DOUBLE(b.imag)
    return _DOUBLE(a) == _DOUBLE(b)


_ATOMS = (int, str, bytes, bool, type(None))
_IDENTITY = (type(len), np.ufunc, np.dtype, np.random.Generator, np.random.BitGenerator,
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
    """Builds the source of the guard predicate, and the snapshot of what it compares
    (two recordings must have equal snapshots)."""

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
        self.snapshot = []
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
        self.fail_if(f"{e} is not {self.const(x)}")
        self.snapshot.append((where, "is", x))

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
            self.snapshot.append((where, "is", x))
            return
        e = self.temp(expr)
        if t in _ATOMS:
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e} != {self.const(x)}")
            self.snapshot.append((where, t, x))
        elif t is float or t is complex:
            k = self.const(x)
            self.fail_if(f"{e} is not {k} and ({e}.__class__ is not {self.const(t)} or not "
                         f"same_float({e}, {k}))")
            self.snapshot.append((where, t, repr(x)))
        elif t is np.ndarray or t is np.memmap:
            if x.dtype.hasobject:
                raise Refused(f"{where} is an array of Python objects, which scg.jit cannot "
                              "compare")
            data = x.tobytes()
            self.arrays.append((x, where))
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e}.dtype != "
                         f"{self.const(x.dtype)} or {e}.shape != {x.shape!r} or "
                         f"{e}.tobytes() != {self.const(data)}")
            self.snapshot.append((where, x.dtype, x.shape, data))
        elif isinstance(x, np.generic):
            self.fail_if(f"{e}.__class__ is not {self.const(t)} or {e}.tobytes() != "
                         f"{self.const(x.tobytes())}")
            self.snapshot.append((where, t, x.tobytes()))
        elif t in self.trusted:  # (an object of a class the user vouched for)
            self.identity(e, x, where)
        elif t is tuple or t is list or t is dict or t is set or t is frozenset or \
                t is range or t is slice:
            self.container(e, x, t, where)
        elif t in _LIBRARY_CONTAINERS:
            self.library_container(e, x, t, where)
        elif t is staticmethod or t is classmethod:
            self.identity(e, x, where)
            self.value(f"{e}.__func__", x.__func__, where)
        elif t is property:
            self.identity(e, x, where)
            for part in ("fget", "fset", "fdel"):
                self.value(f"{e}.{part}", getattr(x, part), f"{where}.{part}")
        elif isinstance(x, _IDENTITY):
            self.identity(e, x, where)
            owner = getattr(x, "__self__", None)  # (a bound method of a container: d.get)
            if owner is not None and isinstance(x, types.BuiltinMethodType) and \
                    not isinstance(owner, (types.ModuleType, type)):
                self.value(f"{e}.__self__", owner, f"the object of {where}")
        elif isinstance(x, Tracer):
            raise Refused(f"{where} is a value an earlier call computed (kept outside the "
                          "call): return the new state from the function instead")
        elif t is types.FunctionType:
            self.function(e, x, where)
        elif t is types.MethodType:
            self.fail_if(f"{e}.__class__ is not {self.const(t)}")
            self.value(f"{e}.__func__", x.__func__, where)
            self.value(f"{e}.__self__", x.__self__, f"the object of {where}")
        elif t is functools.partial:
            self.fail_if(f"{e}.__class__ is not {self.const(t)}")
            self.value(f"{e}.func", x.func, f"{where}.func")
            self.value(f"{e}.args", x.args, f"{where}.args")
            self.value(f"{e}.keywords", x.keywords, f"{where}.keywords")
        elif t is types.ModuleType:
            self.module(e, x, where)
        elif isinstance(x, type):
            self.cls(e, x, where)
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
            self.snapshot.append((where, t, exact))
            return
        if t is range or t is slice:
            self.fail_if(f"{e}.__class__ is not {k} or {e} != {self.const(x)}")
            self.snapshot.append((where, t, x))
            return
        self.fail_if(f"{e}.__class__ is not {k} or len({e}) != {len(x)}")
        self.snapshot.append((where, t, len(x)))
        self.items(e, x, where)

    def library_container(self, e, x, t, where):
        """collections' OrderedDict, defaultdict, Counter and deque: by their items."""
        self.fail_if(f"{e}.__class__ is not {self.const(t)} or length({e}) != {len(x)}")
        self.snapshot.append((where, t, len(x)))
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
            if all(type(key) is str for key in keys):
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

    def function(self, e, x, where):
        self.identity(e, x, where)
        if id(x) in self.seen:
            return
        self.seen.add(id(x))
        code = x.__code__
        kind = self.kinds.get(code)
        if kind is None:
            kind = kind_of(code, self.kinds)
        scg = _in_scg(code.co_filename)
        if not (kind == USER and code in self.ran) and not scg:
            return  # (its code did not run: its values were not read)
        self.covered.add(code)
        f = self.const(x)
        for i, (name, cell) in enumerate(zip(code.co_freevars, x.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                continue  # (a name not assigned yet: read as empty on replay too)
            self.value(f"{f}.__closure__[{i}].cell_contents", value,
                       f"the closure variable {name!r} of {x.__qualname__}")
        if not scg:
            self.value(f"{f}.__dict__", x.__dict__, f"the attributes of {x.__qualname__}")
            self.value(f"{f}.__defaults__", x.__defaults__, f"the defaults of {x.__qualname__}")
            self.value(f"{f}.__kwdefaults__", x.__kwdefaults__,
                       f"the defaults of {x.__qualname__}")

    def module(self, e, x, where):
        self.identity(e, x, where)
        if id(x) in self.seen:
            return
        self.seen.add(id(x))
        d = vars(x)
        kd = self.const(d)
        user = _kind_of_file(getattr(x, "__file__", None) or "<module>") == USER and \
            not x.__name__.split(".")[0] in ("scg", "numpy")
        if user:  # (a setting added later could be read by a computed name)
            self.fail_if(f"len({kd}) != {len(d)}")
        for name in list(d) if user else sorted(self.attributes & d.keys()):
            if name.startswith("__"):
                continue
            v = d[name]
            if name in self.attributes:
                self.value(f"{kd}.get({name!r}, MISSING)", v, f"{x.__name__}.{name}")
            else:  # (a user module's other settings: by identity, in case of getattr)
                self.identity(f"{kd}.get({name!r}, MISSING)", v, f"{x.__name__}.{name}")

    def cls(self, e, x, where):
        self.identity(e, x, where)
        if id(x) in self.seen:
            return
        self.seen.add(id(x))
        for c in x.__mro__:
            if not _user_type(c):
                continue
            d = c.__dict__
            kd = self.const(d)
            self.fail_if(f"len({kd}) != {len(d)}")
            for name, v in d.items():
                if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__",
                            "__annotations__", "__dataclass_fields__", "__slots__",
                            "__match_args__", "__dataclass_params__"):
                    continue
                if name in self.attributes or type(v) is types.FunctionType:
                    self.value(f"{kd}.get({name!r}, MISSING)", v, f"{c.__qualname__}.{name}")
                else:
                    self.identity(f"{kd}.get({name!r}, MISSING)", v, f"{c.__qualname__}.{name}")
            meta = type(c)
            if meta is not type and id(meta) not in self.seen:
                self.cls(f"{self.const(c)}.__class__", meta, f"the metaclass of {c.__qualname__}")

    def obj(self, e, x, t, where):
        module = t.__module__ or ""
        if module == "scg" or module.startswith("scg."):
            self.identity(e, x, where)
            if id(x) in self.seen:
                return
            self.seen.add(id(x))
            k = self.const(x)
            declared = getattr(t, "__jit_attrs__", None)
            if declared is not None:
                for name in declared:
                    self.value(f"getattr({k}, {name!r}, MISSING)", getattr(x, name, MISSING),
                               f"{where}.{name}")
                return
            d = getattr(x, "__dict__", None)
            if type(d) is dict:  # (its settings when it has only comparable ones)
                mark = (len(self.lines), len(self.snapshot), self.count)
                try:
                    self.items(f"{k}.__dict__", d, where)
                    self.fail_if(f"len({k}.__dict__) != {len(d)}")
                except Refused:
                    del self.lines[mark[0]:], self.snapshot[mark[1]:]
                    self.count = mark[2]
            return
        if module.split(".")[0] in ("numpy", "operator", "_operator") and \
                not isinstance(x, np.ndarray):  # (numpy's functions and types, itemgetter)
            self.identity(e, x, where)
            return
        if t is types.SimpleNamespace:
            self.fail_if(f"{e}.__class__ is not {self.const(t)}")
            self.value(f"{e}.__dict__", vars(x), where)
            return
        if not _user_type(t):
            raise Refused(f"{where} is a {module}.{t.__qualname__}, which scg.jit cannot "
                          "compare (pass what the function needs from it as arguments, or "
                          "vouch for the function with trust=)")
        # a user's object: its class and its attributes (or slots), or its items
        self.cls(f"{e}.__class__", t, f"the class of {where}")
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
            self.fail_if(f"{e}.__dict__.__class__ is not dict or len({e}.__dict__) != {len(d)}")
            self.snapshot.append((where, t, len(d)))
            self.items(f"{e}.__dict__", d, where)
        for c in t.__mro__:
            for name in c.__dict__.get("__slots__", ()):
                if name in ("__dict__", "__weakref__"):
                    continue
                v = getattr(x, name, MISSING)
                self.value(f"getattr({e}, {name!r}, MISSING)", v, f"{where}.{name}")

    def compile(self):
        source = "def check(A, I):\n    try:\n" + \
            "".join(f"        {line}\n" for line in self.lines) + \
            "    except Exception:  # (a cell emptied, an attribute gone)\n" \
            "        return False\n    return True\n"
        exec(compile(source, "<scg.jit guards>", "exec"), self.names)
        return self.names["check"]


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
    name = type.__dict__["__module__"].__get__(t)
    name = name if type(name) is str else ""
    path = getattr(sys.modules.get(name), "__file__", None)
    if path:
        return _kind_of_file(path) == USER
    return bool(t.__flags__ & (1 << 9)) and name not in sys.builtin_module_names \
        and name.split(".")[0] not in ("scg", "numpy", "builtins", "")


def guards(fn, ran, kinds, arguments, inputs, trusted=frozenset()):
    """(the guard predicate of a recorded call, its snapshot, a conflict of identities or
    None): `ran` maps the user's code objects that ran to their globals; `arguments` are
    (index, object) of the call's leaves that are not arrays or atoms (checked as
    `A[index]`), `inputs` its array leaves (`I[j]`). Raises Refused.

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
    return b.compile(), b.snapshot, conflict


@functools.lru_cache(maxsize=4096)
def _nested(code):
    return frozenset(c for c in code.co_consts if isinstance(c, types.CodeType))


def same_snapshot(a, b):
    """Do two recordings' snapshots agree (objects compared by identity)?"""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[1] == "is":
            if x[0] != y[0] or y[1] != "is" or x[2] is not y[2]:
                return False
        elif x != y:
            return False
    return True


def snapshot_difference(a, b):
    for x, y in zip(a, b):
        if not same_snapshot([x], [y]):
            return f"{x[0]} differs"
    return "what the function reads outside its arguments differs"
