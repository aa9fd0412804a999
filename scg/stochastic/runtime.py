"""The stochastic layer's per-thread state: the stack of model runs in progress and the
hook that per-draw operations report to.

Models may run in several threads at once (each thread its own gradient); each thread
sees only its own runs.
"""

import threading


class _Runtime(threading.local):
    """`runs`: the Traces of the model runs in progress in this thread, innermost last.
    `on_op`: None, or a callable `(prim, inputs, args, kwargs, result)` that every per-draw
    operation reports its result to (the innermost run sets it while it records a graph
    or is inside a plate)."""

    def __init__(self):
        self.runs = []
        self.on_op = None


RUNTIME = _Runtime()
