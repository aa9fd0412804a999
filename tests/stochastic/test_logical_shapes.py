"""A model is written for one draw; values keep their logical shapes for any n."""

import numpy as np
import pytest

import scg


def run(model, *args, n=3, seed=0):
    return scg.trace(model, *args, n=n, seed=seed)


def test_sample_axis_is_never_a_batch_axis():
    seen = {}

    def model(w):
        x = scg.sample("x", scg.Normal(0.0, 1.0))
        y = x * w                       # logical (3,) even though n == 3
        seen["y"] = y.shape
        seen["sum0"] = np.sum(y, axis=0).shape
        seen["mean"] = y.mean().shape
        return np.sum(y)

    t = run(model, np.array([1.0, 2.0, 3.0]), n=3)
    assert seen == {"y": (3,), "sum0": (), "mean": ()}
    x = t.sites["x"].value
    assert np.allclose(t.costs["return"], 6.0 * np.asarray(x))


def test_reductions_matmul_indexing_einsum():
    A = np.arange(6.0).reshape(2, 3)
    out = {}

    def model(_):
        v = scg.sample("v", scg.Normal(np.zeros(3), 1.0))          # (3,)
        out["Av"] = (A @ v).shape                                    # (2,)
        out["vA"] = (v @ A.T).shape                                  # (2,)
        M = v[:, None] * v[None, :]                                  # (3, 3)
        out["M"] = M.shape
        out["sum1"] = np.sum(M, axis=1).shape
        out["T"] = M.T.shape
        out["slice"] = v[1:].shape
        out["cat"] = np.concatenate([v, np.ones(2)]).shape
        out["stack"] = np.stack([v, v], axis=-1).shape
        out["ein"] = np.einsum("ij,j->i", A, v).shape
        out["lse"] = scg.logsumexp(M, axis=0).shape
        out["reshape"] = M.reshape(9).shape
        return np.sum(A @ v)

    t = run(model, 0.0, n=5)
    assert out == {"Av": (2,), "vA": (2,), "M": (3, 3), "sum1": (3,), "T": (3, 3),
                   "slice": (2,), "cat": (5,), "stack": (3, 2), "ein": (2,), "lse": (3,),
                   "reshape": (9,)}
    v = np.asarray(t.sites["v"].value)
    assert np.allclose(t.costs["return"], v @ A.T @ np.ones(2))


def test_per_draw_values_match_a_loop_over_draws():
    W = np.array([[1.0, -2.0], [0.5, 0.3], [2.0, 1.0]])

    def model(_):
        v = scg.sample("v", scg.Normal(np.zeros(3), 1.0))
        h = np.tanh(v @ W)                      # (2,)
        k = scg.sample("k", scg.Categorical(logits=np.array([0.1, 0.2, 0.3])))
        row = scg.take(W, k, axis=0)            # per-sample index into a shared table
        return np.sum(h ** 2) + np.sum(row * h)

    t = run(model, 0.0, n=7)
    v = np.asarray(t.sites["v"].value)
    k = np.asarray(t.sites["k"].value).astype(int)
    expected = [np.sum(np.tanh(v[i] @ W) ** 2) + W[k[i]] @ np.tanh(v[i] @ W) for i in range(7)]
    assert np.allclose(t.costs["return"], expected)


def test_indexing_a_plain_table_with_a_draw_points_to_scg_take():
    def model(_):
        k = scg.sample("k", scg.Categorical(probs=np.ones(3) / 3))
        return np.arange(3.0)[k]

    with pytest.raises(scg.TracingError, match="scg.take"):
        run(model, 0.0)


def test_per_sample_indices_into_per_sample_and_traced_tables():
    def model(theta):
        v = scg.sample("v", scg.Normal(theta, 1.0))                   # (4,)
        k = scg.sample("k", scg.Categorical(logits=np.zeros(4)))
        return v[k] + theta[k] * 10.0 + np.sum(v[1:3])

    t = run(model, np.arange(4.0), n=6)
    v, k = t.sites["v"].value, t.sites["k"].value.astype(int)
    expected = v[np.arange(6), k] + 10.0 * k + v[:, 1:3].sum(axis=1)
    assert np.allclose(t.costs["return"], expected)


def test_python_branching_on_a_draw_raises_tracing_error():
    def model(_):
        x = scg.sample("x", scg.Normal(0.0, 1.0))
        if x > 0:
            return x
        return -x

    with pytest.raises(scg.TracingError, match="np.where"):
        run(model, 0.0)


def test_collapsing_draws_into_python_raises():
    def model(_):
        x = scg.sample("x", scg.Normal(0.0, 1.0))
        return 1.0 if np.all(x > 0) else 0.0

    with pytest.raises(scg.TracingError):
        run(model, 0.0)


def test_branching_on_shared_values_is_allowed():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return x ** 2 if theta > 0 else x

    g = scg.grad(scg.expectation(model, n=20_000, seed=0))(1.5)
    assert g == pytest.approx(3.0, abs=0.1)


@pytest.mark.parametrize("draw_shape,shared_shape,draw_left", [
    ((3,), (3,), True), ((3,), (3, 2), True), ((4, 3), (3,), True), ((4, 3), (3, 2), True),
    ((2, 4, 3), (3, 2), True), ((3,), (5, 3, 2), True),
    ((3,), (3,), False), ((3,), (2, 3), False), ((3, 2), (3,), False),
    ((3, 2), (4, 3), False), ((5, 3, 2), (4, 3), False), ((3,), (5, 2, 3), False),
])
def test_products_of_draws_and_shared_arrays_match_a_loop(draw_shape, shared_shape,
                                                          draw_left):
    """draw @ shared and shared @ draw, per draw, for vectors, matrices and stacks on
    either side; values and the gradient in the shared array."""
    n = 4
    shared0 = np.random.default_rng(2).normal(size=shared_shape)

    def model(shared):
        v = scg.sample("v", scg.Normal(np.zeros(draw_shape), 1.0))
        return np.sum(np.tanh(v @ shared if draw_left else shared @ v))

    t = run(model, shared0, n=n)
    v = np.asarray(t.sites["v"].value)
    prod = (lambda x, s: x @ s) if draw_left else (lambda x, s: s @ x)
    expected = [np.sum(np.tanh(prod(v[i], shared0))) for i in range(n)]
    np.testing.assert_allclose(np.asarray(t.costs["return"]).reshape(n), expected, rtol=1e-12)
    g = scg.grad(scg.expectation(model, n=n, seed=0))(shared0)
    eps, fd = 1e-6, np.zeros(shared_shape)
    for idx in np.ndindex(*shared_shape):
        up, down = shared0.copy(), shared0.copy()
        up[idx] += eps
        down[idx] -= eps
        fd[idx] = np.mean([np.sum(np.tanh(prod(v[i], up))) - np.sum(np.tanh(prod(v[i], down)))
                           for i in range(n)]) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
