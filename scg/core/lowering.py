"""How a recorded call of a function may be written as one expression (its lowering).

A program recorded for replay (scg/jit/) calls each operation's function; for the
cheapest operations the call of a wrapper costs more than the arithmetic, so the function
may register an expression that computes exactly its result, as JAX registers a lowering
beside each primitive. Registered where each function is defined:

    INLINE[fn] = inline

`inline(args, kwargs, result, arg_exprs, kwarg_exprs, const)` returns the expression
(a string in the names `arg_exprs` and `kwarg_exprs` give the arguments; `const(x)` names
a constant), or None to call fn. Never used for a call whose result's shape is guarded;
an inline function with the attribute `constant_settings = True` is used only when the
arguments after the first (a shape, axes) hold no recorded value.
"""

INLINE = {}

# Functions whose result never shares memory with an argument (a new array, or a view of
# one): a program may then give an argument's memory to a later value once the argument
# is dead, whatever the result lives on (scg/jit/buffers.py). Registered where each
# function is defined: FRESH.add(fn).
FRESH = set()


# Functions with a keyword `out`: given a C-contiguous array of their result's shape and
# dtype, they write the result into it (the same values) and return it. A replay may then
# keep the memory of their large results between calls, as it keeps a ufunc's (see
# scg/jit/buffers.py). Registered where each function is defined: WRITES_OUT.add(fn).
WRITES_OUT = set()


def is_fresh(fn):
    """Is fn registered in FRESH?"""
    return _registered(FRESH, fn)


def writes_out(fn):
    """Is fn registered in WRITES_OUT?"""
    return _registered(WRITES_OUT, fn)


def _registered(table, fn):
    try:
        return fn in table
    except TypeError:  # (an unhashable callable)
        return False
