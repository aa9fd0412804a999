"""NumPy dispatch: plain numpy calls on traced values are routed to scg primitives.

`UFUNCS` and `FUNCTIONS` map numpy callables to scg implementations; any
tracer class gets the numpy protocol and Python operators from
`array_methods`. A numpy function with no entry raises TypeError.
"""

import operator

import numpy as np

from ..core import effects
from ..core.tape import Tracer, strip
from ..errors import TracingError
from . import rules as R


def _identity(x):
    return x


UFUNCS = {
    np.add: R.add, np.subtract: R.subtract, np.multiply: R.multiply,
    np.true_divide: R.divide, np.negative: R.negative, np.positive: _identity,
    np.power: R.power, np.float_power: R.power, np.square: R.square, np.sqrt: R.sqrt,
    np.reciprocal: lambda x: R.divide(1.0, x),
    np.exp: R.exp, np.log: R.log, np.log1p: R.log1p, np.expm1: R.expm1,
    np.absolute: R.abs_, np.fabs: R.abs_,
    np.sin: R.sin, np.cos: R.cos, np.tan: R.tan, np.tanh: R.tanh, np.arctan: R.arctan,
    np.sinh: R.sinh, np.cosh: R.cosh,
    np.logaddexp: R.logaddexp, np.maximum: R.maximum, np.minimum: R.minimum,
    np.matmul: R.matmul,
    np.floor: R.floor, np.ceil: R.ceil, np.rint: R.rint, np.sign: R.sign,
    np.greater: R.greater, np.greater_equal: R.greater_equal, np.less: R.less,
    np.less_equal: R.less_equal, np.equal: R.equal, np.not_equal: R.not_equal,
    np.logical_and: R.logical_and, np.logical_or: R.logical_or, np.logical_not: R.logical_not,
    np.logical_xor: R.logical_xor, np.bitwise_and: R.bitwise_and, np.bitwise_or: R.bitwise_or,
    np.bitwise_xor: R.bitwise_xor, np.invert: R.invert,
    np.isfinite: R.isfinite, np.isnan: R.isnan, np.heaviside: R.heaviside,
}


def _reject(name, **given):
    bad = [k for k, v in given.items() if v is not None and v is not False]
    if bad:
        raise TypeError(f"scg's np.{name} on traced values does not support {', '.join(bad)}=")


def _axis(axis):
    """An axis argument as the rules take it: an int or a tuple of ints (numpy also takes
    lists and numpy integers)."""
    if isinstance(axis, np.integer):
        return int(axis)
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) if isinstance(a, np.integer) else a for a in axis)
    return axis


def _reduction(p, name):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        if dtype is not None or out is not None or initial is not None or where is not None:
            _reject(name, dtype=dtype, out=out, initial=initial, where=where)
        if axis is None and not keepdims:
            return p(a)  # (the full reduction, the usual one, without keyword arguments)
        return p(a, axis=_axis(axis), keepdims=bool(keepdims))
    return impl


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    _reject("var", dtype=dtype, out=out, **kw)
    axis = _axis(axis)
    centered = R.subtract(a, R.mean(a, axis=axis, keepdims=True))
    count = R._count(R.shape(a), axis)
    total = R.sum_(R.square(centered), axis=axis, keepdims=bool(keepdims))
    return R.divide(total, float(count - ddof))


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return R.sqrt(_var(a, axis, dtype, out, ddof, keepdims, **kw))


def _numpy_spread(p, name):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        _reject(name, dtype=dtype, out=out, **kw)
        return p(a, axis=_axis(axis), ddof=ddof, keepdims=bool(keepdims))
    return impl


# The reductions whose rules add in another order than numpy (large arrays): on a recorded
# value of scg.jit (no derivative), numpy's own, as the eager call ran them
NUMPY_OWN = {np.sum: _reduction(R.numpy_sum, "sum"), np.mean: _reduction(R.numpy_mean, "mean"),
             np.var: _numpy_spread(R.numpy_var, "var"), np.std: _numpy_spread(R.numpy_std, "std")}


def _where(condition, x=None, y=None):
    if x is None and y is None:
        return np.nonzero(strip(condition))
    return R.where(condition, x, y)


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    _reject("clip", out=out, **kw)
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    return R.clip(a, lo, hi)


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    _reject("reshape", order=None if order == "C" else order, copy=copy)
    shape = newshape if shape is None else shape
    return R.reshape(a, (shape,) if isinstance(shape, int) else tuple(shape))


def _transpose(a, axes=None):
    return R.transpose(a, None if axes is None else tuple(axes))


def _moveaxis(a, source, destination):
    nd = R.ndim(a)
    order = [i for i in range(nd) if i != source % nd]
    order.insert(destination % nd, source % nd)
    return R.transpose(a, tuple(order))


def _concatenate(arrays, axis=0, out=None, **kw):
    _reject("concatenate", out=out, **kw)
    return R.concatenate(*arrays, axis=axis)


def _stack(arrays, axis=0, out=None, **kw):
    _reject("stack", out=out, **kw)
    return R.stack(*arrays, axis=axis)


def _expand_dims(a, axis):
    return R.expand_dims(a, _axis(axis))


def _squeeze(a, axis=None):
    return R.squeeze(a, _axis(axis))


def _broadcast_to(array, shape, subok=False):
    return R.broadcast_to(array, (shape,) if isinstance(shape, int) else tuple(shape))


def _round(a, decimals=0, out=None):
    _reject("round", out=out)
    if decimals:
        scale = 10.0 ** decimals
        return R.divide(R.rint(R.multiply(a, scale)), scale)
    return R.rint(a)


def _argext(p, name):
    def impl(a, axis=None, out=None, *, keepdims=False):
        _reject(name, out=out)
        return p(a, axis=axis, keepdims=keepdims)
    return impl


def _take_along_axis(arr, indices, axis=-1):
    return R.take_along_axis(arr, indices, axis)


def _einsum(*args, **kw):
    _reject("einsum", **{k: v for k, v in kw.items() if k != "optimize"})
    subscripts, operands = R.einsum_arguments(args)
    return R.einsum(subscripts, *operands)


def _read(x):
    """The plain value of x (under scg.jit, read as a Python value: a guard)."""
    return effects.read(x, "it was inspected by a numpy function")


def _inspect(fn):
    """Functions that only read values (shapes, tests): applied to the untraced values."""
    def impl(*args, **kwargs):
        return fn(*[_read(a) for a in args], **{k: _read(v) for k, v in kwargs.items()})
    return impl


FUNCTIONS = {
    np.sum: _reduction(R.sum_, "sum"), np.mean: _reduction(R.mean, "mean"),
    np.max: _reduction(R.max_, "max"), np.min: _reduction(R.min_, "min"),
    np.amax: _reduction(R.max_, "max"), np.amin: _reduction(R.min_, "min"),
    np.var: _var, np.std: _std,
    np.where: _where, np.clip: _clip, np.dot: R.dot, np.einsum: _einsum,
    np.reshape: _reshape, np.transpose: _transpose, np.swapaxes: R.swapaxes,
    np.moveaxis: _moveaxis, np.concatenate: _concatenate, np.stack: _stack,
    np.expand_dims: _expand_dims, np.squeeze: _squeeze, np.broadcast_to: _broadcast_to,
    np.round: _round, np.around: _round,
    np.argmax: _argext(R.argmax, "argmax"), np.argmin: _argext(R.argmin, "argmin"),
    np.take_along_axis: _take_along_axis,
    np.ravel: lambda a, order="C": R.reshape(a, (-1,)),
    np.logaddexp: R.logaddexp,
}
FUNCTIONS[np.shape] = R.shape
FUNCTIONS[np.ndim] = R.ndim
FUNCTIONS[np.size] = lambda a, axis=None: int(np.prod(R.shape(a))) if axis is None else R.shape(a)[axis]
FUNCTIONS[np.take] = lambda a, indices, axis=None, out=None, mode="raise": R.take(a, indices, axis)
FUNCTIONS[np.any] = _reduction(R.any_, "any")
FUNCTIONS[np.all] = _reduction(R.all_, "all")
for _fn in (np.isclose, np.allclose,
            np.array_equal, np.nonzero, np.count_nonzero):
    FUNCTIONS[_fn] = _inspect(_fn)


def _like(fn):
    """np.zeros_like and the like: they read the shape and dtype of their first argument,
    not its values (so that a recorded value of scg.jit is not read)."""
    def impl(a, *args, **kwargs):
        plain = strip(a)
        if isinstance(plain, Tracer):
            plain = np.empty(plain.shape, dtype=plain.dtype)
        return fn(plain, *[_read(x) for x in args], **{k: _read(v) for k, v in kwargs.items()})
    return impl


for _fn in (np.zeros_like, np.ones_like, np.full_like, np.empty_like):
    FUNCTIONS[_fn] = _like(_fn)


def _no_rule(name, value=None):
    """The TypeError for a numpy function without a rule, called on `value`."""
    if _per_draw(value):
        return TypeError(
            f"scg has no rule for numpy function '{name}' and will not guess one; here it was "
            "given a value that differs between draws. Wrap the code in scg.blackbox(fn): fn "
            "receives the values of all draws as arrays with a leading axis of length n, and "
            "its output has no derivative (sites upstream are then estimated by the score "
            "function). Or write it with supported functions (docs/autodiff.md, 'Supported "
            "numpy').")
    return TypeError(
        f"scg has no gradient rule for numpy function '{name}' and will not guess one; "
        "use a supported function (docs/autodiff.md, 'Supported numpy'), wrap the code in "
        "scg.blackbox(fn) (its output has no derivative), or apply scg.stop_gradient to its "
        "input to drop the derivative deliberately")


def _read_all(x):
    t = type(x)
    if t is tuple or t is list:
        return t(_read_all(v) for v in x)
    if t is dict:
        return {k: _read_all(v) for k, v in x.items()}
    return _read(x) if isinstance(x, Tracer) else x


def _outside_rules(self, fn, args, kwargs):
    """A numpy function without a rule met a recorded value of scg.jit (and no value being
    differentiated): it runs on the values, which the recording reads (a guard)."""
    return fn(*_read_all(args), **_read_all(kwargs))


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if self.floor and (method != "__call__" or ufunc not in UFUNCS or kwargs):
        return _outside_rules(self, getattr(ufunc, method), inputs, kwargs)
    if method != "__call__":
        raise _no_rule(f"np.{ufunc.__name__}.{method}", self)
    impl = UFUNCS.get(ufunc)
    if impl is None:
        raise _no_rule(f"np.{ufunc.__name__}", self)
    if kwargs:
        _reject(ufunc.__name__, **kwargs)
    return impl(*inputs)


def array_function(self, func, types, args, kwargs):
    impl = NUMPY_OWN.get(func) if self.floor else None
    impl = impl or FUNCTIONS.get(func)
    if impl is None:
        if self.floor:
            return _outside_rules(self, func, args, kwargs)
        raise _no_rule(f"np.{func.__name__}", self)
    return impl(*args, **kwargs)


def array_methods():
    """The Python operators, array methods and numpy protocols of traced values (registered
    with the tape by scg/numpy/__init__.py: every tracer class takes them)."""
    return {
        "__array_ufunc__": array_ufunc,
        "__array_function__": array_function,
        "__add__": lambda a, b: R.add(a, b), "__radd__": lambda a, b: R.add(b, a),
        "__sub__": lambda a, b: R.subtract(a, b), "__rsub__": lambda a, b: R.subtract(b, a),
        "__mul__": lambda a, b: R.multiply(a, b), "__rmul__": lambda a, b: R.multiply(b, a),
        "__truediv__": lambda a, b: R.divide(a, b), "__rtruediv__": lambda a, b: R.divide(b, a),
        "__pow__": lambda a, b: R.power(a, b), "__rpow__": lambda a, b: R.power(b, a),
        "__matmul__": lambda a, b: R.matmul(a, b), "__rmatmul__": lambda a, b: R.matmul(b, a),
        "__neg__": lambda a: R.negative(a), "__pos__": lambda a: a,
        "__abs__": lambda a: R.abs_(a),
        "__and__": lambda a, b: R.bitwise_and(a, b), "__rand__": lambda a, b: R.bitwise_and(b, a),
        "__or__": lambda a, b: R.bitwise_or(a, b), "__ror__": lambda a, b: R.bitwise_or(b, a),
        "__xor__": lambda a, b: R.bitwise_xor(a, b), "__rxor__": lambda a, b: R.bitwise_xor(b, a),
        "__invert__": lambda a: R.invert(a),
        "__lt__": lambda a, b: R.less(a, b), "__le__": lambda a, b: R.less_equal(a, b),
        "__gt__": lambda a, b: R.greater(a, b), "__ge__": lambda a, b: R.greater_equal(a, b),
        "__eq__": lambda a, b: R.equal(a, b), "__ne__": lambda a, b: R.not_equal(a, b),
        "__hash__": object.__hash__,
        "__getitem__": lambda a, index: R.index(a, index),
        "__len__": lambda a: a.shape[0] if a.shape else _unsized(),
        "__iter__": lambda a: (a[i] for i in range(len(a))),
        "__bool__": lambda a: bool(strip(a)),
        "__float__": _conversion(float), "__int__": _conversion(int),
        "__index__": _conversion(operator.index),
        "__array__": _no_array,
        "T": property(lambda a: R.transpose(a)),
        "ndim": property(lambda a: len(a.shape)),
        "size": property(lambda a: int(np.prod(a.shape))),
        "reshape": lambda a, *shape, **kw: _reshape(
            a, shape[0] if len(shape) == 1 else shape, **kw),
        "transpose": lambda a, *axes: _transpose(a, axes[0] if len(axes) == 1 else axes or None),
        "sum": lambda a, axis=None, keepdims=False: (R.numpy_sum if a.floor else R.sum_)(
            a, axis=_axis(axis), keepdims=keepdims),
        "mean": lambda a, axis=None, keepdims=False: (R.numpy_mean if a.floor else R.mean)(
            a, axis=_axis(axis), keepdims=keepdims),
        "max": lambda a, axis=None, keepdims=False: R.max_(a, axis=_axis(axis), keepdims=keepdims),
        "min": lambda a, axis=None, keepdims=False: R.min_(a, axis=_axis(axis), keepdims=keepdims),
        "var": lambda a, axis=None, ddof=0, keepdims=False: (
            NUMPY_OWN[np.var] if a.floor else _var)(a, axis, ddof=ddof, keepdims=keepdims),
        "std": lambda a, axis=None, ddof=0, keepdims=False: (
            NUMPY_OWN[np.std] if a.floor else _std)(a, axis, ddof=ddof, keepdims=keepdims),
        "squeeze": lambda a, axis=None: _squeeze(a, axis),
        "ravel": lambda a: R.reshape(a, (-1,)),
        "flatten": lambda a: R.reshape(a, (-1,)),
        "dot": lambda a, b: R.dot(a, b),
        "clip": lambda a, lo=None, hi=None: R.clip(a, lo, hi),
        "astype": lambda a, dtype, copy=True: R.astype(a, dtype),
        "argmax": lambda a, axis=None: R.argmax(a, axis=axis),
        "argmin": lambda a, axis=None: R.argmin(a, axis=axis),
    }


def _unsized():
    raise TypeError("len() of a 0-d traced value")


def _per_draw(x):
    """Is x a tracer holding a value that differs between the draws of a model?"""
    while isinstance(x, Tracer) and not x.floor:
        deps = getattr(x, "deps", None)  # (per-sample values have deps; boxes do not)
        if deps is not None and deps.up:
            return True
        x = x.value
    return False


_PER_DRAW_NUMBER = (
    "a value that differs between draws cannot become one Python number (int(), float(), "
    "a Python index or range()): inside a model scg evaluates all n draws at once, and each "
    "draw has its own value. What works: to index a table with it, scg.take(table, k, "
    "axis=0); for a branch, np.where(condition, a, b); for code that needs plain numbers "
    "(a simulator, a Python loop), wrap it in scg.blackbox(fn), which receives the values "
    "of all draws as an array with a leading axis of length n")

_DERIVATIVE_NUMBER = (
    "converting a value being differentiated to a Python number (int(), float(), a Python "
    "index) would drop its derivative; use scg.stop_gradient(x) first if that is what you "
    "want, or keep computing with numpy functions on x to keep the derivative")


def _conversion(convert):
    """__float__, __int__ or __index__ of a tracer: refused with the reason that applies."""
    def method(self):
        if _per_draw(self):
            raise TracingError(_PER_DRAW_NUMBER)
        value = self.value
        if getattr(self, "deps", None) is not None and not isinstance(value, Tracer):
            # a per-sample value that depends on no draw and carries no derivative (a
            # parameter copied once per draw by scg.grad_samples, after scg.stop_gradient):
            # the same in every row, as __bool__ assumes
            return convert(np.asarray(value)[0])
        raise TracingError(_DERIVATIVE_NUMBER)
    method.__name__ = f"__{getattr(convert, '__name__', 'index')}__"
    return method


def _no_array(self, dtype=None, copy=None):
    if _per_draw(self):
        raise TracingError(
            "a value that differs between draws cannot become a plain numpy array (np.asarray, "
            "np.array, a numpy random generator, or a function outside scg's rules). If you "
            "are drawing random numbers from it (rng.normal(x, 1.0)), write "
            "scg.sample(\"name\", scg.Normal(x, 1.0)): each draw then gets its own value and "
            "the derivative flows. If it indexes a plain array, write scg.take(table, k, "
            "axis=0); for code outside scg's rules, wrap it in scg.blackbox(fn); otherwise "
            "apply numpy functions to it directly")
    raise TracingError(
        "a value being differentiated cannot become a plain numpy array (np.asarray, np.array, "
        "a numpy random generator, or a function outside scg's rules). If you are drawing "
        "random numbers from it (rng.normal(mu, 1.0)), write scg.sample(\"name\", "
        "scg.Normal(mu, 1.0)) inside a model evaluated with scg.expectation: the derivative "
        "then flows through the draw. If it goes into a numpy function without a gradient "
        "rule, wrap that code in scg.blackbox(fn) (its output has no derivative), or use "
        "numpy functions on it directly. To drop the derivative deliberately, use "
        "scg.stop_gradient(x)")
