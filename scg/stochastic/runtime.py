"""The stochastic layer's per-thread state: the hook that per-draw operations report to.

(The runs of models in progress are handlers of the thread's effect stack,
scg/core/effects.py.) Models may run in several threads at once (each thread its own
gradient); each thread sees only its own.
"""

import threading

from ..core import effects
from ..errors import TracingError


class _Runtime(threading.local):
    """`on_op`: None, or a callable `(prim, inputs, args, kwargs, result)` that every per-draw
    operation reports its result to (the innermost run sets it while it records a graph
    or is inside a plate). `reuse`: None, or the results of per-draw operations that the
    run with marginalized sites in progress gives again (scg/stochastic/reuse.py)."""

    def __init__(self):
        self.on_op = None
        self.reuse = None


RUNTIME = _Runtime()


def innermost_run():
    """The run of a model in progress in this thread (innermost), or None."""
    for h in effects.handlers():
        if getattr(h, "is_run", False):
            return h
    return None


def current_run(what):
    """The run of a model in progress, or TracingError naming `what` (called outside one)."""
    run = innermost_run()
    if run is None:
        raise TracingError(f"{what} was called outside a model; call the model through "
                           "scg.expectation(model, n=...) or scg.trace(model, ...)")
    return run


def send(what, msg):
    """Send a model's message (`what`: the call, for the error outside a model)."""
    try:
        return effects.send(msg)
    except LookupError:  # (no run took it: handlers of one's own outside a model)
        current_run(what)
        raise
