"""Every primitive over numpy arrays and its gradient rule, grouped by section.

Rules are written with the primitives of this module, so a rule applied to
traced values is itself recorded and derivatives of any order follow.
A rule has the signature (g, ans, *args, **kwargs) -> cotangent of one argument.
"""

import math
import re

import numpy as np

from ..core import effects, rewrites
from ..core.lowering import FRESH, INLINE, WRITES_OUT
from ..core.tape import Box, Primitive, Rows, Tracer, defvjp, rows_placed, strip
from ..errors import TracingError
from ..core.facts import LARGE, known_sum, remember


EW = "elementwise"

# Passes over large arrays split between threads ("square", "square_vjp"), and one
# compiled loop instead of several numpy calls on small arrays ("sigmoid"): offered by the
# kernels layer, which sits above this one, through scg/core/rewrites.py (None: numpy alone).


def prim(name, fn, kind="smooth", doc=None, batch=None):
    p = Primitive(name, fn, kind, doc, batch)
    if batch == EW:
        p.rows = rows_elementwise
    return p


# ---------------------------------------------------------------- rows apart
# `Primitive.rows` (scg/core/tape.py): does a call act on each row of its first axis apart?
# Then the backward pass takes a cotangent that is zero off a few rows on those rows only.
def _row_flags(shapes, nd, n0):
    """Per argument shape, True if its first axis is the result's (of `nd` dims, `n0` rows:
    numpy's broadcasting pairs row r with row r), False if every row shares it; None if
    neither."""
    flags = []
    for s in shapes:
        if len(s) == nd and s[0] == n0:
            flags.append(True)
        elif len(s) < nd or s[0] == 1:
            flags.append(False)
        else:
            return None
    return tuple(flags)


def rows_elementwise(args, kwargs, ans):
    """Broadcasting elementwise functions: row r of the result reads row r of the
    arguments that have the result's rows."""
    out = shape(ans)
    if not out or out[0] == 1 or (kwargs and any(np.ndim(v) for v in kwargs.values())):
        return None
    return _row_flags([shape(a) for a in args], len(out), out[0])


def _rows_reduction(args, kwargs, ans):
    """A reduction (or a function along an axis) over axes other than the first."""
    if len(args) != 1:
        return None
    nd = len(shape(args[0]))
    axis = kwargs.get("axis")
    if nd == 0 or axis is None or 0 in _axes_tuple(axis, nd):
        return None
    return (True,)


def _rows_along_axis(args, kwargs, ans):  # softmax, log_softmax: keyword axis=-1
    return _rows_reduction(args, {"axis": kwargs.get("axis", -1)}, ans)


def _rows_reshape(args, kwargs, ans):
    """A reshape (C order) that keeps the first axis: row r stays row r."""
    x, out = shape(args[0]), shape(ans)
    return (True, False) if x and out and x[0] == out[0] and not kwargs else None


def _rows_broadcast_to(args, kwargs, ans):
    out = shape(ans)
    flags = _row_flags([shape(args[0])], len(out), out[0]) if out else None
    return None if flags is None else flags + (False,)


def _rows_matmul(args, kwargs, ans):
    """a @ b: a's rows when a is a stack or a matrix and b at most a matrix; the stacks'
    first axis when both are stacks (numpy's broadcasting of the leading axes)."""
    if kwargs or len(args) != 2:
        return None
    sa, sb, out = shape(args[0]), shape(args[1]), shape(ans)
    if len(sa) < 2 or not out:
        return None
    if len(sb) <= 2:
        return (True, False)
    return _row_flags((sa, sb), len(out), out[0])


def shape(x):
    """Shape of a plain or traced value (the logical shape of a per-sample value)."""
    s = getattr(x, "shape", None)  # arrays, numpy scalars and tracers; np.shape for the rest
    if s is not None:
        return s
    return () if type(x) in _NUMBERS else np.shape(x)


_NUMBERS = (float, int, bool)


def ndim(x):
    return len(shape(x))


def unbroadcast(g, target_shape):
    """Sum a cotangent of a broadcast result back to an input of `target_shape`: with
    primitives for a traced cotangent, with numpy calls for a plain one."""
    gshape = shape(g)
    if gshape == target_shape:
        return g
    target_shape = tuple(target_shape)
    if gshape == target_shape:
        return g
    traced = isinstance(g, Tracer)
    if not traced and gshape[1:] == target_shape:  # the bias of a batch
        return g[0] if gshape[0] == 1 else _sum(g, axis=0)
    extra = len(gshape) - len(target_shape)
    axes = tuple(range(extra)) + tuple(i + extra for i, s in enumerate(target_shape)
                                       if s == 1 and gshape[i + extra] != 1)
    single = math.prod(gshape[a] for a in axes) == 1  # then a reshape is the sum
    if traced:
        return reshape(g if single else sum_(g, axis=axes), target_shape)
    return (g if single else _sum(g, axis=axes)).reshape(target_shape)


def _axes_tuple(axis, nd):
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (int, np.integer)):  # (np.int64(-1) as numpy takes it too)
        axis = (axis,)
    return tuple(a % nd for a in axis) if nd else ()


def _restore_reduced(g, x_shape, axis, keepdims):
    """Broadcast the cotangent of a reduction back to the input's shape (with primitives
    for a traced cotangent, numpy calls for a plain one)."""
    traced = isinstance(g, Tracer)
    if not keepdims and axis is not None:  # (a full reduction is 0-d and broadcasts as is)
        axes = _axes_tuple(axis, len(x_shape))
        kept = tuple(1 if i in axes else s for i, s in enumerate(x_shape))
        g = reshape(g, kept) if traced else np.reshape(g, kept)
    return broadcast_to(g, x_shape) if traced else _broadcast_to(g, x_shape)


# ---------------------------------------------------------------- batching rules
# How a primitive runs on arguments batched along a leading axis (the draws of the
# stochastic layer, which applies these rules: scg/stochastic/persample.py). A primitive's
# `batch` is EW for a broadcasting elementwise function, or a rule
# `rule(prim, args, kwargs, batched)`: `args` are the arguments as arrays, a batched one
# with its leading batch axis; `batched[i]` is the shape of one element of argument i when
# it is batched, None when the whole batch shares it. Axis arguments count the axes of one
# element. The rule returns the batched result. Each rule is given where its primitive is
# defined.


def _element_shape(a, batched):
    return shape(a) if batched is None else batched


def batch_lift(v, element_shape, rank):
    """A batched array `v` whose elements have `element_shape`, with the element rank raised
    to `rank` by unit axes after the batch axis (so it broadcasts like its elements)."""
    k = rank - len(element_shape)
    if k <= 0:
        return v
    return reshape(v, (shape(strip(v))[0],) + (1,) * k + element_shape)


def _batch_size(args, batched):
    for a, b in zip(args, batched):
        if b is not None:
            return np.shape(strip(a))[0]
    raise AssertionError("no batched argument")


def _axis_in(axis, nd):
    """An axis argument of one element as an axis of the batch (the batch axis is 0)."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd + 1 for a in axis)
    return axis % nd + 1


def batch_core_dims(*ranks):
    """The batching rule of a primitive whose array arguments have `ranks` core dimensions
    (2 for a matrix, 1 for a vector) and broadcast over the leading ones: batched arguments
    are lifted to the common leading rank, numpy's broadcasting does the rest."""
    def rule(prim, args, kwargs, batched):
        lead = max(len(_element_shape(a, b)) - r for a, b, r in zip(args, batched, ranks))
        arrays = [batch_lift(a, b, lead + r) if b is not None else a
                  for a, b, r in zip(args, batched, ranks)]
        return prim(*arrays, *args[len(ranks):], **kwargs)
    rule.axes = axes_core_dims(*ranks)  # (a primitive built with this rule takes it)
    return rule


# ---------------------------------------------------------------- axis-label rules
# Which axes of a result carry which labels of its arguments' axes. The stochastic layer
# labels the axis of each plate and follows it through every operation, as the batching
# rules above carry the draws' axis (scg/stochastic/trace.py). A primitive's `axes` is a
# rule `rule(args, kwargs, labels, shapes, out_shape)`: `labels[i]` is a tuple of frozensets
# (one per axis of argument i), or None for an argument without labels; `shapes[i]` is its
# shape (of one element, for a batched argument), `out_shape` the result's. The rule
# returns one frozenset per axis of the result. A label that an argument has and the
# result does not is one the operation combined or moved out of place: a reduction, a
# contraction, an index, a reshape across it. A label that an operation combines in one
# argument is not on the result even where another argument brings it (`strip_labels`): the
# result's entries depend on all of that axis's elements. Each rule is given where its primitive is
# defined; elementwise primitives broadcast their labels (`axes_rule`); a primitive
# without a rule has results without labels. Nothing here compares sizes to decide.
NO_LABEL = frozenset()


def strip_labels(labels, consumed):
    """Labels without the plates in `consumed` (combined by the operation somewhere)."""
    if not consumed:
        return labels
    return [label - consumed for label in labels]


def broadcast_labels(labels, shapes, out_shape):
    """The labels of a broadcast of arguments (right-aligned); a size-1 axis stretched to
    a longer one does not pass its label on (its one element is every element now)."""
    nd = len(out_shape)
    out = [NO_LABEL] * nd
    consumed = set()
    for lab, s in zip(labels, shapes):
        if not lab:
            continue
        k = nd - len(s)
        for i, label in enumerate(lab):
            if label and k + i >= 0 and s[i] == out_shape[k + i]:
                out[k + i] = out[k + i] | label
            elif label:
                consumed |= label
    return strip_labels(out, consumed)


def _axes_elementwise(args, kwargs, labels, shapes, out_shape):
    return tuple(broadcast_labels(labels, shapes, out_shape))


def axes_rule(primitive):
    """The axis-label rule of a primitive, or None (its results carry no labels)."""
    rule = getattr(primitive, "axes", None)
    if rule is None:
        batch = getattr(primitive, "batch", None)
        if batch == EW:
            return _axes_elementwise
        rule = getattr(batch, "axes", None)
    return rule


def _arg(args, kwargs, i, name, default=None):
    return args[i] if len(args) > i else kwargs.get(name, default)


def axes_core_dims(*ranks):
    """The axis-label rule of a primitive whose array arguments have `ranks` core dims and
    broadcast over the leading ones (`batch_core_dims`): the leading labels broadcast, the
    result's core axes carry none (each of its entries combines the arguments' cores)."""
    def rule(args, kwargs, labels, shapes, out_shape):
        lead = [lab[:len(lab) - r] if lab else None for lab, r in zip(labels, ranks)]
        lead_shapes = [s[:len(s) - r] for s, r in zip(shapes, ranks)]
        consumed = {p for lab, r in zip(labels, ranks) if lab
                    for label in lab[len(lab) - r:] for p in label}
        core = max(0, len(out_shape) - max(len(s) for s in lead_shapes))
        outer = out_shape[:len(out_shape) - core]
        return tuple(strip_labels(broadcast_labels(lead, lead_shapes, outer), consumed)) + \
            (NO_LABEL,) * core
    return rule


# ---------------------------------------------------------------- arithmetic
_SCALARS = (np.float64, np.int64, float, int)
_INFIX = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/"}
_PREFIX = {np.negative: "-", np.abs: "abs"}


def _inline_scalar(fn):
    """scg.jit: the arithmetic of numbers (a parameter indexed out of a vector, a step
    count) as Python's operators, numpy's scalar math: the same float64 or int64 result
    as the ufunc's, without a ufunc call's cost (a few times the arithmetic)."""
    infix, prefix = _INFIX.get(fn), _PREFIX.get(fn)

    def inline(args, kwargs, ans, exprs, named, const):
        if kwargs or type(ans) not in (np.float64, np.int64) or \
                any(type(a) not in _SCALARS for a in args):
            return None
        if infix is not None and len(exprs) == 2:
            return f"({exprs[0]} {infix} {exprs[1]})"
        if prefix is not None and len(exprs) == 1:
            return f"{prefix}({exprs[0]})"
        return None
    return inline


for _fn in (*_INFIX, *_PREFIX):
    INLINE[_fn] = _inline_scalar(_fn)

add = prim("add", np.add, batch=EW)
subtract = prim("subtract", np.subtract, batch=EW)
multiply = prim("multiply", np.multiply, batch=EW)
divide = prim("divide", np.true_divide, batch=EW)
negative = prim("negative", np.negative, batch=EW)
def _power(a, b):
    # ndarray ** b has numpy's fast paths (b = 2 is a square); np.power has not
    if type(a) is np.ndarray:
        if type(b) in _NUMBERS and b == 2 and a.size >= LARGE:
            fused = rewrites.get("square")  # (a * a on the kernel threads)
            out = fused(a) if fused is not None else None
            if out is not None:
                return out
        return a ** b
    return np.power(a, b)


def _inline_power(args, kwargs, ans, exprs, named, const):
    a, b = args
    if type(a) is np.ndarray and not (type(b) in _NUMBERS and b == 2 and a.size >= LARGE):
        return f"{exprs[0]} ** {exprs[1]}"
    return None


INLINE[_power] = _inline_power
power = prim("power", _power, batch=EW)

defvjp(add, lambda g, ans, a, b: unbroadcast(g, shape(a)),
       lambda g, ans, a, b: unbroadcast(g, shape(b)))
defvjp(subtract, lambda g, ans, a, b: unbroadcast(g, shape(a)),
       lambda g, ans, a, b: negative(unbroadcast(g, shape(b))))
defvjp(multiply, lambda g, ans, a, b: _multiply_to(g, b, shape(a)),
       lambda g, ans, a, b: _multiply_to(g, a, shape(b)))
defvjp(divide, lambda g, ans, a, b: unbroadcast(divide(g, b), shape(a)),
       lambda g, ans, a, b: unbroadcast(negative(multiply(g, divide(ans, b))), shape(b)))
defvjp(negative, lambda g, ans, a: negative(g))


def _multiply_to(g, c, target):
    """unbroadcast(g * c, target): the cotangent of a factor. A plain cotangent that spreads
    one column over a matrix (the cotangent of a sum over its rows: enumerated states'
    log-probabilities, a batch's costs) times a plain matrix, summed over the rows, is a
    product of the column with the matrix: one BLAS pass instead of a product and a sum
    (one operation under scg.jit too)."""
    if _column_times_matrix(g, c, target):
        return effects.opaque(_column_product, g, c)
    return unbroadcast(multiply(g, c), target)


def multiply_to_plain(g, c, target):
    """_multiply_to for plain arrays (the first-order twin in plain_rules.py), or values
    scg.jit's recording holds."""
    if _column_times_matrix(g, c, target):
        return effects.opaque(_column_product, g, c)
    return unbroadcast(g * c, target)


def _column_times_matrix(g, c, target):
    if not all(type(x) is np.ndarray or effects.is_held(x) for x in (g, c)):
        return False  # (differentiated again, or per draw: the primitives)
    shape_g = np.shape(g)
    return len(shape_g) == 2 and len(target) == 1 and shape_g[1] == target[0] > 1 and \
        np.shape(c) == shape_g and g.dtype == np.float64 and c.dtype == np.float64


def _column_product(g, c):
    """sum(g * c, axis=0) for matrices g and c; by BLAS when g repeats one column (a stride
    of 0 across it), as a cotangent spread over a row does."""
    if g.strides[1] == 0:
        return g[:, 0] @ c
    return _sum(np.multiply(g, c), axis=0)


def _scale(g, c):
    """g * c for a number c; a cotangent broadcast from one value (the mean of the draws)
    stays a broadcast view instead of becoming a full array."""
    if type(g) is np.ndarray and g.ndim and g.size and not any(g.strides):
        return np.broadcast_to(g.flat[0] * c, g.shape)
    return multiply(g, c) if isinstance(g, Tracer) else g * c


def _power_base(g, ans, a, b):
    if isinstance(b, (int, float)) and b == 2:
        return unbroadcast(multiply(_scale(g, 2.0), a), shape(a))
    if isinstance(b, (int, float)) and b == 0:  # x**0 is constant, also at x = 0
        return np.zeros(shape(a))
    return unbroadcast(multiply(g, multiply(b, power(a, subtract(b, 1)))), shape(a))


def _power_exponent(g, ans, a, b):
    safe_log = log(where(strip(a) > 0, a, 1.0))
    return unbroadcast(multiply(g, multiply(ans, safe_log)), shape(b))


defvjp(power, _power_base, _power_exponent)

# ---------------------------------------------------------------- elementwise
exp = prim("exp", np.exp, batch=EW)
log = prim("log", np.log, batch=EW)
log1p = prim("log1p", np.log1p, batch=EW)
expm1 = prim("expm1", np.expm1, batch=EW)
sqrt = prim("sqrt", np.sqrt, batch=EW)
square = prim("square", np.square, batch=EW)
abs_ = prim("abs", np.abs, batch=EW)
sin = prim("sin", np.sin, batch=EW)
cos = prim("cos", np.cos, batch=EW)
tan = prim("tan", np.tan, batch=EW)
tanh = prim("tanh", np.tanh, batch=EW)
arctan = prim("arctan", np.arctan, batch=EW)
sinh = prim("sinh", np.sinh, batch=EW)
cosh = prim("cosh", np.cosh, batch=EW)
logaddexp = prim("logaddexp", np.logaddexp, batch=EW)
maximum = prim("maximum", np.maximum, batch=EW)
minimum = prim("minimum", np.minimum, batch=EW)

def _log_nonnegative(x):
    if type(x) is np.ndarray and x.all():  # (no 0: no division by zero to silence)
        return np.log(x)
    with np.errstate(divide="ignore"):  # (log 0 = -inf, without numpy's warning)
        return np.log(x)


# log of probabilities that may be 0 (-inf there): smooth, no comparison on its path, so a
# pathwise draw upstream keeps its path; the derivative at 0 is 0 where nothing reaches it
log_nonnegative = prim("log_nonnegative", _log_nonnegative, batch=EW)


def _log_nonnegative_vjp(g, ans, x):
    plain = strip(x)
    if np.all(plain):  # (no 0; nan counts as not 0, as it is not == 0)
        return divide(g, x)
    at_zero = plain == 0
    reached = at_zero & (strip(g) != 0)
    return where(at_zero, np.where(reached, np.inf, 0.0), divide(g, where(at_zero, 1.0, x)))


defvjp(exp, lambda g, ans, x: multiply(g, ans))
defvjp(log, lambda g, ans, x: divide(g, x))
defvjp(log_nonnegative, _log_nonnegative_vjp)
defvjp(log1p, lambda g, ans, x: divide(g, add(1.0, x)))
defvjp(expm1, lambda g, ans, x: multiply(g, add(ans, 1.0)))
defvjp(sqrt, lambda g, ans, x: divide(multiply(0.5, g), ans))
defvjp(square, lambda g, ans, x: multiply(g, multiply(2.0, x)))
defvjp(abs_, lambda g, ans, x: multiply(g, sign(x)))
defvjp(sin, lambda g, ans, x: multiply(g, cos(x)))
defvjp(cos, lambda g, ans, x: negative(multiply(g, sin(x))))
defvjp(tan, lambda g, ans, x: multiply(g, add(1.0, square(ans))))
defvjp(tanh, lambda g, ans, x: multiply(g, subtract(1.0, square(ans))))
defvjp(arctan, lambda g, ans, x: divide(g, add(1.0, square(x))))
defvjp(sinh, lambda g, ans, x: multiply(g, cosh(x)))
defvjp(cosh, lambda g, ans, x: multiply(g, sinh(x)))
defvjp(logaddexp, lambda g, ans, a, b: unbroadcast(multiply(g, exp(subtract(a, ans))), shape(a)),
       lambda g, ans, a, b: unbroadcast(multiply(g, exp(subtract(b, ans))), shape(b)))


def _share(first, a, b):
    """Where a wins (ties split evenly): the fraction of the cotangent a receives."""
    a, b = strip(a), strip(b)
    return np.where(a == b, 0.5, (a > b) if first else (a < b)).astype(float)


defvjp(maximum, lambda g, ans, a, b: unbroadcast(multiply(g, _share(True, a, b)), shape(a)),
       lambda g, ans, a, b: unbroadcast(multiply(g, _share(True, b, a)), shape(b)))
defvjp(minimum, lambda g, ans, a, b: unbroadcast(multiply(g, _share(False, a, b)), shape(a)),
       lambda g, ans, a, b: unbroadcast(multiply(g, _share(False, b, a)), shape(b)))

# ---------------------------------------------------------------- jumps (derivative 0 a.e.)
floor = prim("floor", np.floor, "jump", batch=EW)
ceil = prim("ceil", np.ceil, "jump", batch=EW)
rint = prim("round", np.round, "jump", batch=EW)
sign = prim("sign", np.sign, "jump", batch=EW)
greater = prim("greater", np.greater, "jump", batch=EW)
greater_equal = prim("greater_equal", np.greater_equal, "jump", batch=EW)
less = prim("less", np.less, "jump", batch=EW)
less_equal = prim("less_equal", np.less_equal, "jump", batch=EW)
equal = prim("equal", np.equal, "jump", batch=EW)
not_equal = prim("not_equal", np.not_equal, "jump", batch=EW)


def _cast(x, dtype):
    return np.asarray(x).astype(dtype)


# x.astype(dtype): between floating types the value is carried over and so is its
# derivative (cast back to the input's type); to or from integers and bools it is a step
cast = prim("cast", _cast, doc="x.astype(dtype) between floating types.", batch=EW)
cast_step = prim("cast_step", _cast, "jump",
                 doc="x.astype(dtype) to or from integers or bools (no derivative).", batch=EW)
defvjp(cast, lambda g, ans, x, dtype: cast(g, _dtype(x)))


def _dtype(x):
    """x's dtype without reading its values (a recorded value's is part of its structure)."""
    v = strip(x)
    dtype = getattr(v, "dtype", None)
    return dtype if isinstance(dtype, np.dtype) else np.result_type(v)


def astype(x, dtype):
    """x.astype(dtype) of a traced value: the derivative goes through a cast between
    floating types and stops at one to or from integers or bools."""
    target = np.dtype(dtype)
    source = _dtype(x)
    if target == source:
        return x  # (traced values are never changed in place: no copy needed)
    if target.kind in "fc" and source.kind in "fc":
        return cast(x, target)
    return cast_step(x, target)
def _batch_arg_extremum(prim, args, kwargs, batched):
    if kwargs.get("axis") is None:  # over the flattened element
        flat = reshape(args[0], (-1, int(np.prod(batched[0]))))
        return prim(flat, axis=-1, keepdims=kwargs.get("keepdims", False))
    return _batch_reduction(prim, args, kwargs, batched)


argmax = prim("argmax", np.argmax, "jump", batch=_batch_arg_extremum)
argmin = prim("argmin", np.argmin, "jump", batch=_batch_arg_extremum)


def _axes_reduction(args, kwargs, labels, shapes, out_shape):
    """A reduction over `axis` (all axes for None): the reduced axes lose their labels."""
    lab = labels[0]
    if not lab:
        return (NO_LABEL,) * len(out_shape)
    reduced = _axes_tuple(_arg(args, kwargs, 1, "axis"), len(lab))
    keepdims = _arg(args, kwargs, 2, "keepdims", False)
    return tuple(NO_LABEL if i in reduced else label for i, label in enumerate(lab)
                 if keepdims or i not in reduced)


argmax.axes = argmin.axes = _axes_reduction
logical_and = prim("logical_and", np.logical_and, "jump", batch=EW)
logical_or = prim("logical_or", np.logical_or, "jump", batch=EW)
logical_not = prim("logical_not", np.logical_not, "jump", batch=EW)
logical_xor = prim("logical_xor", np.logical_xor, "jump", batch=EW)
# (|, &, ^, ~: the logical operations on booleans, bitwise on integers, as numpy's)
bitwise_and = prim("bitwise_and", np.bitwise_and, "jump", batch=EW)
bitwise_or = prim("bitwise_or", np.bitwise_or, "jump", batch=EW)
bitwise_xor = prim("bitwise_xor", np.bitwise_xor, "jump", batch=EW)
invert = prim("invert", np.invert, "jump", batch=EW)
isfinite = prim("isfinite", np.isfinite, "jump", batch=EW)
isnan = prim("isnan", np.isnan, "jump", batch=EW)
heaviside = prim("heaviside", np.heaviside, "jump", batch=EW)

stop_gradient = prim("stop_gradient", lambda x: x, "cut", batch=EW, doc="""The value of x, through which no derivative flows.

    Example:
        >>> scg.grad(lambda x: x * scg.stop_gradient(x))(3.0)
        array(3.)
    """)

# ---------------------------------------------------------------- selection
where = prim("where", np.where, batch=EW)
FRESH.add(np.where)  # (a new array always; see scg/core/lowering.py)
clip = prim("clip", np.clip, batch=EW)

defvjp(where, None,
       lambda g, ans, c, x, y: unbroadcast(where(c, g, 0.0), shape(x)),
       lambda g, ans, c, x, y: unbroadcast(where(c, 0.0, g), shape(y)))


def _clip_inside(x, lo, hi):
    x = strip(x)
    inside = np.ones(np.shape(x), dtype=bool)
    if lo is not None:
        inside = inside & (x >= strip(lo))  # not in place: the bounds may broadcast x
    if hi is not None:
        inside = inside & (x <= strip(hi))
    return inside


defvjp(clip, lambda g, ans, x, lo, hi: unbroadcast(where(_clip_inside(x, lo, hi), g, 0.0), shape(x)),
       lambda g, ans, x, lo, hi: unbroadcast(where(strip(x) < strip(lo), g, 0.0), shape(lo)),
       lambda g, ans, x, lo, hi: unbroadcast(where(strip(x) > strip(hi), g, 0.0), shape(hi)))

# ---------------------------------------------------------------- reductions
_SUM_PASSES_MIN = 512  # float64 entries from which _sum tries its passes for large arrays


def _broadcast_view(x):
    """Does the array x repeat its entries along an axis (a stride of 0 there)?"""
    return x.ndim >= 2 and 0 in x.strides and \
        any(st == 0 and n > 1 for st, n in zip(x.strides, x.shape))


def _sum(x, axis=None, keepdims=False):
    if type(x) is np.ndarray and x.dtype == np.float64 and _broadcast_view(x):
        # a broadcast (a cotangent spread over the elements): its repeated axes once
        return _sum_large(x, axis, keepdims)
    if type(x) is np.ndarray and x.size >= _SUM_PASSES_MIN and x.dtype == np.float64:
        if x.ndim >= 2:
            fast = _sum_large(x, axis, keepdims)
            if fast is not None:
                return fast
        elif x.size >= LARGE and axis in (None, 0, -1) and x.flags.c_contiguous:
            # a large vector of the tape (the costs of the draws) is summed once per
            # gradient call: the mean of the objective, then a leave-one-out baseline
            total = known_sum(x)
            if total is None:
                total = np.add.reduce(x)
                remember(x, total=total)
            return total.reshape(1) if keepdims else total
    return np.add.reduce(x, axis=axis, keepdims=keepdims)  # np.sum minus its Python wrapper


def _inline_sum(args, kwargs, ans, exprs, named, const):
    x = args[0]
    if type(x) is not np.ndarray or (x.size >= _SUM_PASSES_MIN and x.dtype == np.float64) \
            or len(args) > 1 or _broadcast_view(x):
        return None  # (the call of _sum: its passes, or a broadcast's repeated axes once)
    axis = named.get("axis", "None")
    keepdims = named.get("keepdims", "False")
    return f"{const(np.add.reduce)}({exprs[0]}, {axis}, None, None, {keepdims})"


_inline_sum.constant_settings = True
INLINE[_sum] = _inline_sum


def _sum_large(x, axis, keepdims):
    """Sums over the draws of a large cotangent, faster than numpy's reduction across a
    short inner axis: broadcast (stride-0) axes are summed once, and a reduction over the
    first or last axis, or over the leading axes, is a product with ones (BLAS). None when
    no fast path applies."""
    axes = _axes_tuple(axis, x.ndim)
    if x.ndim == 2 and axes == (0,) and x.strides[1] == 0 and x.strides[0]:
        # (one column repeated across the rows: the total of the column, repeated)
        out = np.empty((1, x.shape[1]) if keepdims else (x.shape[1],))
        out[...] = np.add.reduce(x[:, 0])
        return out
    repeated = [st == 0 and n > 1 for st, n in zip(x.strides, x.shape)]
    if any(repeated):
        small = x[tuple(slice(0, 1) if r else slice(None) for r in repeated)]
        repeat = math.prod(x.shape[a] for a in axes if repeated[a])
        small = np.ascontiguousarray(small)
        # (what is left is small: numpy's reduction, not the passes for large arrays)
        out = np.add.reduce(small, axes, None, None, True) if small.size < LARGE else \
            _sum(small, axes, True)
        if repeat != 1:
            out = out * float(repeat)
        target = tuple(1 if a in axes else n for a, n in enumerate(x.shape))
        if math.prod(target) < LARGE:  # (small: filled, cheaper than a broadcast view)
            full = np.empty(target)
            full[...] = out
        else:  # (large: a view, no memory for the repeated values)
            full = np.broadcast_to(out, target)
        return full if keepdims else full.reshape(tuple(n for a, n in enumerate(x.shape)
                                                        if a not in axes))
    if not x.flags.c_contiguous or not axes:
        return None
    if 1 < len(axes) < x.ndim and axes == tuple(range(len(axes))):  # leading axes: rows
        rows = math.prod(x.shape[:len(axes)])
        out = np.ones(rows) @ x.reshape(rows, -1)
        return out.reshape((1,) * len(axes) * keepdims + x.shape[len(axes):])
    if len(axes) != 1:
        return None
    if axes == (0,):
        out = np.ones(x.shape[0]) @ x.reshape(x.shape[0], -1)
        return out.reshape((1,) * keepdims + x.shape[1:])
    if axes == (x.ndim - 1,) and x.size // x.shape[-1] >= x.shape[-1]:
        # (many short rows; a few long ones numpy sums faster itself)
        out = x.reshape(-1, x.shape[-1]) @ np.ones(x.shape[-1])
        return out.reshape(x.shape[:-1] + (1,) * keepdims)
    return None


def _batch_reduction(prim, args, kwargs, batched):
    kw = dict(kwargs)
    kw["axis"] = _axis_in(kw.get("axis"), len(batched[0]))
    return prim(*args, **kw)


sum_ = prim("sum", _sum, batch=_batch_reduction)
sum_.rows = _rows_reduction
def _mean(x, axis=None, keepdims=False):
    # for floats the sum (np.add.reduce, as np.mean does) over the count, without np.mean's
    # wrappers; np.mean itself for the rest (it sums integers as floats)
    if getattr(x, "dtype", None) is None or x.dtype.kind != "f":
        return np.mean(x, axis=axis, keepdims=keepdims)
    return _sum(x, axis=axis, keepdims=keepdims) / _count(shape(x), axis)


mean = prim("mean", _mean, batch=_batch_reduction)
mean.rows = _rows_reduction
# numpy's own reductions, for the user's numpy calls on scg.jit's recorded values (which
# carry no derivative): a replay adds as the eager call's numpy does, to the last bit
# (_sum's passes for large arrays add in another order)
numpy_sum = prim("numpy_sum", np.sum)
numpy_mean = prim("numpy_mean", np.mean)
numpy_var = prim("numpy_var", np.var)
numpy_std = prim("numpy_std", np.std)
max_ = prim("max", np.max, batch=_batch_reduction)
min_ = prim("min", np.min, batch=_batch_reduction)
max_.rows = min_.rows = _rows_reduction
sum_.axes = mean.axes = max_.axes = min_.axes = _axes_reduction
FRESH.update((_sum, _mean))  # (new arrays, or views of new ones)
# (np.any / np.all along logical axes: per draw, a value like any other reduction)
any_ = prim("any", np.any, "jump", batch=_batch_reduction)
all_ = prim("all", np.all, "jump", batch=_batch_reduction)


def _inline_method(name):
    """scg.jit: np.all(x) or np.any(x) of a whole array as its method (the same reduction
    without np.all's Python wrapper)."""
    def inline(args, kwargs, ans, exprs, named, const):
        if kwargs or len(args) != 1 or type(args[0]) is not np.ndarray:
            return None
        return f"{exprs[0]}.{name}()"
    return inline


INLINE[np.all] = _inline_method("all")
INLINE[np.any] = _inline_method("any")
any_.axes = all_.axes = _axes_reduction


def _count(x_shape, axis):
    return math.prod([x_shape[a] for a in _axes_tuple(axis, len(x_shape))])


def _extremum_vjp(g, ans, x, axis=None, keepdims=False):
    x_shape = shape(x)
    ans_full = strip(_restore_reduced(strip(ans), x_shape, axis, keepdims))
    winners = (strip(x) == ans_full).astype(float)
    winners /= np.sum(winners, axis=axis, keepdims=True)  # ties share the cotangent
    return multiply(_restore_reduced(g, x_shape, axis, keepdims), winners)


defvjp(sum_, lambda g, ans, x, axis=None, keepdims=False:
       _restore_reduced(g, shape(x), axis, keepdims))
# divide the small cotangent, then broadcast: a view, not a pass over the input's size
defvjp(mean, lambda g, ans, x, axis=None, keepdims=False:
       _restore_reduced(divide(g, float(_count(shape(x), axis))), shape(x), axis, keepdims))
defvjp(max_, _extremum_vjp)
defvjp(min_, _extremum_vjp)

# ---------------------------------------------------------------- shapes
# The array methods are several times cheaper than the numpy functions on small arrays.
def _reshape(x, newshape):
    return x.reshape(newshape) if isinstance(x, (np.ndarray, np.generic)) else np.reshape(x, newshape)


def _transpose(x, axes=None):
    return x.transpose(axes) if type(x) is np.ndarray else np.transpose(x, axes)


def _swapaxes(x, a, b):
    return x.swapaxes(a, b) if type(x) is np.ndarray else np.swapaxes(x, a, b)


def _inline_reshape(args, kwargs, ans, exprs, named, const):
    return f"{exprs[0]}.reshape({ans.shape!r})" if type(args[0]) is np.ndarray else None


def _inline_swapaxes(args, kwargs, ans, exprs, named, const):
    x, a, b = args
    if type(x) is np.ndarray and x.ndim == 2 and type(a) is int and type(b) is int and \
            a % 2 != b % 2:
        return f"{exprs[0]}.T"  # (the same view as swapaxes: a matrix transposed)
    return None


_inline_reshape.constant_settings = _inline_swapaxes.constant_settings = True
_inline_reshape.reshapes_first = True  # (scg.jit writes a reshape of a reshape as one)
INLINE[_reshape] = _inline_reshape
INLINE[_swapaxes] = _inline_swapaxes


def _broadcast_to(x, target):
    x_shape = shape(x)
    if x_shape == target:
        return x
    if math.prod(target) <= 4096:  # small: a copy beats a view (np.broadcast_to is slow)
        out = np.empty(target, dtype=x.dtype if type(x) is np.ndarray else np.result_type(x))
        out[...] = x
        return out
    return np.broadcast_to(x, target)


def _batch_reshape(prim, args, kwargs, batched):
    x, newshape = args
    return reshape(x, (_batch_size(args, batched),) + tuple(newshape))


def _batch_transpose(prim, args, kwargs, batched):
    axes = args[1] if len(args) > 1 else kwargs.get("axes")
    nd = len(batched[0])
    if axes is None:
        axes = tuple(range(nd - 1, -1, -1))
    return transpose(args[0], (0,) + tuple(a % nd + 1 for a in axes))


def _batch_swapaxes(prim, args, kwargs, batched):
    x, a, b = args
    nd = len(batched[0])
    return swapaxes(x, a % nd + 1, b % nd + 1)


def _batch_expand_dims(prim, args, kwargs, batched):
    x, axis = args
    axes = axis if isinstance(axis, tuple) else (axis,)
    out_nd = len(batched[0]) + len(axes)
    return expand_dims(x, tuple(a % out_nd + 1 for a in axes))


def _batch_squeeze(prim, args, kwargs, batched):
    axis = args[1] if len(args) > 1 else kwargs.get("axis")
    if axis is None:
        axis = tuple(i for i, s in enumerate(batched[0]) if s == 1)
    return squeeze(args[0], _axis_in(axis, len(batched[0])))


def _batch_broadcast_to(prim, args, kwargs, batched):
    x, target = args
    return broadcast_to(batch_lift(x, batched[0], len(target)),
                        (_batch_size(args, batched),) + tuple(target))


reshape = prim("reshape", _reshape, batch=_batch_reshape)
transpose = prim("transpose", _transpose, batch=_batch_transpose)
swapaxes = prim("swapaxes", _swapaxes, batch=_batch_swapaxes)
def _expand_dims(x, axis):
    if type(axis) is int and type(x) is np.ndarray:  # (np.expand_dims normalizes axes slowly)
        s = x.shape
        k = axis if axis >= 0 else len(s) + 1 + axis
        if 0 <= k <= len(s):
            return x.reshape(s[:k] + (1,) + s[k:])
    return np.expand_dims(x, axis)


INLINE[_expand_dims] = _inline_reshape  # (a reshape to the result's shape)
expand_dims = prim("expand_dims", _expand_dims, batch=_batch_expand_dims)
squeeze = prim("squeeze", np.squeeze, batch=_batch_squeeze)
broadcast_to = prim("broadcast_to", _broadcast_to, batch=_batch_broadcast_to)
reshape.rows = _rows_reshape
broadcast_to.rows = _rows_broadcast_to


def _axes_reshape(args, kwargs, labels, shapes, out_shape):
    """An axis keeps its label when the reshape leaves it whole and in place: an output
    axis of the same length with the same number of entries before it (C order)."""
    lab, in_shape = labels[0], shapes[0]
    out = [NO_LABEL] * len(out_shape)
    if not lab:
        return tuple(out)
    before_out = [math.prod(out_shape[:k]) for k in range(len(out_shape))]
    for i, label in enumerate(lab):
        if label:
            before = math.prod(in_shape[:i])
            for k, n in enumerate(out_shape):
                if n == in_shape[i] and before_out[k] == before:
                    out[k] = label
                    break
    return tuple(out)


def _axes_transpose(args, kwargs, labels, shapes, out_shape):
    lab = labels[0] or (NO_LABEL,) * len(shapes[0])
    axes = _arg(args, kwargs, 1, "axes")
    nd = len(lab)
    order = range(nd - 1, -1, -1) if axes is None else [a % nd for a in axes]
    return tuple(lab[a] for a in order)


def _axes_swapaxes(args, kwargs, labels, shapes, out_shape):
    lab = list(labels[0] or (NO_LABEL,) * len(shapes[0]))
    a, b = args[1] % len(lab), args[2] % len(lab)
    lab[a], lab[b] = lab[b], lab[a]
    return tuple(lab)


def _axes_expand_dims(args, kwargs, labels, shapes, out_shape):
    lab = labels[0] or (NO_LABEL,) * len(shapes[0])
    axis = args[1]
    new = {a % len(out_shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    rest = iter(lab)
    return tuple(NO_LABEL if k in new else next(rest) for k in range(len(out_shape)))


def _axes_squeeze(args, kwargs, labels, shapes, out_shape):
    lab, in_shape = labels[0] or (NO_LABEL,) * len(shapes[0]), shapes[0]
    axis = _arg(args, kwargs, 1, "axis")
    gone = {i for i, n in enumerate(in_shape) if n == 1} if axis is None else \
        set(_axes_tuple(axis, len(in_shape)))
    return tuple(label for i, label in enumerate(lab) if i not in gone)


def _axes_broadcast_to(args, kwargs, labels, shapes, out_shape):
    return tuple(broadcast_labels(labels[:1], shapes[:1], out_shape))


reshape.axes = _axes_reshape
transpose.axes = _axes_transpose
swapaxes.axes = _axes_swapaxes
expand_dims.axes = _axes_expand_dims
squeeze.axes = _axes_squeeze
broadcast_to.axes = _axes_broadcast_to

defvjp(reshape, lambda g, ans, x, newshape: reshape(g, shape(x)))
defvjp(transpose, lambda g, ans, x, axes=None:
       transpose(g, None if axes is None else tuple(np.argsort([a % len(axes) for a in axes]))))
defvjp(swapaxes, lambda g, ans, x, a, b: swapaxes(g, a, b))
defvjp(expand_dims, lambda g, ans, x, axis: reshape(g, shape(x)))
defvjp(squeeze, lambda g, ans, x, axis=None: reshape(g, shape(x)))
defvjp(broadcast_to, lambda g, ans, x, target: unbroadcast(g, shape(x)))


def _concatenate(*arrays, axis=0):
    return np.concatenate(arrays, axis=axis)


def _stack(*arrays, axis=0):
    return np.stack(arrays, axis=axis)


def _batch_joined(new_axes):
    """concatenate (no new axis) / stack (one): every argument batched, the axis moved past
    the batch axis."""
    def rule(prim, args, kwargs, batched):
        n = _batch_size(args, batched)
        rank = max(len(_element_shape(a, b)) for a, b in zip(args, batched))
        arrays = [batch_lift(a, b, rank) if b is not None else broadcast_to(a, (n,) + shape(a))
                  for a, b in zip(args, batched)]
        return prim(*arrays, axis=kwargs.get("axis", 0) % (rank + new_axes) + 1)
    return rule


concatenate = prim("concatenate", _concatenate, batch=_batch_joined(0))
stack = prim("stack", _stack, batch=_batch_joined(1))


def _axes_joined(new_axes):
    """concatenate / stack: the other axes' labels broadcast; the axis joined along (and a
    new one) carries none: its entries come from several arguments."""
    def rule(args, kwargs, labels, shapes, out_shape):
        nd = len(out_shape)
        axis = kwargs.get("axis", 0) % nd
        out = [NO_LABEL] * nd
        consumed = set()
        for lab, s in zip(labels, shapes):
            if not lab:
                continue
            pad = nd - new_axes - len(s)  # (arguments of a lower rank: unit axes in front)
            lab, s = (NO_LABEL,) * pad + tuple(lab), (1,) * pad + tuple(s)
            if new_axes:
                lab, s = lab[:axis] + (NO_LABEL,) + lab[axis:], s[:axis] + (1,) + s[axis:]
            for k in range(nd):
                if k != axis and lab[k] and s[k] == out_shape[k]:
                    out[k] = out[k] | lab[k]
                elif lab[k]:
                    consumed |= lab[k]
        return tuple(strip_labels(out, consumed))
    return rule


concatenate.axes = _axes_joined(0)
stack.axes = _axes_joined(1)


def _concat_piece(i):
    def rule(g, ans, *arrays, axis=0):
        ax = axis % len(shape(ans))
        start = sum(shape(a)[ax] for a in arrays[:i])
        index = (slice(None),) * ax + (slice(start, start + shape(arrays[i])[ax]),)
        return getitem(g, index)
    return rule


def _stack_piece(i):
    def rule(g, ans, *arrays, axis=0):
        ax = axis % len(shape(ans))
        return getitem(g, (slice(None),) * ax + (i,))
    return rule


class _VariadicRules(dict):
    """VJP table for primitives with any number of array arguments."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __contains__(self, i):
        return True

    def __missing__(self, i):
        self[i] = rule = self.make(i)
        return rule


concatenate.vjps = _VariadicRules(_concat_piece)
stack.vjps = _VariadicRules(_stack_piece)

# ---------------------------------------------------------------- indexing


def _unbox(x):
    while isinstance(x, Box):
        x = x.value
    return x


class _Slot:
    """Marks where a traced index array goes in a `gather` index template."""

    scg_marker = True  # (a singleton, the same in every template: compared by identity)

    def __repr__(self):
        return "<slot>"


SLOT = _Slot()


def _fill(template, arrays):
    it = iter(arrays)
    return tuple(_as_index(next(it)) if t is SLOT else t for t in template)


def _as_index(a):
    """Draws of discrete distributions are floats holding integers: index with them.
    A float with a fractional part is refused (TracingError), never truncated."""
    if effects.is_held(a):  # (under scg.jit: the conversion and its check, one operation)
        return effects.opaque(_as_index, a) if a.dtype.kind == "f" else a
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):  # (nan and inf are refused below)
            k = a.astype(np.intp)
        if not np.array_equal(k, a):
            raise _float_index_error(a[k != a].flat[0])
        return k
    return a


def _float_index_error(value):
    return TracingError(
        f"scg.take (also x[k] and np.take_along_axis) got a float index with a fractional "
        f"part ({float(value)!r}); numpy refuses float indices, and truncating it to an integer "
        "would be a jump with zero derivative that scg cannot see, so the gradient would "
        "silently miss the jump. Convert it explicitly with np.floor(k) or np.round(k) (a "
        "jump scg knows about: it estimates across it), or index with an integer draw "
        "(scg.sample(name, scg.Categorical(...))).")


def index(x, idx):
    """x[idx] for any index; traced index arrays (per-sample draws) become arguments of
    `gather`, so that the tracers that carry them see the call."""
    idx = tuple(_unbox(i) for i in idx) if isinstance(idx, tuple) else (_unbox(idx),)
    traced = floats = False
    for i in idx:
        if type(i) in _BASIC_INDEX:  # (x[..., 0], x[:, 1:]: the common indices)
            continue
        if isinstance(i, Tracer):
            traced = True
        elif isinstance(i, (float, np.floating)) or (type(i) is np.ndarray
                                                     and i.dtype.kind == "f"):
            floats = True
    if not traced:
        if floats:  # a float with a fractional part: say why it is refused and what works
            for i in idx:
                if isinstance(i, (float, np.floating)) or (type(i) is np.ndarray
                                                           and i.dtype.kind == "f"):
                    _as_index(np.asarray(i))
        return getitem(x, idx)
    template = tuple(SLOT if isinstance(i, Tracer) else i for i in idx)
    return gather(x, template, *[i for i in idx if isinstance(i, Tracer)])


def _untake(g, index, x_shape):
    # (a per-draw index of discrete draws, floats holding integers: under scg.jit the
    # vjp of gather passes the recorded draws as they are, and they become indices here)
    index = tuple(_as_index(i) if type(i) is np.ndarray else i for i in index)
    out = np.zeros(x_shape, dtype=np.result_type(g, float))
    if all(type(i) in _BASIC_INDEX for i in index):
        out[index] = g  # a basic index selects each entry at most once
    else:
        np.add.at(out, index, g)  # repeated entries of an index array add up
    return out


_BASIC_INDEX = (int, slice, type(None), type(Ellipsis))


class _BatchedIndex:
    """A batched index array in an index tuple (its batch and the shape of one element)."""

    __slots__ = ("value", "shape")

    def __init__(self, value, element_shape):
        self.value, self.shape = value, element_shape


def _expand_ellipsis(index, nd):
    if not any(i is Ellipsis for i in index):
        return index
    k = sum(1 for i in index if i is not None and i is not Ellipsis)
    at = next(j for j, i in enumerate(index) if i is Ellipsis)
    return index[:at] + (slice(None),) * (nd - k) + index[at + 1:]


def _is_advanced(i):
    return isinstance(i, (np.ndarray, list, Tracer, _BatchedIndex))


def _check_adjacent(index):
    flags = [_is_advanced(i) for i in index]
    if any(flags):  # beside index arrays, integers are advanced indices too
        flags = [f or isinstance(i, (int, np.integer)) for f, i in zip(flags, index)]
    if True in flags:
        first = flags.index(True)
        last = len(flags) - 1 - flags[::-1].index(True)
        if not all(flags[first:last + 1]):
            raise TracingError("indexing a per-sample value with array indices separated by "
                               "slices is not supported; index in two steps")
        return first
    return None


def _move_to_front(axis, nd):
    return (axis,) + tuple(i for i in range(nd) if i != axis)


def _batch_getitem(prim, args, kwargs, batched):
    x, index = args
    index = _expand_ellipsis(index, len(batched[0]))
    for i in index:
        if type(i) not in _BASIC_INDEX:  # (integers, slices and new axes are never apart)
            _check_adjacent(index)
            break
    return getitem(x, (slice(None),) + index)


def _batch_gather(prim, args, kwargs, batched):
    x, template, *arrays = args
    slots = iter(zip(arrays, batched[2:]))
    index = []
    for t in template:  # (as _fill, with the batched index arrays marked)
        if t is SLOT:
            a, b = next(slots)
            t = _as_index(a) if b is None else _BatchedIndex(a, b)
        index.append(t)
    index = _expand_ellipsis(tuple(index), len(_element_shape(x, batched[0])))
    first = _check_adjacent(index)
    if any(not isinstance(i, slice) or i != slice(None) for i in index[:first]):
        raise TracingError("a per-sample index array may only follow full slices (x[:, a]); "
                           "index in two steps")
    n = _batch_size(args, batched)
    advanced = [i for i in index if _is_advanced(i)]
    rank = max(len(i.shape) if type(i) is _BatchedIndex else np.ndim(i) for i in advanced)
    index = tuple(_as_index(strip(batch_lift(i.value, i.shape, rank)))
                  if type(i) is _BatchedIndex else i for i in index)
    if batched[0] is None:  # shared table: the batch axis appears where the arrays were
        # (the index arrays as arguments of their own: a traced index in a tuple would
        # not be seen by the primitive's dispatch)
        arrays = [i for i in index if isinstance(i, (np.ndarray, Tracer))]
        out = gather(x, tuple(SLOT if isinstance(i, (np.ndarray, Tracer)) else i
                              for i in index), *arrays)
        return transpose(out, _move_to_front(first, ndim(out)))
    samples = np.arange(n).reshape((n,) + (1,) * rank)
    out = getitem(x, (samples,) + index)
    if first == 0:
        return out
    # numpy puts the broadcast array axes first: (n, *arrays, *sliced, *rest)
    nd = ndim(out)
    order = [0] + list(range(1 + rank, 1 + rank + first)) + list(range(1, 1 + rank)) + \
        list(range(1 + rank + first, nd))
    return transpose(out, tuple(order))


def _gather(x, template, *arrays):
    return x[_fill(template, arrays)]


def _fixed_index(template, arrays, exprs):
    """scg.jit: a gather's index when its arrays are constants of the program (the values
    of marginalized sites, a table's rows): filled in and converted to integers once, at
    the recording; None when an array is recorded (a draw)."""
    if any(_RECORDED.match(e) for e in exprs):
        return None
    return _fill(template, arrays)


def _inline_gather(args, kwargs, ans, exprs, named, const):
    index = _fixed_index(args[1], args[2:], exprs[2:])
    return None if index is None else f"{exprs[0]}[{const(index)}]"


_RECORDED = re.compile(r"v\d+$")  # (the name of a recorded value in a program's source)
def _getitem(x, index):
    return x[index]


def _inline_getitem(args, kwargs, ans, exprs, named, const):
    return f"{exprs[0]}[{exprs[1]}]" if not _holds_recorded(exprs[1]) else None


def _holds_recorded(expr):
    return re.search(r"\bv\d+\b", expr) is not None


INLINE[_gather] = _inline_gather
INLINE[_getitem] = _inline_getitem
getitem = prim("getitem", _getitem, batch=_batch_getitem)
gather = prim("gather", _gather, batch=_batch_gather)


class _LabelledIndex:
    """A per-draw index array in an index, for the axis-label rule: its labels and shape."""

    __slots__ = ("labels", "shape")

    def __init__(self, labels, index_shape):
        self.labels, self.shape = labels, tuple(index_shape)


def _index_labels(lab, in_shape, index, out_shape):
    """The labels of x[index] (numpy's rules: integers and arrays take their axes; array
    indices broadcast together, their axes where they stand when they are adjacent, in
    front otherwise). An axis keeps its label only under a full slice ':'."""
    nd = len(in_shape)
    lab = lab or (NO_LABEL,) * nd
    index = index if isinstance(index, tuple) else (index,)
    arrays = [isinstance(i, (np.ndarray, list, _LabelledIndex)) for i in index]
    consumed = [0 if i is None or i is Ellipsis else
                (np.ndim(i) if a and np.asarray(i).dtype == bool and
                 not isinstance(i, _LabelledIndex) else 1)
                for i, a in zip(index, arrays)]
    if any(i is Ellipsis for i in index):
        at = next(j for j, i in enumerate(index) if i is Ellipsis)
        fill = nd - sum(consumed)
        index = index[:at] + (slice(None),) * fill + index[at + 1:]
        arrays = arrays[:at] + [False] * fill + arrays[at + 1:]
        consumed = consumed[:at] + [1] * fill + consumed[at + 1:]
    advanced = any(arrays)
    pieces, adv, axis = [], [], 0  # pieces: lists of labels, or "adv" for an array index
    taken = set()  # the plates of the axes the index takes
    for i, is_array, k in zip(index, arrays, consumed):
        if i is None:
            pieces.append([NO_LABEL])
            continue
        if isinstance(i, slice):
            n = in_shape[axis]
            full = i.indices(n) == (0, n, 1)
            pieces.append([lab[axis] if full else NO_LABEL])
            if not full:
                taken |= lab[axis]
            axis += k
            continue
        for j in range(axis, axis + k):
            taken |= lab[j]
        if is_array or advanced:  # (beside arrays, integers are array indices too)
            if isinstance(i, _LabelledIndex):
                adv.append((i.labels, i.shape))
            elif is_array and np.asarray(i).dtype == bool:
                adv.append((None, (int(np.count_nonzero(i)),)))
            else:
                adv.append((None, np.shape(i)))
            if not pieces or pieces[-1] != "adv":
                pieces.append("adv")
        axis += k
    pieces.extend([label] for label in lab[axis:])
    if adv:
        shape_ = np.broadcast_shapes(*[s for _, s in adv])
        group = broadcast_labels([a for a, _ in adv], [s for _, s in adv], shape_)
        if pieces.count("adv") > 1:  # not adjacent: the array axes go in front
            pieces = [group] + [p for p in pieces if p != "adv"]
        else:
            pieces = [group if p == "adv" else p for p in pieces]
    out = tuple(strip_labels([label for p in pieces for label in p], taken))
    return out if len(out) == len(out_shape) else (NO_LABEL,) * len(out_shape)


def _axes_getitem(args, kwargs, labels, shapes, out_shape):
    return _index_labels(labels[0], shapes[0], args[1], out_shape)


def _axes_gather(args, kwargs, labels, shapes, out_shape):
    slots = iter(zip(labels[2:], shapes[2:]))
    index = []
    for t in args[1]:
        if t is SLOT:
            lab, s = next(slots)
            t = _LabelledIndex(lab, s)
        index.append(t)
    return _index_labels(labels[0], shapes[0], tuple(index), out_shape)


getitem.axes = _axes_getitem
gather.axes = _axes_gather


def take(x, indices, axis=None):
    """np.take(x, indices, axis) for traced tables or traced (per-draw) indices.

    numpy does not let a traced index reach scg when the table is a plain array
    (`table[k]`, `np.take(table, k)`); inside a model, write `scg.take(table, k, axis=0)`.

    Example:
        >>> k = scg.sample("k", scg.Categorical(probs=np.ones(3) / 3))
        >>> row = scg.take(W, k, axis=0)     # W[k] for every draw
    """
    if axis is None:
        return index(reshape(x, (-1,)), (indices,))
    return index(x, (slice(None),) * (axis % ndim(x)) + (indices,))
untake = prim("untake", _untake)
# (gather's transpose with the traced index arrays as arguments of their own, as gather
# takes them: a tracer of those arrays, scg.jit's recorded draws, sees the call)
def _untake_at(g, template, x_shape, *arrays):
    return _untake(g, _fill(template, arrays), x_shape)


def _inline_untake_at(args, kwargs, ans, exprs, named, const):
    index = _fixed_index(args[1], args[3:], exprs[3:])
    return None if index is None else f"{const(_untake)}({exprs[0]}, {const(index)}, {exprs[2]})"


INLINE[_untake_at] = _inline_untake_at
untake_at = prim("untake_at", _untake_at)


def _batch_take_along_axis(prim, args, kwargs, batched):
    x, idx = args[0], args[1]
    axis = args[2] if len(args) > 2 else kwargs.get("axis", -1)
    n, rank = _batch_size(args, batched), len(_element_shape(x, batched[0]))
    # a shared table is broadcast over the batch (a view), so its gradient sums over it
    table = batch_lift(x, batched[0], rank) if batched[0] is not None else \
        broadcast_to(x, (n,) + shape(x))
    idx = strip(batch_lift(idx, batched[1], rank)) if batched[1] is not None else \
        np.expand_dims(idx, 0)
    return take_along_axis(table, _as_index(np.asarray(idx)), axis % rank + 1)


take_along_axis = prim("take_along_axis", lambda x, indices, axis=-1: np.take_along_axis(
    x, _as_index(np.asarray(indices)), axis), batch=_batch_take_along_axis)


def _axes_take_along_axis(args, kwargs, labels, shapes, out_shape):
    """Entry j along the axis is x's entry at indices[j]: it has the indices' label there,
    never x's (it may come from any of x's entries along the axis)."""
    nd = len(out_shape)
    axis = _arg(args, kwargs, 2, "axis", -1) % nd
    padded = []
    for lab, s in zip(labels[:2], shapes[:2]):
        lab = (NO_LABEL,) * (nd - len(s)) + tuple(lab or (NO_LABEL,) * len(s))
        padded.append((lab, (1,) * (nd - len(s)) + tuple(s)))
    (lx, sx), (li, si) = padded
    blank = [lab[:axis] + (NO_LABEL,) + lab[axis + 1:] for lab in (lx, li)]
    out = broadcast_labels(blank, [sx, si], out_shape)
    out[axis] = li[axis] if si[axis] == out_shape[axis] else NO_LABEL
    return tuple(strip_labels(out, lx[axis]))


take_along_axis.axes = _axes_take_along_axis


def _put_along_axis_add(g, indices, x_shape, axis):
    """The cotangent of take_along_axis: g added back at the indices (repeats add up),
    then summed over the axes along which the table was broadcast."""
    axis = axis % len(x_shape)
    g_shape = np.shape(g)
    full = tuple(x_shape[i] if i == axis else g_shape[i] for i in range(len(x_shape)))
    out = np.zeros(full, dtype=np.result_type(g, float))
    grid = list(np.ix_(*[np.arange(s) for s in g_shape]))
    grid[axis] = np.broadcast_to(_as_index(np.asarray(indices)), g_shape)
    if g_shape[axis] == 1:
        # one index per position: no repeats to add up, so a put (5x faster than
        # np.add.at); 0.0 + g as np.add.at adds, so a -0.0 of g gives 0.0 as there
        np.put_along_axis(out, grid[axis], np.add(g, 0.0), axis)
    else:
        np.add.at(out, tuple(grid), g)
    broadcast = tuple(i for i in range(len(x_shape)) if x_shape[i] == 1 and full[i] != 1)
    return np.add.reduce(out, axis=broadcast, keepdims=True) if broadcast else out


put_along_axis_add = prim("put_along_axis_add", _put_along_axis_add)
FRESH.add(_put_along_axis_add)

def _take_rows_vjp(g, ans, x, start, stop):
    if isinstance(g, Tracer) and not type(g).floor:  # (derivatives of higher order: whole)
        return rows_placed(g, start, stop, shape(x))
    return Rows(g, start, stop, shape(x))


take_rows = prim("take_rows", lambda x, start, stop: x[start:stop], doc="""x[start:stop]
along the first axis, whose derivative is taken on those rows only: the backward pass keeps
the cotangent of x zero off them (`Rows`, scg/core/tape.py), through the operations that act
on each row apart.""")
defvjp(take_rows, _take_rows_vjp)

defvjp(getitem, lambda g, ans, x, index: untake(g, index, shape(x)))
defvjp(untake, lambda g, ans, y, index, x_shape: getitem(g, index))
defvjp(gather, lambda g, ans, x, template, *arrays: untake_at(g, template, shape(x), *arrays))
defvjp(untake_at, lambda g, ans, y, template, x_shape, *arrays: gather(g, template, *arrays))
defvjp(take_along_axis, lambda g, ans, x, indices, axis:
       put_along_axis_add(g, indices, shape(x), axis))
defvjp(put_along_axis_add, lambda g, ans, y, indices, x_shape, axis:
       take_along_axis(g, indices, axis))

# ---------------------------------------------------------------- linear algebra
def _by_dot(a, b):
    # vectors and matrices: .dot is np.matmul's product with less overhead on small
    # arrays (0.3 against 0.8 us for a (8, 10) matrix times a vector)
    return type(a) is np.ndarray and type(b) is np.ndarray and 0 < a.ndim <= 2 and \
        0 < b.ndim <= 2


def _matmul(a, b, out=None):
    if _by_dot(a, b):
        return a.dot(b) if out is None else _dot_into(a, b, out)
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim > 2 and b.ndim == 2
            and a.size and a.flags.c_contiguous):
        # stacked rows times one matrix: one product of all the rows (np.matmul makes one
        # small product per leading index: 10x to 20x slower for (512, 8, 33) @ (33, 64))
        rows = a.reshape(-1, a.shape[-1])
        if out is not None:
            _dot_into(rows, b, out.reshape(-1, b.shape[1]))
            return out
        return rows.dot(b).reshape(a.shape[:-1] + (b.shape[1],))
    if out is not None and type(out) is np.ndarray and out.dtype == np.result_type(a, b):
        return np.matmul(a, b, out=out)  # (not a fresh product copied: a large one is
    return _into(out, np.matmul(a, b))   # fresh memory, page faults and all, every call)


def _dot_into(a, b, out):
    """a.dot(b) written into `out` (C-contiguous, the product's shape and dtype): the same
    BLAS call; a product of another dtype is computed apart and copied."""
    if out.dtype == np.result_type(a, b) and out.shape == a.shape[:-1] + b.shape[1:]:
        a.dot(b, out=out)
        return out
    return _into(out, a.dot(b))


def _inline_matmul(args, kwargs, ans, exprs, named, const):
    return f"{exprs[0]}.dot({exprs[1]})" if _by_dot(*args) else None


INLINE[_matmul] = _inline_matmul


def _batch_matmul(prim, args, kwargs, batched):
    (a, b), (ba, bb) = args, batched
    sa, sb = _element_shape(a, ba), _element_shape(b, bb)
    # one side shared and at most a matrix: numpy's own broadcasting of the stacked side
    # is the product element by element (draws (n, k) times weights (k,) or (k, p))
    if bb is None and len(sa) >= 1 and 1 <= len(sb) <= 2:
        return matmul(a, b)
    if ba is None and len(sb) >= 2 and 1 <= len(sa) <= 2:
        return matmul(a, b)
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:  # (k,) -> (1, k), batched or not
        a, sa = expand_dims(a, -2), (1,) + sa
    if b_vec:
        b, sb = expand_dims(b, -1), sb + (1,)
    rank = max(len(sa), len(sb))
    out = matmul(batch_lift(a, sa, rank) if ba is not None else a,
                 batch_lift(b, sb, rank) if bb is not None else b)
    if b_vec:
        out = squeeze(out, -1)
    if a_vec:
        out = squeeze(out, -1 if b_vec else -2)
    return out


matmul = prim("matmul", _matmul, batch=_batch_matmul)
matmul.rows = _rows_matmul
FRESH.add(_matmul)
WRITES_OUT.add(_matmul)


def _axes_matmul(args, kwargs, labels, shapes, out_shape):
    """The contracted axis loses its labels; the stacks' axes broadcast; a matrix's rows
    (of a) and columns (of b) keep theirs."""
    (sa, sb) = shapes[:2]
    la = labels[0] or (NO_LABEL,) * len(sa)
    lb = labels[1] or (NO_LABEL,) * len(sb)
    if len(sa) == 1 and len(sb) == 1:
        return ()
    contracted = la[-1] | (lb[-2] if len(sb) > 1 else lb[-1])
    if len(sa) == 1:
        out = broadcast_labels([lb[:-2]], [sb[:-2]], out_shape[:-1]) + [lb[-1]]
    elif len(sb) == 1:
        out = list(la[:-1])
    else:
        stack = broadcast_labels([la[:-2], lb[:-2]], [sa[:-2], sb[:-2]], out_shape[:-2])
        out = stack + [la[-2], lb[-1]]
    return tuple(strip_labels(out, contracted))


matmul.axes = _axes_matmul


def _matmul_a(g, ans, a, b):
    sa, nb = shape(a), ndim(b)
    if nb == 1:
        if len(sa) == 1:
            return multiply(g, b)
        return unbroadcast(multiply(expand_dims(g, -1), b), sa)
    if len(sa) == 1:
        return unbroadcast(squeeze(matmul(b, expand_dims(g, -1)), -1), sa)
    return unbroadcast(matmul(g, swapaxes(b, -1, -2)), sa)


def _matmul_b(g, ans, a, b):
    na, sb = ndim(a), shape(b)
    if na == 1:
        if len(sb) == 1:
            return multiply(g, a)
        return unbroadcast(multiply(expand_dims(a, -1), expand_dims(g, -2)), sb)
    if len(sb) == 1:
        return unbroadcast(squeeze(matmul(swapaxes(a, -1, -2), expand_dims(g, -1)), -1), sb)
    if len(sb) == 2 and na > 2:  # a stack times a shared matrix: one product over all rows
        k, n = sb
        return matmul(transpose(reshape(a, (-1, k))), reshape(g, (-1, n)))
    return unbroadcast(matmul(swapaxes(a, -1, -2), g), sb)


defvjp(matmul, _matmul_a, _matmul_b)


def dot(a, b):
    """np.dot for the cases that are matrix products or scalings."""
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(a) <= 2 and ndim(b) <= 2:
        return matmul(a, b)
    raise TypeError("scg supports np.dot of arrays with at most 2 dimensions; "
                    "use np.matmul or np.einsum for higher ranks")


def _parse_einsum(subscripts, shapes):
    """Explicit subscripts with '...' replaced by spare letters: (input_subs, output_sub).

    Repeated letters are kept as they are (a trace "ii->", a diagonal "ii->i").
    """
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins, out = subscripts, None
    ins = ins.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"np.einsum subscripts {subscripts!r} name {len(ins)} operand(s), "
                         f"but {len(shapes)} were given")
    used = set(subscripts) - set(".,->")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    n_ell = max((len(s) - (len(i) - 3) for i, s in zip(ins, shapes) if "..." in i), default=0)
    ell = "".join(spare[:n_ell])
    parsed = []
    for i, s in zip(ins, shapes):
        if "..." in i:
            k = len(s) - (len(i) - 3)
            i = i.replace("...", ell[n_ell - k:] if k else "")
        parsed.append(i)
    if out is None:
        letters = "".join(parsed)
        out = ell + "".join(sorted(c for c in set(letters) - set(ell) if letters.count(c) == 1))
    else:
        out = out.replace("...", ell)
    return parsed, out


_SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def einsum_arguments(args):
    """(subscripts, operands) of an np.einsum call in either of numpy's forms:
    `einsum("ij,jk->ik", a, b)` or the interleaved `einsum(a, [0, 1], b, [1, 2], [0, 2])`."""
    if isinstance(args[0], str):
        return args[0], args[1:]
    out = args[-1] if len(args) % 2 else None  # an odd count ends with the output sublist
    pairs = args[:len(args) - len(args) % 2]
    operands, subs = pairs[0::2], pairs[1::2]

    def letters(sublist):
        return "".join("..." if s is Ellipsis else _SUBLIST_LETTERS[s] for s in sublist)

    subscripts = ",".join(letters(s) for s in subs)
    if out is not None:
        subscripts += "->" + letters(out)
    return subscripts, tuple(operands)


def _einsum(subscripts, *operands):
    return np.einsum(subscripts, *operands)


def _batch_einsum(prim, args, kwargs, batched):
    subscripts, *operands = args
    ins, out = _parse_einsum(subscripts, [_element_shape(o, b)
                                          for o, b in zip(operands, batched[1:])])
    s = next(c for c in "zyxwvutsrqponmlkjihgfedcba" if c not in "".join(ins) + out)
    ins = [s + i if b is not None else i for i, b in zip(ins, batched[1:])]
    return einsum(",".join(ins) + "->" + s + out, *operands)


einsum = prim("einsum", _einsum, batch=_batch_einsum)


def _axes_einsum(args, kwargs, labels, shapes, out_shape):
    """An output letter has the labels of its operands' axes of that letter (of its full
    length); a letter summed away takes its labels with it."""
    ins, out = _parse_einsum(args[0], shapes[1:])
    result = [NO_LABEL] * len(out)
    consumed = set()
    for sub, lab, s in zip(ins, labels[1:], shapes[1:]):
        if not lab:
            continue
        for c, label, n in zip(sub, lab, s):
            k = out.find(c)
            if label and k >= 0 and n == out_shape[k]:
                result[k] = result[k] | label
            elif label:
                consumed |= label
    return tuple(strip_labels(result, consumed))


einsum.axes = _axes_einsum


def _einsum_piece(i):
    """The cotangent of operand i: g times the other operands, summed over every index
    not in operand i. A letter repeated in operand i (a diagonal, "ii") gets a fresh letter
    for each repeat and an identity matrix tying it to the first, so the cotangent sits on
    the diagonal; it is itself an einsum, so derivatives of any order follow."""
    def rule(g, ans, subscripts, *operands):
        shapes = [shape(o) for o in operands]
        ins, out = _parse_einsum(subscripts, shapes)
        target, x_shape = ins[i - 1], shapes[i - 1]
        sizes = {}  # each letter's size, the largest where numpy broadcast a size-1 axis
        for sub, s in zip(ins, shapes):
            for c, n in zip(sub, s):
                sizes[c] = max(sizes.get(c, 1), n)
        subs = [out] + [s for j, s in enumerate(ins) if j != i - 1]
        args = [g] + [o for j, o in enumerate(operands) if j != i - 1]
        present = {}  # the letters the cotangent's einsum already has, and their sizes
        for sub, s in zip(subs, [shape(g)] + [s for j, s in enumerate(shapes) if j != i - 1]):
            for c, n in zip(sub, s):
                present[c] = max(present.get(c, 1), n)
        fresh = (c for c in _SUBLIST_LETTERS if c not in sizes)
        result = ""
        for c in target:
            if c in result:  # a repeat: a fresh letter, tied to c by an identity matrix
                d = next(fresh)
                subs.append(c + d)
                args.append(np.eye(sizes[c]))
                present[c] = present[d] = sizes[d] = sizes[c]
                c = d
            result += c
        # Indices summed in this operand only, or along which the others were broadcast
        # from size 1: the cotangent is constant along them.
        constant = [c for c in dict.fromkeys(result) if c not in present
                    or present[c] < sizes[c]]
        if constant:
            subs.append("".join(constant))
            args.append(np.ones([sizes[c] for c in constant]))
        # Size-1 dimensions of this operand may have been broadcast: sum them back.
        return unbroadcast(einsum(",".join(subs) + "->" + result, *args), x_shape)
    return rule


class _EinsumRules(_VariadicRules):
    """Argument 0 is the subscripts string, which has no derivative."""

    def __contains__(self, i):
        return i > 0


einsum.vjps = _EinsumRules(_einsum_piece)

# ---------------------------------------------------------------- stable helpers


def _sigmoid(x):
    small = rewrites.get("sigmoid")
    if small is not None:
        out = small(x)
        if out is not None:
            return out
    # exp(-x) overflows to inf for x < -709, and 1 / (1 + inf) = 0 is then the right answer.
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(np.negative(x, dtype=float)))


def _softplus(x, out=None):
    # = logaddexp(x, 0): one call wins on small arrays, but per element np.logaddexp is
    # several times slower than this chain of vectorized ufuncs.
    if getattr(x, "size", 1) < 128:
        return _into(out, np.logaddexp(x, 0.0))
    if type(x) is not np.ndarray or x.dtype != np.float64:
        return _into(out, np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))))
    # the same operations on one temporary, the result into `out` if given
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    out = np.maximum(x, 0.0, out=out)
    np.add(out, t, out=out)
    return out


def _relu(x, out=None):
    return np.maximum(x, 0.0, out=out)


def _logsumexp(x, axis=None, keepdims=False):
    # (np.max and np.sum without their Python wrappers: the same reductions)
    x = np.asarray(x, dtype=float)
    m = np.maximum.reduce(x, axis, None, None, True)
    finite = np.isfinite(m)
    if finite.all():  # (then every sum is at least 1: no log of 0 to silence)
        out = np.log(np.add.reduce(np.exp(x - m), axis, None, None, True)) + m
    else:
        m = np.where(finite, m, 0.0)
        with np.errstate(divide="ignore"):  # all entries -inf: the answer is -inf
            out = np.log(np.add.reduce(np.exp(x - m), axis, None, None, True)) + m
    return out if keepdims else out.squeeze(axis) if axis is not None else out.reshape(())


def _log_softmax(x, axis=-1, out=None):
    fused = rewrites.get("log_softmax")  # (one compiled pass over the rows)
    if fused is not None:
        ans = fused(x, axis, out)
        if ans is not None:
            return ans
    return _into(out, x - _logsumexp(x, axis=axis, keepdims=True))


def _into(out, ans):
    """ans, or written into `out` (a function of WRITES_OUT, scg/core/lowering.py)."""
    if out is None:
        return ans
    out[...] = ans
    return out


def _softmax(x, axis=-1):
    return np.exp(_log_softmax(x, axis=axis))


sigmoid = prim("sigmoid", _sigmoid, doc="1 / (1 + exp(-x)), finite and without overflow for any x.", batch=EW)
softplus = prim("softplus", _softplus, doc="log(1 + exp(x)), computed stably.", batch=EW)
relu = prim("relu", _relu, doc="max(x, 0); its derivative at 0 is taken as 0.", batch=EW)


def _batch_along_axis(prim, args, kwargs, batched):  # softmax, log_softmax
    return prim(args[0], axis=_axis_in(kwargs.get("axis", -1), len(batched[0])))


logsumexp = prim("logsumexp", _logsumexp, batch=_batch_reduction,
                 doc="log(sum(exp(x), axis)), shifted by the maximum; keyword axis, keepdims.")
softmax = prim("softmax", _softmax, batch=_batch_along_axis,
               doc="exp(x) / sum(exp(x), axis), stably; keyword axis=-1.")
log_softmax = prim("log_softmax", _log_softmax, batch=_batch_along_axis,
                   doc="x - logsumexp(x, axis), stably; keyword axis=-1.")


def _axes_along_axis(args, kwargs, labels, shapes, out_shape):
    """softmax, log_softmax: every entry along the axis depends on all of them."""
    lab = labels[0] or (NO_LABEL,) * len(shapes[0])
    axis = _arg(args, kwargs, 1, "axis", -1) % len(lab)
    return tuple(NO_LABEL if i == axis else label for i, label in enumerate(lab))


logsumexp.axes = _axes_reduction
logsumexp.rows = _rows_reduction
softmax.rows = log_softmax.rows = _rows_along_axis
softmax.axes = log_softmax.axes = _axes_along_axis
FRESH.update((_logsumexp, _softmax, _log_softmax, _softplus, _relu))
WRITES_OUT.update((_softplus, _relu))
WRITES_OUT.add(_log_softmax)

defvjp(sigmoid, lambda g, ans, x: multiply(g, multiply(ans, subtract(1.0, ans))))
# sigmoid(x) = 1 - exp(-softplus(x)) = -expm1(-ans): exact at both ends, x = -inf and +inf
defvjp(softplus, lambda g, ans, x: negative(multiply(g, expm1(negative(ans)))))
defvjp(relu, lambda g, ans, x: where(strip(ans) > 0.0, g, 0.0))  # 0 where x <= 0 or x is nan
defvjp(logsumexp, lambda g, ans, x, axis=None, keepdims=False:
       multiply(_restore_reduced(g, shape(x), axis, keepdims),
                exp(subtract(x, _restore_reduced(ans, shape(x), axis, keepdims)))))
defvjp(softmax, lambda g, ans, x, axis=-1:
       multiply(ans, subtract(g, sum_(multiply(g, ans), axis=axis, keepdims=True))))
defvjp(log_softmax, lambda g, ans, x, axis=-1:
       subtract(g, multiply(exp(ans), sum_(g, axis=axis, keepdims=True))))
