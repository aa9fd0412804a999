"""What the contract of scg.jit (docs/performance.md, "The contract") promises, one test
per way a replay could give another number than a fresh run: outside state the function
reads, identities it compares, tables indexed by discrete draws, the pathwise families
whose derivative checks their concentrations, and what a replay leaves in `E.last_trace`.
"""

import ctypes
import io
import json
import math
import os
import random
import time

import numpy as np
import pytest

import scg


def _pair(model, n=8, seed=3):
    """An expectation run eagerly and the same one (same seed) under scg.jit."""
    eager = scg.expectation(model, n=n, seed=seed)
    jitted = scg.expectation(model, n=n, seed=seed)
    return (lambda p: scg.grad(eager)(p)), scg.jit(lambda p: scg.grad(jitted)(p)), jitted


def _lockstep(model, params, n=8):
    eager, step, E = _pair(model, n)
    for p in params:
        want, got = eager(p), step(p)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    return step, E


# ---------------------------------------------------------------- discrete indices
def _table_by_index(p):
    z = scg.sample("z", scg.Categorical(logits=np.zeros(3)))
    return (p[z] - 1.0) ** 2


def _table_by_take(p):
    z = scg.sample("z", scg.Categorical(logits=np.array([0.0, 0.5, -0.5])))
    return (scg.take(p, z, axis=0) - 1.0) ** 2


@pytest.mark.parametrize("model", [_table_by_index, _table_by_take])
def test_a_learned_table_indexed_by_a_discrete_draw_replays(model):
    params = [np.array([0.1, 0.2, 0.3]) + 0.01 * k for k in range(6)]
    step, _ = _lockstep(model, params)
    assert step.stats["replays"] >= 3, step.explain()


def _mixture_means(means):
    with scg.plate("data", 4):
        z = scg.sample("z", scg.Categorical(logits=np.zeros(2)))
        scg.cost("fit", (means[z] - np.array([0.0, 1.0, 2.0, 3.0])) ** 2)


def test_mixture_means_under_jit():
    params = [np.array([0.5, 1.5]) + 0.01 * k for k in range(6)]
    step, _ = _lockstep(_mixture_means, params)
    assert step.stats["replays"] >= 3, step.explain()


# ---------------------------------------------------------------- concentrations
def _beta(a):
    x = scg.sample("x", scg.Beta(np.exp(a), 2.0), estimator="pathwise")
    return (x - 0.3) ** 2


def _gamma(a):
    x = scg.sample("x", scg.Gamma(np.exp(a), 1.0), estimator="pathwise")
    return (x - 0.3) ** 2


def _dirichlet(a):
    x = scg.sample("x", scg.Dirichlet(np.exp(a)), estimator="pathwise")
    return (x[0] - 0.3) ** 2


@pytest.mark.parametrize("model, start", [(_beta, np.array([0.2])), (_gamma, np.array([0.2])),
                                          (_dirichlet, np.array([0.2, 0.1]))])
def test_learned_concentrations_replay(model, start):
    # (the parameter moves on every call, as in training: the check that the draws are
    # not too rare is a condition the replays check, not a value they must see again)
    params = [start + 0.01 * k for k in range(8)]
    step, _ = _lockstep(model, params)
    assert step.stats["replays"] >= 5, step.explain()


def test_rare_draws_still_warn_under_jit():
    params = [np.array([0.2])] * 4 + [np.array([-5.0])]
    eager, step, _ = _pair(_gamma)
    for p in params[:-1]:
        step(p)
    with pytest.warns(scg.VarianceWarning, match="concentration"):
        step(params[-1])


# ---------------------------------------------------------------- E.last_trace
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


# ---------------------------------------------------------------- outside state
def _outside_state(tmp):
    """name -> (function of an array, change): the function reads 2.0 from state outside
    scg and numpy's mathematics; change() makes it read 3.0."""
    def np_load():
        path = os.path.join(tmp, "scale.npy")
        np.save(path, np.array([2.0]))
        return (lambda x: x * np.load(path)[0]), lambda: np.save(path, np.array([3.0]))

    def getenv():
        os.environ["SCG_TEST_SCALE"] = "2.0"
        return (lambda x: x * float(os.getenv("SCG_TEST_SCALE"))), \
            lambda: os.environ.__setitem__("SCG_TEST_SCALE", "3.0")

    def open_read():
        path = os.path.join(tmp, "scale.txt")
        _write(path, "2.0")
        return (lambda x: x * float(open(path).read())), lambda: _write(path, "3.0")

    def json_load():
        path = os.path.join(tmp, "scale.json")
        _write(path, json.dumps({"scale": 2.0}))

        def f(x):
            with open(path) as fh:
                return x * json.load(fh)["scale"]
        return f, lambda: _write(path, json.dumps({"scale": 3.0}))

    def path_exists():
        path = os.path.join(tmp, "flag")
        _write(path, "")
        return (lambda x: x * (2.0 if os.path.exists(path) else 3.0)), lambda: os.remove(path)

    def string_io():
        buf = io.StringIO("2.0")
        return (lambda x: x * float(buf.getvalue())), lambda: (buf.seek(0), buf.write("3.0"))

    def c_double():
        c = ctypes.c_double(2.0)
        return (lambda x: x * c.value), lambda: setattr(c, "value", 3.0)

    return {f.__name__: f for f in (np_load, getenv, open_read, json_load, path_exists,
                                    string_io, c_double)}


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


@pytest.mark.parametrize("name", list(_outside_state("/nonexistent")))
def test_outside_state_is_never_replayed_stale(name, tmp_path):
    f, change = _outside_state(str(tmp_path))[name]()
    jf = scg.jit(f)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        np.testing.assert_array_equal(jf(x), 2.0 * x)
    change()
    for _ in range(2):
        np.testing.assert_array_equal(jf(x), 3.0 * x)
    assert "runs afresh on every call" in jf.explain()


def test_the_clock_is_read_on_every_call():
    jf = scg.jit(lambda x: x + time.time())
    values = []
    for _ in range(6):
        values.append(jf(np.zeros(1))[0])
        time.sleep(0.002)
    assert all(b > a for a, b in zip(values, values[1:])), values
    assert "time.time" in jf.explain()


def test_a_random_random_in_a_closure_is_read_on_every_call():
    held = random.Random(4)

    def f(x):  # (where the generator is in its stream, which the caller moves)
        return x * float(held.getstate()[1][-1])
    jf = scg.jit(f)
    x = np.ones(1)
    for _ in range(4):
        np.testing.assert_array_equal(jf(x), f(x))
    for _ in range(3):
        held.random()
        np.testing.assert_array_equal(jf(x), f(x))
    assert jf.stats["replays"] == 0 and "runs afresh on every call" in jf.explain()


def test_a_random_random_in_a_closure_draws_on_every_call():
    held, reference = random.Random(4), random.Random(4)
    jf = scg.jit(lambda x: x * held.random())
    x = np.ones(1)
    for _ in range(6):
        np.testing.assert_array_equal(jf(x), x * reference.random())
    assert jf.stats["replays"] == 0 and "Random.random" in jf.explain()


_G = np.array([1.0, 2.0])


def _identity_model(data):
    return data * (2.0 if data is _G else 3.0)


def test_an_identity_test_on_an_argument_gives_the_eager_answer():
    jf = scg.jit(_identity_model)
    other = np.array([1.0, 2.0])
    for data in [_G, _G, other, other, other, _G, other]:
        np.testing.assert_array_equal(jf(data), _identity_model(data))


def test_identity_of_an_argument_in_a_model():
    table = np.array([0.5, 1.5])

    def model(data):
        x = scg.sample("x", scg.Normal(0.0, 1.0))
        return (x - (10.0 if data is table else 0.0) * data[0]) ** 2
    E, Ej = scg.expectation(model, n=4, seed=2), scg.expectation(model, n=4, seed=2)
    jf = scg.jit(lambda d: Ej(d))
    for data in [table, np.array([0.5, 1.5]), table]:
        np.testing.assert_array_equal(jf(data), E(data))


def test_trust_lets_a_library_call_replay():
    def f(x):
        return x * math.gamma(3.0) * float(os.path.basename("a/2"))
    assert "runs afresh" in _explained(scg.jit(f))
    jf = scg.jit(f, trust=(os.path,))
    for _ in range(4):
        np.testing.assert_array_equal(jf(np.ones(1)), [4.0])
    assert jf.stats["replays"] >= 2, jf.explain()


def _explained(jf):
    for _ in range(4):
        jf(np.ones(1))
    return jf.explain()


def test_a_function_that_changes_what_it_reads_is_never_replayed():
    state = {"n": 0}
    history = []

    def f(x):
        state["n"] += 1
        history.append(state["n"])
        return x * state["n"]
    jf = scg.jit(f)
    for k in range(1, 8):
        np.testing.assert_array_equal(jf(np.ones(1)), [float(k)])
    assert history == list(range(1, 8))
    assert jf.stats["replays"] == 0


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
