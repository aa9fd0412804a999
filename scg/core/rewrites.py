"""Faster implementations that a higher layer offers to a lower one: rewrites.

The numpy rules sit below the kernels, so they cannot call a compiled kernel by name.
Instead a rule asks this table for a named pass (`get("square")`), and the kernels layer
registers its implementations here when it is imported (`register("square", fn)`), as a
primitive's lowering is registered beside it (scg/core/lowering.py). A pass returns None
for an input it does not take; with nothing registered, the rule's numpy code runs.

Registered now: "square" and "square_vjp" (threaded passes over large arrays,
scg/kernels/fused.py), "sigmoid" (one compiled loop for small arrays,
scg/kernels/small.py), and "log_softmax", "log_softmax_vjp" and "tanh_vjp" (passes over
the rows of a layer, scg/kernels/layers.py).
"""

_TABLE = {}


def register(name, fn):
    """Offer `fn` as the pass `name` (replacing an earlier one)."""
    _TABLE[name] = fn


def get(name):
    """The pass registered as `name`, or None."""
    return _TABLE.get(name)
