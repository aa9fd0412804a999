"""The contract, a replay gives a fresh run's numbers and side effects.

The same sequence of calls runs twice: eagerly, and through `scg.jit` with expectations
built with the same seed (so both draw the same random numbers from the same generator
states); every call's result is checked against the eager one, to a tight tolerance or
bit for bit. Covered: value and gradient of expectations, training steps with optimizers,
models written as closures, partials, bound methods and plate returns, Hessians, argument
and result structures (dicts, lists, namedtuples, user objects, deques), Python numbers
and integer or float32 arguments, and gradients and Hessians bit for bit.
The side effects scg itself has: `E.last_trace` and `E.last_aux` hold the replay's
values, warnings are raised, a restored checkpoint of the kept state (baselines, tuning)
is the one replays use, parameter validation turned back on checks a replay, and in-place
updates and values stored outside the call happen as eagerly. (The numbers of particular
recordings: test_fresh_run_*.py.)
"""

import collections
import copy
import functools
import warnings

import numpy as np
import pytest

import scg
from scg.core import pytree

from .compare import assert_same, check_values as check, compare_loop, pair, same_values as same
from .models import normal_model, normal_pathwise, thetas


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


def test_hessian_of_an_expectation_bit_exact():
    E, Ej = pair(normal_model, n=4, seed=5)
    step = scg.jit(scg.hessian(Ej))
    for k in range(5):
        assert same(scg.hessian(E)(np.array(0.1 * k)), step(np.array(0.1 * k)))
    assert step.stats["replays"] > 0


@pytest.mark.parametrize("opt", [scg.optim.SGD(0.05, momentum=0.9), scg.optim.SGD(0.05),
                                 scg.optim.Adam(0.05)], ids=["momentum", "sgd", "adam"])
def test_training_loops_bit_exact(opt):
    def model(p):
        x = scg.sample("x", scg.Normal(p["mu"], np.exp(p["ls"])))
        a = scg.sample("a", scg.Bernoulli(logits=p["mu"]),
                       estimator=scg.Score(scg.baselines.MovingAverage(0.8)))
        return (x - 2.0) ** 2 + a

    def make(E):
        def step(p, s):
            v, g = scg.value_and_grad(E)(p)
            p, s = opt.update(g, s, p)
            return v, p, s
        return step
    E, Ej = pair(model, n=8, seed=1)
    eager, jitted = make(E), scg.jit(make(Ej))
    p_e = p_j = {"mu": np.array(0.0), "ls": np.array(0.0)}
    s_e = s_j = opt.init(p_e)
    for _ in range(10):
        out_e = eager(p_e, s_e)
        out_j = jitted(p_j, s_j)
        assert same(out_e, out_j)
        (_, p_e, s_e), (_, p_j, s_j) = out_e, out_j
    assert jitted.stats["replays"] > 0
    assert repr(E.states.baselines()) == repr(Ej.states.baselines())


def test_argument_structures_bit_exact():
    g = scg.grad(lambda p: np.sum(p["a"] * 2.0 - p["b"] ** 2))
    check(g, [({"a": np.ones(2), "b": np.arange(2.0)},),
              ({"b": np.arange(2.0) + 1, "a": np.ones(2) * 3},)] * 4)  # (key order)
    check(scg.grad(lambda xs: sum(np.sum(x ** 2) for x in xs)),
          [([np.ones(2) * (k + 1)] * n,) for k, n in enumerate([1, 1, 1, 2, 2, 2, 3, 1])])
    check(lambda x: x * 2 + 1, [(np.float64(1.5),), (np.array(1.5),)] * 4)
    check(lambda t, k: scg.take(t, k, axis=0),
          [(np.arange(5.0), np.array([k % 5, 1])) for k in range(8)])

    def f(x, *, s=1.0, t=2.0):
        return np.sum(x * s - t)
    jf = scg.jit(f)
    for _ in range(3):
        for kw in [dict(s=2.0, t=3.0), dict(t=3.0, s=5.0), dict(s=5.0)]:
            assert same(f(np.ones(2), **kw), jf(np.ones(2), **kw))


def test_result_types_of_python_numbers():
    check(lambda x: x * 2.0, [(1.5,)] * 3)


def test_float32_argument_of_value_and_grad():
    check(scg.value_and_grad(lambda x: np.sum(np.exp(x))), [(np.ones(2, np.float32),)] * 3)


def test_int_argument_of_value_and_grad():
    check(scg.value_and_grad(lambda x: np.sum(x ** 3)), [(np.array([3_000_000, 2]),)] * 3)


def test_first_order_gradient_bits():
    """The backward pass under scg.jit calls the plain twins of the rules, as eager does,
    as operations of the recording: the same roundings, bit for bit."""
    rng = np.random.default_rng(1)
    c = rng.normal(size=50)
    b = rng.uniform(1.0, 2.0, size=50)
    check(scg.grad(lambda b: np.sum(c * (3.7 / b))), [(b,)] * 3)


def test_hessian_bits():
    w = np.abs(np.random.default_rng(0).normal(size=5)) + 0.5
    check(scg.hessian(lambda w: np.sum(1.0 / w)), [(w,)] * 3)


class _Result:
    def __init__(self, loss):
        self.loss = loss

    def __repr__(self):
        return "Result"


def test_result_inside_a_user_object():
    def f(x):
        return _Result(np.sum(x * 2))
    jf = scg.jit(f)
    for k in [1.0, 3.0, 5.0]:
        assert same(f(np.ones(2) * k).loss, jf(np.ones(2) * k).loss)


def test_result_inside_a_deque():
    def f(x):
        return collections.deque([np.sum(x * 2)])
    jf = scg.jit(f)
    for k in [1.0, 1.0, 5.0]:
        assert same(list(f(np.ones(2) * k)), list(jf(np.ones(2) * k)))


def test_jit_as_a_method_decorator():
    class Model:
        def __init__(self):
            self.s = 2.0

        @scg.jit
        def loss(self, x):
            return self.s * x
    np.testing.assert_array_equal(Model().loss(np.ones(2)), 2.0 * np.ones(2))



# ---------------------------------------------------------------- scg's side effects
def _monitored(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0), estimator="score")
    scg.cost("fit", (x - 1.0) ** 2)


def test_last_trace_after_a_replay_holds_its_values():
    eager = scg.expectation(_monitored, n=8, seed=5)
    jitted = scg.expectation(_monitored, n=8, seed=5)
    step = scg.jit(lambda p: scg.grad(jitted)(p))
    for k in range(6):
        mu = np.array(0.1 * k)
        scg.grad(eager)(mu)
        step(mu)
        want, got = eager.last_trace, jitted.last_trace
        np.testing.assert_array_equal(got.sites["x"].value, want.sites["x"].value)
        np.testing.assert_allclose(got.costs["fit"], want.costs["fit"], rtol=1e-15)
        if k >= 2:  # (replayed: the log-probabilities are not kept, never stale)
            with pytest.raises(ValueError, match="not the log-probabilities"):
                got.sites["x"].log_prob()
        else:  # (recorded: the whole trace)
            assert got.sites["x"].log_prob() is not None
    assert step.stats["replays"] >= 3, step.explain()


def _with_aux(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0), estimator="score")
    return (x - 1.0) ** 2, {"x": x, "mu": mu * 2.0}


def test_last_aux_after_a_replay_holds_its_values():
    eager = scg.expectation(_with_aux, n=4, seed=8, has_aux=True)
    jitted = scg.expectation(_with_aux, n=4, seed=8, has_aux=True)
    step = scg.jit(lambda p: scg.value_and_grad(jitted, has_aux=True)(p))
    for k in range(6):
        mu = np.array(0.1 * k)
        (value, aux), g = scg.value_and_grad(eager, has_aux=True)(mu)
        (value_j, aux_j), g_j = step(mu)
        for got in (aux_j, jitted.last_aux):
            np.testing.assert_array_equal(got["x"], aux["x"])
            np.testing.assert_array_equal(got["mu"], aux["mu"])
    assert step.stats["replays"] >= 3, step.explain()


def _gamma(a):
    x = scg.sample("x", scg.Gamma(np.exp(a), 1.0), estimator="pathwise")
    return (x - 0.3) ** 2


def test_rare_draws_still_warn_under_jit():
    E = scg.expectation(_gamma, n=8, seed=3)
    step = scg.jit(lambda p: scg.grad(E)(p))
    for _ in range(4):
        step(np.array([0.2]))
    with pytest.warns(scg.VarianceWarning, match="concentration"):
        step(np.array([-5.0]))


def _moving_average(theta):
    x = scg.sample("x", scg.Normal(theta[0], 1.0),
                   estimator=scg.Score(scg.baselines.MovingAverage(0.5)))
    return x ** 2


def _rebar(theta):
    b = scg.sample("b", scg.Bernoulli(logits=theta).to_event(1), estimator=scg.REBAR(lr=0.5))
    return np.sum((b - 0.4) ** 2) + b[0] * b[1]


def _restored(model, site, how, jit):
    E = scg.expectation(model, n=4, seed=1)
    f = scg.jit(scg.grad(E)) if jit else scg.grad(E)
    theta = np.array([0.3, -0.2])
    f(theta)
    saved = copy.deepcopy(E.states)
    for _ in range(4):
        f(theta)
    if how == "states":
        E.states = copy.deepcopy(saved)
    elif how == "baseline":
        E.states[site].baseline = copy.deepcopy(saved[site].baseline)
    else:
        E.states[site].estimator = copy.deepcopy(saved[site].estimator)
    out = [f(theta) for _ in range(3)]
    return out, (f.stats if jit else None), E


@pytest.mark.parametrize("model, site, how", [
    (_moving_average, "x", "states"), (_moving_average, "x", "baseline"),
    (_rebar, "b", "states"), (_rebar, "b", "estimator")])
def test_a_restored_checkpoint_of_the_kept_state_is_the_one_replays_use(model, site, how):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, _, E_eager = _restored(model, site, how, jit=False)
        jitted, stats, E_jit = _restored(model, site, how, jit=True)
    assert stats["replays"] >= 2, stats
    for a, b in zip(jitted, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    kept = [E_jit.states[site].baseline, E_jit.states[site].estimator]
    want = [E_eager.states[site].baseline, E_eager.states[site].estimator]
    assert repr(kept) == repr(want)


def test_states_takes_only_an_expectations_states():
    E = scg.expectation(_moving_average, n=2, seed=0)
    with pytest.raises(TypeError, match=r"copy.deepcopy\(E.states\)"):
        E.states = {}


def test_validation_turned_back_on_checks_the_parameters_of_a_replay():
    def model(theta):
        return scg.sample("x", scg.Normal(0.0, theta[0])) ** 2

    f = scg.jit(scg.grad(scg.expectation(model, n=5, seed=1)))
    scg.distributions.set_validation(False)
    try:
        for _ in range(3):
            f(np.array([1.0]))
    finally:
        scg.distributions.set_validation(True)
    with pytest.raises(ValueError, match="scale"):
        f(np.array([-1.0]))
    for _ in range(3):  # (and replays again with it on)
        f(np.array([1.0]))
    assert f.stats["replays"] >= 1, f.explain()


# ---------------------------------------------------------------- in-place and kept values
def test_local_buffer_changed_after_use():
    def f(x):
        acc = np.zeros(2)
        out = []
        for _ in range(3):
            out.append(x * acc)
            acc += 1.0
        return out
    check(f, [(np.ones(2) * (k + 1),) for k in range(4)])


def test_in_place_update_of_an_argument():
    def sgd(p, g):
        p -= 0.1 * g
        return p
    jf = scg.jit(sgd)
    g = np.array([1.0, 2.0])
    p_eager, p_jit = np.ones(2), np.ones(2)
    for _ in range(4):
        sgd(p_eager, g)
        jf(p_jit, g)
    assert same(p_eager, p_jit)


def test_value_stored_outside_the_call_leaks_a_var():
    def make(history):
        def step(x):
            v = np.sum(x ** 2)
            history.append(v)
            return v
        return step
    h_eager, h_jit = [], []
    eager, jitted = make(h_eager), scg.jit(make(h_jit))
    for k in range(3):
        eager(np.ones(2) * k)
        jitted(np.ones(2) * k)
    assert same(sum(h_eager), sum(h_jit))


def _enumerated_with_fixed_logits(mu, logits):
    x = scg.sample("x", scg.Categorical(logits=logits), estimator=scg.Enumerate())
    y = scg.sample("y", scg.Normal(mu * (x + 1.0), 1.0))
    return np.tanh(y * mu) ** 2 + (y - x) ** 2


def test_copies_weighted_zero_by_their_values_bit_exact():
    """Enumerate's weights are its values' probabilities: those that underflow to 0 weigh
    their copies zero eagerly, while a recording holds the weights as values it does not
    look into. The derivative is taken on the same rows either way: bit for bit."""
    logits = np.array([0.0, 0.1, -800.0, -800.0])  # (probabilities 0 for values 2 and 3)
    for n in (7, 11):
        E, Ej = pair(_enumerated_with_fixed_logits, n=n, seed=1)
        eager, jitted = scg.value_and_grad(E), scg.jit(scg.value_and_grad(Ej))
        for k in range(6):
            mu = np.array(0.3 + 0.1 * k)
            want, got = eager(mu, logits), jitted(mu, logits)
            assert same(want, got), (n, k, want, got)
        assert jitted.stats["replays"] > 0
