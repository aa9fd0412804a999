"""User-facing transformations: grad, value_and_grad, jacobian, hessian, hvp.

They sit above the tape (`scg.core`) and the numpy rules (`scg.numpy`), which they use,
and below the stochastic layer, whose expectations they differentiate.
"""

import functools
import math

import numpy as np

from .core import effects, pytree
from .core.tape import Box, Tracer, backward, new_level, new_root, strip
from .errors import NoGradientPathError, TracingError
from .numpy import rules as R


class _Traced:
    """The arguments of one call, with the differentiated leaves boxed at `level`."""

    def __init__(self, args, argnums, level, floats_only=False):
        n_args = len(args)
        if type(argnums) is int:  # the usual case, first: this runs on every gradient call
            self.single, self.argnums = True, (argnums,)
        else:
            accepted = ("argnums must be an int or a tuple of distinct ints (the positions of "
                        "the arguments to differentiate)")

            def is_int(a):
                return isinstance(a, (int, np.integer)) and not isinstance(a, bool)

            self.single = is_int(argnums)
            if self.single:
                self.argnums = (int(argnums),)
            elif isinstance(argnums, (tuple, list)):
                for a in argnums:
                    if not is_int(a):
                        raise TypeError(f"argnums={argnums!r} holds {a!r} of type "
                                        f"{type(a).__name__}; {accepted}")
                if not argnums:
                    raise ValueError(f"argnums={argnums!r} selects no argument; {accepted}")
                self.argnums = tuple(int(a) for a in argnums)
            else:
                raise TypeError(f"argnums={argnums!r} is of type {type(argnums).__name__}; "
                                f"{accepted}")
        for i in self.argnums:
            if not -n_args <= i < n_args:
                valid = (f"each argnum must be in range({-n_args}, {n_args})" if n_args else
                         "pass the values to differentiate as positional arguments")
                raise TypeError(f"argnums={argnums!r} but the function got {n_args} positional "
                                f"arguments: {valid} (keyword arguments are passed through, "
                                "not differentiated)")
        if len(self.argnums) > 1:
            positions = [i % n_args for i in self.argnums]
            for k, p in enumerate(positions):
                if p in positions[:k]:
                    raise ValueError(f"argnums={argnums!r} names argument {p} twice; argnums "
                                     "must be an int or a tuple of distinct ints")
        self.args = list(args)
        self.parts = []  # per argnum: (treedef, roots); leaf names are made on demand
        self._roots = []
        self.integers = []  # (argnum, treedef, k, value) of the integer leaves, boxed as floats
        for i in self.argnums:
            leaves, treedef = pytree.flatten_leaves(args[i])
            if not floats_only:
                self.integers += [(i, treedef, k, leaf) for k, leaf in enumerate(leaves)
                                  if _is_integer(leaf)]
            if floats_only:  # (scg.trace: the float leaves are parameters, others pass)
                roots = [new_root(np.asarray(leaf, dtype=float), level) if _is_float(leaf)
                         else leaf for leaf in leaves]
            else:
                roots = [new_root(leaf if type(leaf) is np.ndarray and leaf.dtype is _F64
                                  else _as_float(leaf, i, treedef, k), level)
                         for k, leaf in enumerate(leaves)]
            self.args[i] = roots[0] if treedef is None else pytree.unflatten(treedef, roots)
            self.parts.append((treedef, roots))
            self._roots += roots

    def roots(self):
        """The boxes of the differentiated leaves, in order (the tape's roots)."""
        return self._roots

    def shapes(self):
        return [R.shape(r.value) for r in self._roots]

    def names(self, prefix="argument "):
        return [f"{prefix}{i}{p}" for i, (treedef, _) in zip(self.argnums, self.parts)
                for p in pytree.leaf_paths(treedef)]

    def rebuild(self, flat):
        """Structure a flat list of per-leaf results like the differentiated arguments."""
        if self.single:
            treedef = self.parts[0][0]
            return flat[0] if treedef is None else pytree.unflatten(treedef, flat)
        out, k = [], 0
        for treedef, roots in self.parts:
            out.append(pytree.unflatten(treedef, flat[k:k + len(roots)]))
            k += len(roots)
        return tuple(out)


_F64 = np.dtype(np.float64)


def _is_integer(leaf):
    return isinstance(leaf, (int, np.integer)) and not isinstance(leaf, (bool, np.bool_)) or \
        type(leaf) is np.ndarray and leaf.dtype.kind in "iu"


def call_traced(call, traced, kwargs):
    """`call(*traced.args, **kwargs)`; where an integer leaf of a differentiated argument
    was used as a Python integer (a size, range(), an index), an error that names it."""
    try:
        return call(*traced.args, **kwargs)
    except TypeError as e:
        if not traced.integers or not _as_integer_error(e):
            raise
        names = [f"argument {i}{pytree.leaf_paths(treedef)[k]} ({leaf!r:.30})"
                 for i, treedef, k, leaf in traced.integers]
        one = len(names) == 1
        raise TracingError(
            f"{' and '.join(names)} {'is an integer' if one else 'are integers'} inside the "
            "differentiated arguments, and the function uses a value being differentiated as "
            "a Python integer (a size as in np.zeros(k), range(k), an index): scg "
            "differentiates every leaf of the arguments in argnums, integers too (as floats), "
            "and a derivative cannot pass through a size. Pass "
            f"{'it' if one else 'them'} outside the differentiated arguments: as another "
            "positional argument not in argnums (f(theta, k) with argnums=0), as a keyword "
            "argument, or through a closure (functools.partial)") from e


def _as_integer_error(e):
    text = str(e)
    return "Box(" in text or (isinstance(e, TracingError) and text.startswith(
        "converting a value being differentiated to a Python number"))


def _is_float(leaf):
    return isinstance(leaf, (float, np.ndarray, np.generic)) and \
        np.asarray(leaf).dtype.kind == "f"
_ONE = np.float64(1.0)


def _as_float(leaf, argnum, treedef, k):
    """A leaf to differentiate as float64 (float64 arrays are used as they are: never
    written to, so no copy is needed; _Traced passes them without this call)."""
    if isinstance(leaf, Tracer):
        if effects.is_held(leaf) and leaf.dtype != _F64:  # (under scg.jit: cast, recorded)
            return effects.opaque(_to_float64, leaf)
        return leaf
    arr = np.asarray(leaf)
    if arr.dtype.kind not in "biuf":
        path = pytree.leaf_paths(treedef)[k]
        raise TypeError(f"cannot differentiate argument {argnum}{path} of dtype {arr.dtype}; "
                        "differentiated arguments are floats or float arrays")
    return arr.astype(np.float64)


def _to_float64(x):
    return np.asarray(x, dtype=np.float64)


def _as_python_float(value):
    return float(value.item() if hasattr(value, "item") else value)


def _as_python_float_finite(value):
    value = _as_python_float(value)
    if not math.isfinite(value):
        raise FloatingPointError("the value is not finite")
    return value


def _finish_recorded(grads, shapes, distinct, constants=()):
    # (replayed on every call: float64 arrays of the right shapes, writeable and with
    # distinct memory owners, are returned as they are after the cheapest tests; the
    # gradients that are constants of the recording are copied, each call's own)
    if constants:
        grads = tuple(g.copy() if k in constants else g for k, g in enumerate(grads))
    owners = set()
    for g, shape in zip(grads, shapes):
        if type(g) is not np.ndarray or g.dtype is not _F64 or g.shape != shape:
            return tuple(_finish(list(grads), shapes, distinct))
        owner = g.base
        if owner is None:
            owner = g
        elif not g.flags.writeable:
            return tuple(_finish(list(grads), shapes, distinct))
        owners.add(id(owner))
    if distinct and len(owners) < len(grads):
        return tuple(_finish(list(grads), shapes, distinct))
    return grads


def _finish(grads, shapes, distinct=True):
    """Cotangents as the user sees them: float64 arrays at the top level, traced inside.

    With `distinct`, every returned array is the caller's own: a read-only broadcast view
    is copied, and so is a cotangent whose memory another returned one shares (the rule
    of `a + b` gives both the same array; a bias's cotangent can be a row of another's).
    """
    if any(effects.is_held(g) for g in grads):  # (under scg.jit: the same conversion, recorded)
        constants = tuple(k for k, g in enumerate(grads) if type(g) is np.ndarray)
        return list(effects.opaque(_finish_recorded, tuple(grads), tuple(shapes), distinct,
                                constants))
    seen = set()  # the ids of the memory owners of the arrays returned so far
    out = []
    for g, shape in zip(grads, shapes):
        if type(g) is np.ndarray and g.shape == shape and g.dtype == _F64:
            if distinct:
                owner = g.base  # numpy points every view at the array that owns the memory
                if owner is None:
                    owner = g  # (arrays that numpy operations make are writeable)
                elif not g.flags.writeable:
                    g = owner = g.copy()
                if id(owner) in seen:
                    g = owner = g.copy()
                seen.add(id(owner))
        elif g is None:
            g = np.zeros(shape)
        elif not isinstance(g, Tracer):
            g = np.asarray(g, dtype=np.float64).reshape(shape)
        out.append(g)
    return out


def _check_reached(grads, traced, fun):
    if all(g is not None for g in grads):
        return
    for g, name in zip(grads, traced.names()):
        if g is None:
            raise NoGradientPathError(fun.no_path_message(name))


def value_and_grad(fun, argnums=0, *, allow_unused=False, has_aux=False):
    """Return a function computing fun's value and its gradient with respect to `argnums`.

    Args:
        fun: a function returning a scalar, or an `scg.expectation`.
        argnums: int or tuple of ints; the arguments (pytrees of arrays) to differentiate.
        allow_unused: for expectations, return zeros instead of raising
            `NoGradientPathError` when no cost depends on an argument.
        has_aux: for an expectation made with has_aux=True: return ((value, aux),
            gradient), aux what the model returned beside its cost.
    Returns:
        A function returning (value, gradient); the gradient has the structure of the
        argument (a tuple of them when argnums is a tuple).

    Example:
        >>> scg.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
        (5.0, array([2., 4.]))
    """
    return _gradient_function(fun, argnums, allow_unused, with_value=True, has_aux=has_aux)


def grad(fun, argnums=0, *, allow_unused=False, has_aux=False):
    """Return a function computing the gradient of scalar-valued `fun`.

    Works on plain functions of numpy arrays and on `scg.expectation` objects (then it
    returns an unbiased estimate of the gradient of the expectation). Any order:
    ``scg.grad(scg.grad(f))``.

    With `has_aux=True` (an expectation made with has_aux=True), it returns
    (gradient, aux).

    Example:
        >>> scg.grad(np.sin)(0.0)
        array(1.)
    """
    return _gradient_function(fun, argnums, allow_unused, with_value=False, has_aux=has_aux)


def _gradient_function(fun, argnums, allow_unused, with_value, has_aux=False):
    if has_aux and not getattr(fun, "has_aux", False):
        raise TypeError("has_aux=True takes an expectation made with "
                        "scg.expectation(model, ..., has_aux=True), whose model returns "
                        f"(cost, aux); got {getattr(fun, '__name__', fun)!r}")
    # (looked up once: on a plain function each lookup is a failed attribute search)
    needs_path = not allow_unused and getattr(fun, "requires_gradient_path", False)
    check = getattr(fun, "check_gradient", None)

    @functools.wraps(fun)
    def gradient_function(*args, **kwargs):
        # (with has_aux, this call's own aux, returned by it: another thread's call may
        # change the expectation's last_aux meanwhile)
        auxes = [] if has_aux else None
        call = _keeping_aux(fun, auxes) if has_aux else None
        traced, value, grads = reverse(fun, args, kwargs, argnums, needs_path, check,
                                       call=call)
        gradient = traced.rebuild(_finish(grads, traced.shapes()))
        if not with_value:
            return (gradient, auxes[-1]) if has_aux else gradient
        if not isinstance(value, Tracer):
            value = float(value.item() if hasattr(value, "item") else value)
            if not math.isfinite(value):  # (finite costs whose sum overflowed: averaged
                # again, each divided by n first; gradients are not affected)
                value = getattr(fun, "finite_value", lambda v: v)(value)
        elif value.floor:  # (under scg.jit: the same conversion, recorded; a replay whose
            # value is not finite runs afresh, where the value is averaged again)
            value = effects.opaque(_as_python_float_finite, value)
        return ((value, auxes[-1]), gradient) if has_aux else (value, gradient)

    return gradient_function


def _keeping_aux(fun, auxes):
    """fun's call that returns the estimate and appends the call's aux to `auxes`."""
    def call(*args, **kwargs):
        out, aux = fun.call_with_aux(*args, **kwargs)
        auxes.append(aux)
        return out
    return call


def reverse(fun, args, kwargs, argnums, needs_path=False, check=None, per_draw=None,
            call=None):
    """The one reverse pass behind every gradient: box the differentiated arguments at a
    new level, call `fun` (or `call`, which stands for it), check that its output is a
    scalar, backpropagate, and check that every argument was reached (`needs_path`:
    `fun.no_path_message(name)` says why not) and that the gradient is finite
    (`check(grads, names, roots)`).

    `per_draw(traced, level)`, for per-draw gradients of an expectation, returns
    (the function to call instead of fun, the roots to differentiate, the seed).

    Returns (the traced arguments, the output's value, the cotangents of the roots).
    """
    with new_level() as level:
        traced = _Traced(args, argnums, level)
        if per_draw is None:
            call, roots, seed = call or fun, traced.roots(), None
        else:
            call, roots, seed = per_draw(traced, level)
        out = call_traced(call, traced, kwargs)
        value = strip(out, level - 1)
        out_shape = R.shape(value)  # (logical: inside a model, value may differ per draw)
        if out_shape and math.prod(out_shape) != 1:
            raise TypeError(f"grad needs a scalar output, got shape {out_shape}; "
                            "use scg.jacobian for vector outputs")
        if isinstance(out, Box) and out.level == level:
            if seed is None:
                seed = np.ones(out_shape) if out_shape else _ONE  # (a number: cheaper)
            grads = effects.scg_only(backward, out, seed, roots)  # (no code of the user's)
        else:
            grads = [None] * len(roots)
    if needs_path:
        _check_reached(grads, traced, fun)
    if check is not None:
        check(grads, traced.names, roots)
    return traced, value, grads


def jacobian(fun, argnums=0):
    """Return a function computing the Jacobian of `fun` by reverse mode, one row at a time.

    For an output of shape S and an argument leaf of shape A the result has shape S + A;
    pytree outputs give a tree (output structure) of trees (argument structure).

    Example:
        >>> scg.jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    @functools.wraps(fun)
    def jacobian_fun(*args, **kwargs):
        with new_level() as level:
            traced = _Traced(args, argnums, level)
            out = call_traced(fun, traced, kwargs)
            out_leaves, out_def, _ = pytree.flatten(out)
            blocks = [_jacobian_rows(o, level, traced) for o in out_leaves]
        return pytree.unflatten(out_def, blocks)

    return jacobian_fun


def _jacobian_rows(out, level, traced):
    value = strip(out, level - 1)
    out_shape = R.shape(value)
    in_shapes = traced.shapes()
    rows = []
    for i in range(int(np.prod(out_shape))):
        if isinstance(out, Box) and out.level == level:
            seed = np.zeros(out_shape)
            seed.flat[i] = 1.0
            rows.append(backward(out, seed, traced.roots()))
        else:
            rows.append([None] * len(in_shapes))
    flat = []
    for k, shape in enumerate(in_shapes):
        pieces = _finish([row[k] for row in rows], [shape] * len(rows), distinct=False)
        if any(isinstance(p, Tracer) for p in pieces):
            block = R.reshape(R.stack(*pieces), out_shape + shape)
        else:
            block = np.stack(pieces).reshape(out_shape + shape)
        flat.append(block)
    return traced.rebuild(flat)


def hessian(fun, argnums=0):
    """Return a function computing the Hessian of scalar `fun` (shape A + A for one array).

    For an expectation, the estimate is unbiased (see docs: higher-order derivatives).
    """
    return jacobian(grad(fun, argnums), argnums)


def hvp(fun, argnums=0):
    """Return a function computing the Hessian of scalar `fun` times a vector, without
    building the Hessian: `hvp(f)(x, v)` is the gradient of <grad f(x), v>.

    `v` has the structure of the differentiated argument (a tuple of them when argnums is a
    tuple). For an expectation the product is an unbiased estimate.

    Example:
        >>> scg.hvp(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
        array([6., 0.])
    """
    g = grad(fun, argnums)

    def hvp_fun(*args, **kwargs):
        *primals, v = args

        def directional(*xs):
            return _tree_dot(g(*xs, **kwargs), v)

        return grad(directional, argnums)(*primals)

    return hvp_fun


def _tree_dot(a, b):
    a_leaves, b_leaves = pytree.flatten(a)[0], pytree.flatten(b)[0]
    if len(a_leaves) != len(b_leaves):
        raise TypeError("hvp: the vector must have the structure of the differentiated argument")
    total = 0.0
    for x, y in zip(a_leaves, b_leaves):
        if R.shape(x) != np.shape(y):
            raise ValueError(f"hvp: a vector leaf of shape {np.shape(y)} for an argument of "
                             f"shape {R.shape(x)}")
        total = R.add(total, R.sum_(R.multiply(x, np.asarray(y, dtype=float))))
    return total
