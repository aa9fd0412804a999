"""The runs of models in progress in this thread, and how a model's messages reach them.

(The runs are handlers of the thread's effect stack, scg/core/effects.py; per-draw
operations reach the innermost one as `effects.operation`.) Models may run in several
threads at once (each thread its own gradient); each thread sees only its own.
"""

from ..core import effects
from ..errors import TracingError


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
