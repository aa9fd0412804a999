"""scg.nn (layers and MLPs over pytrees), scg.optim (SGD, Adam) and scg.progress."""

import io

import numpy as np
import pytest

import scg
from scg.core import pytree


# ---------------------------------------------------------------------- nn
def test_init_linear_shapes_and_scales():
    rng = np.random.default_rng(0)
    he = scg.nn.init_linear(rng, 400, 300, init="he")
    assert he["W"].shape == (400, 300) and he["b"].shape == (300,)
    assert np.all(he["b"] == 0)
    assert abs(np.var(he["W"]) - 2 / 400) < 0.05 * 2 / 400
    gl = scg.nn.init_linear(rng, 400, 300, init="glorot")
    limit = np.sqrt(6 / 700)
    assert np.max(np.abs(gl["W"])) <= limit and abs(np.var(gl["W"]) - 2 / 700) < 0.05 * 2 / 700
    assert np.all(scg.nn.init_linear(rng, 3, 2, init="zeros")["W"] == 0)
    with pytest.raises(ValueError, match="unknown init"):
        scg.nn.init_linear(rng, 3, 2, init="xavier-ish")


def test_init_mlp_is_seeded_and_shaped():
    a, b = scg.nn.init_mlp(7, [1, 20, 30, 2]), scg.nn.init_mlp(7, [1, 20, 30, 2])
    assert [layer["W"].shape for layer in a] == [(1, 20), (20, 30), (30, 2)]
    assert [layer["b"].shape for layer in a] == [(20,), (30,), (2,)]
    assert all(np.array_equal(x, y) for x, y in zip(pytree.flatten(a)[0], pytree.flatten(b)[0]))
    with pytest.raises(ValueError):
        scg.nn.init_mlp(0, [3])


def test_mlp_matches_a_hand_written_forward_pass():
    params = scg.nn.init_mlp(0, [3, 5, 4, 2], init="glorot")
    x = np.random.default_rng(1).normal(size=(6, 3))
    h = np.tanh(x @ params[0]["W"] + params[0]["b"])
    h = np.tanh(h @ params[1]["W"] + params[1]["b"])
    out = np.log1p(np.exp(h @ params[2]["W"] + params[2]["b"]))
    got = scg.nn.mlp(params, x, activation=np.tanh, final=scg.softplus)
    np.testing.assert_allclose(got, out, rtol=1e-12)
    assert scg.nn.mlp(params, x[0]).shape == (2,)            # one input vector
    np.testing.assert_allclose(scg.nn.linear(params[0], x), x @ params[0]["W"] + params[0]["b"])


@pytest.mark.parametrize("activation", [scg.relu, np.tanh, scg.sigmoid, scg.softplus])
def test_mlp_gradients_against_finite_differences(activation):
    params = scg.nn.init_mlp(3, [2, 4, 3, 2])
    x = np.random.default_rng(4).normal(size=(5, 2))
    target = np.random.default_rng(5).normal(size=(5, 2))

    def loss(p):
        return np.sum((scg.nn.mlp(p, x, activation=activation, final=scg.softplus) - target) ** 2)

    g = scg.grad(loss)(params)
    leaves, treedef, paths = pytree.flatten(params)
    g_leaves = pytree.flatten(g)[0]
    eps = 1e-6
    for k, (leaf, gl) in enumerate(zip(leaves, g_leaves)):
        assert gl.shape == leaf.shape, paths[k]
        for idx in np.ndindex(leaf.shape):
            plus = [l.copy() for l in leaves]
            minus = [l.copy() for l in leaves]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            fd = (loss(pytree.unflatten(treedef, plus))
                  - loss(pytree.unflatten(treedef, minus))) / (2 * eps)
            assert abs(gl[idx] - fd) < 1e-5 * (1 + abs(fd)), (paths[k], idx, gl[idx], fd)


def test_mlp_inside_a_model_gives_per_draw_values():
    params = scg.nn.init_mlp(0, [1, 8, 2])

    def model(p):
        out = scg.nn.mlp(p, np.ones(1), final=scg.softplus)
        assert out.shape == (2,)
        noise = scg.sample("z", scg.Normal(np.zeros(1), 1.0).to_event(1))
        h = scg.nn.mlp(p, noise, final=scg.softplus)      # a per-draw input
        assert h.shape == (2,)
        a = scg.sample("a", scg.Normal(out[0], out[1]))
        return (a - 3.0) ** 2 + np.sum(h)

    g = scg.grad(scg.expectation(model, n=16, seed=0))(params)
    assert [layer["W"].shape for layer in g] == [(1, 8), (8, 2)]
    assert all(np.all(np.isfinite(leaf)) for leaf in pytree.flatten(g)[0])


# ---------------------------------------------------------------------- optim
def _quadratic(A, c):
    def f(p):
        d = p["x"] - c
        return 0.5 * d @ A @ d + np.sum(p["y"] ** 2)
    return f


def test_adam_matches_the_textbook_update():
    A = np.array([[3.0, 0.5], [0.5, 1.0]])
    c = np.array([1.0, -2.0])
    f = _quadratic(A, c)
    params = {"x": np.zeros(2), "y": 1.5}
    opt = scg.optim.Adam(lr=0.05, b1=0.8, b2=0.95, eps=1e-6)
    state = opt.init(params)
    # the textbook form (Kingma and Ba, Algorithm 1), written out by hand
    x, y = np.zeros(2), 1.5
    m = {"x": np.zeros(2), "y": 0.0}
    v = {"x": np.zeros(2), "y": 0.0}
    for t in range(1, 201):
        g = scg.grad(f)(params)
        params, state = opt.update(g, state, params)
        gx, gy = A @ (x - c), 2 * y
        for k, gk in (("x", gx), ("y", gy)):
            m[k] = 0.8 * m[k] + 0.2 * gk
            v[k] = 0.95 * v[k] + 0.05 * gk ** 2
        mh = {k: m[k] / (1 - 0.8 ** t) for k in m}
        vh = {k: v[k] / (1 - 0.95 ** t) for k in v}
        x = x - 0.05 * mh["x"] / (np.sqrt(vh["x"]) + 1e-6)
        y = y - 0.05 * mh["y"] / (np.sqrt(vh["y"]) + 1e-6)
        np.testing.assert_allclose(params["x"], x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(params["y"], y, rtol=1e-10, atol=1e-12)
    assert state["t"] == 200
    np.testing.assert_allclose(params["x"], c, atol=0.05)


def test_sgd_plain_and_with_momentum():
    A, c = np.diag([2.0, 0.5]), np.array([1.0, 1.0])
    f = _quadratic(A, c)
    for momentum in (0.0, 0.9):
        opt = scg.optim.SGD(lr=0.1, momentum=momentum)
        params = {"x": np.zeros(2), "y": np.array([0.5])}
        state = opt.init(params)
        x, vel = np.zeros(2), np.zeros(2)
        for _ in range(200):
            params, state = opt.update(scg.grad(f)(params), state, params)
            g = A @ (x - c)
            vel = momentum * vel + g
            x = x - 0.1 * vel
            np.testing.assert_allclose(params["x"], x, rtol=1e-12)
    np.testing.assert_allclose(params["x"], c, atol=1e-2)


def test_optimizers_do_not_modify_their_inputs_and_check_shapes():
    params = [{"W": np.ones((2, 2)), "b": np.zeros(2)}]
    grads = [{"W": np.ones((2, 2)), "b": np.ones(2)}]
    for opt in (scg.optim.SGD(0.1, momentum=0.5), scg.optim.Adam(0.1)):
        state = opt.init(params)
        new, _ = opt.update(grads, state, params)
        assert np.all(params[0]["W"] == 1) and np.all(new[0]["W"] < 1)
        with pytest.raises(ValueError, match="shape"):
            opt.update([{"W": np.ones(2), "b": np.ones(2)}], state, params)
    with pytest.raises(ValueError):
        scg.optim.Adam(lr=-1.0)


def test_adam_trains_a_policy_through_an_expectation():
    """The reference question's loop at small scale: the policy's mean moves toward 3."""
    params = scg.nn.init_mlp(0, [1, 8, 2])
    est = scg.Score(scg.baselines.MovingAverage(0.9))

    def model(p):
        mu, std = scg.nn.mlp(p, np.ones(1), final=scg.softplus)
        a = scg.sample("a", scg.Normal(mu, std), estimator=est)
        return (3.0 - a) ** 2

    E = scg.expectation(model, n=32, seed=0)
    opt = scg.optim.Adam(0.02)
    state = opt.init(params)
    first = E(params)
    for _ in range(150):
        params, state = opt.update(scg.grad(E)(params), state, params)
    mu, std = scg.nn.mlp(params, np.ones(1), final=scg.softplus)
    assert abs(mu - 3.0) < 0.5 and E(params) < first / 2


# ---------------------------------------------------------------------- progress
class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_quiet_unless_enabled(monkeypatch):
    out = _Tty()
    monkeypatch.setenv("SCG_PROGRESS", "0")
    assert list(scg.progress(range(5), stream=out)) == list(range(5))
    assert out.getvalue() == ""
    monkeypatch.delenv("SCG_PROGRESS")
    assert list(scg.progress(range(5), stream=io.StringIO())) == list(range(5))   # not a TTY
    pytest.importorskip("tqdm")
    assert list(scg.progress(range(5), stream=out, desc="train")) == list(range(5))
    assert "train" in out.getvalue() and "5/5" in out.getvalue()
    forced = io.StringIO()
    assert list(scg.progress(iter(range(3)), stream=forced, enabled=True, total=3)) == [0, 1, 2]
    assert "3/3" in forced.getvalue()
