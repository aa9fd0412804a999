"""Comparing the calls of a function with and without scg.jit (the review tests)."""

import numpy as np

from scg.core import pytree


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
