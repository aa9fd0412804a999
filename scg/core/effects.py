"""Effects: what code above the primitives does besides computing, as messages to handlers.

Most of scg is pure: primitives of arrays. A few things are not, and whatever runs a
program other than eagerly (a recording for replay, see scg/jit/) must see them:

- `opaque(fn, *args)`: a function of its arguments only, run as one operation (a numba
  kernel, a conversion the user sees);
- `stateful(fn, *args)`: a function that reads state kept between calls (a baseline's
  moving average, an optimizer's moments), the state marked `State(obj)`;
- `after(fn, *args)`: an update of such state, run when the call has returned;
- `check(predicate, x, where)`: a condition that must hold on every run (a finite cost,
  a parameter inside its constraint);
- `generator(rng)`: a numpy Generator whose draws are the program's randomness;
- `asarray(x, dtype)`: a value as a plain array, below every transformation;
- `unrepeatable(reason)`: this run did something a repetition of its operations would
  not reproduce;
- `sees_operations()`: does a handler see every primitive call (then code takes the
  primitives' path, not a fused kernel's that would hide them)?

Each thread has one stack of handlers (`push`, `pop`, `handling`). A message goes to the
innermost handler; a `Handler` forwards what it does not handle to the one outside it,
and with no handler the message's default runs: the eager computation. The defaults cost
one attribute read more than the plain call.
"""

import numpy as np

from .tape import THREAD, Tracer, strip


class State:
    """An argument of `stateful` or `after` used by identity: a dict of state, an object.

    `own=True`: an object the call made for itself (each run has its own, so two runs are
    the same if the rest is)."""

    __slots__ = ("obj", "own")

    def __init__(self, obj, own=False):
        self.obj = obj
        self.own = own


def _plain(args):
    return [a.obj if type(a) is State else a for a in args]


class Handler:
    """A handler of the effect stack: each method receives one kind of message, and by
    default forwards it to the handler outside this one (or runs the default)."""

    outer = None

    def opaque(self, fn, args):
        return _send_opaque(self.outer, fn, args)

    def stateful(self, fn, args):
        return _send_stateful(self.outer, fn, args)

    def after(self, fn, args):
        return _send_after(self.outer, fn, args)

    def check(self, predicate, x, where):
        return _send_check(self.outer, predicate, x, where)

    def generator(self, rng):
        return rng if self.outer is None else self.outer.generator(rng)

    def asarray(self, x, dtype):
        return np.asarray(strip(x), dtype=dtype) if self.outer is None else \
            self.outer.asarray(x, dtype)

    def unrepeatable(self, reason):
        if self.outer is not None:
            self.outer.unrepeatable(reason)

    def sees_operations(self):
        return self.outer is not None and self.outer.sees_operations()

    def floor(self):
        return 0 if self.outer is None else self.outer.floor()


def _send_opaque(h, fn, args):
    return fn(*args) if h is None else h.opaque(fn, args)


def _send_stateful(h, fn, args):
    return fn(*_plain(args)) if h is None else h.stateful(fn, args)


def _send_after(h, fn, args):
    if h is None:
        fn(*_plain(args))
    else:
        h.after(fn, args)


def _send_check(h, predicate, x, where):
    return bool(predicate(x)) if h is None else h.check(predicate, x, where)


# ---------------------------------------------------------------- the stack
def push(handler):
    """Make `handler` this thread's innermost handler."""
    handler.outer = THREAD.handler
    THREAD.handler = handler


def pop(handler):
    """Remove the innermost handler, which must be `handler`."""
    if THREAD.handler is not handler:
        raise RuntimeError("effect handlers must be removed innermost first")
    THREAD.handler = handler.outer
    handler.outer = None


def innermost():
    """This thread's innermost handler, or None."""
    return THREAD.handler


# ---------------------------------------------------------------- the messages
def opaque(fn, *args):
    """fn(*args), for a function of its arguments only, as one operation."""
    return _send_opaque(THREAD.handler, fn, args)


def stateful(fn, *args):
    """fn(*args) for a function that reads state kept between calls (marked `State`)."""
    return _send_stateful(THREAD.handler, fn, args)


def after(fn, *args):
    """fn(*args) for its side effect on state kept between calls (marked `State`): run
    when the call has returned (now, without a handler)."""
    _send_after(THREAD.handler, fn, args)


def check(predicate, x, where):
    """predicate(x) as a bool: a condition every run must meet (`where` says which)."""
    return _send_check(THREAD.handler, predicate, x, where)


def generator(rng):
    """The numpy Generator through which a program draws its randomness."""
    h = THREAD.handler
    return rng if h is None else h.generator(rng)


def asarray(x, dtype=None):
    """np.asarray(strip(x), dtype): the value below every transformation (a handler may
    keep its own representation of it)."""
    h = THREAD.handler
    if h is None:
        return np.asarray(strip(x), dtype=dtype)
    return h.asarray(x, dtype)


def unrepeatable(reason):
    """Say that this run did something a repetition of its operations would not
    reproduce (`reason`, for the user)."""
    h = THREAD.handler
    if h is not None:
        h.unrepeatable(reason)


def sees_operations():
    """Does a handler see every primitive call (so fused kernels, which hide them, are
    not used)?"""
    h = THREAD.handler
    return h is not None and h.sees_operations()


def floor():
    """The trace level of the innermost handler's values (0 if none): `strip(x, floor())`
    removes every transformation's tracer but keeps a handler's value."""
    h = THREAD.handler
    return 0 if h is None else h.floor()


def is_held(x):
    """Is x a value that a handler holds below every transformation (not a plain array)?"""
    return isinstance(x, Tracer) and type(x).floor
