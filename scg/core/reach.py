"""The generators a function can reach (numpy Generators, Python random.Random objects):
through its closures, defaults, the globals it names, partials, bound methods, containers
and objects' attributes.

A model that draws from such a generator itself (`rng.normal()`) draws one number shared
by every one of its n draws: the estimate's error bars are then wrong. The stochastic
layer saves these generators' positions around a run and warns when one moved.
"""

import functools
import random
import types

import numpy as np

from .random_state import PYTHON_RANDOM

_BUDGET = 20_000  # objects visited at most (a large object graph: the rest is not searched)
_SKIP = (type, types.ModuleType, types.BuiltinFunctionType, np.ufunc, np.ndarray, np.generic,
         str, bytes, int, float, complex, bool, type(None))


def generators_reachable(x):
    """The distinct numpy Generators and random.Random objects (but SystemRandom, which
    keeps no position) reachable from x (a function, a tuple of them and their
    arguments)."""
    found, seen, stack = [], set(), [x]
    while stack and len(seen) < _BUDGET:
        obj = stack.pop()
        try:
            owner = getattr(obj, "__self__", None)
        except Exception:  # (a __getattr__ that raises another error)
            owner = None
        if obj is random or isinstance(owner, random.Random):
            # (the random module, random.random, rng.gauss: their generator)
            obj = PYTHON_RANDOM if obj is random else owner
        if isinstance(obj, _SKIP) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.random.Generator) or (
                isinstance(obj, random.Random) and not isinstance(obj, random.SystemRandom)):
            found.append(obj)
        elif isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if _filled(c))
            stack.extend(obj.__defaults__ or ())
            g = obj.__globals__
            if not g.get("__name__", "").startswith("scg."):
                stack.extend(g[name] for name in obj.__code__.co_names if name in g)
        elif isinstance(obj, functools.partial):
            stack.extend((obj.func, obj.args, obj.keywords))
        elif isinstance(obj, types.MethodType):
            stack.extend((obj.__func__, obj.__self__))
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        else:
            attrs = getattr(obj, "__dict__", None)
            if type(attrs) is dict and not type(obj).__module__.startswith("scg"):
                stack.extend(attrs.values())
    return found


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:  # (a name not yet assigned)
        return False
    return True
