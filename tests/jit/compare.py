"""Comparing the calls of a function with and without scg.jit.

Shared by the tests in this folder: exact comparison of results (every bit, or every value
with NaNs equal), the same calls run eagerly and jitted in lockstep, and pairs of
expectations whose generators start in the same state.
"""

import numpy as np

import scg
from scg.core import pytree

RTOL = 1e-12


def same_bits(a, b):
    """Exactly the same result: structure, leaf types, dtypes, shapes and every bit
    (signed zeros and the sign bits of NaNs included)."""
    la, _ = pytree.flatten_leaves(a)
    lb, _ = pytree.flatten_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if type(x) is not type(y):
            return False
        ax, ay = np.asarray(x), np.asarray(y)
        if ax.dtype != ay.dtype or ax.shape != ay.shape or ax.tobytes() != ay.tobytes():
            return False
    return True


def same_values(a, b):
    """Exactly the same result: structure, leaf types, dtypes and every bit of the values
    (NaNs equal to NaNs; strings and None compared as they are)."""
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    la, da = pytree.flatten_leaves(a)
    lb, db = pytree.flatten_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x is None or y is None:
            if x is not y:
                return False
            continue
        if type(x) is not type(y):
            return False
        ax, ay = np.asarray(x), np.asarray(y)
        if ax.dtype != ay.dtype or ax.shape != ay.shape:
            return False
        if not np.array_equal(ax, ay, equal_nan=ax.dtype.kind in "fc"):
            return False
    return True


class Raised:
    """The outcome of a call that raised (compared by exception type)."""

    def __init__(self, error):
        self.type = type(error)

    def __repr__(self):
        return f"Raised({self.type.__name__})"


def outcome(fn, *args, **kwargs):
    """The result of a call, or Raised(exception)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # (compared with the other run's outcome)
        return Raised(e)


def agree(eager, jitted, args_list, same=same_bits):
    """Call both on every argument tuple; return the calls (index, eager, jitted) that
    differ (results by `same`, errors by type)."""
    bad = []
    for i, args in enumerate(args_list):
        want, got = outcome(eager, *args), outcome(jitted, *args)
        if type(want) is Raised or type(got) is Raised:
            if type(want) is not type(got) or want.type is not got.type:
                bad.append((i, want, got))
        elif not same(want, got):
            bad.append((i, want, got))
    return bad


def agree_values(eager, jitted, args_list):
    """The calls that differ (by value, NaNs equal: see `same_values`)."""
    return agree(eager, jitted, args_list, same=same_values)


def check_values(fn, args_list, expect_replays=True):
    """fn eagerly and jitted on every argument tuple: no call differs by value (NaNs
    equal), and (by default) some calls were replayed."""
    jf = scg.jit(fn)
    bad = agree_values(fn, jf, args_list)
    assert bad == [], bad
    if expect_replays:
        assert jf.stats["replays"] > 0


def lockstep_calls(eager, jitted, args_list):
    """Call both on every argument tuple; the calls (index, eager, jitted) that differ."""
    return agree(eager, jitted, args_list)


def check_lockstep(fn, args_list, min_replays=1):
    """fn eagerly and jitted on every argument tuple: no call differs in any bit, and at
    least `min_replays` calls were replayed; returns the jitted function."""
    jitted = scg.jit(fn)
    bad = lockstep_calls(fn, jitted, args_list)
    assert bad == [], bad
    assert jitted.stats["replays"] >= min_replays, jitted.explain()
    return jitted


def repeated_calls(fn, args, calls=4):
    """Eager and jitted calls in turn; returns (jitted, [(eager, jitted) per call])."""
    jitted = scg.jit(fn)
    pairs = [(fn(*args), jitted(*args)) for _ in range(calls)]
    return jitted, pairs


def check_repeated(fn, *args, calls=4):
    """The same arguments, eagerly and jitted in turn: every result the same in every bit,
    at least one call replayed; returns the jitted function."""
    jitted, pairs = repeated_calls(fn, args, calls)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    for want, got in pairs:
        assert same_bits(want, got), (want, got)
    return jitted


def source_of(jitted):
    """The source of the first replay program of a jitted function."""
    return next(e.source for e in jitted._entries.values() if e.source)


def pair(model, n=4, seed=0, **kwargs):
    """Two expectations of `model` with generators in the same state."""
    return (scg.expectation(model, n=n, seed=seed, **kwargs),
            scg.expectation(model, n=n, seed=seed, **kwargs))


def structure(tree):
    """The containers of a result (dict keys, list and tuple lengths) and leaf shapes."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, structure(v)) for k, v in tree.items()))
    if isinstance(tree, (list, tuple)):
        return ("seq", tuple(structure(v) for v in tree))
    return ("leaf", np.shape(tree))


def assert_same(eager, jitted, rtol=RTOL):
    """Same structure, same shapes, values equal to `rtol` (relative)."""
    assert structure(jitted) == structure(eager)
    le = pytree.flatten_leaves(eager)[0]
    lj = pytree.flatten_leaves(jitted)[0]
    assert len(le) == len(lj)
    for a, b in zip(le, lj):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-300)


def compare_loop(eager_fn, jitted, args_list):
    """Call both on every argument tuple in order; check every call agrees."""
    results = []
    for args in args_list:
        want = eager_fn(*args)
        got = jitted(*args)
        assert_same(want, got)
        results.append((want, got))
    return results
