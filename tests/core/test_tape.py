"""The tape (scg/core/tape.py): what it keeps of the plain arrays it is given, and
cotangents on a few rows.

A plain array the tape keeps is copied when the caller could change it in place, with the
array's memory layout. A cotangent that is zero off a few rows (`Rows`): the backward pass
takes the rules of the operations that act on each row apart on those rows only, and makes
the cotangent whole before any other. Every derivative equals the one taken on all rows
(`x[start:stop]`, whose cotangent is whole), for operations of each kind, at first and
second order, and under scg.jit."""

import numpy as np
import pytest

import scg
from scg.core.tape import Primitive, defvjp, kept
from scg.numpy import rules as R

ROWS = 6
rng = np.random.default_rng(0)
X = rng.normal(size=(ROWS, 4))
W = rng.normal(size=(4, 3))
S = rng.normal(size=(ROWS, 3, 4))  # a stack
C = rng.normal(size=(2, 3))

# y(x, w): operations that act on each row of the first axis apart, and some that do not
# (those make the cotangent whole first)
CASES = {
    "elementwise, w shared by the rows": lambda x, w: np.tanh(x[:, :3] * w[0]) + w[1],
    "elementwise, both with rows": lambda x, w: x[:, :3] * (x[:, 1:] @ w[1:]),
    "where and maximum": lambda x, w: np.where(x[:, :3] > 0, x[:, :3] * w[0],
                                               np.maximum(x[:, :3], w[1])),
    "matrix times a matrix": lambda x, w: scg.softplus(x @ w),
    "a stack times a matrix": lambda x, w: (x[:, None, :] * S) @ w,
    "a stack times a stack": lambda x, w: np.sum(S @ (x[:, :, None] * w[None]), axis=1),
    "a shared matrix times a stack": lambda x, w: np.sum(
        (w.T @ (x[:, :, None] * S.transpose(0, 2, 1))), axis=-1),
    "a stack times a vector": lambda x, w: np.tanh((x[:, None, :] * S) @ w[:, 0]),
    "sums, means, maxima along other axes": lambda x, w: np.stack(
        [np.sum(x * w[:, 0], axis=1), np.mean(x, axis=-1) * w[0, 0],
         np.max(x * w[:, 1], axis=1)], axis=1),
    "reshape keeping the rows": lambda x, w: (x @ w).reshape(ROWS, 3, 1) * w[None, 0, :, None],
    "broadcast_to": lambda x, w: np.broadcast_to((x @ w)[:, None, :], (ROWS, 2, 3)).sum(1),
    "log_softmax, softmax and logsumexp": lambda x, w: scg.log_softmax(x @ w, axis=-1)
        + scg.softmax(x @ w, axis=1) * scg.logsumexp(x, axis=1, keepdims=True),
    # (these mix rows: the cotangent is made whole)
    "a sum over the rows": lambda x, w: (x @ w) + np.sum(x @ w, axis=0),
    "a transpose": lambda x, w: ((x @ w).T * 2.0).T,
    "a reshape across the rows": lambda x, w: (x @ w).reshape(3, ROWS * 3 // 3, 1)
        .reshape(ROWS, 3),
    "a shift of the rows": lambda x, w: (x @ w)[::-1] * np.tanh(x[:, :3]),
}


MIXING = {"a sum over the rows", "a transpose", "a reshape across the rows",
          "a shift of the rows"}


def cost(y, start, stop, cut):
    rows = R.take_rows(y, start, stop) if cut else y[start:stop]
    weights = np.cos(np.arange(np.size(rows))).reshape(np.shape(rows))
    return np.sum(rows * weights)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("start, stop", [(0, 2), (3, 5), (5, 6)])
def test_same_gradient_as_on_every_row(case, start, stop):
    y = CASES[case]
    cut = scg.grad(lambda x, w: cost(y(x, w), start, stop, True), argnums=(0, 1))(X, W)
    whole = scg.grad(lambda x, w: cost(y(x, w), start, stop, False), argnums=(0, 1))(X, W)
    for a, b in zip(cut, whole):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
        assert np.shape(a) == np.shape(b)
    # x's rows off start:stop get no cotangent where every operation acts on rows apart
    if case not in MIXING:
        assert not np.any(cut[0][:start]) and not np.any(cut[0][stop:])


def test_rules_run_on_the_rows_only():
    """A primitive that acts on rows apart gets the rows of its cotangent, its result and
    its arguments (a rule's work is on those rows); one that does not gets them whole."""
    seen = []
    square = Primitive("rows_square", np.square)
    square.rows = R.rows_elementwise
    defvjp(square, lambda g, ans, x: (seen.append((np.shape(g), np.shape(ans), np.shape(x))),
                                      2.0 * g * x)[1])
    mixing = Primitive("mixing_square", np.square)  # (no rows rule)
    defvjp(mixing, lambda g, ans, x: (seen.append((np.shape(g), np.shape(ans), np.shape(x))),
                                      2.0 * g * x)[1])
    for p, expected in ((square, [((2, 4),) * 3]), (mixing, [((ROWS, 4),) * 3])):
        seen.clear()
        g = scg.grad(lambda x: np.sum(R.take_rows(p(x) * W[:, 0], 2, 4)))(X)
        assert seen == expected
        np.testing.assert_array_equal(g[2:4], 2.0 * X[2:4] * W[:, 0])
        assert not np.any(g[:2]) and not np.any(g[4:])


def test_paths_that_meet():
    """Cotangents of the same rows add on those rows; of other rows, or whole, are made
    whole first."""
    def f(x, w, other):
        y = np.tanh(x @ w)
        total = np.sum(R.take_rows(y, 1, 3) * C) + np.sum(R.take_rows(y * y, 1, 3) * C)
        return total + (np.sum(R.take_rows(y, other, other + 2) * C) + y[0, 1])

    def whole(x, w, other):
        y = np.tanh(x @ w)
        total = np.sum(y[1:3] * C) + np.sum((y * y)[1:3] * C)
        return total + (np.sum(y[other:other + 2] * C) + y[0, 1])

    for other in (1, 4):
        a = scg.grad(f, argnums=(0, 1))(X, W, other)
        b = scg.grad(whole, argnums=(0, 1))(X, W, other)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-13, atol=1e-14)


def test_second_order():
    def f(w):
        return np.sum(R.take_rows(np.tanh(X @ w), 2, 4) ** 3)

    def whole(w):
        return np.sum(np.tanh(X @ w)[2:4] ** 3)

    np.testing.assert_allclose(scg.hessian(f)(W), scg.hessian(whole)(W), rtol=1e-12,
                               atol=1e-13)


def test_under_jit_as_eager():
    grad = scg.grad(lambda x, w: cost(CASES["a stack times a matrix"](x, w), 2, 4, True),
                    argnums=(0, 1))
    jitted = scg.jit(grad)
    for k in range(3):
        w = W + 0.1 * k
        for a, b in zip(jitted(X, w), grad(X, w)):
            np.testing.assert_array_equal(a, b)
    assert jitted.stats["replays"] >= 1


def test_a_kept_constant_keeps_its_memory_layout():
    """The tape copies a small writeable constant it keeps (the caller may change it in
    place later); the copy has the constant's layout, as scg.jit's recording, which does
    not copy, sees it: a result's layout, and a sum over it, follow the operands'."""
    c = np.asfortranarray(rng.normal(size=(5, 4, 3)))
    copy = kept(c)
    assert copy is not c and copy.strides == c.strides
    permuted = rng.normal(size=(3, 4, 5)).transpose(2, 0, 1)  # (5, 3, 4), axis 0 innermost
    assert kept(permuted).strides == permuted.strides
