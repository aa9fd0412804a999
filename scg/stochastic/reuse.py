"""Operations on the values of marginalized sites, computed once per run.

A marginalized site's value is its support laid along the dim of its slot
(scg/stochastic/marginal.py), and a `scg.markov` chain has only `history + 1` slots: every
step's site has one of a few values, the same arrays. The model computes the same things
from them at every step (`trans[z]`, the log-probability table of `Categorical(trans[z])`,
`locs[z]`), each a pure function of the same inputs. While a run has marginalized sites,
a per-draw operation whose per-draw inputs are such values (or results kept here), and
whose other inputs are the same objects or equal constants, gives the value it gave
before: the tape then holds one node where the chain had one per step, the backward pass
sums the steps' cotangents into it and runs its rule once, and scg.jit records it once.

Only the value is shared: each call still makes its own per-draw value, with the
dependencies (the sites) and plate labels of its own inputs. Inputs that could change
between two calls are never keys: arrays anyone may still write into (unless small: then
their contents are), objects of unknown kinds, the values of an operation changed in place
by scg.jit's recording. The results are read-only; a large one is not kept (a chain's
tables are small), and all are dropped once the run's marginal likelihood is summed.
"""

import math

import numpy as np

from ..core.tape import Tracer, read_only
from .persample import PerSample

_SMALL = 64  # entries of a plain array compared by contents (larger: read-only, by identity)
# the largest result kept (the tables of a chain's steps are far smaller): a larger one is
# computed again if the model computes it again, and held no longer than the model holds it
_KEEP_MAX = 1 << 16
_ATOMS = (bool, int, str, type(None))
_NUMBERS = frozenset("biufc")


class Reuse:
    """The results of the run's per-draw operations on values laid out by the marginal
    layer, by their inputs (see the module docstring)."""

    def __init__(self):
        self.results = {}
        self._stable = {}  # id -> a per-draw value's physical array kept here (alive)

    def keep_value(self, physical):
        """Mark a per-draw value's physical array as one the marginal layer laid out."""
        self._stable[id(physical)] = physical

    def key(self, prim, args, kwargs, level):
        """The key of `prim(*args, **kwargs)` on per-draw values of `level`, or None when
        the call is not reused (a per-draw input computed elsewhere, an input that may
        change)."""
        stable = self._stable
        for a in args:
            if type(a) is PerSample and a.level == level and id(a.value) not in stable:
                return None
        parts = [prim]
        for a in args:
            if type(a) is PerSample and a.level == level:
                parts.append(("draws", id(a.value)))
                continue
            k = _constant(a, stable)
            if k is None:
                return None
            parts.append(k)
        if kwargs:
            for name in sorted(kwargs):
                k = _constant(kwargs[name], stable)
                if k is None:
                    return None
                parts.append((name, k))
        return tuple(parts)

    def clear(self):
        """Forget every result (the run's model has returned)."""
        self.results.clear()
        self._stable.clear()

    def state_key(self, dist, level):
        """(A key of the distribution's state, the dependencies of its per-draw
        parameters), equal for distributions of one family whose log-probabilities are the
        same computation; (None, None) if one is not known, or a per-draw parameter is
        other than values of marginalized sites (a drawn site upstream, a held
        log-probability)."""
        parents = []
        parts = [type(dist)]
        for name, v in vars(dist).items():
            if name == "_last_log_prob":
                continue
            k = self._state(v, level, parents)
            if k is None:
                return None, None
            parts.append((name, k))
        return tuple(parts), parents

    def _state(self, v, level, parents):
        if type(v) is PerSample and v.level == level:
            if id(v.value) not in self._stable or v.deps.smooth or v.deps.rough or \
                    v.held or v.bent or v.law is not None:
                return None
            parents.append(v.deps.up)
            return ("draws", id(v.value))
        if type(v) is dict:
            keys = tuple((k, self._state(x, level, parents)) for k, x in v.items())
            return None if any(k is None for _, k in keys) else (dict, keys)
        if type(v) is tuple and any(type(x) is PerSample for x in v):
            return None
        return _constant(v, self._stable)

    def keep(self, key, out, shape):
        """Keep `out`, the physical result of the call of `key`, of logical shape `shape`
        (unless it is large)."""
        if math.prod(shape) > _KEEP_MAX:
            return
        if type(out) is np.ndarray:
            read_only(out)
        self.results[key] = out
        self._stable[id(out)] = out


def _constant(a, stable):
    """A key for an input that is not a per-draw value of the run, equal for inputs that
    give equal results; None for one that may change or that is not known."""
    t = type(a)
    if t in _ATOMS:
        return (t, a)
    if t is float:  # (by bits: 0.0 and -0.0 give different results)
        return (t, a.hex())
    if t is complex:
        return (t, a.real.hex(), a.imag.hex())
    if t is np.ndarray:
        if a.dtype.kind not in _NUMBERS:
            return None
        if a.size <= _SMALL:
            return ("array", a.dtype.str, a.shape, a.tobytes())
        if _read_only(a):
            stable[id(a)] = a  # (kept alive: its id is not reused)
            return ("object", id(a))
        return None
    if isinstance(a, np.generic):
        return ("scalar", a.dtype.str, a.tobytes()) if a.dtype.kind in _NUMBERS else None
    if isinstance(a, Tracer):  # (a value being differentiated, one scg.jit records)
        stable[id(a)] = a
        return ("object", id(a), getattr(a, "version", 0))
    if t is tuple or t is list:
        keys = tuple(_constant(x, stable) for x in a)
        return None if None in keys else (t, keys)
    if t is slice:
        keys = tuple(_constant(x, stable) for x in (a.start, a.stop, a.step))
        return None if None in keys else (slice, keys)
    if a is Ellipsis or getattr(t, "scg_marker", False):
        return ("object", id(a))  # (singletons: Ellipsis, a gather's slot marker)
    return None


def _read_only(a):
    """Can nobody write into a (read-only down to the array that owns its memory)?"""
    while type(a) is np.ndarray:
        if a.flags.writeable:
            return False
        a = a.base
    return True
