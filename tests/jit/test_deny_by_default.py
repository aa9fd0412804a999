"""The contract, deny by default: while scg.jit records a call it watches every call the
run makes; a call outside the allowlist (file or network I/O, `os`, `time`, `random`,
`json`, `np.load`, a C extension, numpy's generators outside scg.sample, `globals()`,
`eval`, `vars`) makes the function run afresh on every call, and explain() names it.
`trust=` vouches for a function, class or module.

One table of stale cases: each row is state the function reads through such a call, and a
change of it (or none: a generator, which moves by itself). `stale.check_row` checks that
the change is real, that every jitted call gives a fresh call's numbers, and that the
function runs afresh (or, for settings read by names computed at run time, that either
the change was seen between replays or the function runs afresh).
"""

import importlib
import io
import json
import math
import os
import random
import sys
import threading
import time
import types

import numpy as np
import pytest

import scg

from .stale import Row, check_row

K = 1.0  # a setting read through globals() and the like
_CFG = "scg_test_deny_cfg"
_GLOBAL_JITTER = None  # (a global holding a Generator's bound method)


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _reset():
    global K, _GLOBAL_JITTER
    K = 1.0
    _GLOBAL_JITTER = None
    sys.modules.pop(_CFG, None)


def _settings_module():
    cfg = types.ModuleType(_CFG)
    cfg.SCALE = 1.0
    sys.modules[_CFG] = cfg
    return cfg


# ---------------------------------------------------------------- calls outside the allowlist
def _outside_calls(tmp):
    """name -> Row: the function reads 2.0 through a call outside the allowlist."""
    def np_load():
        path = os.path.join(tmp, "scale.npy")
        np.save(path, np.array([2.0]))
        return (lambda: np.load(path)[0]), lambda: np.save(path, np.array([3.0]))

    def getenv():
        os.environ["SCG_TEST_SCALE"] = "2.0"
        return (lambda: float(os.getenv("SCG_TEST_SCALE"))), \
            lambda: os.environ.__setitem__("SCG_TEST_SCALE", "3.0")

    def open_read():
        path = os.path.join(tmp, "scale.txt")
        _write(path, "2.0")
        return (lambda: float(open(path).read())), lambda: _write(path, "3.0")

    def json_load():
        path = os.path.join(tmp, "scale.json")
        _write(path, json.dumps({"scale": 2.0}))

        def read():
            with open(path) as fh:
                return json.load(fh)["scale"]
        return read, lambda: _write(path, json.dumps({"scale": 3.0}))

    def path_exists():
        path = os.path.join(tmp, "flag")
        _write(path, "")
        return (lambda: 2.0 if os.path.exists(path) else 3.0), lambda: os.remove(path)

    def generator_normal():  # (compiled bound methods drawing noise outside scg.sample)
        return np.random.default_rng(0).normal, None

    def global_numpy_rand():
        np.random.seed(3)
        return np.random.rand, None

    def random_state_rand():
        return np.random.RandomState(5).rand, None

    def generator_method_through_a_global():
        global _GLOBAL_JITTER
        _GLOBAL_JITTER = np.random.default_rng(11).normal
        return _read_global_jitter, None

    def ckdtree_query():
        spatial = pytest.importorskip("scipy.spatial")
        points = np.array([[0.0], [1.0], [4.0]])
        query = spatial.cKDTree(points).query

        def change():  # (another tree: the query gives another distance)
            nonlocal query
            query = spatial.cKDTree(points + 0.5).query
        return (lambda: query(np.array([2.9]))[0]), change

    rows = {f.__name__: Row(f, "afresh") for f in (
        np_load, getenv, open_read, json_load, path_exists, generator_normal,
        global_numpy_rand, random_state_rand, ckdtree_query)}
    rows["generator_method_through_a_global"] = Row(
        generator_method_through_a_global, "afresh", ("draws from a generator itself",),
        reset=_reset)
    return rows


def _read_global_jitter():
    return _GLOBAL_JITTER()


@pytest.mark.parametrize("case", list(_outside_calls("/nonexistent")))
def test_a_call_outside_the_allowlist_runs_afresh(case, tmp_path):
    check_row(_outside_calls(str(tmp_path))[case])


def test_the_clock_is_read_on_every_call():
    jf = scg.jit(lambda x: x + time.time())
    values = []
    for _ in range(6):
        values.append(jf(np.zeros(1))[0])
        time.sleep(0.002)
    assert all(b > a for a, b in zip(values, values[1:])), values
    assert "time.time" in jf.explain()


def test_draws_from_pythons_random_module_run_afresh():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        return x if random.random() < 0.5 else 3.0 + 0.0 * x  # (epsilon-greedy)

    def run(jit):
        random.seed(7)
        g = scg.grad(scg.expectation(model, n=1, seed=2))
        f = scg.jit(g) if jit else g
        return [f(np.array([0.1]))[0] for _ in range(12)], f

    # (a model's own random numbers: warned of, eagerly and under scg.jit alike)
    with pytest.warns(scg.RandomnessWarning, match="Python's random module"):
        eager, _ = run(False)
    with pytest.warns(scg.RandomnessWarning, match="Python's random module"):
        jitted, f = run(True)
    assert jitted == eager
    assert f.stats["replays"] == 0
    assert "runs afresh on every call" in f.explain() and "Random.random" in f.explain()


# ---------------------------------------------------------------- names computed at run time
def _read_globals():
    return globals()["K"]


def _read_eval():
    return eval("K")


def _read_own_module():
    return sys.modules[__name__].K


def _read_sys_modules():
    return sys.modules["scg_test_deny_cfg"].SCALE


def _read_import_module():
    return importlib.import_module("scg_test_deny_cfg").SCALE


def _read_dunder_import():
    return __import__("scg_test_deny_cfg").SCALE


def _read_vars():
    return vars(sys.modules["scg_test_deny_cfg"])["SCALE"]


def _read_module_dict():
    return sys.modules["scg_test_deny_cfg"].__dict__["SCALE"]


def _computed_name_reader():
    suffix = "cfg"
    return lambda: sys.modules["scg_test_deny_" + suffix].SCALE


def _alias_reader():
    load = importlib.import_module  # (import_module under another name)
    return lambda: load("scg_test_deny_cfg").SCALE


class _ReadsByComputedName:
    def __init__(self, cfg):
        self.cfg = cfg

    def scale(self):
        return vars(self.cfg)["".join(["SC", "ALE"])]


def _computed_names():
    def by(read):
        def make():
            cfg = _settings_module()

            def change():
                global K
                K = 7.0
                cfg.SCALE = 7.0
            return read, change
        return make

    rows = {f.__name__: Row(by(f), "either", reset=_reset) for f in (
        _read_globals, _read_eval, _read_own_module, _read_sys_modules, _read_import_module,
        _read_dunder_import, _read_vars, _read_module_dict)}
    for reader in (_computed_name_reader, _alias_reader):
        rows[reader.__name__] = Row(lambda reader=reader: by(reader())(), "either",
                                    reset=_reset)

    def module_replaced_in_sys_modules():
        _settings_module()

        def change():
            other = types.ModuleType(_CFG)
            other.SCALE = 3.0
            sys.modules[_CFG] = other
        return _read_sys_modules, change

    def vars_of_a_module_in_a_closure():
        cfg = types.ModuleType("scg_test_deny_closure")
        cfg.SCALE = 1.0
        key = "SC" + "ALE"
        return (lambda: vars(cfg)[key]), lambda: setattr(cfg, "SCALE", 4.0)

    def held_module_read_by_a_computed_name():
        cfg = _settings_module()
        return _ReadsByComputedName(cfg).scale, lambda: setattr(cfg, "SCALE", 3.0)

    for f in (module_replaced_in_sys_modules, vars_of_a_module_in_a_closure,
              held_module_read_by_a_computed_name):
        rows[f.__name__] = Row(f, "either", reset=_reset)
    return rows


COMPUTED_NAMES = _computed_names()


@pytest.mark.parametrize("case", list(COMPUTED_NAMES))
def test_settings_read_by_computed_names_are_never_stale(case):
    check_row(COMPUTED_NAMES[case])


# ---------------------------------------------------------------- trust=
def _explained(jf):
    for _ in range(4):
        jf(np.ones(1))
    return jf.explain()


def test_trust_lets_a_library_call_replay():
    def f(x):
        return x * math.gamma(3.0) * float(os.path.basename("a/2"))
    assert "runs afresh" in _explained(scg.jit(f))
    jf = scg.jit(f, trust=(os.path,))
    for _ in range(4):
        np.testing.assert_array_equal(jf(np.ones(1)), [4.0])
    assert jf.stats["replays"] >= 2, jf.explain()


def test_locks_and_files_run_afresh_unless_their_classes_are_trusted():
    lock = threading.Lock()
    out = sys.stdout

    def f(x):
        with lock:
            assert out is not None
            return x * 2.0
    jf = scg.jit(f)
    for _ in range(5):
        jf(np.ones(2))
    assert jf.stats["replays"] == 0 and "lock" in jf.explain()
    jf = scg.jit(f, trust=(type(lock), type(out)))  # (vouched for: compared by identity)
    for _ in range(5):
        jf(np.ones(2))
    assert jf.stats["replays"] >= 2, jf.explain()


def test_a_users_gradient_rule_that_reads_the_environment_runs_afresh(monkeypatch):
    # (the recording's watch looks away during the backward pass only while every rule
    # attached is scg's own: a rule of the user's runs there, and may read anything)
    from scg.core import tape
    from scg.numpy import rules as R
    monkeypatch.setattr(tape.RULES, "of_users", False)
    monkeypatch.setenv("SCG_TEST_SLOPE", "2.0")
    twice = tape.Primitive("scaled_by_the_environment", lambda x: 2.0 * x)
    tape.defvjp(twice, lambda g, ans, x: R.multiply(g, float(os.environ["SCG_TEST_SLOPE"])))
    assert tape.RULES.of_users
    grad = scg.grad(lambda x: np.sum(twice(x)))
    x = np.array([0.5, 1.5])
    jitted = scg.jit(grad)
    for _ in range(3):
        np.testing.assert_array_equal(jitted(x), [2.0, 2.0])
    monkeypatch.setenv("SCG_TEST_SLOPE", "3.0")
    np.testing.assert_array_equal(jitted(x), [3.0, 3.0])  # (not the recorded 2.0)
    assert jitted.stats["replays"] == 0, jitted.explain()
    assert "os.environ" in jitted.explain() or "getenv" in jitted.explain() or \
        "runs afresh" in jitted.explain()



class _Cycle:
    """Garbage the collector must find (a reference cycle)."""

    def __init__(self):
        self.me = self


class _Finalized:
    """An object whose finalizer calls a library: it runs where the object dies."""

    def __del__(self):
        json.dumps([])


def test_the_collectors_callbacks_and_finalizers_are_not_the_calls_of_the_model():
    """A garbage collection starting inside the recorded call would run gc.callbacks (a
    test runner's, a profiler's), the finalizers of cycles and weakref callbacks, which call
    libraries: the collector is held while the call is watched (and on again after it), and
    a finalizer run where an object dies is not a call the model makes. The function
    replays, with the eager numbers."""
    import gc

    def callback(phase, info):
        json.dumps({"phase": phase})

    def model(theta):
        for _ in range(3000):
            _Cycle()  # (enough garbage for a collection to start during the call)
        _Finalized()  # (dies at once: its finalizer runs inside the model)
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return x ** 2

    gc.callbacks.append(callback)
    try:
        step = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
        eager = scg.grad(scg.expectation(model, n=4, seed=0))
        for _ in range(4):
            assert step(0.3) == eager(0.3)
            assert gc.isenabled()
    finally:
        gc.callbacks.remove(callback)
    assert step.stats["replays"] >= 2, step.explain()
