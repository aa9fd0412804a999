"""Third review of scg.jit: the folding of negations into products (2aad48d, since
taken out: it changed the sign bits of NaNs and, for integers and complex numbers, the
numbers), the fixes of the second review (class fingerprints, non-finite constants,
constant gradients) and output buffers reused only from fused.REUSE_MIN entries.

Sections "bugs: ..." reproduced the bugs found (all fixed); each runs the same calls
eagerly and through `scg.jit` in lockstep and asserts what the eager run gives, bit for
bit. Sections "checked: ..." cover risky cases that turned out fine.
"""

import dataclasses
import enum
import math

import numpy as np
import pytest

import scg
from jit_compare import same_bits as same


# ---------------------------------------------------------------------------- helpers
def lockstep(fn, args, calls=4):
    """Eager and jitted calls in turn; returns (jitted, [(eager, jitted) per call])."""
    jitted = scg.jit(fn)
    pairs = [(fn(*args), jitted(*args)) for _ in range(calls)]
    return jitted, pairs


def check(fn, *args, calls=4):
    jitted, pairs = lockstep(fn, args, calls)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    for want, got in pairs:
        assert same(want, got), (want, got)
    return jitted


def source_of(jitted):
    return next(e.source for e in jitted._entries.values() if e.source)


# ==================================== bugs: _fold_negations (2aad48d, scg/core/replay.py)
# -((-a) * b) -> a * b is exact only when negation is exact in a's own dtype and the
# product's rounding is sign-symmetric. -(-a) -> a replaces a fresh array by a's object.

def test_fold_double_negation_returns_the_callers_input_array():
    """-(-x) is replayed as `v3 = v0`: the replay returns the caller's own input array
    (eager: a new array). Writing into the result then changes the input.
    (The fold runs only when the recording also holds a multiply.)"""
    def f(x, w):
        return -(-x), x * w

    x, w = np.arange(3.0), np.ones(3)
    jitted = check(f, x, w)
    r = jitted(x, w)
    assert not np.shares_memory(r[0], x), source_of(jitted)


def test_fold_double_negation_makes_two_outputs_one_array():
    """y and -(-y) are returned as the same array by the replay (eager: two arrays)."""
    def f(x, w):
        y = np.exp(x) * w
        return y, -(-y)

    x, w = np.arange(3.0), np.ones(3)
    jitted = check(f, x, w)
    r = jitted(x, w)
    assert not np.shares_memory(r[0], r[1]), source_of(jitted)


def test_fold_double_negation_of_a_0d_array_changes_the_result_type():
    """np.negative of a 0-d array gives a numpy scalar: eager -(-x) is np.float64; the
    replay returns the 0-d ndarray x itself."""
    def f(x, w):
        return -(-x), x * w

    check(f, np.array(2.0), 2.0)


@pytest.mark.parametrize("a, b", [
    (np.array([1, 2, 200], dtype=np.uint8), np.array([2.0, 3.0, 1.0])),
    (np.array([-128, 5], dtype=np.int8), np.array([1.0, 1.0])),
    (np.array([-128, 5], dtype=np.int8), np.array([1, 1], dtype=np.int16)),
    (np.array([np.iinfo(np.int64).min, 1]), np.array([1.0, 2.0])),
], ids=["uint8*float", "int8_min*float", "int8_min*int16", "int64_min*float"])
def test_fold_product_of_a_wrapping_integer_negation_gives_other_numbers(a, b):
    """-((-a) * b) -> a * b assumes -a is exact; for unsigned ints -a is 2**k - a, and
    for a signed minimum it wraps to itself. With b of a wider type the product is done
    in the wider type: uint8 [1, 2, 200] * [2., 3., 1.] gives eager [-510, -762, -56],
    the replay [2, 6, 200]. No error, wrong numbers."""
    check(lambda a, b: -((-a) * b), a, b)


def test_fold_complex_product_loses_the_sign_of_zero():
    """For complex numbers the fold is not exact at zero: the real part of (-a) * b is
    (-ar)br - (-ai)bi, and -0 - (-0) = +0, so -((-a) * b) has real part -0 where a * b has
    +0 (a = 0j, b = 1 + 0j)."""
    check(lambda a, b: -((-a) * b), np.array([0j, 1 + 0j]), np.array([1 + 0j, 0j]))


@pytest.mark.parametrize("case", ["nan_operand", "default_nan", "grad"])
def test_fold_changes_the_sign_bit_of_nans(case):
    """The commit claims every bit is kept; NaN signs are not. x86 propagates the NaN
    operand's sign through a product and makes a negative default NaN for inf * 0, so
    -((-a) * nan) is -nan where a * nan is +nan, and -((-inf) * -0.0) is +nan where
    inf * -0.0 is -nan. Seen in a gradient too (the commit's own example with t = nan):
    np.signbit and np.copysign of the replayed gradient differ from eager."""
    if case == "nan_operand":
        check(lambda a, b: -((-a) * b), np.array([1.0, 2.0]), np.array([np.nan, -np.nan]))
    elif case == "default_nan":
        with np.errstate(invalid="ignore"):
            check(lambda a, b: -((-a) * b), np.array([np.inf, 1.0]), np.array([-0.0, 1.0]))
    else:
        def f(t, w):
            return np.sum((np.log1p(t * t) - scg.softplus(t)) * w)
        with np.errstate(invalid="ignore"):
            check(scg.grad(f), np.array([np.nan, -1.5, 2.0]), np.array([1.0, 1.0, 2.0]))


# ===================================== checked: _fold_negations cases that stay exact
@pytest.mark.parametrize("name", [
    "float32", "float32*float16", "int64", "signed_zeros", "neg_neg_product",
    "product_reused", "square_of_negation", "triple_negation", "transpose_view",
    "negative_dtype_kw", "multiply_out_kw", "multiply_dtype_kw", "modf_tuple", "matmul"])
def test_fold_cases_that_agree_bit_for_bit(name):
    X = np.array([[1.0, -0.0], [0.0, 3.5]])
    W = np.array([[2.0, 3.0], [-0.0, 0.5]])
    fns = {
        "float32": (lambda a, b: -((-a) * b), X.astype(np.float32), W),
        "float32*float16": (lambda a, b: -(a * (-b)), X.astype(np.float32),
                            W.astype(np.float16)),
        "int64": (lambda a, b: -((-a) * b), np.array([3, -4, 0]), np.array([2, 5, -7])),
        "signed_zeros": (lambda a, b: -((-a) * b), np.array([0.0, -0.0, 0.0, -0.0]),
                         np.array([1.0, 1.0, -1.0, -1.0])),
        "neg_neg_product": (lambda a, b: -((-a) * (-b)), X, W),
        "product_reused": (lambda a, b: (lambda p: (-p, p))((-a) * b), X, W),
        "square_of_negation": (lambda a, b: (lambda n: -(n * n))(-a) + b, X, W),
        "triple_negation": (lambda a, b: (-(-(-a)), a * b), X, W),
        "transpose_view": (lambda a, b: -((-a.T) * b), X, W),
        "negative_dtype_kw": (lambda a, b: -(np.negative(a, dtype=np.float32) * b), X, W),
        "multiply_out_kw": (lambda a, b: -np.multiply(-a, b, out=np.empty_like(a)), X, W),
        "multiply_dtype_kw": (lambda a, b: -np.multiply(-a, b, dtype=np.float32), X, W),
        "modf_tuple": (lambda a, b: (-(-np.modf(a * b)[0]), -np.modf(-a)[1] * b), X, W),
        "matmul": (lambda a, b: -((-a) @ b), X, W),
    }
    fn, a, b = fns[name]
    check(fn, a, b)


def test_fold_in_a_gradient_with_signed_zeros_and_inf():
    def f(t, w):
        return np.sum((np.log1p(t * t) - scg.softplus(t)) * w)

    with np.errstate(invalid="ignore"):
        check(scg.grad(f), np.array([0.0, -0.0, 1.0, -2.0]),
              np.array([-0.0, 0.0, np.inf, 3.0]))


def test_negating_a_bool_raises_as_eager():
    jitted = scg.jit(lambda a, b: -((-a) * b))
    for _ in range(3):
        with pytest.raises(TypeError):
            jitted(np.array([True, False]), np.array([1.0, 2.0]))


# ====================== bugs: classes reached as values are compared by identity only
# fingerprint._walk: `type` is in _BY_IDENTITY, so a class that the function reads as a
# global, through a closure, or as another class's attribute is fingerprinted by id:
# _walk_class (99bb439) runs only for the class of an instance. Its attributes and
# metaclass attributes can change and the replay keeps the recorded values.

def _stale_after(f, mutate, x=np.arange(3.0)):
    jitted = scg.jit(f)
    for _ in range(4):
        assert same(f(x), jitted(x))
    assert jitted.stats["replays"] >= 1, jitted.explain()
    mutate()
    assert same(f(x), jitted(x)), "replayed a value from before the change"


class _Settings:
    scale = 2.0


def test_class_attribute_read_through_a_global_class_is_not_seen():
    """`x * _Settings.scale`; then `_Settings.scale = 5.0`: the replay still gives x * 2."""
    try:
        _stale_after(lambda x: x * _Settings.scale, lambda: setattr(_Settings, "scale", 5.0))
    finally:
        _Settings.scale = 2.0


def test_class_held_as_another_classes_attribute_is_not_seen():
    """A model class holding its configuration class (`cfg = Config`): the configuration
    class is walked by identity, so Config.scale = 3.0 goes unseen."""
    class Config:
        scale = 2.0

    class Model:
        cfg = Config

        def __call__(self, x):
            return x * self.cfg.scale

    m = Model()
    _stale_after(lambda x: m(x), lambda: setattr(Config, "scale", 3.0))


def test_dataclass_default_read_on_the_class_is_not_seen():
    @dataclasses.dataclass
    class Hyper:
        lr: float = 2.0

    _stale_after(lambda x: x * Hyper.lr, lambda: setattr(Hyper, "lr", 4.0))


def test_metaclass_attribute_is_not_seen():
    class Meta(type):
        factor = 2.0

    class WithMeta(metaclass=Meta):
        pass

    o = WithMeta()
    _stale_after(lambda x: x * type(o).factor, lambda: setattr(Meta, "factor", 6.0))


# ============================ bugs: dunder methods are skipped by _walk_class (99bb439)
# `_walk_class` skips every __name__ but __call__ and __init__: an operator method
# (__getitem__, __mul__, __float__, ...) replaced on the class keeps the dict's size,
# and the globals such a method reads are never walked.

_G = 2.0


def test_dunder_method_reading_a_global_is_not_seen():
    class Box:
        def __getitem__(self, k):
            return _G * k

    box = Box()

    def change():
        global _G
        _G = 7.0
    try:
        _stale_after(lambda x: x * box[1], change)
    finally:
        globals()["_G"] = 2.0


def test_dunder_method_replaced_on_the_class_is_not_seen():
    class Box:
        def __getitem__(self, k):
            return 2.0

    box = Box()
    _stale_after(lambda x: x * box[0], lambda: setattr(Box, "__getitem__", lambda s, k: 9.0))


# ======================= bugs: complex non-finite constants (99bb439 fixed only floats)
def test_a_non_finite_complex_constant_is_never_replayed():
    """`_Recording._expr` still writes complex constants by repr: complex(inf, 0) is
    written `(inf+0j)`, an undefined name; each replay raises NameError, is counted as a
    miss ('replay(s) stopped by a guard') and records again. Results agree; nothing is
    ever replayed."""
    x = np.array([1.0, -2.0, 0.5])
    with np.errstate(invalid="ignore"):
        check(lambda x: x * complex(math.inf, 0), x)


# ================================= checked: class fingerprints that do invalidate
_H = 2.0


def _set_h(v):
    global _H
    _H = v


class _Many:
    scale = 2.0

    def get(self):
        return self.scale


for _k in range(300):
    setattr(_Many, f"m{_k}", lambda self, _k=_k: float(_k))


@pytest.mark.parametrize("case", [
    "method_reads_global", "subclass_override", "class_array_mutated", "local_class",
    "enum_member", "slots_property", "property_replaced", "dataclass_field",
    "staticmethod_reads_global", "many_methods"])
def test_class_changes_that_are_seen(case):
    if case == "method_reads_global":
        class M:
            def s(self):
                return _H
        o = M()
        try:
            _stale_after(lambda x: x * o.s(), lambda: _set_h(4.0))
        finally:
            _set_h(2.0)
    elif case == "staticmethod_reads_global":
        class M:
            @staticmethod
            def s():
                return _H
        o = M()
        try:
            _stale_after(lambda x: x * o.s(), lambda: _set_h(11.0))
        finally:
            _set_h(2.0)
    elif case == "subclass_override":
        class Base:
            def s(self):
                return 2.0

        class Sub(Base):
            pass
        o = Sub()
        _stale_after(lambda x: x * o.s(), lambda: setattr(Sub, "s", lambda self: 3.0))
    elif case == "class_array_mutated":
        class A:
            w = np.array([1.0, 2.0, 3.0])
        o = A()
        _stale_after(lambda x: x * o.w, lambda: A.w.__setitem__(0, 10.0))
    elif case == "local_class":
        def make():
            class Local:
                k = 2.0

                def s(self):
                    return self.k
            return Local
        L = make()
        o = L()
        _stale_after(lambda x: x * o.s(), lambda: setattr(L, "k", 8.0))
    elif case == "enum_member":
        class Color(enum.Enum):
            RED = 2.0
            BLUE = 3.0
        cur = [Color.RED]
        _stale_after(lambda x: x * cur[0].value, lambda: cur.__setitem__(0, Color.BLUE))
    elif case == "slots_property":
        class S:
            __slots__ = ("_a",)

            def __init__(self):
                self._a = 2.0

            @property
            def a(self):
                return self._a
        o = S()
        _stale_after(lambda x: x * o.a, lambda: setattr(o, "_a", 5.0))
    elif case == "property_replaced":
        class P:
            @property
            def a(self):
                return 2.0
        o = P()
        _stale_after(lambda x: x * o.a, lambda: setattr(P, "a", property(lambda s: 5.0)))
    elif case == "dataclass_field":
        @dataclasses.dataclass
        class D:
            s: float = 2.0

            def get(self):
                return self.s
        o = D()
        _stale_after(lambda x: x * o.get(), lambda: setattr(o, "s", 4.0))
    else:
        o = _Many()
        try:
            _stale_after(lambda x: x * o.get(), lambda: setattr(_Many, "scale", 3.0))
        finally:
            _Many.scale = 2.0


# ================================= checked: non-finite float constants, constant grads
@pytest.mark.parametrize("name", [
    "clip", "maximum", "where_nan", "full_like_nan", "power_nan", "tuple_of_infs",
    "float64_nan", "nan_to_num"])
def test_non_finite_float_constants_are_replayed(name):
    fns = {
        "clip": lambda x: np.clip(x, -math.inf, 0.5),
        "maximum": lambda x: np.maximum(x, -math.inf),
        "where_nan": lambda x: np.where(x > 0, x, math.nan),
        "full_like_nan": lambda x: x + np.full_like(x, math.nan),
        "power_nan": lambda x: x ** math.nan,
        "tuple_of_infs": lambda x: np.clip(x, *(-math.inf, math.inf)),
        "float64_nan": lambda x: x * np.float64("nan"),
        "nan_to_num": lambda x: np.nan_to_num(x / 0.0, posinf=math.inf, neginf=-math.inf),
    }
    with np.errstate(all="ignore"):
        check(fns[name], np.array([1.0, -2.0, 0.0]))


def test_constant_gradients_returned_twice_are_distinct_and_kept():
    """Gradients that are constants of the recording (x * c: the cotangent is c), one of
    them next to a traced one, returned twice in a structure: distinct arrays within a
    call and between calls, values kept after the next call."""
    c = np.array([1.5, -0.0, 2.0])

    def f(x, y):
        return np.sum(x * c) + np.sum(y * y) + np.sum(x * math.inf * 0.0 + x)

    g = scg.grad(f, argnums=(0, 1))

    def h(x, y):
        gx, gy = g(x, y)
        return {"a": gx, "b": gx, "c": gy}

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.0, 1.0])
    with np.errstate(invalid="ignore"):
        jitted = check(h, x, y)
        first = jitted(x, y)
        kept = {k: v.copy() for k, v in first.items()}
        second = jitted(x, y)
    for k in first:
        assert same(first[k], kept[k])
        for k2 in second:
            assert not np.shares_memory(first[k], second[k2])


# ====================== checked: reused output buffers at n = 5 000 000 (7fe701f)
def test_large_grad_samples_never_share_memory_between_calls():
    THETA = {"mu": 2.0, "sigma": 1.3}

    def model(estimator):
        def m(theta):
            x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=estimator)
            return x ** 2
        return m

    n = 5_000_000
    for estimator in ("pathwise", "score"):
        E = scg.expectation(model(estimator), n=n, seed=0)
        first = scg.grad_samples(E)(THETA).samples
        kept = {k: v.copy() for k, v in first.items()}
        second = scg.grad_samples(E)(THETA).samples
        kept2 = {k: v.copy() for k, v in second.items()}
        mu = first["mu"]
        del first  # (sigma's buffer is free again)
        third = scg.grad_samples(E)(THETA).samples
        for k in kept:
            assert not np.shares_memory(second[k], third[k])
            assert not np.shares_memory(mu, third[k]) and not np.shares_memory(mu, second[k])
        np.testing.assert_array_equal(mu, kept["mu"])
        for k in kept2:
            np.testing.assert_array_equal(second[k], kept2[k])
        del second, third, mu, kept, kept2
