"""scg.jit: record a function once, replay it on later calls of the same structure.

See docs/performance.md ("Compiled replay" and "The contract") for when a replay is used
and what stops it. The recording and the replayed program are in `recording.py`; what a
recorded call ran and the guards a replay checks are in `guards.py`. This module decides,
for each call, whether a program applies: the key of a call is the structure of its
arguments (pytree, dtypes, shapes, the values of Python numbers, bools and strings), and
the program's guards must hold.
"""

import functools
import re
import struct
import sys
import types

import numpy as np

from ..core import effects, pytree
from ..core.random_state import (PYTHON_RANDOM, global_random_position, position_keeper,
                                 restore_position, save_position)
from ..core.reach import generators_reachable
from ..core.tape import THREAD, Tracer, new_level
from .guards import Refused, guards
from .watch import Watch, trusted_kinds
from .recording import Var, _Recording, compile_program, generators_of, same

_RECORDINGS_PER_KEY = 4  # recordings in a row that make no program: then only on a repeat
_PROGRAMS = 8            # programs kept per structure of call (loops of other lengths)
_CANDIDATES = 4          # watched recordings kept per structure, awaiting confirmation
_KEYS = 32               # structures kept per jitted function
_GIVE_UP = 64            # new structures without a replay: stop recording
_SHARED_BYTES = 1 << 16  # constants this large are shared by a structure's recordings


def jit(fn=None, *, validate=2, trust=()):
    """Return `fn` compiled by recording: later calls of the same structure replay it.

    The first calls run `fn` as usual while recording every operation on its array
    arguments (the model, its sampling sites and surrogate, the backward pass of
    `scg.grad`, an optimizer's update) as straight-line code. Once `validate` successive
    recordings of one structure are identical, later calls with that structure run the
    recorded code instead: the numbers of a fresh run (the same random numbers from the
    same generators, the same baseline updates, the same checks, the same gradient bit
    for bit), without the Python bookkeeping.

    A replay is used only when scg knows everything the recorded call read (the contract,
    docs/performance.md): a new recording is made, never a stale one replayed, when the
    arguments' structure, dtypes or shapes change; a Python number, bool, string or other
    object argument changes; a closure variable, default or global that the code which
    ran names changes (arrays by content, objects by their attributes); a value was read
    as a Python value during the recording (`if x > 0`, `float(x)`, `range(n)`) or a
    shape depended on values, and reads differently now. While it records, scg.jit
    watches every call the function makes: a call outside scg, numpy's array
    mathematics, `math`, `operator` and Python's pure builtins (I/O, `os`, `time`,
    `random`, `json`, a C extension), an object it cannot compare, or code that cannot be
    replayed (in-place changes of arguments) makes the function run afresh on every call;
    `explain()` says which.

    Args:
        fn: the function; its positional and keyword arguments are pytrees whose arrays
            and numpy scalars are the recorded inputs; Python numbers, bools, strings and
            other objects are part of the key.
        validate: identical recordings needed before replaying (2: a value that changes
            between calls but was recorded as a constant is caught before any replay).
        trust: functions, classes or modules the function may call although they are
            outside the allowlist; the user vouches that each is a function of its
            arguments (no I/O, no state), so nothing it reads is guarded.

    Returns:
        A callable with the signature of `fn`, with `.explain()` (what was recorded and
        replayed, and why not when it was not) and `.stats` (counts of calls).

    Example:
        >>> step = scg.jit(lambda params: scg.grad(E)(params))
        >>> for _ in range(1000):
        ...     g = step(params)
    """
    if fn is None:
        return functools.partial(jit, validate=validate, trust=trust)
    if not callable(fn):
        raise TypeError(f"scg.jit needs a function, got {type(fn).__name__}")
    if isinstance(validate, bool) or not isinstance(validate, int) or validate < 1:
        raise ValueError(f"validate must be an int >= 1 (identical recordings before a "
                         f"replay), got {validate!r}")
    trust = tuple(trust) if isinstance(trust, (tuple, list, set, frozenset)) else (trust,)
    return Jitted(fn, validate, trust)


_MISSED = object()  # (a replay that missed a guard or raised)


class _Program:
    """One compiled recording of a structure of call, and the guards it was made with."""

    __slots__ = ("run", "source", "built", "out_def", "keepers", "n_ops", "guards", "check",
                 "n_checks", "replays", "consts")

    def __init__(self, run, source, built, out_def, generators, n_ops, guards, check,
                 n_checks, consts):
        self.run, self.source, self.built, self.out_def = run, source, built, out_def
        self.consts = consts  # (its constants: see _share_constants)
        # (save, restore) of the position of each generator it draws from
        self.keepers = [position_keeper(g) for g in generators]
        self.n_ops, self.guards = n_ops, guards
        self.check, self.n_checks = check, n_checks  # (what it read outside its arrays)
        self.replays = 0


class _Candidate:
    """A watched recording awaiting `validate` identical ones: its signature, and the
    guards on what it read outside its arrays (those of the recordings that confirm it)."""

    __slots__ = ("signature", "check", "n_checks", "seen")

    def __init__(self, signature, check, n_checks):
        self.signature, self.check, self.n_checks = signature, check, n_checks
        self.seen = 0  # (recordings identical to it, the watched one counted)


class _Entry:
    """What is known about one structure of call: the programs that replay it (several
    when its calls take other paths, such as a loop that ends at another step: each
    program checks its own path and another is tried when one misses), and the
    recordings awaiting confirmation."""

    __slots__ = ("programs", "candidates", "recordings", "replays", "misses", "refused",
                 "unstable", "failures", "error", "denials", "tries", "streak", "last_checks",
                 "needed", "confirm", "last_guards")

    def __init__(self):
        self.programs = []    # _Program, the one replayed last first
        self.candidates = []  # _Candidate, the newest first
        self.recordings = self.replays = self.misses = 0
        self.refused = None
        self.unstable = None  # how the last two recordings differed
        self.failures = self.denials = 0
        self.error = None
        # (when to record: `tries` recordings since the last program was made; after
        # _RECORDINGS_PER_KEY of them, or once a program exists, a call is recorded again
        # once `needed` calls in a row that no program replayed checked as many conditions
        # (the same path again, such as a loop of the same length); `needed` doubles after
        # each such recording that made no program)
        self.tries = 0
        self.streak = 0
        self.last_checks = None
        self.needed = 2
        self.confirm = False  # (record the next call: it may confirm the last recording)
        self.last_guards = ()  # (the last recording's reads and checks, for explain())

    @property
    def program(self):
        return self.programs[0].run if self.programs else None

    @property
    def source(self):
        return self.programs[0].source if self.programs else None

    def wants_recording(self):
        """Record this call (no program replayed it)? The first tries of a structure, a
        call that may confirm the last recording, and a path that came back; a call of a
        new path once programs exist runs afresh until its path repeats."""
        if self.confirm or (not self.programs and self.tries < _RECORDINGS_PER_KEY):
            return True
        return self.streak >= self.needed

    def ran_afresh(self, checks):
        """Note a call that ran without recording and made `checks` checks."""
        if checks == self.last_checks:
            self.streak += 1
        else:
            self.last_checks, self.streak = checks, 1

    def recorded(self, made_program, new_candidate, confirmed=False, guards=()):
        """Note a recording: did it make a program, is it a new candidate, or did it
        confirm one short of `validate`? The next call that no program replays is then
        recorded to confirm it (unless this was a call recorded to confirm, whose path
        was another one)."""
        confirming = self.confirm
        self.streak = 0
        self.last_guards = guards
        if made_program:
            self.tries, self.needed, self.confirm = 0, 2, False
            return
        self.tries += 1
        self.confirm = confirmed or (new_candidate and not confirming)
        if confirming and self.tries > _RECORDINGS_PER_KEY:
            self.needed *= 2  # (a path that came back, recorded twice, in vain)


class Jitted:
    """A function compiled by `scg.jit`."""

    __jit_attrs__ = ("fn", "validate")  # (a jitted function called by another one)

    def __init__(self, fn, validate, trust=()):
        self.fn = fn
        self.validate = validate
        self.trust = trust
        self._kinds, self._trusted = trusted_kinds(trust)  # (code object -> kind, cached)
        self._entries = {}
        self._uncached = False
        self._new_keys = 0
        self.stats = {"calls": 0, "replays": 0, "recordings": 0, "eager": 0}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        self.stats["calls"] += 1
        if THREAD.level or effects.innermost() is not None:  # inside a transformation
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        missed = None
        if not kwargs:  # the fast path: no keyword arguments, plain containers
            inputs = []
            shape_key = _arguments_key(args, inputs, [])
            if shape_key is not None:
                entry = self._entries.get(shape_key)
                if entry is not None and entry.programs:
                    out = self._replay(entry, inputs, None, inputs)
                    if out is not _MISSED:
                        return out
                    missed = entry
        traced = []
        spec = []
        objects = []  # (index, object): leaves compared by the guards
        leaves, treedef = pytree.flatten_leaves((args, kwargs))
        for index, leaf in enumerate(leaves):
            t = type(leaf)
            if t is np.ndarray or t is np.memmap:
                traced.append(leaf if t is np.ndarray else leaf.view(np.ndarray))
                spec.append((leaf.dtype.str, leaf.shape))
            elif isinstance(leaf, np.generic) and t is not np.bool_:
                traced.append(leaf)
                spec.append((t,))
            elif isinstance(leaf, Tracer):
                self.stats["eager"] += 1
                return self.fn(*args, **kwargs)
            else:  # (Python numbers, bools, strings: part of the key; other objects by
                # their type, and compared by the guards)
                static = _static_key(leaf)
                if static is None:
                    objects.append((index, leaf))
                    static = ("object", type(leaf))
                spec.append(("static", static))
        try:
            key = _arguments_key(args, [], []) if not kwargs else None
            if key is None:
                key = (_freeze(treedef), tuple(spec))
            hash(key)
        except TypeError:  # (unhashable static arguments)
            key = None
        if key is None:  # (never cached: see explain())
            self.stats["eager"] += 1
            self._uncached = True
            return self.fn(*args, **kwargs)
        entry = self._entries.get(key)
        if entry is None:
            if self._new_keys >= _GIVE_UP and not self.stats["replays"]:
                # (every call a new structure: recording costs more than it ever saves)
                self.stats["eager"] += 1
                self._uncached = True
                return self.fn(*args, **kwargs)
            self._new_keys += 1
            if len(self._entries) >= _KEYS:  # (the structure seen longest ago goes)
                del self._entries[next(iter(self._entries))]
            entry = self._entries[key] = _Entry()
        if entry.programs and entry is not missed:
            out = self._replay(entry, traced, leaves, traced)
            if out is not _MISSED:
                return out
        if entry.refused is not None or not entry.wants_recording():
            self.stats["eager"] += 1
            before = THREAD.checks
            out = self.fn(*args, **kwargs)
            entry.ran_afresh(THREAD.checks - before)
            return out
        return self._record(entry, args, kwargs, leaves, treedef, objects)

    def __reduce__(self):
        # (pickled as the function and its settings: recordings belong to one process;
        # `@scg.jit` on a function of an importable module: by its name there, as pickle
        # pickles functions, since that name now holds this object)
        module = getattr(self.fn, "__module__", None)
        name = getattr(self.fn, "__qualname__", "")
        if module not in (None, "__main__") and "<" not in name:
            found = sys.modules.get(module)
            for part in name.split("."):
                found = getattr(found, part, None)
            if found is self:
                return name
        return (Jitted, (self.fn, self.validate, self.trust))

    def __get__(self, obj, objtype=None):
        # (@scg.jit on a method: the instance is the first argument, part of the key)
        return self if obj is None else types.MethodType(self, obj)

    def _replay(self, entry, inputs, leaves, traced):
        """The call's result, or _MISSED when every program's guards missed or an
        operation raised (the generators are then back where they were, and nothing was
        updated: effects run last; the call then runs afresh, which raises the error if
        there is one). The programs are tried the one replayed last first."""
        programs = entry.programs
        for prog in programs:
            if not prog.check(leaves, traced):  # (something its recording read changed)
                entry.programs = [p for p in entry.programs if p is not prog]
                continue
            keepers = prog.keepers
            saved = [save() for save, _ in keepers] if keepers else ()
            try:
                out = prog.run(*inputs)
            except Exception:  # (Miss, or an error a fresh run raises with its own message)
                for (_, restore), position in zip(keepers, saved):
                    restore(position)
                continue
            if prog is not programs[0]:
                entry.programs = [prog] + [p for p in entry.programs if p is not prog]
            prog.replays += 1
            entry.replays += 1
            self.stats["replays"] += 1
            return out if prog.built else pytree.unflatten(prog.out_def, list(out))
        entry.misses += 1
        return _MISSED

    def _record(self, entry, args, kwargs, leaves, treedef, objects):
        if any(isinstance(leaf, np.ndarray) and leaf.dtype.fields is not None
               for leaf in leaves):
            entry.refused = ("an argument is a structured array (its fields, read by name, "
                             "are not recorded): pass its fields as arrays of their own")
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        self.stats["recordings"] += 1
        entry.recordings += 1
        # (the positions of the generators it reaches: a recording that fails runs afresh
        # from the same positions)
        reachable = generators_reachable((self.fn, args, kwargs))
        positions = [save_position(g) for g in reachable]  # (a random.Random: getstate())
        global_random = global_random_position()
        with new_level() as level:
            rec = _Recording(level)
            inputs = []
            call_leaves = []
            for leaf in leaves:
                t = type(leaf)
                if t is np.memmap:
                    leaf = leaf.view(np.ndarray)
                    t = np.ndarray
                if t is np.ndarray or (isinstance(leaf, np.generic) and t is not np.bool_):
                    v = rec._new(leaf)
                    inputs.append(v)
                    call_leaves.append(v)
                else:
                    call_leaves.append(leaf)
            call_args, call_kwargs = pytree.unflatten(treedef, call_leaves)
            arrays = [v.concrete for v in inputs]
            # (a recording that would confirm the last one, which nothing it read has
            # changed since, runs the same code: it needs no watching, and its guards
            # are the last one's, which must still hold when it returns)
            newest = entry.candidates[0] if entry.confirm and entry.candidates else None
            confirming = newest is not None and newest.check(leaves, arrays)
            watch = _UNWATCHED if confirming else Watch(self._kinds, self._trusted)
            rec.watch = None if confirming else watch
            effects.push(rec)
            try:
                with watch:
                    out = self.fn(*call_args, **call_kwargs)
            except Exception as error:
                _stop(rec)
                rec.open = False
                entry.error = f"the recorded call raised {type(error).__name__}: {error}"
                if not _maybe_the_recording(error):
                    # the function's own error, raised as a run without scg.jit raises it:
                    # the same draws, and the state updates made before it
                    rec.run_effects()
                    raise
                rec.restore_generators()  # (the run afresh draws what this one drew)
                _restore(reachable, positions)
                entry.failures += 1
                if entry.failures >= 2:  # (once may be the input's fault: try again later)
                    entry.refused = entry.error
                failed = True
            else:
                failed = _opaque_result(out, rec)
                guarded = None
                if not failed and confirming:
                    guarded = newest.check(leaves, arrays)  # (what it read is unchanged)
                elif not failed:
                    try:
                        guarded = guards(self.fn, watch.ran, self._kinds, objects, arrays,
                                         self._trusted)
                    except Refused as reason:
                        guarded = str(reason)
                    if type(guarded) is tuple and guarded[2] is not None:
                        rec.refuse(guarded[2])  # (its numbers may not be a fresh run's)
                        failed = True
                if failed:  # (results scg cannot look into: the call runs afresh)
                    rec.restore_generators()
                    _restore(reachable, positions)
                    entry.refused = rec.invalid
                else:
                    rec.run_effects()
            finally:
                _stop(rec)
                rec.close()
        if failed:
            # run afresh: an error of the function itself is raised there as usual
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        # (numpy's generators draw in compiled code, which the profiler does not see)
        drawn = {id(g) for g, _ in rec.generators.values()}
        if any(id(g) not in drawn and _form(save_position(g)) != _form(p)
               for g, p in zip(reachable, positions)):
            rec.refuse("it draws from a generator itself (rng.normal(), not scg.sample): a "
                       "replay would repeat its numbers")
        elif global_random_position() != global_random:
            rec.refuse("it draws from numpy's global generator (np.random.*): a replay would "
                       "repeat its numbers")
        out_leaves, out_def = pytree.flatten_leaves(out)
        for o in out_leaves:
            if isinstance(o, Tracer) and type(o) is not Var:
                raise TypeError("scg.jit: the function returned a traced value of a "
                                "transformation opened inside it (a Box of scg.grad?); "
                                "return plain results")
        result = pytree.unflatten(out_def, [
            (o.concrete.copy() if type(o.concrete) is np.ndarray else o.concrete)
            if type(o) is Var else o for o in out_leaves])
        reason = watch.denied or rec.invalid or (guarded if type(guarded) is str else None)
        if reason is not None:
            # (this recording is not used; a second one in a row that cannot be replayed,
            # and the function runs afresh on every call: the first call may settle
            # estimators, or take a branch later calls do not)
            entry.denials += 1
            entry.recorded(False, False)
            if entry.denials >= 2:
                entry.refused = reason
            else:
                entry.error = f"its recording cannot be replayed: {reason}"
            return result
        entry.denials = 0
        _share_constants(entry, rec)
        signature = _signature(rec, out_leaves, inputs)
        read = [(kind, where) for _, kind, where in rec.guards]
        new_candidate = False
        if confirming:  # (unwatched: it may only confirm the recording it follows)
            match = newest if guarded and _same_signature(newest.signature, signature) \
                else None
            if match is None:
                entry.unstable = _difference(newest.signature, signature) if guarded else \
                    "it changes what it reads outside its arrays (a counter, a list it " \
                    "appends to)"
        else:
            match = next((c for c in entry.candidates
                          if _same_signature(c.signature, signature)), None)
            if match is None:
                if entry.candidates:  # (for explain(), if no program comes of them)
                    entry.unstable = _difference(entry.candidates[0].signature, signature)
                check, n_checks, _ = guarded
                _share_guard_bytes(entry, check)
                match = _Candidate(signature, check, n_checks)
                entry.candidates = [match] + entry.candidates[:_CANDIDATES - 1]
                new_candidate = True
        made = False
        if match is not None:
            match.seen += 1
            if match.seen >= self.validate:
                run, source, built = compile_program(rec, inputs, out_leaves, out_def)
                prog = _Program(run, source, built, out_def, generators_of(rec),
                                len(rec.lines), read, match.check, match.n_checks,
                                rec.consts)
                entry.candidates = [c for c in entry.candidates if c is not match]
                # (last: another thread may replay it at once)
                entry.programs = [prog] + entry.programs[:_PROGRAMS - 1]
                made = True
        entry.recorded(made, new_candidate, match is not None and not new_candidate, read)
        return result

    def explain(self):
        """What was recorded and replayed for each structure of call, and why a call ran
        afresh when it did."""
        lines = [f"scg.jit({getattr(self.fn, '__name__', self.fn)!r}): {self.stats['calls']} "
                 f"calls, {self.stats['replays']} replayed, {self.stats['recordings']} "
                 f"recorded, {self.stats['eager']} run without recording"]
        if self._uncached:
            lines.append("  some calls ran afresh without a key: an argument could not be "
                         f"compared (unhashable), or {_GIVE_UP} calls in a row had a "
                         "structure never seen before")
        for k, e in enumerate(self._entries.values()):
            if e.programs:
                ops = ", ".join(str(p.n_ops) for p in e.programs)
                state = (f"replayed ({e.replays} calls) from {len(e.programs)} program(s) of "
                         f"{ops} operations" if len(e.programs) > 1 else
                         f"replayed ({e.replays} calls) from a program of {ops} operations")
            elif e.refused is not None:
                state = f"runs afresh on every call: {e.refused}"
            elif e.tries >= _RECORDINGS_PER_KEY and e.unstable is not None:
                state = ("runs afresh on every call: its recordings differed from call to "
                         f"call ({e.unstable}); it is recorded again only once {e.needed} "
                         "calls in a row check as many conditions (the same path again)")
            elif e.replays:
                state = (f"recorded {e.recordings} time(s); replayed {e.replays} call(s) "
                         "before what its programs read changed (they were dropped)")
            else:
                state = f"recorded {e.recordings} time(s), not yet replayed"
            lines.append(f"  structure {k + 1}: {state}")
            if len(e.programs) > 1:
                lines.append("    its programs take other paths (a loop ending at another "
                             "step): a call replays the first whose guards hold")
            if e.error is not None and e.refused is None:
                lines.append(f"    {e.error} (it ran afresh; the next call records again)")
            if e.misses:
                lines.append(f"    {e.misses} call(s) stopped by a guard of every program "
                             "(recorded again, or run afresh)")
            n_checks = max((p.n_checks for p in e.programs),
                           default=e.candidates[0].n_checks if e.candidates else 0)
            if n_checks:
                lines.append(f"    guards {n_checks} value(s) it read outside its arrays "
                             "(closure variables, globals, defaults, objects)")
            guards = [g for p in e.programs for g in p.guards] + list(e.last_guards)
            checks = list(dict.fromkeys(w for kind, w in guards if kind == "check"))
            if checks:
                lines.append(f"    checked on every replay: {'; '.join(checks)}")
            reads = list(dict.fromkeys(w for kind, w in guards if kind == "read"))
            for where in reads[:10]:
                lines.append(f"    reads a value (recorded again when it differs): {where}")
        return "\n".join(lines)

    def __repr__(self):
        return f"scg.jit({getattr(self.fn, '__name__', self.fn)!r})"


_RESULTS = (np.ndarray, np.generic, int, float, complex, str, bool, bytes, type(None))


def _stop(rec):
    """The recording no longer handles this thread's effects."""
    if THREAD.recording is rec:
        effects.pop(rec)


def _opaque_result(out, rec):
    """Does the result hold an object scg.jit cannot look into (then it may hold recorded
    values: the call runs afresh, and so do later ones)?"""
    for o in pytree.flatten_leaves(out)[0]:
        if type(o) is not Var and not isinstance(o, _RESULTS):
            rec.refuse(f"the function returned a {type(o).__name__}, which scg.jit does not "
                       "look into (it replays arrays, numbers, strings, and dicts, lists, "
                       "tuples and dataclasses of them)")
            return True
    return False


def _maybe_the_recording(error):
    """Could the error come from recording rather than from the function (a numba kernel
    or a library meeting a recorded value where it expects an array)? Then the call runs
    afresh without recording; any other error is the function's, and is raised."""
    return isinstance(error, (TypeError, AttributeError, NotImplementedError)) or \
        type(error).__module__.startswith("numba")


class _Unwatched:
    """In place of a Watch, for a recording that confirms the last one."""

    denied = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_UNWATCHED = _Unwatched()


def _restore(generators, positions):
    for g, position in zip(generators, positions):
        if isinstance(g, np.random.Generator):
            restore_position(g, position)
        elif g is not PYTHON_RANDOM:  # (its position compares, it does not restore)
            g.setstate(position)


def _form(saved):
    return saved if type(saved) is bytes else repr(saved)


# ---------------------------------------------------------------- recordings compared
def _share_constants(entry, rec):
    """Each large constant of the recording becomes an identical one that a program or
    candidate of the same structure already holds: every recording copies a writeable
    array it reads (a closure's data matrix: recording._frozen), so the programs of
    several paths (loop lengths) would each hold copies of the same data."""
    held = [c for p in entry.programs for c in p.consts if _large(c)]
    held += [c for cand in entry.candidates for c in cand.signature[2] if _large(c)]
    if not held:
        return
    consts = rec.consts
    for k, c in enumerate(consts):
        if _large(c):
            consts[k] = next((h for h in held if h is c or _identical(h, c)), c)


def _share_guard_bytes(entry, check):
    """The same for the bytes the guards `check` compare (the globals of the predicate
    guards.py compiled): each guard keeps the bytes of every array it compares."""
    snapshots = [v for f in [p.check for p in entry.programs] +
                 [c.check for c in entry.candidates]
                 for v in f.__globals__.values() if _large_bytes(v)]
    if not snapshots:
        return
    names = check.__globals__
    for k, v in names.items():
        if _large_bytes(v):
            names[k] = next((h for h in snapshots if h is v or h == v), v)


def _large_bytes(v):
    return type(v) is bytes and len(v) >= _SHARED_BYTES


def _large(c):
    return type(c) is np.ndarray and c.nbytes >= _SHARED_BYTES and not c.dtype.hasobject


def _identical(a, b):
    """The same array for a program: shape, dtype, layout and every bit."""
    if a.shape != b.shape or a.dtype != b.dtype or a.strides != b.strides:
        return False
    order = "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else None
    if order is None:  # (a broadcast, or another view: compared as numpy lays it out)
        return same(a, b)
    # (byte by byte, without a copy of either)
    return bool(np.array_equal(a.reshape(-1, order=order).view(np.uint8),
                               b.reshape(-1, order=order).view(np.uint8)))


def _signature(rec, out_leaves, inputs):
    outs = tuple(("v", o.slot) if type(o) is Var else ("c", _value_key(o)) for o in out_leaves)
    refs = [type(r) if f"r{k}" in rec.own else r for k, r in enumerate(rec.refs)]
    return (tuple(rec.lines), tuple(rec.effects), rec.consts, refs, outs,
            tuple(v.slot for v in inputs))


def _difference(a, b):
    """Where two recordings first differ, in words (for explain())."""
    if a[0] != b[0]:
        for k, (x, y) in enumerate(zip(a[0], b[0])):
            if x != y:
                return f"operation {k + 1} differs: {x!r} against {y!r}"
        return f"one recording has {len(a[0])} operations, the other {len(b[0])}"
    if a[1] != b[1]:
        return "the updates of state kept between calls differ"
    for k, (x, y) in enumerate(zip(a[2], b[2])):
        if not _same_const(x, y):
            used = next((line for line in a[0] if re.search(rf"\bc{k}\b", line)),
                        "an output")
            return (f"the constant c{k} differs ({_short(x)} against {_short(y)}), in "
                    f"{used.strip()!r}: a value computed outside scg's operations")
    for k, (x, y) in enumerate(zip(a[3], b[3])):
        if not _same_ref(x, y):
            return f"the object r{k} differs ({_short(x)} against {_short(y)})"
    return "the outputs differ"


def _short(x):
    text = repr(x)
    return text if len(text) < 60 else text[:57] + "..."


def _same_signature(a, b):
    if a[0] != b[0] or a[1] != b[1] or a[4] != b[4] or a[5] != b[5]:
        return False
    if len(a[2]) != len(b[2]) or len(a[3]) != len(b[3]):
        return False
    return all(_same_const(x, y) for x, y in zip(a[2], b[2])) and \
        all(_same_ref(x, y) for x, y in zip(a[3], b[3]))


def _same_const(x, y):
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if type(x) is np.ndarray or isinstance(x, np.generic):
        return same(x, y)
    if type(x) is tuple or type(x) is list:
        return len(x) == len(y) and all(_same_const(a, b) for a, b in zip(x, y))
    if type(x) is dict:
        return x.keys() == y.keys() and all(_same_const(x[k], y[k]) for k in x)
    try:
        return bool(x == y)
    except Exception:
        return False


def _same_ref(x, y):
    if x is y:
        return True
    sx, sy = getattr(x, "__self__", None), getattr(y, "__self__", None)
    if sx is None or getattr(x, "__name__", None) != getattr(y, "__name__", None):
        return False
    if sx is sy:
        return True
    # two equal objects of scg made anew by each call (a baseline written inline in the
    # model): the same method of either gives the same results
    return type(sx) is type(sy) and type(sx).__module__.startswith("scg.") and \
        hasattr(sx, "__dict__") and _same_const(vars(sx), vars(sy))


def _value_key(x):
    if type(x) is np.ndarray:
        return ("array", x.dtype.str, x.shape, x.tobytes())
    return ("value", repr(x))


# ---------------------------------------------------------------- keys of calls
_END = ("end",)


def _arguments_key(args, traced, spec):
    """The structure of positional arguments made of dicts, lists, tuples, arrays and
    numbers only, collecting the traced leaves in pytree order (the fast path of every
    call); None for anything else (then pytree and _freeze make the key)."""
    if _collect(args, traced, spec):
        return tuple(spec)
    return None


def _collect(x, traced, spec):
    # (an array adds its shape and dtype, a number its type, a container a tuple that
    # holds its kind and size: no two structures give the same sequence)
    t = type(x)
    if t is np.ndarray or t is np.memmap:  # (a memmap's slice: an array like any other)
        traced.append(x if t is np.ndarray else x.view(np.ndarray))
        spec.append(x.shape)
        spec.append(x.dtype)
        return True
    if t is dict:
        keys = tuple(x)
        for k in keys:
            if type(k) is not str:  # (keys by type and bits: 0.0 and -0.0 are one key)
                keys = _exact_keys(x)
                break
        spec.append((dict, keys))
        for v in x.values():
            if type(v) is np.ndarray:
                traced.append(v)
                spec.append(v.shape)
                spec.append(v.dtype)
            elif not _collect(v, traced, spec):
                return False
        spec.append(_END)
        return True
    if t is list or t is tuple:
        spec.append((t, len(x)))
        for v in x:
            if not _collect(v, traced, spec):
                return False
        spec.append(_END)
        return True
    if t is float or t is complex:  # (by type and bits: -0.0 is not 0.0, nor -nan nan)
        spec.append(_atom(x))
        return True
    if t is int or t is bool:  # (by value: part of the key)
        spec.append((t, x))
        return True
    if isinstance(x, np.generic) and t is not np.bool_:
        traced.append(x)
        spec.append((x.dtype.str, "scalar"))
        return True
    return False



def _freeze(treedef):
    if treedef is None:
        return None
    kind, children = treedef
    if kind is dict or isinstance(kind, type):
        if kind is dict:
            return (dict, tuple((_exact(k), _freeze(c)) for k, c in children))
        return (kind, tuple(_freeze(c) for c in children))
    node = kind
    fixed = getattr(node, "fixed", None)
    if fixed is not None:
        fixed = tuple((_exact(k), _static_key(v)) for k, v in fixed.items())
        if any(v is None for _, v in fixed):
            raise TypeError("a field scg.jit cannot compare")  # (the call runs afresh)
    head = (type(node), getattr(node, "cls", None), getattr(node, "names", None), fixed)
    return head + (tuple((k, _freeze(c)) for k, c in children),)


_DOUBLE = struct.Struct("<d").pack
_ATOMS = (int, float, bool, str, bytes, complex, type(None))
_BY_IDENTITY = (types.BuiltinFunctionType, np.ufunc, np.dtype)


def _atom(x):
    """A Python atom as its exact type and bits: values that compare equal but compute
    differently (0.0 and -0.0, 1, 1.0 and True, nans of another sign) are other keys."""
    t = type(x)
    if t is float:
        return (float, _DOUBLE(x))
    if t is complex:
        return (complex, _DOUBLE(x.real), _DOUBLE(x.imag))
    return (t, x)


def _exact(v):
    """A key in a form whose == is exact (atoms by type and bits, tuples of them)."""
    t = type(v)
    if t in _ATOMS:
        return _atom(v)
    if t is tuple:
        return (t,) + tuple(_exact(u) for u in v)
    if isinstance(v, np.generic):
        return (type(v), v.dtype.str, v.tobytes())
    return v


def _exact_keys(x):
    """A dict's keys in a form whose == is exact; None for string keys."""
    if all(type(k) is str for k in x):
        return None
    return tuple(_exact(k) for k in x)


def _static_key(x):
    """A key for an argument that is not an array: atoms by type and bits, builtins,
    ufuncs and dtypes by identity, tuples of them; None for any other object (a function,
    a class, a module: compared by the guards)."""
    t = type(x)
    if t in _ATOMS:
        return _atom(x)
    if isinstance(x, _BY_IDENTITY):
        return ("is", x)
    if t is tuple or t is frozenset:
        keys = tuple(_static_key(v) for v in x)
        return None if any(k is None for k in keys) else (t, keys)
    return None
