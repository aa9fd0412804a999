"""First-order twins of the hot VJP rules, in plain numpy (see `defvjp_plain`).

A rule in `rules.py` is written with primitives so that outer trace levels record it;
at first order there is nothing to record, and each of its primitive calls is pure
overhead on small arrays. Each twin here computes the same cotangent with numpy calls
only. The finite-difference checks exercise both: first order runs the twins, second
order the traced rules.
"""

import numpy as np

from ..core import effects, rewrites
from ..core.tape import defvjp_plain
from ..core.facts import LARGE
from ..core.lowering import FRESH, WRITES_OUT
from . import rules as R
from .rules import _restore_reduced, shape, unbroadcast  # plain cotangents: numpy calls

# (add, sum and broadcast_to need no twin: their rules call these helpers only)
#
# Under scg.jit's recording the twins run on its values (Vars, which a handler holds) as on
# plain arrays, and the recording records their numpy calls: a replay rounds as an eager
# first-order gradient does. A twin that needs plain arrays is wrapped in _on_plain_values.


def _on_plain_values(twin, uses_ans=True, uses_x=True):
    """`twin` for a call whose values scg.jit's recording holds: one operation of the
    recording on the plain values (the twin writes into a buffer of its own, or picks
    ndarray.dot by the arrays' types, which recorded values are not). A twin that does
    not read the result (`uses_ans=False`) or its inputs (`uses_x=False`) is recorded
    without them, so that a replay need not keep forward values alive until the backward
    pass."""
    def rule(g, ans, *args):
        if effects.is_held(g) or effects.is_held(ans) or any(
                effects.is_held(a) or type(a) is tuple for a in args):
            if not uses_x:
                args = (None,) * len(args)
            return effects.opaque(twin, g, ans if uses_ans else None, *args)
        return twin(g, ans, *args)
    rule.__name__ = rule.__qualname__ = getattr(twin, "__name__", "twin")
    return rule


# ---------------------------------------------------------------- arithmetic
defvjp_plain(R.subtract, lambda g, ans, a, b: unbroadcast(g, shape(a)),
             lambda g, ans, a, b: np.negative(unbroadcast(g, shape(b))))
defvjp_plain(R.multiply, lambda g, ans, a, b: R.multiply_to_plain(g, b, shape(a)),
             lambda g, ans, a, b: R.multiply_to_plain(g, a, shape(b)))
defvjp_plain(R.divide, lambda g, ans, a, b: unbroadcast(g / b, shape(a)),
             lambda g, ans, a, b: unbroadcast(np.negative(g * ans / b), shape(b)))
defvjp_plain(R.negative, lambda g, ans, a: np.negative(g))


def _power_base(g, ans, a, b):
    if isinstance(b, (int, float)):  # then g has a's shape
        if b == 2:
            fused = rewrites.get("square_vjp")
            if fused is not None and getattr(a, "size", 0) >= LARGE:
                out = fused(g, a)  # (the same products in one pass on the threads)
                if out is not None:
                    return out
            return R._scale(g, 2.0) * a
        if b == 0:  # x**0 is constant, also at x = 0
            return np.zeros(shape(a))
    return unbroadcast(g * (b * np.power(a, np.subtract(b, 1))), shape(a))


def _power_exponent(g, ans, a, b):
    a = np.asarray(a)
    return unbroadcast(g * ans * np.log(np.where(a > 0, a, 1.0)), shape(b))


defvjp_plain(R.power, _power_base, _power_exponent)

# ---------------------------------------------------------------- elementwise
defvjp_plain(R.exp, lambda g, ans, x: g * ans)
defvjp_plain(R.log, lambda g, ans, x: g / x)
defvjp_plain(R.log1p, lambda g, ans, x: g / (1.0 + x))
defvjp_plain(R.expm1, lambda g, ans, x: g * (ans + 1.0))
defvjp_plain(R.sqrt, lambda g, ans, x: (0.5 * g) / ans)
defvjp_plain(R.square, lambda g, ans, x: g * (2.0 * x))
defvjp_plain(R.sin, lambda g, ans, x: g * np.cos(x))
defvjp_plain(R.cos, lambda g, ans, x: np.negative(g * np.sin(x)))


def _tanh_vjp(g, ans, x, out=None):
    fused = rewrites.get("tanh_vjp")  # (the same products in one pass, one array written)
    got = fused(g, ans, out) if fused is not None else None
    return R._into(out, g * (1.0 - ans * ans)) if got is None else got


defvjp_plain(R.tanh, _on_plain_values(_tanh_vjp, uses_x=False))
defvjp_plain(R.maximum,
             lambda g, ans, a, b: unbroadcast(g * R._share(True, a, b), shape(a)),
             lambda g, ans, a, b: unbroadcast(g * R._share(True, b, a), shape(b)))
defvjp_plain(R.minimum,
             lambda g, ans, a, b: unbroadcast(g * R._share(False, a, b), shape(a)),
             lambda g, ans, a, b: unbroadcast(g * R._share(False, b, a), shape(b)))
defvjp_plain(R.where, None,
             lambda g, ans, c, x, y: unbroadcast(np.where(c, g, 0.0), shape(x)),
             lambda g, ans, c, x, y: unbroadcast(np.where(c, 0.0, g), shape(y)))

# ---------------------------------------------------------------- reductions and shapes
defvjp_plain(R.mean, lambda g, ans, x, axis=None, keepdims=False:
             _restore_reduced(g / float(R._count(shape(x), axis)), shape(x), axis, keepdims))
defvjp_plain(R.reshape, lambda g, ans, x, newshape: R._reshape(g, shape(x)))


def _getitem_x(g, ans, x, index):
    return R._untake(g, index, shape(x))


defvjp_plain(R.getitem, _on_plain_values(_getitem_x, uses_ans=False))


# ---------------------------------------------------------------- linear algebra
# The cases without batch axes to broadcast, through ndarray.dot (the same products as @
# for arrays of one or two dimensions, with less overhead); the rest by the traced rules.
def _matmul_a(g, ans, a, b, out=None):
    if type(a) is np.ndarray and type(b) is np.ndarray and b.ndim <= 2:
        if b.ndim == 2:
            if a.ndim > 2 and type(g) is np.ndarray and g.shape[:-1] == a.shape[:-1]:
                # stacked rows: one 2-D product (ndarray.dot of a 3-D array by a matrix
                # is numpy's generic loop, 5x to 10x slower than the BLAS product)
                rows = g.reshape(-1, g.shape[-1])
                if out is not None:
                    R._dot_into(rows, b.T, out.reshape(rows.shape[0], -1))
                    return out
                return rows.dot(b.T).reshape(a.shape)
            if a.ndim >= 2:
                return g.dot(b.T) if out is None else R._dot_into(g, b.T, out)
            return R._into(out, b.dot(g))  # (a @ b = b.T applied to a)
        if a.ndim <= 2:
            return R._into(out, g * b if a.ndim == 1 else np.multiply.outer(g, b))
    return R._into(out, R._matmul_a(g, ans, a, b))


def _matmul_b(g, ans, a, b, out=None):
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim <= 2:
        if b.ndim == 2:
            if a.ndim == 2:
                return a.T.dot(g) if out is None else R._dot_into(a.T, g, out)
            return R._into(out, np.multiply.outer(a, g))
        if b.ndim == 1:
            return R._into(out, g * a if a.ndim == 1 else g.dot(a))
    if type(a) is np.ndarray and a.ndim > 2 and R.ndim(b) == 2:
        k, m = b.shape  # every row of a stack meets the same matrix: one product
        rows, g_rows = a.reshape(-1, k).T, g.reshape(-1, m)
        return rows.dot(g_rows) if out is None else R._dot_into(rows, g_rows, out)
    return R._into(out, R._matmul_b(g, ans, a, b))


defvjp_plain(R.matmul, _on_plain_values(_matmul_a, uses_ans=False),
             _on_plain_values(_matmul_b, uses_ans=False))
FRESH.update((_matmul_a, _matmul_b, _getitem_x))  # (new arrays: scg/core/lowering.py)
WRITES_OUT.update((_matmul_a, _matmul_b))  # (and into a buffer given)

# ---------------------------------------------------------------- stable helpers
def _log_softmax_vjp(g, ans, axis, out=None):
    fused = rewrites.get("log_softmax_vjp")  # (one compiled pass over the rows)
    got = fused(g, ans, axis, out) if fused is not None else None
    if got is None:
        return R._into(out, g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True))
    return got


def _log_softmax_rule(g, ans, x, axis=-1):
    if effects.is_held(g) or effects.is_held(ans):  # (one operation of scg.jit's recording)
        return effects.opaque(_log_softmax_vjp, g, ans, axis)
    return _log_softmax_vjp(g, ans, axis)


defvjp_plain(R.log_softmax, _log_softmax_rule)
FRESH.update((_tanh_vjp, _log_softmax_vjp))  # (new arrays: scg/core/lowering.py)
WRITES_OUT.update((_tanh_vjp, _log_softmax_vjp))
defvjp_plain(R.sigmoid, lambda g, ans, x: g * (ans * (1.0 - ans)))
defvjp_plain(R.softplus, lambda g, ans, x: np.negative(g * np.expm1(np.negative(ans))))
# (np.where, not g * mask: an infinite g where x <= 0 must give 0, not nan)
defvjp_plain(R.relu, lambda g, ans, x: np.where(ans > 0.0, g, 0.0))
