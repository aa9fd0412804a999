"""What a recorded call ran: the first half of scg.jit's contract (guards.py is the other).

`Watch` is the profiler written in C (`_lsprof`, cProfile's) on the recording thread,
never on during replays: it sees every call the run makes, Python and C functions alike,
with its caller. Each code object is classified once: scg's own and numpy's array
mathematics (trusted), the standard library and installed packages (libraries), and the
user's code. A call *made by the user's code* to a library function, or to a C function
outside the allowlist (`_allowed_c`), denies the recording, with the call and its line for
explain() (docs/performance.md, "The contract", lists the allowlist). The user's code
objects that ran are kept, with their globals: guards.py guards what they name.
`trust=` vouches for functions, classes and modules (`trusted_kinds`).
"""

import _lsprof
import dis
import functools
import gc
import os
import re
import sys
import sysconfig
import types

import numpy as np

from ..core import collector

TRUSTED, LIBRARY, USER = 1, 2, 3  # (all true: `kinds.get(code) or ...`)
# ---------------------------------------------------------------- whose code is it
def _dir(path):
    return os.path.join(os.path.abspath(path), "")


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


@functools.lru_cache(maxsize=4096)
def _kind_of_file(filename):
    # (normalized, as the paths above: a module imported through a sys.path entry with
    # "..", or a relative one, has such a file name)
    path = os.path.abspath(filename) if filename[:1] != "<" else filename
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


@functools.lru_cache(maxsize=1024)
def _in_scg(filename):
    return (os.path.abspath(filename) if filename[:1] != "<" else filename).startswith(_SCG)


def kind_of(code, kinds):
    """The kind of a code object (TRUSTED, LIBRARY or USER), cached in `kinds`. Code
    compiled from a string is its module's, but the methods that dataclasses and
    namedtuple write from a class's fields (the fields are the class's, guarded there)."""
    name = code.co_filename
    if name[:1] == "<" and not name.startswith(("<frozen", "<scg.")):
        if code.co_qualname.startswith("__create_fn__.") or code.co_names == ("_tuple_new",):
            kind = TRUSTED  # (dataclasses' and namedtuple's methods made from fields)
        else:
            g = _globals_of(code)
            path = getattr(sys.modules.get((g or {}).get("__name__", "")), "__file__", None)
            kind = _kind_of_file(path) if path else USER
    else:
        kind = _kind_of_file(name)
    kinds[code] = kind
    return kind


# ---------------------------------------------------------------- C functions
_PURE_BUILTINS = frozenset(
    "abs all any ascii bin bool callable chr divmod format getattr hasattr hash hex isinstance "
    "issubclass iter len max min next oct ord pow repr round sorted sum __build_class__ "
    "setattr delattr".split())
_PURE_MODULES = frozenset(["math", "cmath", "_operator", "operator", "itertools", "_functools",
                           "functools", "_abc", "abc", "_collections", "_bisect", "_heapq"])
_PURE_TYPES = frozenset(["list", "dict", "tuple", "set", "frozenset", "str", "bytes", "int",
                         "float", "complex", "bool", "range", "slice", "object", "type",
                         "numpy.ndarray", "numpy.generic", "numpy.ufunc", "numpy.dtype",
                         "numpy.flatiter", "numpy.broadcast", "itertools.count",
                         "functools.partial", "collections.OrderedDict", "collections.deque",
                         "collections.defaultdict", "dict_keys", "dict_values", "dict_items"])
_CLASS_METHODS = frozenset(["fromkeys", "from_bytes", "fromhex", "maketrans"])
_ARRAY_IO = frozenset(["tofile", "dump", "dumps", "fromfile", "load", "save", "savez",
                       "loadtxt", "memmap", "fromregex"])
_BUILTIN = re.compile(r"<built-in method (?:(.+)\.)?([^.\s>]+)>$")
_METHOD = re.compile(r"<method '([^']+)' of '([^']+)' objects>$")


def _allowed_c(name, trusted):
    """May the user's code call the C function that the profiler names `name` ("<built-in
    method math.exp>", "<method 'append' of 'list' objects>") in a replayed function?"""
    m = _BUILTIN.match(name)
    if m is not None:
        module, fn = m.groups()
        if module is None:  # (a class's C method: dict.fromkeys)
            return fn in _CLASS_METHODS or name in trusted
        if module == "builtins":
            return fn in _PURE_BUILTINS
        if module in _PURE_MODULES:
            return True
        if module.split(".")[0] == "numpy" and not module.startswith("numpy.random"):
            return fn not in _ARRAY_IO
        return module in trusted or f"{module}.{fn}" in trusted
    m = _METHOD.match(name)
    if m is not None:
        fn, owner = m.groups()
        if owner in _PURE_TYPES or owner.startswith("numpy.") and "random" not in owner:
            return fn not in _ARRAY_IO
        return owner in trusted or owner.startswith("scg.")
    # ("<built-in method __new__ of type object at 0x...>": type's own methods)
    return " of type object at " in name


class Watch:
    """While the recorded call runs (`with Watch(kinds, trusted):`, a profiler in C on this
    thread): the user's code objects that ran, with their globals (`ran`), and the first
    call outside the contract (`denied`, in words)."""

    __slots__ = ("kinds", "trusted", "ran", "denied", "_profiler", "_previous")

    def __init__(self, kinds, trusted):
        self.kinds = kinds
        self.trusted = trusted
        self.ran = {}
        self.denied = None

    def __enter__(self):
        # (the garbage collector is held, core/collector.py: a collection starting inside
        # the call runs gc.callbacks, finalizers of cycles and weakref callbacks (a test
        # runner's, a library's) wherever it starts, and the profiler would count them as
        # the user's calls)
        collector.hold()
        self._previous = sys.getprofile()
        self._profiler = _lsprof.Profiler()
        self._profiler.enable(subcalls=True, builtins=True)
        return self

    def pause(self):
        """Look away (scg's own code runs, which calls none of the user's)."""
        self._profiler.disable()

    def resume(self):
        self._profiler.enable(subcalls=True, builtins=True)

    def __exit__(self, *exc):
        self._profiler.disable()
        collector.release()
        if isinstance(self._previous, _lsprof.Profiler):  # (cProfile, profiling the caller)
            self._previous.enable()
        elif self._previous is not None:
            sys.setprofile(self._previous)
        stats = self._profiler.getstats()
        self._profiler = None
        kinds = self.kinds
        for entry in stats:
            code = entry.code
            if type(code) is str or (kinds.get(code) or kind_of(code, kinds)) != USER or \
                    code.co_name == "__del__":  # (a finalizer: run where an object dies)
                continue
            g = _globals_of(code)
            if g is None:
                self.denied = self.denied or f"it runs {code.co_qualname} " \
                    f"({code.co_filename}), whose globals scg.jit cannot find"
                continue
            self.ran[code] = g
            for sub in entry.calls or ():
                callee = sub.code
                if type(callee) is str:
                    bad = not _allowed_c(callee, self.trusted)
                    what = _pretty(callee)
                elif callee.co_name == "__del__":
                    continue
                else:
                    bad = (kinds.get(callee) or kind_of(callee, kinds)) == LIBRARY
                    what = f"{callee.co_qualname} ({callee.co_filename})"
                if bad and self.denied is None:
                    self.denied = f"it calls {what} in {code.co_qualname} at " \
                                  f"{code.co_filename}:{_line_of(code, what)}"
        return False


def _line_of(code, what):
    """The line of `code` that names the function `what` describes (else its first)."""
    name = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", what.replace("<built-in method", ""))
    for ins in dis.get_instructions(code):
        if name and ins.argval in name[:3] and ins.positions and ins.positions.lineno:
            return ins.positions.lineno
    return code.co_firstlineno


_BY_FILE = {}  # file -> the globals of its module
_BY_CODE = {}  # code compiled from a string -> its globals (or None)


def _globals_of(code):
    """The globals of a code object that ran: its module's, found by its file (code
    compiled from a string: the function that holds it)."""
    name = code.co_filename
    g = _BY_FILE.get(name)
    if g is not None:
        return g
    if name[:1] != "<":
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path and path not in _BY_FILE:
                _BY_FILE[path] = vars(module)
        g = _BY_FILE.get(name)
        if g is not None:
            return g
    if code not in _BY_CODE:  # (rare: code compiled from a string, a module not imported)
        _BY_CODE[code] = next((h.__globals__ for h in gc.get_referrers(code)
                               if type(h) is types.FunctionType), None)
    return _BY_CODE[code]


def _pretty(name):
    """A C function as the profiler names it, in Python's words: time.time, list.append."""
    m = _BUILTIN.match(name)
    if m is not None:
        return ".".join(p for p in m.groups() if p)
    m = _METHOD.match(name)
    return f"{m.group(2)}.{m.group(1)}" if m is not None else name


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
        else:  # (a C function: by the name the profiler gives it)
            module = getattr(v, "__module__", None) or getattr(
                getattr(v, "__self__", None), "__name__", "")
            c.add(f"{module}.{getattr(v, '__name__', '')}")

    def vouch_class(t):
        c.add(t)
        c.add(t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}")
        for m in vars(t).values():
            if hasattr(getattr(m, "__func__", m), "__code__"):
                vouch(m)

    for t in trust:
        if type(t).__name__ == "Jitted":
            t = t.fn
        if isinstance(t, types.ModuleType):
            c.add(t.__name__)
            for v in vars(t).values():
                if isinstance(v, types.FunctionType) and v.__module__ == t.__name__:
                    vouch(v)
                elif isinstance(v, type) and v.__module__ == t.__name__:
                    vouch_class(v)
        elif isinstance(t, type):
            vouch_class(t)
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


@functools.lru_cache(maxsize=4096)
def _nested(code):
    return frozenset(c for c in code.co_consts if isinstance(c, types.CodeType))
