"""The registry of differentiable functions that drives the generic gradient tests.

`REGISTRY` maps each numpy function (or scg primitive, for the helpers and indexing) to a
list of `Case`s: the function to check, a hypothesis strategy for its shapes and settings
(broadcasting pairs included), and a sampler per argument that keeps values inside the
domain and away from kinks. `JUMPS` and `INSPECT` list the dispatched functions that have
no derivative by design; tests/numpy/test_registry.py fails if a dispatched numpy function
or a primitive of scg/numpy/rules.py is in none of them, so a new rule needs a test line.
"""

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import scg
from scg.numpy import rules as R


# ---------------------------------------------------------------- value samplers
def uniform(lo=-2.0, hi=2.0):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def away(gap=0.3, hi=2.0):
    """Away from 0 (kinks of abs, relu; poles of 1/x)."""
    return lambda rng, shape: rng.choice([-1.0, 1.0], size=shape) * rng.uniform(gap, hi, size=shape)


def grid(offset):
    """Values k/2 + offset + U(0, 0.1): two grids with offsets 0 and 0.25 never come closer
    than 0.15, so maximum / minimum / clip are smooth around them."""
    return lambda rng, shape: (rng.integers(-4, 4, size=shape) / 2 + offset
                               + rng.uniform(0, 0.1, size=shape))


def distinct(rng, shape):
    """All entries at least 0.2 apart (max / min without ties)."""
    size = int(np.prod(shape))
    return (rng.permutation(size) * 0.3 - 1.0 + rng.uniform(0, 0.1, size=size)).reshape(shape)


@dataclass
class Case:
    """fn(*arrays, **settings) with arrays drawn by `samplers` at shapes from `strategy`.

    `strategy` draws a dict with key "shapes" (a tuple, one shape per argument) and any
    keyword settings for fn; it may also be a list of such dicts, all of which are checked.
    """
    fn: Callable
    strategy: st.SearchStrategy | list
    samplers: list = field(default_factory=lambda: [uniform()])
    order: int = 2
    name: str = ""

    def sample(self, rng, shapes):
        samplers = self.samplers * len(shapes) if len(self.samplers) == 1 else self.samplers
        return [s(rng, shape) for s, shape in zip(samplers, shapes)]


# ---------------------------------------------------------------- shape strategies
SHAPE = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
UNARY = st.fixed_dictionaries({"shapes": SHAPE.map(lambda s: (s,))})
BINARY = st.fixed_dictionaries({"shapes": hnp.mutually_broadcastable_shapes(
    num_shapes=2, min_dims=0, max_dims=3, max_side=3).map(lambda b: b.input_shapes)})
TERNARY = st.fixed_dictionaries({"shapes": hnp.mutually_broadcastable_shapes(
    num_shapes=3, min_dims=0, max_dims=3, max_side=3).map(lambda b: b.input_shapes)})


@st.composite
def reduction(draw, min_dims=0, keepdims=True, tuples=True):
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=4))
    nd = len(shape)
    choices = [st.none()]
    if nd:
        choices.append(st.integers(-nd, nd - 1))
        if tuples:
            choices.append(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                    unique=True).map(tuple))
    out = {"shapes": (shape,), "axis": draw(st.one_of(*choices))}
    if keepdims:
        out["keepdims"] = draw(st.booleans())
    return out


@st.composite
def along_axis(draw):
    """A shape with at least one dimension and an axis of it (softmax and friends)."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    return {"shapes": (shape,), "axis": draw(st.integers(-len(shape), len(shape) - 1))}


def fixed(*options):
    """Settings from a list, each checked in turn: each option is (shapes, settings dict)."""
    return [{"shapes": shapes, **settings} for shapes, settings in options]


def unary(fn, sampler=None, **kw):
    return Case(fn, UNARY, [sampler or uniform()], **kw)


def binary(fn, *samplers, **kw):
    return Case(fn, BINARY, list(samplers) or [uniform()], **kw)


# ---------------------------------------------------------------- fixed settings
MATMUL_SHAPES = fixed(
    (((3,), (3,)), {}), (((2, 3), (3,)), {}), (((3,), (3, 2)), {}), (((2, 3), (3, 4)), {}),
    (((5, 2, 3), (3, 4)), {}), (((2, 3), (5, 3, 4)), {}), (((5, 1, 2, 3), (4, 3, 2)), {}),
    (((3,), (5, 3, 2)), {}), (((5, 2, 3), (3,)), {}))
DOT_SHAPES = fixed((((3,), (3,)), {}), (((2, 3), (3,)), {}), (((2, 3), (3, 4)), {}),
                   (((), (3,)), {}), (((2, 2), ()), {}), (((3,), (3, 2)), {}))
EINSUM = fixed(
    (((2, 3), (3, 4)), {"subscripts": "ij,jk->ik"}),
    (((2, 3), (3, 4)), {"subscripts": "ij,jk"}),            # implicit output
    (((3,), (3,)), {"subscripts": "i,i->"}),
    (((2, 3),), {"subscripts": "ij->ji"}),
    (((2, 3),), {"subscripts": "ij->"}),
    (((2, 3), (4,)), {"subscripts": "ij,k->ijk"}),          # outer product
    (((2, 3), (2, 3)), {"subscripts": "ij,ij->i"}),
    (((2, 3, 4), (4,)), {"subscripts": "...i,i->..."}),
    (((5, 2, 3), (5, 3, 2)), {"subscripts": "...ij,...jk->...ik"}),
    (((3, 1, 4), (5, 4)), {"subscripts": "...i,...i->..."}),  # ellipsis broadcasting
    (((2, 3), (3,)), {"subscripts": "...j,j"}),
    (((2, 3), (3, 4), (4,)), {"subscripts": "ij,jk,k->i"}),
    (((2, 3), (5,)), {"subscripts": "ij,k->i"}),            # index summed in one operand
)
GETITEM = fixed(*[(((4, 3),), {"index": i}) for i in [
    (slice(1, 3),), (1,), (-1, 2), (np.array([0, 2, 2]),), (np.array([True, False, True, True]),),
    (Ellipsis, 1), (None, slice(None), 0), (slice(None, None, -1), np.array([0, 1])),
    (np.array([[0, 1], [1, 3]]),), (np.array([3, 0]), np.array([1, 1])),
    (np.array([[True, False, True], [False, False, True],
               [True, True, True], [False, False, False]]),),
    (slice(None), slice(0, 3, 2)),
]])
CONCAT = fixed(
    (((2, 3), (4, 3)), {"axis": 0}), (((2, 3), (2, 1), (2, 2)), {"axis": 1}),
    (((3,), (2,)), {"axis": 0}), (((2, 1, 2), (2, 3, 2)), {"axis": -2}))
STACK = fixed((((3,), (3,)), {"axis": 0}), (((2, 3), (2, 3), (2, 3)), {"axis": 1}),
              (((2, 3), (2, 3)), {"axis": -1}), (((), ()), {"axis": 0}))
RESHAPE = fixed((((2, 3),), {"newshape": (3, 2)}), (((2, 3),), {"newshape": (-1,)}),
                (((6,),), {"newshape": (2, 1, 3)}), (((),), {"newshape": (1, 1)}))
TRANSPOSE = fixed((((2, 3),), {"axes": None}), (((2, 3, 4),), {"axes": (1, 2, 0)}),
                  (((2, 3, 4),), {"axes": (-1, 0, 1)}), (((3,),), {"axes": None}))
SWAP = fixed((((2, 3),), {"a": 0, "b": 1}), (((2, 3, 4),), {"a": -1, "b": 0}))
MOVE = fixed((((2, 3, 4),), {"source": 0, "destination": -1}),
             (((2, 3, 4),), {"source": -1, "destination": 0}))
EXPAND = fixed((((3,),), {"axis": 0}), (((2, 3),), {"axis": -1}), (((2, 3),), {"axis": (0, 2)}))
SQUEEZE = fixed((((1, 3, 1),), {"axis": None}), (((1, 3, 1),), {"axis": 0}),
                (((2, 1),), {"axis": -1}), (((1, 3, 1),), {"axis": (0, 2)}))
BROADCAST = fixed((((3,),), {"shape": (2, 3)}), (((2, 1),), {"shape": (4, 2, 3)}),
                  (((),), {"shape": (2, 2)}))
ALONG = fixed((((3, 4),), {"indices": np.array([[0], [3], [1]]), "axis": 1}),
              (((3, 4),), {"indices": np.array([[0, 2, 1, 0]]), "axis": 0}),
              (((3, 4),), {"indices": np.array([[0, 0], [1, 2], [3, 3]]), "axis": -1}))
TAKE = fixed((((5,),), {"indices": np.array([0, 4, 4]), "axis": None}),
             (((2, 3),), {"indices": np.array([5, 0]), "axis": None}),
             (((2, 3),), {"indices": np.array([2, 0, 2]), "axis": 1}))


# ---------------------------------------------------------------- the registry
POS = uniform(0.5, 3.0)

REGISTRY = {
    # arithmetic (also the Python operators: + - * / ** unary -)
    np.add: [binary(np.add), binary(lambda a, b: a + b, name="operator +"),
             unary(lambda a: 2.0 + a, name="float + traced")],
    np.subtract: [binary(np.subtract), binary(lambda a, b: a - b, name="operator -"),
                  unary(lambda a: 1.0 - a, name="float - traced")],
    np.multiply: [binary(np.multiply), binary(lambda a, b: a * b, name="operator *")],
    np.true_divide: [binary(np.true_divide, uniform(), away()),
                     binary(lambda a, b: a / b, uniform(), away(), name="operator /"),
                     unary(lambda a: 1.0 / a, away(), name="float / traced")],
    np.negative: [unary(np.negative), unary(lambda a: -a, name="unary -")],
    np.positive: [unary(np.positive), unary(lambda a: +a, name="unary +")],
    np.power: [binary(np.power, POS, uniform()),
               binary(lambda a, b: a ** b, POS, uniform(), name="operator **"),
               unary(lambda a: a ** 2, name="x ** 2"), unary(lambda a: a ** 3, name="x ** 3"),
               unary(lambda a: a ** 0.5, POS, name="x ** 0.5"),
               unary(lambda a: 2.0 ** a, name="2.0 ** x")],
    np.float_power: [binary(np.float_power, POS, uniform())],
    np.square: [unary(np.square)],
    np.sqrt: [unary(np.sqrt, POS)],
    np.reciprocal: [unary(np.reciprocal, away())],
    np.exp: [unary(np.exp)],
    np.log: [unary(np.log, POS)],
    np.log1p: [unary(np.log1p, uniform(-0.5, 2.0))],
    np.expm1: [unary(np.expm1)],
    np.absolute: [unary(np.absolute, away()), unary(abs, away(), name="abs()")],
    np.fabs: [unary(np.fabs, away())],
    np.sin: [unary(np.sin)],
    np.cos: [unary(np.cos)],
    np.tan: [unary(np.tan, uniform(-1.0, 1.0))],
    np.tanh: [unary(np.tanh)],
    np.arctan: [unary(np.arctan)],
    np.sinh: [unary(np.sinh)],
    np.cosh: [unary(np.cosh)],
    np.logaddexp: [binary(np.logaddexp)],
    np.maximum: [binary(np.maximum, grid(0.0), grid(0.25))],
    np.minimum: [binary(np.minimum, grid(0.0), grid(0.25))],
    np.matmul: [Case(np.matmul, MATMUL_SHAPES), Case(lambda a, b: a @ b, MATMUL_SHAPES,
                                                     name="operator @")],
    # reductions
    np.sum: [Case(np.sum, reduction()), Case(lambda a, **kw: a.sum(**kw), reduction(),
                                            name="method sum")],
    np.mean: [Case(np.mean, reduction()), Case(lambda a, **kw: a.mean(**kw), reduction(),
                                              name="method mean")],
    np.max: [Case(np.max, reduction(), [distinct]),
             Case(lambda a, **kw: a.max(**kw), reduction(), [distinct], name="method max")],
    np.min: [Case(np.min, reduction(), [distinct]),
             Case(lambda a, **kw: a.min(**kw), reduction(), [distinct], name="method min")],
    np.amax: [Case(np.amax, reduction(), [distinct])],
    np.amin: [Case(np.amin, reduction(), [distinct])],
    np.var: [Case(np.var, reduction(min_dims=1)),
             Case(lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=1),
                  reduction(min_dims=1).filter(lambda d: _count(d) > 1), name="var ddof=1")],
    np.std: [Case(np.std, reduction(min_dims=1).filter(lambda d: _count(d) > 1)),
             Case(lambda a, axis, keepdims: a.std(axis=axis, keepdims=keepdims, ddof=1),
                  reduction(min_dims=1).filter(lambda d: _count(d) > 2), name="std ddof=1")],
    # selection
    np.where: [Case(lambda c, x, y: np.where(c > 0, x, y), TERNARY),
               Case(lambda x, y: np.where(x > 0.5, x * y, 0.0), BINARY, name="where const")],
    np.clip: [unary(lambda x: np.clip(x, -0.6, 0.7), grid(0.0), name="clip const"),
              Case(lambda x, lo, hi: np.clip(x, lo, hi), TERNARY,
                   [grid(0.25), grid(-2.0), grid(2.0)], name="clip traced bounds"),
              Case(lambda x, hi: np.clip(x, None, hi), BINARY, [grid(0.0), grid(0.25)],
                   name="clip upper only"),
              Case(lambda x, lo: x.clip(lo), BINARY, [grid(0.0), grid(0.25)],
                   name="method clip")],
    # linear algebra
    np.dot: [Case(np.dot, DOT_SHAPES), Case(lambda a, b: a.dot(b), DOT_SHAPES[:3],
                                           name="method dot")],
    np.einsum: [Case(lambda *ops, subscripts: np.einsum(subscripts, *ops), EINSUM)],
    # shapes
    np.reshape: [Case(lambda a, newshape: np.reshape(a, newshape), RESHAPE),
                 Case(lambda a, newshape: a.reshape(newshape), RESHAPE, name="method reshape"),
                 Case(lambda a, newshape: a.reshape(*newshape), RESHAPE,
                      name="method reshape *shape")],
    np.transpose: [Case(lambda a, axes: np.transpose(a, axes), TRANSPOSE),
                   unary(lambda a: a.T, name=".T")],
    np.swapaxes: [Case(lambda x, a, b: np.swapaxes(x, a, b), SWAP)],
    np.moveaxis: [Case(np.moveaxis, MOVE)],
    np.concatenate: [Case(lambda *xs, axis: np.concatenate(xs, axis=axis), CONCAT),
                     Case(lambda *xs, axis: np.concatenate(xs, axis=axis) ** 2, CONCAT,
                          name="squared")],
    np.stack: [Case(lambda *xs, axis: np.stack(xs, axis=axis), STACK),
               Case(lambda *xs, axis: np.stack(xs, axis=axis) ** 2, STACK, name="squared")],
    np.expand_dims: [Case(np.expand_dims, EXPAND)],
    np.squeeze: [Case(np.squeeze, SQUEEZE), Case(lambda a, axis: a.squeeze(axis), SQUEEZE,
                                                name="method squeeze")],
    np.broadcast_to: [Case(np.broadcast_to, BROADCAST)],
    # Linear maps have zero second derivatives; squaring the result makes the second-order
    # check meaningful (it records the transposed map, e.g. untake, on the outer tape).
    np.take_along_axis: [Case(np.take_along_axis, ALONG),
                         Case(lambda a, **kw: np.take_along_axis(a, **kw) ** 2, ALONG,
                              name="squared")],
    np.take: [Case(lambda a, indices, axis: np.take(a, indices, axis=axis), TAKE)],
    np.ravel: [unary(np.ravel), unary(lambda a: a.ravel(), name="method ravel"),
               unary(lambda a: a.flatten(), name="method flatten")],
    # indexing (gather is what indexing by a traced index array records)
    R.getitem: [Case(lambda a, index: a[index], GETITEM),
                Case(lambda a, index: a[index] ** 2, GETITEM, name="squared")],
    R.gather: [Case(lambda a, index: R.gather(a, (slice(None), R.SLOT), index),
                    fixed((((2, 3),), {"index": np.array([2, 0, 2])}))),
               Case(lambda a, index: R.gather(a, (slice(None), R.SLOT), index) ** 2,
                    fixed((((2, 3),), {"index": np.array([2, 0, 2])})), name="squared")],
    # rows of the first axis whose cotangent stays on those rows (scg/core/tape.py, Rows)
    R.take_rows: [Case(lambda a: R.take_rows(np.tanh(a) * a, 1, 3) ** 2,
                       fixed((((4, 3),), {})), name="through operations on rows apart"),
                  Case(lambda a: R.take_rows(a.T, 0, 2) ** 2, fixed((((3, 4),), {})),
                       name="through a transpose")],
    R.rows_placed: [Case(lambda a: R.rows_placed(a, 1, 3, (4, 3)) ** 2,
                         fixed((((2, 3),), {})))],
    # casts between floating types (x.astype): the derivative is carried through
    R.cast: [unary(lambda a: a.astype(np.longdouble).astype(np.float64) * a,
                   name="astype to long double and back")],
    # the log of probabilities that may be 0 (Categorical(probs=...))
    R.log_nonnegative: [unary(R.log_nonnegative, POS)],
    # stable helpers
    scg.sigmoid: [unary(scg.sigmoid, uniform(-5.0, 5.0))],
    scg.softplus: [unary(scg.softplus, uniform(-5.0, 5.0))],
    scg.relu: [unary(scg.relu, away())],
    scg.logsumexp: [Case(scg.logsumexp, reduction())],
    scg.softmax: [Case(scg.softmax, along_axis())],
    scg.log_softmax: [Case(scg.log_softmax, along_axis())],
}


def _count(d):
    shape, axis = d["shapes"][0], d["axis"]
    axes = range(len(shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


# Dispatched functions without a derivative, by design.
JUMPS = {np.floor, np.ceil, np.rint, np.sign, np.round, np.around, np.greater,
         np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal, np.argmax,
         np.argmin, np.heaviside, np.logical_and, np.logical_or, np.logical_not,
         np.isfinite, np.isnan, np.logical_xor, np.bitwise_and, np.bitwise_or,
         np.bitwise_xor, np.invert, np.all, np.any}
INSPECT = {np.shape, np.ndim, np.size, np.isclose, np.allclose,
           np.zeros_like, np.ones_like, np.full_like, np.empty_like, np.array_equal,
           np.nonzero, np.count_nonzero}

CASES = [(key, i, case) for key, cases in REGISTRY.items() for i, case in enumerate(cases)]


def case_id(key, i, case):
    name = getattr(key, "__name__", None) or getattr(key, "name", repr(key))
    return f"{name}[{case.name or i}]"
