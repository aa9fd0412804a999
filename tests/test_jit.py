"""scg.jit: a replayed call gives the numbers of an eager call, and nothing stale.

Every test runs the same sequence of calls twice: eagerly, and through `scg.jit` with
expectations built with the same seed (so both draw the same random numbers from the same
generator states), and checks every call's result against the eager one. Where the
replay is the point, the tests also check that replays were used (`stats["replays"]`).
"""

import dataclasses
import functools
import threading
import types

import numpy as np
import pytest

import scg
from stochastic.test_threads import run_in_threads
from scg.core import pytree

RTOL = 1e-12


# ---------------------------------------------------------------------------- helpers
def structure(tree):
    """The containers of a result (dict keys, list and tuple lengths) and leaf shapes."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, structure(v)) for k, v in tree.items()))
    if isinstance(tree, (list, tuple)):
        return ("seq", tuple(structure(v) for v in tree))
    return ("leaf", np.shape(tree))


def assert_same(eager, jitted, rtol=RTOL):
    """Same structure, same shapes, values equal to `rtol` (relative)."""
    assert structure(jitted) == structure(eager)
    le = pytree.flatten_leaves(eager)[0]
    lj = pytree.flatten_leaves(jitted)[0]
    assert len(le) == len(lj)
    for a, b in zip(le, lj):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-300)


def pair(model, n, seed, **kwargs):
    """Two expectations of `model` with generators in the same state."""
    return (scg.expectation(model, n=n, seed=seed, **kwargs),
            scg.expectation(model, n=n, seed=seed, **kwargs))


def compare_loop(eager_fn, jitted, args_list):
    """Call both on every argument tuple in order; check every call agrees."""
    results = []
    for args in args_list:
        want = eager_fn(*args)
        got = jitted(*args)
        assert_same(want, got)
        results.append((want, got))
    return results


def thetas(k=8):
    return [{"mu": np.array(0.1 * i - 0.2), "log_sigma": np.array(-0.5 + 0.05 * i)}
            for i in range(k)]


# ------------------------------------------------------------------ models (for one draw)
def normal_pathwise(theta):
    x = scg.sample("x", scg.Normal(theta["mu"], np.exp(theta["log_sigma"])),
                   estimator="pathwise")
    scg.cost("penalty", 0.1 * x ** 2)
    return (x - 1.5) ** 2


def make_moving_average_model(inline):
    shared = scg.Score(scg.baselines.MovingAverage(0.9))

    def model(mu):
        est = scg.Score(scg.baselines.MovingAverage(0.9)) if inline else shared
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator=est)
        return (x - 2.0) ** 2 + 5.0  # (an offset: the baseline has work to do)
    return model


TARGETS = np.linspace(-0.5, 1.5, 10)


def bernoulli_loop(logits):
    probs = scg.sigmoid(logits)
    total = 0.0
    for i in range(10):
        a = scg.sample(f"a{i}", scg.Bernoulli(probs=probs[i]), estimator=scg.Score("loo"))
        total = total + (a - TARGETS[i]) ** 2
    return total


def bernoulli_plate(logits):
    probs = scg.sigmoid(logits)
    with scg.plate("sites", 10):
        a = scg.sample("a", scg.Bernoulli(probs=probs), estimator=scg.Score("loo"))
        scg.cost("fit", (a - TARGETS) ** 2)


POLICY_STATE = np.ones(1)


def make_policy_model(estimator):
    def model(params):
        mu, std = scg.nn.mlp(params, POLICY_STATE, final=scg.softplus)
        a = scg.sample("a", scg.Normal(mu, std), estimator=estimator)
        return (3.0 - a) ** 2
    return model


def make_train_step(E, opt):
    def step(params, opt_state):
        value, g = scg.value_and_grad(E)(params)
        params, opt_state = opt.update(g, opt_state, params)
        return value, params, opt_state
    return step


# ================================================================ 1. equality with eager
def test_normal_pathwise_value_and_grad_matches_eager():
    E, Ej = pair(normal_pathwise, n=16, seed=3)
    step = scg.jit(lambda theta: scg.value_and_grad(Ej)(theta))
    compare_loop(lambda theta: scg.value_and_grad(E)(theta), step, [(t,) for t in thetas()])
    assert step.stats["calls"] == 8
    assert step.stats["replays"] > 0


def test_normal_pathwise_plain_value_matches_eager():
    E, Ej = pair(normal_pathwise, n=16, seed=4)
    value = scg.jit(Ej)
    compare_loop(E, value, [(t,) for t in thetas()])
    assert value.stats["replays"] > 0


@pytest.mark.parametrize("inline", [False, True], ids=["estimator-built-once", "inline"])
def test_moving_average_baseline_state_evolves_like_eager(inline):
    model = make_moving_average_model(inline)
    E, Ej = pair(model, n=4, seed=5)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for k in range(40):
        mu = np.array(0.05 * k)
        assert_same(scg.value_and_grad(E)(mu), step(mu))
        # the baseline's state (kept between calls) is updated identically, replay or not
        assert set(Ej._baseline_state) == set(E._baseline_state) == {"x"}
        se, sj = E._baseline_state["x"], Ej._baseline_state["x"]
        assert sj["count"] == se["count"] == k + 1
        np.testing.assert_allclose(sj["avg"], se["avg"], rtol=RTOL)
    assert step.stats["replays"] > 0


@pytest.mark.parametrize("model", [bernoulli_loop, bernoulli_plate], ids=["loop", "plate"])
def test_ten_bernoulli_sites_leave_one_out_matches_eager(model):
    rng = np.random.default_rng(0)
    E, Ej = pair(model, n=8, seed=1)
    step = scg.jit(lambda logits: scg.value_and_grad(Ej)(logits))
    compare_loop(lambda logits: scg.value_and_grad(E)(logits), step,
                 [(rng.normal(size=10),) for _ in range(8)])
    assert step.stats["replays"] > 0


@pytest.mark.parametrize("estimator", ["pathwise", "moving-average"])
def test_policy_gradient_training_step_with_adam_matches_eager(estimator):
    def make_estimator():
        if estimator == "pathwise":
            return "pathwise"
        return scg.Score(scg.baselines.MovingAverage(0.9))
    init = scg.nn.init_mlp(0, [1, 8, 8, 2])
    opt = scg.optim.Adam(1e-2)
    eager = make_train_step(scg.expectation(make_policy_model(make_estimator()), n=4, seed=2),
                            opt)
    jitted = scg.jit(make_train_step(
        scg.expectation(make_policy_model(make_estimator()), n=4, seed=2), opt))
    p_e = p_j = init
    s_e = s_j = opt.init(init)
    for _ in range(8):
        v_e, p_e, s_e = eager(p_e, s_e)
        v_j, p_j, s_j = jitted(p_j, s_j)
        assert_same((v_e, p_e, s_e), (v_j, p_j, s_j))
        assert int(s_j["t"]) == int(s_e["t"])
    assert jitted.stats["replays"] > 0
    # the parameters moved: the loop fed the updates back
    assert not np.allclose(p_j[0]["W"], init[0]["W"])


def deterministic_loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2) + 0.1 * np.sum(w ** 2)


def test_plain_deterministic_gradient_matches_eager():
    x = np.random.default_rng(1).normal(size=(5, 3))
    grad = scg.grad(deterministic_loss)
    jgrad = scg.jit(scg.grad(deterministic_loss))
    ws = [np.linspace(-1, 1, 3) * (1 + 0.1 * k) for k in range(8)]
    compare_loop(grad, jgrad, [(w, x) for w in ws])
    assert jgrad.stats["replays"] > 0
    # and the gradient is right (d/dw of the loss, by hand)
    w = ws[-1]
    t = np.tanh(x @ w)
    np.testing.assert_allclose(jgrad(w, x), x.T @ (2 * t * (1 - t ** 2)) + 0.2 * w,
                               rtol=1e-12)


# -- models written in user styles: closure, functools.partial, bound method, plate return
def make_closure_model(scale, shift):
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, scale))
        return (x - shift) ** 2
    return model


def partial_model(mu, scale, shift):
    x = scg.sample("x", scg.Normal(mu, scale))
    return (x - shift) ** 2


class Regression:
    """A model as a bound method: its data are attributes."""

    def __init__(self, y):
        self.y = y

    def model(self, w):
        z = scg.sample("z", scg.Normal(w, 0.5))
        return np.sum((z - self.y) ** 2)


def plate_return_model(mu):
    with scg.plate("data", 4):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return (x - np.arange(4.0)) ** 2  # returned from inside the plate


STYLE_MODELS = {
    "closure": (lambda: make_closure_model(0.7, 1.0), lambda k: np.array(0.1 * k)),
    "partial": (lambda: functools.partial(partial_model, scale=0.7, shift=1.0),
                lambda k: np.array(0.1 * k)),
    "bound-method": (lambda: Regression(np.array([1.0, -1.0, 0.5])).model,
                     lambda k: np.array([0.1, 0.2, 0.3]) * k),
    "plate-return": (lambda: plate_return_model, lambda k: np.linspace(0, 1, 4) + 0.1 * k),
}


@pytest.mark.parametrize("style", list(STYLE_MODELS))
def test_user_style_models_match_eager(style):
    make_model, arg = STYLE_MODELS[style]
    model = make_model()
    E, Ej = pair(model, n=8, seed=11)
    step = scg.jit(lambda a: scg.value_and_grad(Ej)(a))
    compare_loop(lambda a: scg.value_and_grad(E)(a), step, [(arg(k),) for k in range(8)])
    assert step.stats["replays"] > 0


def test_jit_of_partial_and_of_bound_method_directly():
    x = np.array([0.3, -0.2, 1.1])
    part = functools.partial(deterministic_loss, x=np.eye(3))
    jpart = scg.jit(part)

    class Quadratic:
        def __init__(self, a):
            self.a = a

        def loss(self, w):
            return np.sum(self.a * w ** 2)
    q = Quadratic(np.array([1.0, 2.0, 3.0]))
    jq = scg.jit(q.loss)
    jgq = scg.jit(scg.grad(q.loss))
    for k in range(6):
        w = x * (1 + k)
        assert_same(part(w), jpart(w))
        assert_same(q.loss(w), jq(w))
        assert_same(scg.grad(q.loss)(w), jgq(w))
    assert all(j.stats["replays"] > 0 for j in (jpart, jq, jgq))


# ============================================================== 2. invalidation
def test_argument_shape_change_gives_eager_answers():
    f = scg.jit(scg.grad(lambda w: np.sum(np.sin(w) * w)))
    g = scg.grad(lambda w: np.sum(np.sin(w) * w))
    args = [np.linspace(0, 1, 3)] * 3 + [np.linspace(0, 1, 4)] * 3 + [np.linspace(0, 2, 3)]
    compare_loop(g, f, [(a,) for a in args])
    assert f(np.linspace(0, 1, 5)).shape == (5,)


def test_argument_shape_change_in_an_expectation():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return np.sum(x ** 2)
    E, Ej = pair(model, n=6, seed=7)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    args = [np.zeros(2)] * 3 + [np.zeros(3)] * 3 + [np.ones(2)] * 2
    compare_loop(lambda mu: scg.value_and_grad(E)(mu), step, [(a,) for a in args])
    assert step.stats["replays"] > 0


def test_dtype_change_gives_eager_answers_and_dtypes():
    def f(x):
        return x * 2 + np.sum(x) / 3
    jf = scg.jit(f)
    calls = ([np.arange(3.0)] * 3 + [np.arange(3.0).astype(np.float32)] * 3
             + [np.arange(3)] * 2 + [np.arange(3.0)])
    for x in calls:
        want, got = f(x), jf(x)
        assert_same(want, got, rtol=1e-6)
        assert np.asarray(got).dtype == np.asarray(want).dtype
    # a Python int and a Python float scalar are different structures
    for x in [3, 3, 3, 3.5, 3.5, 3.5, 2]:
        assert_same(f(x), jf(x))

    # code that looks at the dtype (a Python decision no guard sees): the key has it
    def by_dtype(x):
        if x.dtype == np.float32:
            return x * 2.0
        if np.issubdtype(x.dtype, np.integer):
            return x * 5
        return x * 3.0
    jb = scg.jit(by_dtype)
    for x in calls:
        want, got = by_dtype(x), jb(x)
        assert_same(want, got, rtol=1e-6)
        assert np.asarray(got).dtype == np.asarray(want).dtype
    assert jb.stats["replays"] > 0


def test_closure_float_rebound_with_nonlocal():
    def make():
        scale = 2.0

        def f(x):
            return np.sum(scale * x ** 2)

        def set_scale(v):
            nonlocal scale
            scale = v
        return f, set_scale
    f, set_scale = make()
    jf = scg.jit(scg.grad(f))
    x = np.array([1.0, 2.0, -1.0])
    for _ in range(4):
        assert_same(scg.grad(f)(x), jf(x))
    assert jf.stats["replays"] > 0
    set_scale(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(jf(x), 6.0 * x)
        assert_same(scg.grad(f)(x), jf(x))


def test_closure_float_rebound_in_a_model():
    state = {"scale": 1.0}  # (a mutable container the model closes over)

    def model(mu):
        x = scg.sample("x", scg.Normal(mu, state["scale"]))
        return (x - 1.0) ** 2
    E, Ej = pair(model, n=8, seed=12)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for k in range(10):
        if k == 5:
            state["scale"] = 3.0
        mu = np.array(0.2)
        assert_same(scg.value_and_grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0


def test_closure_array_mutated_in_place():
    data = np.array([1.0, 2.0, 3.0])

    def f(w):
        return np.sum((w * data - 1.0) ** 2)
    jf = scg.jit(scg.grad(f))
    w = np.array(0.5)
    for _ in range(4):
        assert_same(scg.grad(f)(w), jf(w))
    assert jf.stats["replays"] > 0
    data[0] = 5.0
    for _ in range(3):
        assert_same(scg.grad(f)(w), jf(w))
    np.testing.assert_allclose(jf(w), np.sum(2 * (w * data - 1.0) * data), rtol=1e-12)


def test_closure_array_mutated_in_place_in_a_model():
    data = np.array([1.0, 2.0, 3.0])

    def model(w):
        z = scg.sample("z", scg.Normal(w, 1.0))
        return np.sum((z - data) ** 2)
    E, Ej = pair(model, n=8, seed=13)
    step = scg.jit(lambda w: scg.value_and_grad(Ej)(w))
    for k in range(10):
        if k == 5:
            data[0] = 5.0
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))
    assert step.stats["replays"] > 0


GLOBAL_SCALE = 2.0
GLOBAL_CONFIG = {"power": 2.0}
GLOBAL_DATA = np.array([1.0, -2.0, 0.5])


def global_reader(x):
    return GLOBAL_SCALE * np.sum(np.abs(x) ** GLOBAL_CONFIG["power"] * GLOBAL_DATA)


def test_global_variables_changed():
    global GLOBAL_SCALE
    jf = scg.jit(global_reader)
    x = np.array([0.5, 1.5, 2.0])
    old = GLOBAL_SCALE, GLOBAL_CONFIG["power"], GLOBAL_DATA.copy()
    try:
        for change in range(4):
            if change == 1:
                GLOBAL_SCALE = 3.0                 # a global rebound
            elif change == 2:
                GLOBAL_CONFIG["power"] = 3.0       # a global container changed in place
            elif change == 3:
                GLOBAL_DATA[1] = 4.0               # a global array changed in place
            for _ in range(3):
                assert_same(global_reader(x), jf(x))
        assert jf.stats["replays"] > 0
    finally:
        GLOBAL_SCALE = old[0]
        GLOBAL_CONFIG["power"] = old[1]
        GLOBAL_DATA[:] = old[2]


def test_python_control_flow_on_values_deterministic():
    def f(x):
        if np.sum(x) > 0:
            return np.sum(x ** 2)
        return np.sum(np.sin(x))
    jf = scg.jit(scg.grad(f))
    g = scg.grad(f)
    xs = [np.array([1.0, 2.0]) * (1 + 0.1 * k) for k in range(4)]
    xs += [np.array([-1.0, -2.0]) * (1 + 0.1 * k) for k in range(4)]
    xs += [np.array([3.0, 1.0])]
    compare_loop(g, jf, [(x,) for x in xs])
    assert jf.stats["replays"] > 0
    np.testing.assert_allclose(jf(np.array([-1.0, -0.5])), np.cos([-1.0, -0.5]), rtol=1e-12)


def branching_model(read_before_draw):
    def model(mu):
        if read_before_draw:
            positive = bool(np.sum(mu) > 0)  # (a guard on an argument, before the draw)
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator="pathwise")
        if not read_before_draw:
            positive = bool(np.sum(mu) > 0)  # (the same guard, after the draw)
        if positive:
            return (x - 1.0) ** 2
        return (x + 1.0) ** 2
    return model


@pytest.mark.parametrize("read_before_draw", [True, False],
                         ids=["guard-before-draw", "guard-after-draw"])
def test_python_control_flow_on_values_in_a_model(read_before_draw):
    E, Ej = pair(branching_model(read_before_draw), n=4, seed=0)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    mus = [0.5, 0.6, 0.7, 0.8, -0.5, -0.4, -0.3, 0.5, 0.6]
    compare_loop(lambda mu: scg.value_and_grad(E)(mu), step, [(np.array(m),) for m in mus])
    assert step.stats["replays"] > 0


def test_estimator_in_a_closure_variable_changed():
    def make():
        estimator = "pathwise"

        def model(mu):
            x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
            return (x - 1.0) ** 2

        def choose(e):
            nonlocal estimator
            estimator = e
        return model, choose
    model, choose = make()
    E, Ej = pair(model, n=8, seed=21)
    step = scg.jit(lambda mu: scg.grad(Ej)(mu))
    mu = np.array(0.3)
    for _ in range(4):
        assert_same(scg.grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0
    choose(scg.Score("loo"))
    for _ in range(4):
        assert_same(scg.grad(E)(mu), step(mu))


def shifted_square(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0))
    return (x - 1.0) ** 2


def test_estimators_dict_changed_in_place():
    model = shifted_square
    spec = {"x": "pathwise"}
    E, Ej = pair(model, n=8, seed=22, estimators=spec)
    step = scg.jit(lambda mu: scg.grad(Ej)(mu))
    mu = np.array(0.3)
    for k in range(12):
        if k == 4:  # the dict the expectation holds, changed in place
            E.estimators["x"] = scg.Score("loo")
            Ej.estimators["x"] = scg.Score("loo")
        if k == 8:  # the dict the user passed (the expectation holds a copy)
            spec["x"] = "score"
        assert_same(scg.grad(E)(mu), step(mu))
    assert step.stats["replays"] > 0


def test_expectation_draws_and_generator_changed():
    model = shifted_square
    E, Ej = pair(model, n=4, seed=24)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    mu = np.array(0.3)
    for k in range(16):
        if k == 4:  # more draws per call
            E.n = Ej.n = 8
        if k == 8:  # a new generator
            E.rng, Ej.rng = np.random.default_rng(99), np.random.default_rng(99)
        if k == 12:  # the same generator object, its state reset
            state = np.random.default_rng(7).bit_generator.state
            E.rng.bit_generator.state = state
            Ej.rng.bit_generator.state = state
        want, got = scg.value_and_grad(E)(mu), step(mu)
        assert_same(want, got)
    assert step.stats["replays"] > 0


def test_bool_argument_switches_code_path():
    def f(x, squared):
        if squared:
            return np.sum(x ** 2)
        return np.sum(np.cos(x))
    jf = scg.jit(f)
    x = np.array([0.5, 1.0, 2.0])
    for flag in [True] * 3 + [False] * 3 + [True, False, True]:
        assert_same(f(x, flag), jf(x, flag))
    assert jf.stats["replays"] > 0


def test_bool_argument_switches_code_path_in_a_model():
    def model(mu, wide):
        x = scg.sample("x", scg.Normal(mu, 2.0 if wide else 0.5))
        return (x - 1.0) ** 2
    E, Ej = pair(model, n=8, seed=23)
    step = scg.jit(lambda mu, wide: scg.value_and_grad(Ej)(mu, wide))
    args = [(np.array(0.2), w) for w in [True] * 3 + [False] * 3 + [True, False]]
    compare_loop(lambda mu, wide: scg.value_and_grad(E)(mu, wide), step, args)
    assert step.stats["replays"] > 0


def test_string_and_keyword_arguments():
    def f(x, mode="sum", *, scale=1.0):
        return scale * (np.sum(x) if mode == "sum" else np.max(x))
    jf = scg.jit(f)
    x = np.array([1.0, 3.0, 2.0])
    for mode in ["sum"] * 3 + ["max"] * 3 + ["sum"]:
        assert_same(f(x, mode), jf(x, mode))
        assert_same(f(x, mode, scale=2.5), jf(x, mode, scale=2.5))
    assert jf.stats["replays"] > 0


class Scaled:
    def __init__(self, s):
        self.s = s

    def loss(self, x):
        return np.sum(self.s * x ** 2)


@dataclasses.dataclass
class Config:
    s: float


def user_object_case(kind):
    """(jitted-to-be function, eager function, change): the function reads a number from
    an attribute of an object of a user class, which `change` sets to 3.0."""
    if kind == "bound-method":
        obj = Scaled(2.0)
        return obj.loss, obj.loss, lambda: setattr(obj, "s", 3.0)
    cfg = types.SimpleNamespace(s=2.0) if kind == "namespace-closure" else Config(2.0)

    def loss(x):
        return np.sum(cfg.s * x ** 2)
    return loss, loss, lambda: setattr(cfg, "s", 3.0)


@pytest.mark.parametrize("kind", ["bound-method", "namespace-closure", "dataclass-closure"])
def test_attribute_of_a_user_object_changed(kind):
    fn, eager, change = user_object_case(kind)
    jf = scg.jit(fn)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert_same(eager(x), jf(x))
    assert jf.stats["replays"] > 0
    change()
    assert_same(eager(x), jf(x))


def test_default_argument_container_changed():
    def loss(x, d={"s": 2.0}):
        return np.sum(d["s"] * x ** 2)
    jf = scg.jit(loss)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert_same(loss(x), jf(x))
    loss.__defaults__[0]["s"] = 3.0
    for _ in range(3):
        assert_same(loss(x), jf(x))
    assert jf(x) == 15.0


# ============================================================== 3. refusal is safe
def test_float_conversion_guards_give_eager_answers():
    def f(x):
        c = float(np.sum(x))
        return x * c
    jf = scg.jit(f)
    for k in range(12):
        x = np.array([1.0, 2.0]) + k
        assert_same(f(x), jf(x))
    text = jf.explain()
    assert "float()" in text
    assert "test_jit.py" in text  # (the line of the user's code that read the value)
    assert "runs afresh" in text
    assert jf.stats["replays"] == 0


def test_float_conversion_guard_miss_records_again():
    def f(x):
        c = float(np.sum(x))
        return x * c
    jf = scg.jit(f)
    a, b = np.array([1.0, 2.0]), np.array([2.0, 5.0])
    for x in [a, a, a, a, b, b, b, a, b]:  # replays, guard misses, new programs
        assert_same(f(x), jf(x))
    assert jf.stats["replays"] > 0
    text = jf.explain()
    assert "float()" in text
    assert "stopped by a guard" in text


def test_user_error_is_raised_under_jit():
    def f(x):
        if np.sum(x) < 0:
            raise ValueError("the total is negative")
        return np.sqrt(x)
    jf = scg.jit(f)
    with pytest.raises(ValueError, match="the total is negative"):
        jf(np.array([-1.0, -2.0]))  # (on the first call)
    assert "raised ValueError" in jf.explain()
    x = np.array([1.0, 4.0])
    for _ in range(4):
        assert_same(f(x), jf(x))
    with pytest.raises(ValueError, match="the total is negative"):
        jf(np.array([-3.0, 1.0]))  # (after replays were possible)
    assert_same(f(x), jf(x))

    g = scg.jit(f)
    for _ in range(4):
        assert_same(f(x), g(x))
    assert g.stats["replays"] > 0
    with pytest.raises(ValueError, match="the total is negative"):
        g(np.array([-3.0, 1.0]))  # (a guard misses in a replay; the record raises)
    assert_same(f(x), g(x))


def test_invalid_parameter_error_is_the_eager_error():
    def model(mu, sigma):
        x = scg.sample("x", scg.Normal(mu, sigma))
        return (x - 1.0) ** 2
    E, Ej = pair(model, n=4, seed=31)
    step = scg.jit(lambda mu, sigma: scg.grad(Ej)(mu, sigma))
    for _ in range(4):
        assert_same(scg.grad(E)(0.2, 1.0), step(0.2, 1.0))
    assert step.stats["replays"] > 0
    with pytest.raises(ValueError) as eager_error:
        scg.grad(E)(0.2, -1.0)
    with pytest.raises(ValueError) as jit_error:
        step(0.2, -1.0)
    assert str(jit_error.value) == str(eager_error.value)
    assert "scale" in str(jit_error.value)


def test_model_error_then_later_calls_match_eager():
    """The recorded call raises: the eager run that raises the error again draws what an
    eager call would have drawn, and later calls stay in step with eager ones."""
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator="pathwise")
        if np.sum(mu) > 10:
            raise ValueError("mu too large")
        return x ** 2
    E, Ej = pair(model, n=4, seed=0)
    jE = scg.jit(Ej)
    with pytest.raises(ValueError, match="mu too large"):
        E(np.array(20.0))
    with pytest.raises(ValueError, match="mu too large"):
        jE(np.array(20.0))
    for m in [0.5, 0.6, 0.7]:
        assert_same(E(np.array(m)), jE(np.array(m)))


@pytest.fixture
def quiet_numpy():
    """0 * inf in a gradient rule, without numpy's RuntimeWarning (an error in pytest's
    configuration): the error under test is scg's FloatingPointError."""
    with np.errstate(divide="ignore", invalid="ignore"):
        yield


def nan_gradient_model(estimator):
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
        # the value is finite everywhere; the gradient is 0 * inf = nan at mu = 0
        return x ** 2 + 0.0 * np.sqrt(np.abs(mu))
    return model


def test_error_after_a_baseline_update_leaves_the_eager_state(quiet_numpy):
    model = nan_gradient_model(scg.Score(scg.baselines.MovingAverage(0.9)))
    E, Ej = pair(model, n=4, seed=0)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    with pytest.raises(FloatingPointError) as eager_error:
        scg.value_and_grad(E)(np.array(0.0))
    with pytest.raises(FloatingPointError) as jit_error:
        step(np.array(0.0))
    assert str(jit_error.value) == str(eager_error.value)
    assert Ej._baseline_state["x"]["count"] == E._baseline_state["x"]["count"]
    for _ in range(4):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))


def test_an_error_in_a_replay_is_the_eager_error_and_later_calls_match(quiet_numpy):
    model = nan_gradient_model("pathwise")
    E, Ej = pair(model, n=4, seed=0)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for _ in range(4):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))
    assert step.stats["replays"] > 0
    with pytest.raises(FloatingPointError) as eager_error:
        scg.value_and_grad(E)(np.array(0.0))
    with pytest.raises(FloatingPointError) as jit_error:
        step(np.array(0.0))
    assert str(jit_error.value) == str(eager_error.value)
    for _ in range(3):
        assert_same(scg.value_and_grad(E)(np.array(0.5)), step(np.array(0.5)))


# ============================================================== 4. threads
def test_two_threads_each_with_its_own_jitted_function():
    rng = np.random.default_rng(5)
    logits = [rng.normal(size=10) for _ in range(8)]
    ths = thetas()

    # eager references, one thread
    E1, E1j = pair(normal_pathwise, n=16, seed=41)
    E2, E2j = pair(bernoulli_plate, n=8, seed=42)
    want1 = [scg.value_and_grad(E1)(t) for t in ths]
    want2 = [scg.value_and_grad(E2)(lg) for lg in logits]

    start = threading.Barrier(2)
    first_call = threading.Barrier(2)
    waited = [False, False]

    def job(k, E, args):
        def fn(a):
            if not waited[k]:  # both threads record their first call at the same time
                waited[k] = True
                first_call.wait(timeout=30)
            return scg.value_and_grad(E)(a)
        jitted = scg.jit(fn)
        start.wait(timeout=30)
        return jitted, [jitted(a) for a in args]

    results = run_in_threads(lambda: job(0, E1j, ths), lambda: job(1, E2j, logits))
    for (jitted, got), want in zip(results, (want1, want2)):
        for w, g in zip(want, got):
            assert_same(w, g)
        assert jitted.stats["replays"] > 0


def test_one_jitted_function_shared_by_threads():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)
    jgrad = scg.jit(scg.grad(loss))

    def work(k):
        rng = np.random.default_rng(k)
        mismatches = []
        for i in range(40):
            size = 3 + (i + k) % 3  # (three structures, shared by the threads)
            w, x = rng.normal(size=size), rng.normal(size=(4, size))
            if not np.allclose(jgrad(w, x), scg.grad(loss)(w, x), rtol=1e-12, atol=0):
                mismatches.append((k, i))
        return mismatches

    mismatches = sum(run_in_threads(*[lambda k=k: work(k) for k in range(4)]), [])
    assert mismatches == []
    assert jgrad.stats["replays"] > 0


# ============================================================== 5. nested use
def test_jitted_function_under_grad_runs_eagerly():
    def f(x):
        return np.sum(np.sin(x) * x)
    jf = scg.jit(f)
    x = np.array([0.3, -1.2, 2.0])
    for _ in range(4):
        assert_same(f(x), jf(x))
    assert jf.stats["replays"] > 0
    eager_before = jf.stats["eager"]
    g = scg.grad(jf)(x)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-12)
    assert jf.stats["eager"] == eager_before + 1
    # second order through the jitted function
    h = scg.grad(lambda y: np.sum(scg.grad(jf)(y)))(x)
    np.testing.assert_allclose(h, -np.sin(x) * x + 2 * np.cos(x), rtol=1e-12)
    # and replays still work afterwards
    replays = jf.stats["replays"]
    assert_same(f(x), jf(x))
    assert jf.stats["replays"] == replays + 1


def test_jitted_expectation_under_grad_matches_eager():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return (x - 2.0) ** 2
    E, Ej = pair(model, n=8, seed=51)
    jE = scg.jit(Ej)
    mu = np.array(0.4)
    for _ in range(4):
        assert_same(E(mu), jE(mu))
    assert jE.stats["replays"] > 0
    for _ in range(3):
        assert_same(scg.value_and_grad(E)(mu), scg.value_and_grad(jE)(mu))


def nested_jitted():
    inner = scg.jit(lambda x: np.sin(x) * 2.0)
    outer = scg.jit(lambda x: np.sum(inner(x) + x ** 2))
    grad_outer = scg.jit(scg.grad(lambda x: np.sum(inner(x) * x)))
    return inner, outer, grad_outer


def test_jit_of_a_function_calling_a_jitted_function():
    inner, outer, grad_outer = nested_jitted()
    for k in range(8):
        x = np.array([0.1, 0.5, -0.3]) * (k + 1)
        assert_same(np.sum(np.sin(x) * 2.0 + x ** 2), outer(x))
        np.testing.assert_allclose(grad_outer(x), 2 * np.cos(x) * x + 2 * np.sin(x),
                                   rtol=1e-12)
        assert_same(np.sin(x) * 2.0, inner(x))
    assert inner.stats["eager"] > 0  # (inside another recording or a gradient: eager)
    assert inner.stats["replays"] > 0  # (called alone: replayed)


def test_jit_of_a_function_calling_a_jitted_function_replays():
    """The inner jitted function's counters change on every call: not part of the outer
    function's fingerprint."""
    inner, outer, grad_outer = nested_jitted()
    for k in range(8):
        x = np.array([0.1, 0.5, -0.3]) * (k + 1)
        outer(x)
        grad_outer(x)
    assert outer.stats["replays"] > 0
    assert grad_outer.stats["replays"] > 0
    step = scg.jit(lambda mu: mu - 0.1 * inner(mu))
    for k in range(8):
        step(np.array(0.1 * k))
    assert step.stats["replays"] > 0


def test_jitted_step_calling_a_jitted_gradient():
    model = shifted_square
    E, Ej = pair(model, n=8, seed=52)
    inner = scg.jit(scg.grad(Ej))
    step = scg.jit(lambda mu: mu - 0.1 * inner(mu))
    mu_e = mu_j = np.array(0.0)
    for _ in range(8):
        mu_e = mu_e - 0.1 * scg.grad(E)(mu_e)
        mu_j = step(mu_j)
        assert_same(mu_e, mu_j)
    assert inner.stats["eager"] > 0
    assert step.stats["replays"] > 0


# ============================================================== 6. explain
def test_explain_mentions_replays():
    E, Ej = pair(normal_pathwise, n=4, seed=61)
    step = scg.jit(lambda theta: scg.grad(Ej)(theta))
    assert "0 replayed" in step.explain()
    step(thetas()[0])
    assert "replayed (" not in step.explain()
    for t in thetas(5)[1:]:
        step(t)
    text = step.explain()
    assert step.stats["replays"] == 3
    assert "replayed" in text
    assert "3 replayed" in text
    assert "replayed (3 calls)" in text


def test_stats_count_every_call():
    jf = scg.jit(lambda x: x * 2.0)
    for k in range(5):
        jf(np.arange(3.0) + k)
    s = jf.stats
    assert s["calls"] == 5
    assert s["replays"] + s["recordings"] + s["eager"] >= 5
    assert s["recordings"] == 2 and s["replays"] == 3


def test_jit_rejects_bad_arguments():
    with pytest.raises(TypeError):
        scg.jit(3)
    with pytest.raises(ValueError):
        scg.jit(lambda x: x, validate=0)
    decorated = scg.jit(validate=1)(lambda x: x + 1.0)
    assert decorated(1.0) == 2.0


def test_a_closure_that_changes_on_every_call_runs_afresh_and_stays_right():
    counter = {"k": 0.0}

    def f(x):
        return np.sum(x * counter["k"])

    jf = scg.jit(f)
    x = np.array([1.0, 2.0])
    for k in range(150):
        counter["k"] = float(k)
        assert jf(x) == 3.0 * k
    assert jf.stats["replays"] == 0
    assert jf.stats["recordings"] <= 70  # (it stops recording after 64 new structures)
    assert "closes over changes on every call" in jf.explain()


def test_many_structures_keep_the_latest_ones():
    jf = scg.jit(lambda x: np.sum(x ** 2))
    for size in range(1, 40):
        x = np.arange(float(size))
        for _ in range(3):
            assert jf(x) == np.sum(x ** 2)
    assert jf.stats["replays"] > 0
    x = np.arange(39.0)
    before = jf.stats["replays"]
    jf(x)
    assert jf.stats["replays"] == before + 1  # (the latest structure is still replayed)


def test_categorical_in_a_plate_replays_as_eager():
    data = np.random.default_rng(0).normal(size=(16, 3))
    targets = np.arange(16) % 3

    def model(W, data):  # (a port of a REINFORCE over a minibatch, through a partial)
        with scg.plate("batch", 16):
            a = scg.sample("a", scg.Categorical(logits=data @ W))
            return -2.0 * np.where(a == targets, 1.0, 0.0)

    E, Ej = pair(functools.partial(model, data=data), n=64, seed=3)
    step = scg.jit(scg.value_and_grad(Ej))
    for k in range(8):
        W = np.full((3, 3), 0.1 * k)
        assert_same(scg.value_and_grad(E)(W), step(W))
    assert step.stats["replays"] > 0


class _Settings:
    __slots__ = ("gain",)


def test_watch_sees_each_kind_of_read_change_and_nothing_else():
    """The function's fingerprint is re-checked by generated code on every call: each kind
    of read (cell, global, attribute, slot, dict item, list item and length, set, array
    contents, an emptied cell) must notice its change, and an unchanged function keep its
    token."""
    from scg.core.fingerprint import Watch

    class Config:
        pass

    cfg = Config()
    cfg.scale = 2.0
    slots = _Settings()
    slots.gain = 1.0
    table = {"k": 1.0}
    items = [1.0, 2.0]
    flags = {1, 2}
    weights = np.ones(3)
    late = 1.0

    def f(x):
        return x * cfg.scale * slots.gain * table["k"] * items[0] * len(flags) * weights * late

    watch = Watch()
    first = watch.get(f)
    assert watch.get(f) == first

    def changed(mutate, undo):
        mutate()
        token = watch.get(f)
        undo()
        assert watch.get(f) == first
        return token != first

    assert changed(lambda: setattr(cfg, "scale", 3.0), lambda: setattr(cfg, "scale", 2.0))
    assert changed(lambda: setattr(cfg, "extra", 1), lambda: delattr(cfg, "extra"))
    assert changed(lambda: setattr(slots, "gain", 5.0), lambda: setattr(slots, "gain", 1.0))
    assert changed(lambda: table.update(k=4.0), lambda: table.update(k=1.0))
    assert changed(lambda: items.__setitem__(0, 9.0), lambda: items.__setitem__(0, 1.0))
    assert changed(lambda: items.append(3.0), lambda: items.pop())
    assert changed(lambda: flags.add(3), lambda: flags.discard(3))
    assert changed(lambda: weights.__setitem__(1, 2.0), lambda: weights.__setitem__(1, 1.0))

    def rebind(value):
        nonlocal late
        late = value
    assert changed(lambda: rebind(2.0), lambda: rebind(1.0))
    del slots.gain  # (an attribute gone: the walk runs again and sees it)
    assert watch.get(f) != first


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.Philox])
def test_position_keeper_goes_back_to_the_saved_position(bit_generator):
    from scg.core.replay import position_keeper
    rng = np.random.Generator(bit_generator(7))
    rng.integers(0, 10, 3, dtype=np.uint32)  # (leaves a spare 32-bit word in PCG64)
    save, restore = position_keeper(rng)
    position, state = save(), rng.bit_generator.state
    first = (rng.integers(0, 2**31, 5, dtype=np.uint32), rng.standard_normal(4))
    restore(position)
    assert repr(rng.bit_generator.state) == repr(state)  # (Philox: arrays in the state)
    again = (rng.integers(0, 2**31, 5, dtype=np.uint32), rng.standard_normal(4))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_replayed_results_keep_their_structure():
    """The replay builds dicts, lists and tuples itself and unflattens other nodes; a
    function returning None replays too."""
    import collections
    Pair = collections.namedtuple("Pair", "first second")
    def nested(x):
        return {"a": [x * 2.0, (x + 1.0,)], 3: Pair(x, {"b": np.sum(x)}), "none": None}

    def nothing(x):
        np.sum(x * 2.0)
        return None

    for fn in (nested, nothing):
        jitted = scg.jit(fn)
        x = np.arange(3.0)
        for _ in range(5):
            out, expected = jitted(x), fn(x)
            assert pytree.tree_map(lambda a, b: np.testing.assert_array_equal(a, b),
                                   out, expected) is not None or out is None
            assert type(out) is type(expected)
        assert jitted.stats["replays"] >= 2, jitted.explain()
    assert type(scg.jit(nested)(np.ones(2))[3]) is Pair


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


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("family", ["logits", "scale"])
def test_a_parameter_that_breaks_its_constraint_in_a_replay_raises_the_eager_error(bad, family):
    """Constraints are checked on every replay (finiteness with the other finiteness
    checks, in one pass); a replay that fails one runs afresh and raises the error."""
    def model(theta):
        if family == "logits":
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline="loo"))
        else:
            b = scg.sample("b", scg.Normal(0.0, theta))
        return np.sum(b ** 2)

    grad = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
    eager = scg.grad(scg.expectation(model, n=4, seed=0))  # (in step with it)
    theta = np.array([0.5, 1.0, 2.0])
    for _ in range(4):
        np.testing.assert_array_equal(grad(theta), eager(theta))
    assert grad.stats["replays"] >= 1
    broken = theta.copy()
    broken[1] = bad if family == "logits" else -bad
    for fn in (grad, eager):
        with pytest.raises(ValueError, match="parameter '(logits|scale)' must be"):
            fn(broken)
    np.testing.assert_array_equal(grad(theta), eager(theta))


@pytest.mark.parametrize("family", ["Normal", "Laplace", "Gumbel", "LogNormal"])
@pytest.mark.parametrize("kind", ["scalar", "one-entry", "per-draw", "plain-float"])
def test_kernel_calls_replayed_as_specialized_calls_match_eager(family, kind):
    """The density and path kernels of small draws are replayed through calls made for
    the recorded kinds of their arguments (a numpy scalar, a one-entry array, an array of
    the draw's shape, a Python float): values and gradients as eager, score and pathwise."""
    law = getattr(scg, family)

    def model(theta):
        scale = np.exp(theta[1])
        if kind == "scalar":
            loc = theta[0]
        elif kind == "one-entry":
            loc, scale = theta[:1], np.exp(theta[1:2])
        elif kind == "per-draw":  # (a location that is a draw of its own)
            loc = scg.sample("z", scg.Normal(theta[0], 1.0)) * theta[2]
        else:
            loc = 0.3
        x = scg.sample("x", law(loc, scale))
        y = scg.sample("y", law(loc, scale), estimator=scg.Score(baseline="loo"))
        return np.sum(np.tanh(x) * np.sin(y))

    theta = np.array([0.2, -0.4, 0.7])
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=4, seed=5)))
    eager = scg.value_and_grad(scg.expectation(model, n=4, seed=5))
    for _ in range(4):
        (v1, g1), (v2, g2) = jitted(theta), eager(theta)
        assert v1 == v2
        np.testing.assert_array_equal(g1, g2)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    program = next(e.program for e in jitted._entries.values() if e.program)
    assert any(getattr(c, "__name__", "") == "call" for c in program.__globals__.values())
