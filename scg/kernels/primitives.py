"""Primitives backed by numba kernels, with composite (numpy) rules for higher orders.

A *density kernel* of a family computes, elementwise over broadcast arrays,
one of: the log-density (which=0), its derivative with respect to the value
(which=1) and to each parameter (which=2, 3, ...: the scores). A *path kernel*
computes the draw from noise (which=0) and its derivative with respect to each
parameter (which=2, 3, ...). Each kernel has a numpy twin `twin(which, *args)`
written with numpy calls only, so it also runs on traced values.

`kernel_primitives` turns a kernel + twin into a primitive whose value comes
from the kernel and whose VJP with respect to argument i multiplies the
cotangent by another kernel-backed primitive (the derivative, which=i+1). The
VJPs of those derivative primitives differentiate the twin on the tape, so
second and higher orders are exact compositions of primitives.
"""

import collections
import math
import re

import numpy as np
from numba import njit  # noqa: F401  (re-exported for the kernel modules)

from ..core.facts import LARGE
from ..core.lowering import INLINE
from ..core.tape import Box, Primitive, Tracer, backward, defvjp, new_level, new_root
from ..numpy import rules as R

EW = "elementwise"


def sig(n_inputs):
    """The numba signature of a kernel (which, out, *inputs): one compiled version only."""
    arr = "Array(float64, 2, 'A', readonly=True)"
    return f"void(int64, float64[:, ::1], {', '.join([arr] * n_inputs)})"


def run(kernel, which, *args):
    """Call `kernel(which, out, *inputs)` on the broadcast of `args`; return out."""
    a0 = args[0]
    if type(a0) is not np.ndarray and len(args) > 1 and type(args[1]) is np.ndarray:
        a0 = args[1]  # (a number observed at array parameters: the grid is theirs)
    if type(a0) is np.ndarray and a0.ndim and a0.size < PARALLEL_MIN:
        out = _run_small(kernel, which, a0, args)
        if out is not None:
            return out
    out = run_flat(kernel, which, args)
    if out is not None:
        return out
    arrays = [a if type(a) is np.ndarray and a.dtype is _F64 else np.asarray(a, dtype=float)
              for a in args]
    shapes = [a.shape for a in arrays]
    shape = max(shapes, key=len)  # the broadcast, unless two shapes of several entries differ
    if any(s != shape and math.prod(s) != 1 for s in shapes):
        shape = np.broadcast_shapes(*shapes)
    size = math.prod(shape)
    rows = shape[0] if shape else 1
    cols = math.prod(shape[1:])
    if any(a.size not in (size, 1) for a in arrays):  # (broadcast along some axes)
        # the grid whose rows and columns each merge the axes of every argument (broadcast
        # ones by a stride of 0): views of the arguments, no copies
        grid = _strided_grid(shape, [a.shape for a in arrays], [a.strides for a in arrays])
        if grid is not None:
            rows, cols = grid[:2]
    views = []
    for a in arrays:
        if a.size == size:  # (then the entries line up)
            v = a.reshape(rows, cols)  # a new view, whatever a's flags are
        elif a.size == 1 and size <= 4096:  # a small fill is cheaper than broadcast_to
            v = np.full((rows, cols), a.reshape(-1)[0])
        else:
            v = np.broadcast_to(a, shape).reshape(rows, cols)  # copies only if strides cannot merge
            if v.flags.writeable:
                v = v.view()
        v.flags.writeable = False  # the kernels take read-only arrays (one signature)
        views.append(v)
    out = np.empty((rows, cols))
    kernel(which, out, *views)
    return out.reshape(shape)


def _strided_grid(shape, shapes, strides):
    """(rows, cols, [(row stride, column stride) per argument]): the split of `shape`'s axes
    into rows and columns (the most columns first) along which every argument, of shape
    `shapes[i]` and byte strides `strides[i]` broadcast to `shape`, is a 2-D strided view;
    None if no split allows it."""
    n = len(shape)
    aligned = []
    for s, st in zip(shapes, strides):
        pad = n - len(s)
        aligned.append([0] * pad + [0 if s[k] == 1 else st[k] for k in range(len(s))])
    for split in range(n + 1):
        found = []
        for st in aligned:
            r, c = _merged(shape[:split], st[:split]), _merged(shape[split:], st[split:])
            if r is None or c is None:
                break
            found.append((r, c))
        else:
            return math.prod(shape[:split]), math.prod(shape[split:]), found
    return None


def _merged(sizes, strides):
    """The stride of the axes `sizes` (with `strides`) merged into one, in C order, or None
    if they do not merge (a broadcast axis beside one that is not)."""
    stride = expected = None
    for n, st in zip(reversed(sizes), reversed(strides)):
        if n == 1:
            continue
        if stride is None:
            stride = st
        elif st != expected:
            return None
        expected = st * n
    return 0 if stride is None else stride


_F64 = np.dtype(np.float64)
_F64_SCALAR = np.float64


def _run_small(kernel, which, a0, args):
    """`run` below the parallel size when the other arguments have a0's shape or one entry
    (the common call: draws and their parameters), without the general broadcasting;
    None otherwise."""
    shape = a0.shape
    kinds = [_small_kind(a, a0) for a in args]
    if None in kinds:
        return None
    serial = _serial_flat(kernel, kinds)
    if serial is not None:  # (the parameters passed as numbers, not filled arrays)
        out = np.empty(a0.size)
        serial(which, out, _NO_G, a0.ravel(), *[a if kind == "fill" else a.item()
                                                for a, kind in zip(args[1:], kinds[1:])])
        return out.reshape(shape)
    grid = _grid(a0)
    views = []
    for a, kind in zip(args, kinds):
        if kind == "view":
            v = a.reshape(grid)
        else:  # (np.full costs three times np.empty and fill)
            v = np.empty(grid)
            v.fill(a if kind == "fill" else a.item())
        views.append(v)
    out = np.empty(grid)
    _entry(kernel)(which, out, *views)
    return out.reshape(shape)


def _serial_flat(kernel, kinds):
    """The entry point of the kernel's flat variant run in the calling thread, when the
    call's draws are its first argument and every parameter is one number ("fill" or
    "item"); None otherwise. The flat kernel evaluates the same scalar function as the
    2-D one, so the values are the same; it spares the filled parameter arrays."""
    if kinds[0] != "view" or "view" in kinds[1:]:
        return None
    flat = FLAT.get(kernel)
    serial = getattr(flat, "serial", None)
    return None if serial is None else _entry(serial)


def _grid(a0):
    """The 2-D shape (rows, the rest) the kernels take for draws shaped like a0."""
    rows = a0.shape[0]
    return rows, (a0.size // rows if rows else 0)


def _small_kind(a, a0):
    """How `_run_small` passes argument a beside the draws a0: "view" (a reshaped view),
    "fill" (a number filled in), "item" (a one-entry array's number filled in), or None
    (a call it does not take)."""
    t = type(a)
    if t is _F64_SCALAR or t is float:  # (a parameter indexed out of a vector)
        return "fill"
    if t is not np.ndarray or a.dtype is not _F64:
        return None
    if a.shape == a0.shape or (a0.size == 1 and a.size == 1):
        return "view"
    return "item" if a.size == 1 else None


def entry_point(kernel):
    """A numba kernel's compiled function without the dispatcher's typing of its arguments
    (a third of a small call), for a kernel of one signature; None where numba has no such
    entry. The caller must pass exactly the signature's types (a writeable array where a
    read-only one is declared is read the same way)."""
    try:
        (result,) = kernel.overloads.values()
        return result.entry_point
    except (AttributeError, ValueError):  # pragma: no cover - another numba's internals
        return None


def _entry(kernel):
    """The entry point of a kernel of `_run_small`, kept; where numba has none, the
    dispatcher with the read-only arguments its signature declares."""
    entry = _ENTRY.get(kernel)
    if entry is None:
        entry = entry_point(kernel)
        if entry is None:  # pragma: no cover - another numba's internals
            def entry(which, out, *views):
                for v in views:
                    v.flags.writeable = False
                kernel(which, out, *views)
        _ENTRY[kernel] = entry
    return entry


_ENTRY = {}  # kernel -> its compiled entry point (see _entry)


def _small_call(kernel, which, args, fixed=()):
    """For scg.jit: `run(kernel, which, *args)` as a function specialized to the recorded
    kinds and shapes of args (what `_run_small` decides on every call, decided once), or
    None when the call is not a small one: every argument either of the shape of the first
    array among them or a single value.

    `fixed`: the indices of single values that are constants of the program; the function
    then takes those it lists in its attribute `prefilled` already filled in (`filled`),
    so a replay fills only the others."""
    a0 = next((a for a in args if type(a) is np.ndarray and a.ndim), None)
    if a0 is None or a0.size >= PARALLEL_MIN:
        return None
    kinds = [_small_kind(a, a0) for a in args]
    if None in kinds:
        return None
    names = ", ".join(f"a{k}" for k in range(len(args)))
    serial = _serial_flat(kernel, kinds)
    if serial is not None:
        params = ", ".join(f"a{k}" if kind == "fill" else f"a{k}.item()"
                           for k, kind in enumerate(kinds) if k)
        source = (f"def call({names}):\n"
                  f"    out = empty(size)\n"
                  f"    entry(which, out, no_g, a0.ravel(), {params})\n"
                  f"    return out.reshape(shape)\n")
        namespace = {"empty": np.empty, "entry": serial, "which": which, "no_g": _NO_G,
                     "size": a0.size, "shape": a0.shape}
        exec(compile(source, f"<scg.jit kernel {getattr(kernel, '__name__', '')}>", "exec"),
             namespace)
        namespace["call"].prefilled = ()
        return namespace["call"]
    grid = _grid(a0)
    views, fills, prefilled = [], [], []
    for k, (a, kind) in enumerate(zip(args, kinds)):
        if k in fixed and kind != "view":
            views.append(f"a{k}")  # (filled in once: `filled`)
            prefilled.append(k)
        elif kind == "view":
            views.append(f"a{k}" if a0.shape == grid else f"a{k}.reshape(grid)")
        else:
            value = f"a{k}" if kind == "fill" else f"a{k}.item()"
            fills.append(f"    b{k} = empty(grid)\n    b{k}.fill({value})\n")
            views.append(f"b{k}")
    source = (f"def call({names}):\n" + "".join(fills) +
              f"    out = empty(grid)\n"
              f"    entry(which, out, {', '.join(views)})\n"
              f"    return out{'' if a0.shape == grid else '.reshape(shape)'}\n")
    namespace = {"empty": np.empty, "entry": _entry(kernel), "which": which,
                 "grid": grid, "shape": a0.shape}
    exec(compile(source, f"<scg.jit kernel {getattr(kernel, '__name__', '')}>", "exec"),
         namespace)
    namespace["call"].prefilled = tuple(prefilled)
    return namespace["call"]


def _broadcast_call(kernel, which, args, fixed):
    """For scg.jit: `run(kernel, which, *args)` for arguments that broadcast along some
    axes (a mixture's observations against its components' locations), specialized to the
    recorded shapes: the arguments of the program (not in `fixed`) must be C-contiguous
    arrays in a replay, and are passed as strided views without copies; the constants are
    laid out once (`laid_out`, the function's attribute `prefilled` lists them). None for
    a call it does not take (large, other dtypes, axes that merge no way)."""
    arrays = [np.asarray(a) for a in args]
    if any(a.dtype != _F64 for a in arrays) or \
            any(k not in fixed and type(a) is not np.ndarray for k, a in enumerate(args)):
        return None
    shape = np.broadcast_shapes(*[a.shape for a in arrays])
    size = math.prod(shape)
    if not shape or not size or size >= PARALLEL_MIN:
        return None
    recorded = [k for k in range(len(args)) if k not in fixed]
    # (the arguments of the program as C-contiguous arrays; the constants fit any grid)
    grid = _strided_grid(shape, [arrays[k].shape for k in recorded],
                         [_contiguous_strides(arrays[k].shape) for k in recorded])
    if grid is None:
        return None
    rows, cols, found = grid
    strides = dict(zip(recorded, found))
    names = ", ".join(f"a{k}" for k in range(len(args)))
    views = [f"a{k}" if k in fixed else f"ndarray(grid, f64, a{k}, 0, {strides[k]!r})"
             for k in range(len(args))]
    contiguous = " and ".join(f"a{k}.flags.c_contiguous" for k in recorded) or "True"
    fallback = ", ".join(f"a{k}.reshape(shape)" if k in fixed else f"a{k}"
                         for k in range(len(args)))
    source = (f"def call({names}):\n"
              f"    if not ({contiguous}):\n"
              f"        return run(kernel, which, {fallback})\n"
              f"    out = empty(grid)\n"
              f"    entry(which, out, {', '.join(views)})\n"
              f"    return out.reshape(shape)\n")
    namespace = {"empty": np.empty, "ndarray": np.ndarray, "f64": _F64, "run": run,
                 "kernel": kernel, "entry": _entry(kernel), "which": which,
                 "grid": (rows, cols), "shape": shape}
    exec(compile(source, f"<scg.jit kernel {getattr(kernel, '__name__', '')}>", "exec"),
         namespace)
    namespace["call"].prefilled = tuple(fixed)
    namespace["call"].grid = (rows, cols), shape
    return namespace["call"]


def _contiguous_strides(shape):
    strides, step = [], 8
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def laid_out(value, grid, shape):
    """A constant argument of `_broadcast_call`'s function: broadcast to the call's shape
    and laid out on its grid, read-only."""
    out = np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=float), shape))
    out = out.reshape(grid)
    out.flags.writeable = False
    return out


def filled(value, a0):
    """A single value (a number or a one-entry array) filled into the kernels' grid for
    draws shaped like a0, read-only: a constant argument of `_small_call`'s function."""
    out = np.empty(_grid(a0))
    out.fill(value if type(value) is not np.ndarray else value.item())
    out.flags.writeable = False
    return out


def _inline_kernel(kernel, which):
    """The INLINE entry of a kernel-backed primitive (see scg/core/lowering.py)."""
    # the specialized functions, one per kind of call, the least recently used dropped
    # beyond _KEPT_CALLS: they are constants of programs, and two recordings of one call
    # replay only if they name the same function (a model's calls are the most recent)
    calls = collections.OrderedDict()

    def inline(args, kwargs, ans, exprs, named, const):
        if kwargs:
            return None
        # (the constants of the program: filled in or laid out once, below)
        constants = tuple(k for k, e in enumerate(exprs) if not _RECORDED.match(e))
        fixed = tuple(k for k in constants if type(args[k]) is not np.ndarray or
                      args[k].size == 1)
        key = (constants,) + tuple((type(a), getattr(a, "shape", None), getattr(a, "dtype", None))
                               for a in args)
        call = calls.get(key, _MISSING)
        if call is _MISSING:
            if len(calls) >= _KEPT_CALLS:  # (shapes that change on every call)
                calls.popitem(last=False)
            call = calls[key] = _small_call(kernel, which, args, fixed) or \
                _broadcast_call(kernel, which, args, constants)
        else:
            calls.move_to_end(key)
        if call is None:
            return None
        if call.prefilled:
            grid = getattr(call, "grid", None)
            if grid is None:
                a0 = next(a for a in args if type(a) is np.ndarray and a.ndim)
            exprs = [e if k not in call.prefilled else const(
                filled(a, a0) if grid is None else laid_out(a, *grid))
                for k, (a, e) in enumerate(zip(args, exprs))]
        return f"{const(call)}({', '.join(exprs)})"
    return inline


_KEPT_CALLS = 1024
_MISSING = object()
_RECORDED = re.compile(r"v\d+$")  # (the name of a recorded value in a program's source)


# below this many entries a thread launch costs more than it saves
PARALLEL_MIN = LARGE
# kernel -> its flat parallel variant for single-valued parameters (kernels/parallel.py),
# registered by `kernel_primitives(..., flat=)`
FLAT = {}


def readonly_flat(a):
    """A 1-D read-only view of a C-contiguous array (the flat kernels' argument type)."""
    v = a.reshape(-1)
    if v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v


_NO_G = readonly_flat(np.empty(0))  # "no cotangent": a flat kernel writes plain values


def run_flat(kernel, which, args, g=None):
    """`kernel` output `which` (times g if given) by its flat parallel variant, or None
    when the call does not qualify: plain arrays, the first argument a large C-contiguous
    array of the full shape, every other one a single value (a size-1 array or a broadcast
    copy), g of the full shape."""
    flat = FLAT.get(kernel)
    # the size first: on small arrays this must cost next to nothing
    if flat is None or getattr(args[0], "size", 0) < PARALLEL_MIN or isinstance(g, Tracer) \
            or any(isinstance(a, Tracer) for a in args):
        return None
    first = np.asarray(args[0], dtype=float)
    if not first.flags.c_contiguous:
        return None
    params = []
    for a in args[1:]:
        a = np.asarray(a, dtype=float)
        if (a.size != 1 and any(a.strides)) or \
                np.broadcast_shapes(a.shape, first.shape) != first.shape:
            return None
        params.append(float(a[(0,) * a.ndim]))
    if g is not None:
        g = np.asarray(g, dtype=float)
        if g.shape != first.shape or not g.flags.c_contiguous:
            return None
    out = np.empty(first.shape)
    flat(which, out.reshape(-1), _NO_G if g is None else readonly_flat(g),
         readonly_flat(first), *params)
    return out


def composite_vjp(fn, argnum):
    """The VJP rule of `fn` (numpy calls on its arguments) for argument `argnum`, on the tape."""
    def rule(g, ans, *args):
        with new_level() as level:
            boxed = list(args)
            root = new_root(args[argnum], level)
            boxed[argnum] = root
            out = fn(*boxed)
            if not (isinstance(out, Box) and out.level == level):
                return np.zeros(R.shape(args[argnum]))
            (grad,) = backward(out, g, [root])
        return np.zeros(R.shape(args[argnum])) if grad is None else grad
    return rule


def kernel_primitives(name, kernel, twin, n_args, differentiable=None, flat=None):
    """The primitive `twin(0, *args)` computed by `kernel`, and its derivative primitives.

    Args:
        name: used in the primitive names (e.g. "normal_log_prob").
        kernel: numba kernel `kernel(which, out, *inputs)`.
        twin: numpy twin `twin(which, *args)`; `which = i + 1` is the derivative in arg i.
        n_args: the number of array arguments.
        differentiable: the argument indices with a derivative (default: all).
        flat: the kernel's flat parallel variant (kernels/parallel.py), used for large
            per-draw arrays with single-valued parameters; None if it has none.
    Returns:
        (primitive, [derivative primitive per argument or None]).
    """
    if differentiable is None:
        differentiable = range(n_args)
    if flat is not None:
        FLAT[kernel] = flat
    derivs = [None] * n_args
    for i in differentiable:
        d = Primitive(f"{name}_d{i}", lambda *a, _w=i + 1: run(kernel, _w, *a),
                      doc=f"Derivative of {name} in argument {i}, elementwise.", batch=EW)
        INLINE[d.fn] = _inline_kernel(kernel, i + 1)
        defvjp(d, *[composite_vjp(lambda *a, _w=i + 1: twin(_w, *a), j) for j in range(n_args)])
        derivs[i] = d
    main = Primitive(name, lambda *a: run(kernel, 0, *a),
                     doc=f"{name}, elementwise, computed by a numba kernel.", batch=EW)
    INLINE[main.fn] = _inline_kernel(kernel, 0)

    def vjp(i):
        if derivs[i] is None:
            return None

        def rule(g, ans, *a):
            if isinstance(g, Tracer) or any(isinstance(v, Tracer) for v in a):
                return R.unbroadcast(R.multiply(g, derivs[i](*a)), R.shape(a[i]))
            # first order on plain arrays: g times the derivative in one pass if the
            # kernel has a flat variant, else scale the kernel's output in place
            d = run_flat(kernel, i + 1, a, g)
            if d is not None:
                return R.unbroadcast(d, R.shape(a[i]))
            d = run(kernel, i + 1, *a)
            g_shape = R.shape(g)
            if g_shape == d.shape or np.broadcast_shapes(g_shape, d.shape) == d.shape:
                d *= g
            else:
                d = d * g
            return R.unbroadcast(d, R.shape(a[i]))
        return rule

    defvjp(main, *[vjp(i) for i in range(n_args)])
    return main, derivs


def _fd_partial(kernel, which, k, args):
    """Central difference of kernel output `which` in argument k (relative step 1e-5)."""
    args = [np.asarray(a, dtype=float) for a in args]
    step = 1e-5 * np.maximum(np.abs(args[k]), 1e-3)
    up, down = list(args), list(args)
    up[k], down[k] = args[k] + step, args[k] - step
    return (run(kernel, which, *up) - run(kernel, which, *down)) / (2 * step)


def _no_third_order(*_):
    raise NotImplementedError("implicit reparameterization paths are differentiable to "
                              "second order only")


def implicit_path_primitive(name, dx_kernel, n_params, logp_derivs):
    """The path of a draw x0 made by implicit reparameterization: params, x0 -> x0.

    Its value is the draw itself; its VJP in parameter j is g * dx_j, where
    `dx_kernel(j, out, *params, x)` computes dx/dtheta_j at fixed CDF level
    (implicit function theorem). Second order: the partial of dx_j in x is
    -d_j log p - dx_j * d_x log p (exact, from `logp_derivs(which, x, *params)`,
    which=1 the value and j+2 the parameter), the partial in the parameters is a
    central difference of the kernel (relative accuracy about 1e-8).

    Returns:
        (path primitive, [dx_j primitive per parameter]).
    """
    dx = [Primitive(f"{name}_dx{j}", lambda *a, _j=j: run(dx_kernel, _j, *a),
                    doc=f"d draw / d parameter {j} of {name} at fixed CDF level.", batch=EW)
          for j in range(n_params)]
    for j, d in enumerate(dx):
        rules = []
        for k in range(n_params):
            fd = Primitive(f"{name}_dx{j}_d{k}", lambda *a, _j=j, _k=k: _fd_partial(
                dx_kernel, _j, _k, a), doc="A central difference of the implicit derivative.",
                batch=EW)
            defvjp(fd, *[_no_third_order] * (n_params + 1))
            rules.append(lambda g, ans, *a, _fd=fd, _k=k:
                         R.unbroadcast(R.multiply(g, _fd(*a)), R.shape(a[_k])))

        def x_rule(g, ans, *a, _j=j):
            params, x = a[:-1], a[-1]
            dxdx = -(logp_derivs(_j + 2, x, *params) + ans * logp_derivs(1, x, *params))
            return R.unbroadcast(R.multiply(g, dxdx), R.shape(x))
        rules.append(x_rule)
        defvjp(d, *rules)

    def value(*a):
        shape = np.broadcast_shapes(*[np.shape(v) for v in a])
        return np.array(np.broadcast_to(np.asarray(a[-1], dtype=float), shape))

    path = Primitive(name, value, doc=f"{name}: a draw, differentiable by implicit "
                     "reparameterization.", batch=EW)
    rules = [(lambda g, ans, *a, _j=j: R.unbroadcast(R.multiply(g, dx[_j](*a[:-1], ans)),
                                                    R.shape(a[_j]))) for j in range(n_params)]
    rules.append(lambda g, ans, *a: R.unbroadcast(g, R.shape(a[-1])))
    defvjp(path, *rules)
    return path, dx
