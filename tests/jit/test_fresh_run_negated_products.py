"""scg.jit: negations and products are replayed bit for bit.

Double negations, negated products and negations of products in every dtype (float32,
float16, wrapping unsigned and signed integers, complex numbers, bools), with signed
zeros, infinities and the sign bits of NaNs, keyword arguments (dtype=, out=), tuples of
results and matrix products, in values and gradients: the replay returns what the eager
call returns, new arrays where eager makes new arrays, and raises where eager raises.
"""

import numpy as np
import pytest

import scg

from .compare import check_repeated as check, source_of


def test_fold_double_negation_returns_the_callers_input_array():
    """-(-x) next to a multiply: the replay returns a new array, as eager does, never the
    caller's own input array (writing into the result must not change the input)."""
    def f(x, w):
        return -(-x), x * w

    x, w = np.arange(3.0), np.ones(3)
    jitted = check(f, x, w)
    r = jitted(x, w)
    assert not np.shares_memory(r[0], x), source_of(jitted)


def test_fold_double_negation_makes_two_outputs_one_array():
    """y and -(-y) are returned by the replay as two arrays, as eagerly."""
    def f(x, w):
        y = np.exp(x) * w
        return y, -(-y)

    x, w = np.arange(3.0), np.ones(3)
    jitted = check(f, x, w)
    r = jitted(x, w)
    assert not np.shares_memory(r[0], r[1]), source_of(jitted)


def test_fold_double_negation_of_a_0d_array_changes_the_result_type():
    """np.negative of a 0-d array gives a numpy scalar: the replay of -(-x) returns
    np.float64, as eagerly, not the 0-d ndarray x itself."""
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
    """-((-a) * b) where the negation of a wraps (unsigned integers: -a is 2**k - a; a signed
    minimum is its own negation) and b is of a wider type: the replay gives the eager
    numbers (uint8 [1, 2, 200] * [2., 3., 1.]: [-510, -762, -56]), not those of a * b."""
    check(lambda a, b: -((-a) * b), a, b)


def test_fold_complex_product_loses_the_sign_of_zero():
    """For complex numbers -((-a) * b) differs from a * b at zero: the real part of (-a) * b
    is (-ar)br - (-ai)bi, and -0 - (-0) = +0, so -((-a) * b) has real part -0 where a * b has
    +0 (a = 0j, b = 1 + 0j); the replay keeps the eager sign."""
    check(lambda a, b: -((-a) * b), np.array([0j, 1 + 0j]), np.array([1 + 0j, 0j]))


@pytest.mark.parametrize("case", ["nan_operand", "default_nan", "grad"])
def test_fold_changes_the_sign_bit_of_nans(case):
    """The sign bits of NaNs are kept: x86 propagates the NaN operand's sign through a
    product and makes a negative default NaN for inf * 0, so -((-a) * nan) is -nan where
    a * nan is +nan, and -((-inf) * -0.0) is +nan where inf * -0.0 is -nan. In a gradient
    too (t = nan): np.signbit and np.copysign of the replayed gradient are the eager ones."""
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
