"""numpy code under scg.jit: inlined expressions, traced shapes, astype and matmul.

Transposes, matrix products, reshapes, new axes, powers and sums are replayed as numpy
expressions: values and gradients are the eager ones, bit for bit, including shapes
that depend on traced sizes or axes, non-contiguous operands, integer and bool sums, and
non-finite Python float constants. astype in models and gradients is replayed, and
per-draw matrix products give the eager gradients and Hessians.
"""

import numpy as np
import pytest

import scg

from .compare import check_lockstep as check, lockstep_calls as lockstep, same_bits as same


def test_inlined_operations_give_the_eager_values():
    """Transposes, matrix products, reshapes, new axes, powers and sums are replayed as
    numpy expressions rather than calls of their wrappers: the values must be the eager
    ones, for the shapes that are inlined (matrices) and those that are not (stacks,
    vectors, large sums)."""
    def loss(w, stack, v):
        h = np.swapaxes(w, 0, 1) @ w + np.swapaxes(stack, -1, -2).sum(0)
        u = np.expand_dims(v, -1) * h.reshape(-1)[: v.size, None]
        return np.sum(h ** 2) + np.sum(u ** -1.5) + np.sum((v @ w[:, :3]) ** 3) + \
            np.sum(np.matmul(stack, stack) ** 0.5) + np.sum(np.sum(h, axis=0) ** 2) + \
            np.sum(np.sum(np.concatenate([v] * 300)[:, None] * v, axis=1, keepdims=True) ** 2)

    g = scg.grad(loss, argnums=(0, 1, 2))
    jitted = scg.jit(g)
    rng = np.random.default_rng(3)
    for _ in range(4):
        w = rng.uniform(1.0, 2.0, (3, 3))
        stack = rng.uniform(1.0, 2.0, (2, 3, 3))
        v = rng.uniform(1.0, 2.0, 3)
        for a, b in zip(jitted(w, stack, v), g(w, stack, v)):
            np.testing.assert_array_equal(a, b)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    source = next(e.source for e in jitted._entries.values() if e.source)
    assert ".T" in source and ".dot(" in source and ".reshape(" in source and " ** " in source
    assert ", None, None, " in source  # (np.add.reduce(x, axis, None, None, keepdims))


def test_reshape_to_a_traced_size_replays_the_recorded_shape():
    """`x.reshape(k[0], -1)` with k an integer array argument: the shape follows k (eager
    gives (3, 2) for k = [3] after calls with k = [2]); the inlined reshape keeps its shape
    guard, which misses, and the call is recorded again."""
    def f(x, k):
        return x.reshape(k[0], -1) * 1.0
    x = np.arange(6.0)
    check(f, [(x, np.array([2]))] * 3 + [(x, np.array([3]))])


def test_expand_dims_on_a_traced_axis_replays_the_recorded_shape():
    """`np.expand_dims(y, k[0])`: the axis is a recorded value, and a replay with another
    axis misses its guard (eager: (2, 1, 3) for k = [1])."""
    def f(x, k):
        return np.expand_dims(x.reshape(2, 3), k[0]) + 0.0
    x = np.arange(6.0)
    check(f, [(x, np.array([0]))] * 3 + [(x, np.array([1]))])


def test_sum_over_a_traced_axis_loses_its_shape_guard():
    """`np.sum(x, axis=k[0])` inlined as np.add.reduce keeps its shape guard, so a later
    inlined reshape (here expand_dims) gets the new shape: (1, 2, 3) for axis 2 after calls
    with axis 0, with the entries laid out as eagerly."""
    def f(x, k):
        return np.expand_dims(np.sum(x, axis=k[0]), 0)
    x = np.arange(12.0).reshape(2, 3, 2)
    check(f, [(x, np.array([0]))] * 3 + [(x, np.array([2]))])


def test_astype_in_a_model_is_never_replayed():
    """A PyTorch-style model with `(x > 0).astype(float)`: astype (and the VJP of `cast`)
    take the source dtype without reading the traced value, so no value guard is recorded
    and calls with new draws are replayed."""
    def ported(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return (x > 0).astype(float) * x ** 2

    jitted = scg.jit(scg.value_and_grad(scg.expectation(ported, n=8, seed=3)))
    eager = scg.value_and_grad(scg.expectation(ported, n=8, seed=3))
    for _ in range(6):
        assert same(jitted(0.4), eager(0.4))
    assert jitted.stats["replays"] >= 3, jitted.explain()


def test_astype_between_floats_in_a_gradient_is_never_replayed():
    """The same without a model: a gradient through x.astype(np.float32) does not read x's
    value, so a training loop (new x on every call) is replayed."""
    g = scg.grad(lambda x: np.sum(x.astype(np.float32) * x))
    x = np.array([0.3, -1.2, 2.0])
    check(g, [(x * (1 + 0.1 * k),) for k in range(6)], min_replays=3)


@pytest.mark.parametrize("fn", [
    lambda x: np.clip(x, -np.inf, 1.0),
    lambda x: np.maximum(x, -np.inf),
    lambda x: x ** -np.inf,
], ids=["clip", "maximum", "power"])
def test_a_non_finite_python_float_constant_is_never_replayed(fn):
    """Non-finite Python float constants (-np.inf) are written into the replay program as
    defined values: np.clip(x, -np.inf, hi), np.maximum(x, -np.inf) and x ** -np.inf are
    replayed, with the eager results."""
    check(fn, [(np.array([0.5, 2.0]),)] * 5, min_replays=2)


@pytest.mark.parametrize("name", [
    "sum**2", "sum_keepdims**-1", "x**-1.5", "x**array", "x**0d", "x**f64", "x**pyfloat",
    "xT@x", "noncontiguous@", "reshape-1", "sum_bool", "sum_int", "sum_view", "int**2",
    "swapaxes", "expand_dims", "mat@vec", "vec@matT", "big_float32_sum", "index_array",
    "index_mask", "reshape_reshape", "all_any"])
def test_inlined_operations_agree_with_eager(name):
    X = np.arange(6.0).reshape(2, 3) + 1.0
    V = np.arange(3.0)
    cases = {
        "sum**2": (lambda x: np.sum(x) ** 2, (X,)),
        "sum_keepdims**-1": (lambda x: np.sum(x, keepdims=True) ** -1, (X,)),
        "x**-1.5": (lambda x: x ** -1.5, (X,)),
        "x**array": (lambda x: x ** np.array([1.0, 2.0, 3.0]), (X,)),
        "x**0d": (lambda x, p: x ** p, (X, np.array(2.0))),
        "x**f64": (lambda x, p: x ** p, (X, np.float64(2.0))),
        "x**pyfloat": (lambda x, p: x ** p, (X, 0.5)),
        "xT@x": (lambda x: x.T @ x, (X,)),
        "noncontiguous@": (lambda x: x[:, ::2] @ x[:, ::2].T, (X,)),
        "reshape-1": (lambda x: np.sum(x.reshape(-1, 2), axis=0), (X,)),
        "sum_bool": (lambda x: np.sum(x > 2), (X,)),
        "sum_int": (lambda x: np.sum(x.astype(int)), (X,)),
        "sum_view": (lambda x: np.sum(x[:, 1:], axis=1), (X,)),
        "int**2": (lambda x: x.astype(int) ** 2, (X,)),
        "swapaxes": (lambda x: np.swapaxes(x, 0, -1) ** 2, (X,)),
        "expand_dims": (lambda x: np.expand_dims(x, -1) * 2, (X,)),
        "mat@vec": (lambda x, v: x @ v, (X, V)),
        "vec@matT": (lambda x, v: v @ x.T, (X, V)),
        "big_float32_sum": (lambda x: np.sum(x), (np.arange(600, dtype=np.float32),)),
        "index_array": (lambda x: x[np.array([1, 0, 1]), 1:] ** 2, (X,)),
        "index_mask": (lambda x: x[:, np.array([True, False, True])] ** 2, (X,)),
        "reshape_reshape": (lambda x: x.reshape(3, 2).reshape(6, 1).reshape(-1) * 2, (X,)),
        "all_any": (lambda x: x * float(np.all(x > 0)) + float(np.any(x > 5)), (X,)),
    }
    fn, args = cases[name]
    check(fn, [args] * 5)


def test_an_index_of_constants_is_written_as_the_index():
    """An index array or mask that is a constant of the program gives a result of a fixed
    shape: replayed as the index itself, with no shape guard; an index array that is an
    argument keeps its guard (a mask's count is a value). A reshape of a reshape is one
    reshape of the first one's input."""
    X = np.arange(12.0).reshape(3, 4)

    def constant(x):
        return np.sum(x[np.array([2, 0, 2])][:, np.array([True, False, True, True])] ** 2) + \
            np.sum(x.reshape(4, 3).reshape(2, 6) ** 2)

    jitted = scg.jit(scg.grad(constant))
    for k in range(4):
        np.testing.assert_array_equal(jitted(X + k), scg.grad(constant)(X + k))
    source = next(e.source for e in jitted._entries.values() if e.source)
    assert "if shape(" not in source and "[c" in source, source
    assert ".reshape((4, 3)).reshape" not in source, source

    def recorded(x, mask):
        return np.sum(x[mask] ** 2)

    check(recorded, [(X, np.array([True, False, True]))] * 3 +
          [(X, np.array([True, True, True]))])


def test_gradient_through_inlined_operations_with_traced_slices():
    """getitem with int/slice indices no longer records a shape guard; slice bounds held
    by traced values are still read (and guarded) by numpy's __index__."""
    X = np.arange(12.0).reshape(3, 4)

    def f(x, k):
        return x[:, :k[0]] * 2.0

    def g(x, k):
        return x[k[0]:] * 2.0

    for fn in (f, g):
        check(fn, [(X, np.array([2]))] * 3 + [(X, np.array([3]))])


def _matmul_models():
    rng = np.random.default_rng(0)
    v = rng.normal(size=3)

    def draw_times_matrix(W):
        z = scg.sample("z", scg.Normal(np.zeros(3), 1.0))
        return np.sum(np.tanh(z @ W) ** 2)

    def matrix_times_draw(W):
        z = scg.sample("z", scg.Normal(np.zeros((3, 2)), 1.0))
        return np.sum(np.sin(W.T @ z) ** 2)

    def vector_times_stack(W):
        z = scg.sample("z", scg.Normal(np.zeros((4, 3, 2)), 1.0))
        return np.sum(np.sin(W[:, 0] @ z) ** 2)

    def plate_of_vectors(W):
        with scg.plate("p", 4):
            z = scg.sample("z", scg.Normal(np.zeros((4, 3)), 1.0).to_event(1))
        return np.sum(np.cos(z @ W))

    def vector_times_drawn_matrix(W):
        mu = scg.sample("mu", scg.Normal(W, 1.0))
        return np.sum(np.cos(v @ mu))

    return {f.__name__: f for f in (draw_times_matrix, matrix_times_draw, vector_times_stack,
                                    plate_of_vectors, vector_times_drawn_matrix)}


@pytest.mark.parametrize("order", ["grad", "hessian"])
@pytest.mark.parametrize("name", list(_matmul_models()))
def test_per_draw_matmul_agrees_with_eager(name, order):
    model = _matmul_models()[name]
    W = np.random.default_rng(1).normal(size=(3, 2))
    op = getattr(scg, order)
    eager = op(scg.expectation(model, n=5, seed=1))
    jitted = scg.jit(op(scg.expectation(model, n=5, seed=1)))
    assert lockstep(eager, jitted, [(W,)] * 4) == []
    assert jitted.stats["replays"] >= 1


def test_arithmetic_of_numbers_is_replayed_as_operators_with_the_eager_values():
    """Sums, differences, products, quotients, negations and absolute values of numpy
    numbers (parameters indexed out of a vector, a step count) are replayed as Python's
    operators: the eager values bit for bit, float64 and int64 alike."""
    def step(theta, t):
        a, b = theta[0], theta[1]
        c = np.abs(a - 2.0) * b / (1.5 + np.negative(b)) - a * a
        return np.sum(theta * c) + np.sin(c), t + 1, t * 3 - 2

    jitted = scg.jit(step)
    rng = np.random.default_rng(1)
    for k in range(5):
        theta, t = rng.normal(size=3), np.int64(k)
        got, want = jitted(theta, t), step(theta, t)
        for x, y in zip(got, want):
            assert type(x) is type(y) and same(x, y)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    source = next(e.source for e in jitted._entries.values() if e.source)
    assert " + 1)" in source and "abs(" in source, source


REDUCTIONS = {
    "sum over rows": lambda x: np.sum(x, axis=0),
    "mean over columns": lambda x: np.mean(x, axis=1, keepdims=True),
    "sum over two axes": lambda x: np.sum(x.reshape(8, 8, 48), axis=(0, 1)),
    "methods": lambda x: x.sum(axis=0) + x.mean(),
    "var and std": lambda x: np.var(x, axis=0, ddof=1) + x.std(),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_the_users_numpy_reductions_of_large_arrays_add_as_numpy(name):
    # (scg's own sum of a large array adds in another order than numpy's; the user's
    # np.sum of a recorded value is numpy's, as in the eager call)
    f = REDUCTIONS[name]
    x = np.random.default_rng(0).normal(size=(64, 48)) * 1e3
    jitted = scg.jit(f)
    for _ in range(4):
        assert same(jitted(x), f(x))
    assert jitted.stats["replays"] >= 2, jitted.explain()
