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
- `kept(getter, *args)`: the object `getter(*args)` returns, state kept between calls
  and used by identity (a site's baseline state, which a user may replace: a checkpoint
  restored); a handler that repeats the call checks that it is still that object;
- `generator(rng)`: a numpy Generator whose draws are the program's randomness;
  `position(rng)` and `restore(rng, position)`: where it is in its stream, and back there
  (to draw the same numbers again: copies of a run with common random numbers);
- `asarray(x, dtype)`: a value as a plain array, below every transformation;
- `read(x, why)`: a value as Python reads it (a test, an index, a numpy function without
  a rule), which a handler holding it may guard;
- `unrepeatable(reason)`: this run did something a repetition of its operations would
  not reproduce;
- `sees_operations()`: does a handler see every primitive call (then code takes the
  primitives' path, not a fused kernel's that would hide them)?
- `drawing(rng, shape)`: a kernel is about to draw `shape` numbers from `rng` itself (a
  handler may note where the draw starts, to draw it again later);
- `operation(prim, inputs, args, kwargs, result)`: a per-draw operation of a model ran;
  it goes to the innermost handler that watches them (`watches_operations`), the run of
  the model that follows plates' axes and builds its graph, and to no other.
- `scg_only(fn, *args)`: fn(*args), scg's own code that calls none of the user's (the
  backward pass): a handler that watches what the user's code calls may look away.

Each thread has one stack of handlers (`push`, `pop`). A message goes to the innermost
handler; a `Handler` forwards what it does not handle to the one outside it, and with no
handler the message's default runs: the eager computation. The stack also knows, in O(1),
its innermost handler of three roles: the one that takes values (`takes_values`), the one
that watches per-draw operations (`watches_operations`), and the recording of scg.jit
(`records`), whose traced values record only while it is this thread's. The defaults cost one
attribute read more than the plain call. (Handlers that take none of these messages, the
stochastic layer's, are skipped: `takes_values = False`.)

The stochastic layer's effects are `Message`s sent with `send`: a sample site, a cost, a
plate opened or closed. Each handler's `process(msg)` sees the message in turn, innermost
first (a plate adds itself to a site's plates, a choice of estimators sets the site's
estimator), until one performs it (the run of a model: it sets `msg.done`); then the
handlers it passed see it again, outermost first (`postprocess`). As in Pyro's messengers.
"""

import numpy as np

from .random_state import restore_position, save_position
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


class Message:
    """A stochastic effect on its way through the handlers (see the module docstring).

    `kind` ("sample", "cost", "plate", "plate_exit"), `name`, `fields` (what the kind
    needs: a distribution, an estimator, a value), `plates` (the plates it is inside,
    outermost first), and, once performed, `value` and `done`."""

    __slots__ = ("kind", "name", "fields", "plates", "value", "done")

    def __init__(self, kind, name, **fields):
        self.kind = kind
        self.name = name
        self.fields = fields
        self.plates = ()
        self.value = None
        self.done = False


class Handler:
    """A handler of the effect stack: each method receives one kind of message, and by
    default forwards it to the handler outside this one (or runs the default).

    `process(msg)` and `postprocess(msg)` see the stochastic layer's messages (`send`);
    a handler with `takes_values = False` takes none of the other messages, which skip it.
    """

    outer = None   # the next handler outside this one
    outer_values = None  # the next handler outside this one that takes the messages above
    outer_ops = None  # (the innermost operations watcher and recording before this one)
    outer_recording = None
    takes_values = True
    watches_operations = False  # receives `operation` (the innermost such handler only)
    records = False  # scg.jit's recording

    def process(self, msg):
        """See a message on its way in (innermost first); perform it by setting
        `msg.value` and `msg.done`."""

    def postprocess(self, msg):
        """See a performed message on its way back (outermost first)."""

    def opaque(self, fn, args):
        return _send_opaque(self.outer_values, fn, args)

    def stateful(self, fn, args):
        return _send_stateful(self.outer_values, fn, args)

    def after(self, fn, args):
        return _send_after(self.outer_values, fn, args)

    def check(self, predicate, x, where):
        return _send_check(self.outer_values, predicate, x, where)

    def kept(self, getter, args):
        return _send_kept(self.outer_values, getter, args)

    def generator(self, rng):
        h = self.outer_values
        return rng if h is None else h.generator(rng)

    def position(self, rng):
        h = self.outer_values
        return save_position(rng) if h is None else h.position(rng)

    def restore(self, rng, position):
        h = self.outer_values
        if h is None:
            restore_position(rng, position)
        else:
            h.restore(rng, position)

    def asarray(self, x, dtype):
        h = self.outer_values
        return np.asarray(strip(x), dtype=dtype) if h is None else h.asarray(x, dtype)

    def read(self, x, why):
        h = self.outer_values
        return x.read(why) if h is None else h.read(x, why)

    def unrepeatable(self, reason):
        if self.outer_values is not None:
            self.outer_values.unrepeatable(reason)

    def drawing(self, rng, shape):
        if self.outer_values is not None:
            self.outer_values.drawing(rng, shape)

    def operation(self, prim, inputs, args, kwargs, result):
        """A per-draw operation ran (for a handler with `watches_operations`)."""

    def sees_operations(self):
        return self.outer_values is not None and self.outer_values.sees_operations()

    def scg_only(self, fn, args):
        h = self.outer_values
        return fn(*args) if h is None else h.scg_only(fn, args)

    def floor(self):
        return 0 if self.outer_values is None else self.outer_values.floor()


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
    if h is None:
        if is_held(x):  # (a handler's value kept after its handler ended: its number)
            x = x.value
        return bool(predicate(x))
    return h.check(predicate, x, where)


def _send_kept(h, getter, args):
    return getter(*args) if h is None else h.kept(getter, args)


# ---------------------------------------------------------------- the stack
def push(handler):
    """Make `handler` this thread's innermost handler."""
    state = THREAD
    handler.outer = state.handler
    handler.outer_values = state.values
    state.handler = handler
    if handler.takes_values:
        state.values = handler
    if handler.watches_operations:
        handler.outer_ops = state.ops
        state.ops = handler
    if handler.records:
        handler.outer_recording = state.recording
        state.recording = handler


def pop(handler):
    """Remove the innermost handler, which must be `handler`."""
    state = THREAD
    if state.handler is not handler:
        raise RuntimeError("effect handlers must be removed innermost first (a plate or "
                           "a model run left open inside another)")
    state.handler = handler.outer
    state.values = handler.outer_values
    if handler.watches_operations:
        state.ops = handler.outer_ops
    if handler.records:
        state.recording = handler.outer_recording
    handler.outer = handler.outer_values = handler.outer_ops = handler.outer_recording = None


def innermost():
    """This thread's innermost handler, or None."""
    return THREAD.handler


def handlers():
    """This thread's handlers, innermost first."""
    h = THREAD.handler
    while h is not None:
        yield h
        h = h.outer


def send(msg):
    """Send a stochastic message through this thread's handlers (see the module
    docstring); return its value, or raise LookupError if no handler performed it."""
    passed = []
    h = THREAD.handler
    while h is not None and not msg.done:
        h.process(msg)
        passed.append(h)
        h = h.outer
    if not msg.done:
        raise LookupError(msg.kind)
    for h in reversed(passed):
        h.postprocess(msg)
    return msg.value


# ---------------------------------------------------------------- the messages
def opaque(fn, *args):
    """fn(*args), for a function of its arguments only, as one operation."""
    return _send_opaque(THREAD.values, fn, args)


def stateful(fn, *args):
    """fn(*args) for a function that reads state kept between calls (marked `State`)."""
    return _send_stateful(THREAD.values, fn, args)


def after(fn, *args):
    """fn(*args) for its side effect on state kept between calls (marked `State`): run
    when the call has returned (now, without a handler)."""
    _send_after(THREAD.values, fn, args)


def kept(getter, *args):
    """getter(*args): an object kept between calls and used by identity (state that a
    user may replace between calls); a repetition of the call must find the same one."""
    return _send_kept(THREAD.values, getter, args)


def check(predicate, x, where):
    """predicate(x) as a bool: a condition every run must meet (`where` says which)."""
    THREAD.checks += 1  # (how many a call made: scg.jit tells calls of one shape apart)
    return _send_check(THREAD.values, predicate, x, where)


def generator(rng):
    """The numpy Generator through which a program draws its randomness."""
    h = THREAD.values
    return rng if h is None else h.generator(rng)


def position(rng):
    """Where the Generator `rng` (as `generator(rng)` gave it) is in its stream: `restore`
    puts it back there, to draw the same numbers again."""
    h = THREAD.values
    return save_position(rng) if h is None else h.position(rng)


def restore(rng, position):
    """Put the Generator `rng` back where `position(rng)` found it."""
    h = THREAD.values
    if h is None:
        restore_position(rng, position)
    else:
        h.restore(rng, position)


def asarray(x, dtype=None):
    """np.asarray(strip(x), dtype): the value below every transformation (a handler may
    keep its own representation of it)."""
    h = THREAD.values
    if h is None:
        return np.asarray(strip(x), dtype=dtype)
    return h.asarray(x, dtype)


def read(x, why):
    """The value below every transformation of x as Python reads it (a test, an index, a
    numpy function without a rule): a handler holding the value may note the read, `why`
    (scg.jit guards the value, so a replay whose value differs runs afresh)."""
    x = strip(x)
    if not is_held(x):
        return x
    h = THREAD.values  # (a held value reads itself when no handler is open: one kept)
    return x.read(why) if h is None else h.read(x, why)


def unrepeatable(reason):
    """Say that this run did something a repetition of its operations would not
    reproduce (`reason`, for the user)."""
    h = THREAD.values
    if h is not None:
        h.unrepeatable(reason)


def drawing(rng, shape):
    """A kernel is about to draw `shape` numbers from the numpy Generator `rng` itself
    (called under the bit generator's lock, so a handler can note where the draw starts)."""
    h = THREAD.values
    if h is not None:
        h.drawing(rng, shape)


def operation(prim, inputs, args, kwargs, result):
    """A per-draw operation of a model ran (`prim` on `args` gave `result`; `inputs` are
    its per-draw arguments): told to the innermost handler that watches operations."""
    h = THREAD.ops
    if h is not None:
        h.operation(prim, inputs, args, kwargs, result)


def sees_operations():
    """Does a handler see every primitive call (so fused kernels, which hide them, are
    not used)?"""
    h = THREAD.values
    return h is not None and h.sees_operations()


def scg_only(fn, *args):
    """fn(*args), where fn is scg's own code and calls none of the user's (the backward
    pass: the rules of scg's primitives): a handler that watches the calls the user's code
    makes (scg.jit's recording) need not watch it."""
    h = THREAD.values
    return fn(*args) if h is None else h.scg_only(fn, args)


def floor():
    """The trace level of the innermost handler's values (0 if none): `strip(x, floor())`
    removes every transformation's tracer but keeps a handler's value."""
    h = THREAD.values
    return 0 if h is None else h.floor()


class values_only:
    """A block that runs with the stochastic handlers off this thread's stack and the value
    handlers kept (a recording of scg.jit records it): a model run of its own inside a
    call, such as an estimator's probe. Use as ``with effects.values_only():``."""

    __slots__ = ("saved", "saved_ops")

    def __enter__(self):
        self.saved = THREAD.handler
        self.saved_ops = THREAD.ops
        THREAD.handler = THREAD.values
        THREAD.ops = None

    def __exit__(self, *exc):
        THREAD.handler = self.saved
        THREAD.ops = self.saved_ops
        return False


class operations_unseen:
    """A block whose per-draw operations no handler watches (a site's own sampling and
    log-density, which are not the model's operations). Use as
    ``with effects.operations_unseen():``. (A class rather than a generator-based context
    manager: entered twice per site, and this is several times cheaper.)"""

    __slots__ = ("saved",)

    def __enter__(self):
        state = THREAD
        self.saved = state.ops
        state.ops = None

    def __exit__(self, *exc):
        THREAD.ops = self.saved
        return False


def is_held(x):
    """Is x a value that a handler holds below every transformation (not a plain array)?"""
    return isinstance(x, Tracer) and type(x).floor
