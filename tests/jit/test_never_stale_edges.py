"""scg.jit never replays stale values: the edges of its contract.

Compiled (Cython) bound methods reached through a global or a closure (a numpy
Generator's, RandomState's, scipy's cKDTree's) neither crash the call nor give other
numbers than eager calls; an object scg.jit cannot compare makes the call run afresh, named
by explain(); values that compare equal but compute differently (0.0 and -0.0, 1, 1.0 and
True, nans of either sign, numpy scalars, set elements) count as changed; an array whose
dtype is reassigned in place counts as changed; and settings read by a name computed at
run time (globals()["K"], eval, sys.modules[...], importlib.import_module, __import__,
vars(mod), mod.__dict__) are seen, or make the call run afresh (calls outside the
allowlist). Each test calls a function eagerly and jitted, with
the same change in between, and compares every call.
"""

import collections
import functools
import importlib
import math
import random
import sys
import types

import numpy as np
import pytest

import scg

from .compare import assert_same, same_values

K = 1.0  # a setting read through globals() and the like (set by each test)


def _model(read):
    """A model whose cost is read() times a square of a draw."""
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        return read() * x ** 2
    return model


def _compare(make, before=4, after=4, same=None):
    """make() -> (step, change): a fresh function of theta and what changes what it reads.
    Runs the calls eagerly and jitted (each from its own make()): `before` calls, the
    change, `after` calls; every call agrees. Returns the jitted function and its number
    of replays after the change."""
    theta = np.array([0.3])
    results = []
    for jit in (False, True):
        step, change = make()
        f = scg.jit(step) if jit else step
        out = [f(theta) for _ in range(before)]
        replays = f.stats["replays"] if jit else 0
        change()
        out += [f(theta) for _ in range(after)]
        results.append(out)
        if jit:
            jitted, replays_after = f, f.stats["replays"] - replays
    for k, (want, got) in enumerate(zip(*results)):
        if same is None:
            assert_same(want, got)
        else:
            assert same(want, got), (k, want, got)
    return jitted, replays_after


def _changes_seen(make, module=None):
    """_compare(make), then: replays before and after the change (it was seen, not
    avoided by running afresh); `module` is taken out of sys.modules after."""
    try:
        jitted, replays_after = _compare(make)
    finally:
        if module is not None:
            sys.modules.pop(module, None)
    assert jitted.stats["replays"] > 0 and replays_after > 0, jitted.explain()


def _never_stale(make, module=None):
    """_compare(make): eager numbers before and after the change; and either the change
    was seen between replays, or the function runs afresh (the contract denies what it
    reads or calls, and explain() says so)."""
    try:
        jitted, replays_after = _compare(make)
    finally:
        if module is not None:
            sys.modules.pop(module, None)
    assert (jitted.stats["replays"] > 0 and replays_after > 0) or \
        "runs afresh on every call" in jitted.explain(), jitted.explain()
    return jitted


def _grad_of(read):
    """make() helper: the gradient of an expectation of _model(read), fresh."""
    return scg.grad(scg.expectation(_model(read), n=5, seed=1))


# ---------------------------------------------------------------- compiled bound methods
def _drawing_steps():
    """name -> () -> (step, change): a step drawing its noise through a Cython bound
    method it holds (a closure), outside scg.sample."""
    def generator_normal():
        jitter = np.random.default_rng(0).normal
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th + jitter())), lambda: None

    def global_rand():
        np.random.seed(3)
        jitter = np.random.rand
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th + jitter())), lambda: None

    def random_state_rand():
        jitter = np.random.RandomState(5).rand
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th + jitter())), lambda: None

    return {"Generator.normal": generator_normal, "np.random.rand": global_rand,
            "RandomState.rand": random_state_rand}


@pytest.mark.parametrize("name", list(_drawing_steps()))
def test_compiled_bound_method_drawing_noise_gives_eager_numbers(name):
    jitted, _ = _compare(_drawing_steps()[name], same=same_values)
    # (each call draws new noise: none may be replayed, and explain() says why)
    assert jitted.stats["replays"] == 0
    assert jitted.stats["eager"] > 0
    assert "runs afresh on every call" in jitted.explain()


_GLOBAL_JITTER = None  # (a global holding a Generator's bound method, set by the test)


def _step_with_global_jitter(g):
    def step(theta):
        return g(theta + _GLOBAL_JITTER())
    return step


def test_generator_method_through_a_global():
    def make():
        global _GLOBAL_JITTER
        _GLOBAL_JITTER = np.random.default_rng(11).normal
        return _step_with_global_jitter(_grad_of(lambda: 1.0)), lambda: None
    jitted, _ = _compare(make, same=same_values)
    assert jitted.stats["replays"] == 0
    assert "draws from a generator itself" in jitted.explain()


def test_ckdtree_query_in_a_closure_runs_afresh_with_eager_numbers():
    scipy_spatial = pytest.importorskip("scipy.spatial")

    def make():
        points = np.array([[0.0], [1.0], [4.0]])
        tree = {"t": scipy_spatial.cKDTree(points)}
        query = tree["t"].query
        g = _grad_of(lambda: 1.0)

        def step(theta):
            distance, _ = query(np.array([2.9]))
            return g(theta) * distance

        def change():  # (another tree: the query gives another distance)
            nonlocal query
            query = scipy_spatial.cKDTree(points + 0.5).query
        return step, change
    jitted, _ = _compare(make, same=same_values)
    assert jitted.stats["replays"] == 0
    assert "runs afresh on every call" in jitted.explain()


def test_an_object_with_slots_is_guarded_by_them():
    class Odd:  # (no __dict__: its slots are compared)
        __slots__ = ("scale",)

    def make():
        odd = Odd()
        odd.scale = 2.0
        return _grad_of(lambda: odd.scale), lambda: setattr(odd, "scale", 5.0)
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


# ---------------------------------------------------------------- equal but different atoms
def _atom_cases():
    """name -> (holder, key, old, new, use): holder[key] changes from old to new, which are
    equal by == but give other costs through use()."""
    angle = lambda s: np.arctan2(s, -1.0)  # (pi for 0.0, -pi for -0.0)
    pick = lambda i: np.sum(np.array([2.0, 5.0])[i])  # (5 for 1, 7 for True)
    nan_sign = lambda v: np.copysign(1.0, v) + 2.0
    return {
        "dict 0.0 -> -0.0": ("dict", 0.0, -0.0, angle),
        "list np.float64(0.0) -> np.float64(-0.0)": ("list", np.float64(0.0),
                                                      np.float64(-0.0), angle),
        "dict 1 -> True": ("dict", 1, True, pick),
        "dict 1 -> 1.0": ("dict", 1, 1.0, lambda v: np.float64(1.0) / (v * 0 + 3) if
                          type(v) is float else np.float64(2.0)),
        "dict nan -> -nan": ("dict", math.nan, -math.nan, nan_sign),
        "dict np.float32(nan) -> -nan": ("dict", np.float32(math.nan),
                                         np.float32(-math.nan), nan_sign),
        "dict complex 0j -> -0j imag": ("dict", complex(1.0, 0.0), complex(1.0, -0.0),
                                        lambda c: np.arctan2(c.imag, -1.0)),
        "tuple in a dict": ("dict", (0.0, 1), (-0.0, 1), lambda t: angle(t[0])),
    }


@pytest.mark.parametrize("name", list(_atom_cases()))
def test_equal_atoms_that_differ_are_changes(name):
    where, old, new, use = _atom_cases()[name]

    def make():
        holder = {"v": old} if where == "dict" else [old]
        key = "v" if where == "dict" else 0
        return _grad_of(lambda: use(holder[key])), lambda: holder.__setitem__(key, new)
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


def test_set_elements_equal_but_different_are_changes():
    def make():
        s = {0.0}

        def change():
            s.clear()
            s.add(-0.0)
        return _grad_of(lambda: np.arctan2(max(s), -1.0)), change
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


def test_a_set_of_tuples_with_signed_zeros():
    def make():
        s = {(0.0, "a")}

        def change():
            s.clear()
            s.add((-0.0, "a"))
        return _grad_of(lambda: np.arctan2(next(iter(s))[0], -1.0)), change
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


# ---------------------------------------------------------------- dtypes changed in place
@pytest.mark.parametrize("size", [2, (1 << 16) + 2])  # (compared by bytes, by digest)
def test_array_dtype_reassigned_in_place(size):
    def make():
        a = np.zeros(size)
        a[:2] = [1.0, 2.0]
        return _grad_of(lambda: np.sum(a[:2].astype(float)) * 1e-18), \
            lambda: setattr(a, "dtype", np.int64)  # (the same bytes, read as integers)
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


def test_structured_dtype_renamed_in_place():
    def make():
        a = np.zeros(2, dtype=[("x", "f8"), ("y", "f8")])
        a["x"], a["y"] = 1.0, 5.0
        return _grad_of(lambda: np.sum(a["x"])), \
            lambda: setattr(a, "dtype", np.dtype([("y", "f8"), ("x", "f8")]))
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


# ---------------------------------------------------------------- names computed at run time
_CFG = "scg_test_edges_cfg"


def _settings_module():
    cfg = types.ModuleType(_CFG)
    cfg.SCALE = 1.0
    sys.modules[_CFG] = cfg
    return cfg


def _read_globals():
    return globals()["K"]


def _read_eval():
    return eval("K")


def _read_own_module():
    return sys.modules[__name__].K


def _read_sys_modules():
    return sys.modules["scg_test_edges_cfg"].SCALE


def _read_import_module():
    return importlib.import_module("scg_test_edges_cfg").SCALE


def _read_dunder_import():
    return __import__("scg_test_edges_cfg").SCALE


def _read_vars():
    return vars(sys.modules["scg_test_edges_cfg"])["SCALE"]


def _read_module_dict():
    return sys.modules["scg_test_edges_cfg"].__dict__["SCALE"]


_READERS = {f.__name__: f for f in (
    _read_globals, _read_eval, _read_own_module, _read_sys_modules, _read_import_module,
    _read_dunder_import, _read_vars, _read_module_dict)}


@pytest.mark.parametrize("name", list(_READERS))
def test_settings_read_by_computed_names(name):
    read = _READERS[name]

    def make():
        global K
        K = 1.0
        cfg = _settings_module()

        def change():
            global K
            K = 7.0
            cfg.SCALE = 7.0
        return _grad_of(read), change
    _never_stale(make, module=_CFG)


def _computed_name_reader():
    suffix = "cfg"
    return lambda: sys.modules["scg_test_edges_" + suffix].SCALE


def _alias_reader():
    load = importlib.import_module  # (import_module under another name)
    return lambda: load("scg_test_edges_cfg").SCALE


@pytest.mark.parametrize("reader", [_computed_name_reader, _alias_reader])
def test_a_module_looked_up_by_a_computed_name(reader):
    """Any module could be the one: every user's module is watched (replayed while none
    changes), or, if they hold too much, the call runs afresh and explain() says why."""
    def make():
        global K
        K = 1.0
        cfg = _settings_module()
        return _grad_of(reader()), lambda: setattr(cfg, "SCALE", 7.0)
    _never_stale(make, module=_CFG)


def test_a_module_replaced_in_sys_modules():
    def make():
        _settings_module()

        def change():
            other = types.ModuleType(_CFG)
            other.SCALE = 3.0
            sys.modules[_CFG] = other
        return _grad_of(_read_sys_modules), change
    _never_stale(make, module=_CFG)


def test_vars_of_a_module_in_a_closure():
    def make():
        cfg = types.ModuleType("scg_test_edges_closure")
        cfg.SCALE = 1.0
        key = "SC" + "ALE"
        return _grad_of(lambda: vars(cfg)[key]), lambda: setattr(cfg, "SCALE", 4.0)
    _never_stale(make)


def test_two_functions_reading_other_attributes_of_one_module():
    """The function reads cfg.A, a helper it calls cfg.B: a change of B shows (a module
    guarded for the function's names still gives the helper's)."""
    def make():
        cfg = types.ModuleType("scg_test_edges_two")
        cfg.A, cfg.B = 1.0, 1.0

        def helper():
            return cfg.B

        def read():
            return cfg.A * helper()
        return _grad_of(read), lambda: setattr(cfg, "B", 7.0)
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


# ---------------------------------------------------------------- Python's random.Random
def _python_random_steps():
    """name -> () -> (step, change): a step whose branch a random.Random it holds decides
    (two recordings agree half the time: only the generator's moved state tells)."""
    def instance():
        rng = random.Random(0)
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th) * (1.0 if rng.random() < 0.5 else 2.0)), lambda: None

    def bound_method():  # (rng.random is a builtin method: followed to its generator)
        coin = random.Random(1).random
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th) * (1.0 if coin() < 0.5 else 2.0)), lambda: None

    def python_method():  # (rng.choice is a Python method of random.Random)
        choose = random.Random(2).choice
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th) * choose([1.0, 2.0])), lambda: None

    def in_an_object():
        holder = types.SimpleNamespace(rng=random.Random(3))
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th) * (1.0 if holder.rng.random() < 0.5 else 2.0)), \
            lambda: None
    return {"instance": instance, "bound method": bound_method,
            "Python method": python_method, "in an object": in_an_object}


@pytest.mark.parametrize("name", list(_python_random_steps()))
def test_python_random_instance_gives_eager_numbers(name):
    jitted, _ = _compare(_python_random_steps()[name], before=6, after=6)
    assert jitted.stats["replays"] == 0
    assert "runs afresh on every call" in jitted.explain()


def test_python_random_instance_held_runs_afresh():
    """A random.Random in a closure is an object scg.jit cannot compare: the function runs
    afresh (with the eager numbers), whether it draws from it or not."""
    def make():
        rng = random.Random(0)
        unused = [rng]
        g = _grad_of(lambda: 1.0 + 0 * len(unused))
        return g, lambda: None
    jitted = _never_stale(make)
    assert "random.Random" in jitted.explain()


def test_system_random_runs_afresh():
    def make():
        rng = random.SystemRandom()
        g = _grad_of(lambda: 1.0)
        return (lambda th: g(th) * (1.0 if rng.random() < 2.0 else 2.0)), lambda: None
    jitted, _ = _compare(make)
    assert jitted.stats["replays"] == 0
    assert "SystemRandom" in jitted.explain()


# ---------------------------------------------------------------- modules held in containers
@pytest.mark.parametrize("holder", ["list", "dict", "object"])
def test_module_held_in_a_container_is_watched_by_attribute(holder):
    def make():
        cfg = types.ModuleType("scg_test_edges_held")
        cfg.K = 1.0
        if holder == "list":
            held = [cfg]
            read = lambda: held[0].K
        elif holder == "dict":
            held = {"m": cfg}
            read = lambda: held["m"].K
        else:
            held = types.SimpleNamespace(settings=cfg)
            read = lambda: held.settings.K
        return _grad_of(read), lambda: setattr(cfg, "K", 3.0)
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


# ---------------------------------------------------------------- keys and arguments by bits
@pytest.mark.parametrize("old, new", [(0.0, -0.0), (1, True), ((0.0, 1), (-0.0, 1))])
def test_dict_key_replaced_by_an_equal_one_is_a_change(old, new):
    def make():
        d = {old: 1.0}

        def first():
            k = next(iter(d))
            k = k[0] if type(k) is tuple else k
            return np.arctan2(k, -1.0) + (3.0 if type(k) is bool else 0.0)

        def change():
            d.clear()
            d[new] = 1.0
        return _grad_of(first), change
    jitted, replays_after = _compare(make)
    assert jitted.stats["replays"] > 0 and replays_after > 0


def _sign_of(c):
    if type(c) is complex:
        return np.arctan2(c.imag, -1.0)
    return np.copysign(1.0, c)


@pytest.mark.parametrize("old, new", [(0j, -0j), (complex(1, 0.0), complex(1, -0.0)),
                                      (math.nan, -math.nan), (0.0, -0.0)])
@pytest.mark.parametrize("how", ["positional", "in a dict", "keyword", "dict key"])
def test_arguments_equal_but_different_are_other_keys(old, new, how):
    def step(theta, c=None):
        if type(c) is dict:
            (k, v), = c.items()
            c = k if how == "dict key" else v
        return theta * _sign_of(c)

    def call(f, c):
        theta = np.array([1.0])
        if how == "positional":
            return f(theta, c)
        if how == "keyword":
            return f(theta, c=c)
        return f(theta, {c: 1} if how == "dict key" else {"c": c})

    jitted = scg.jit(step)
    for c in [old] * 4 + [new] * 3:
        assert_same(call(step, c), call(jitted, c))
    assert jitted.stats["replays"] > 0


# ---------------------------------------------------------------- objects of every kind
class _Gain:
    def gain(self):
        return 1.0


class _OtherGain:
    def gain(self):
        return 3.0


class _ScaledArray(np.ndarray):
    """An array class of the user's with a setting of its own."""
    scale = 1.0


_PROPERTY_SOURCE = {"value": 1.0}


class _Pair(collections.namedtuple("_PairBase", "a b")):
    """The common "namedtuple with methods" pattern."""

    @property
    def target(self):
        return self.a[0] * _PROPERTY_SOURCE["value"]


class _Tags(set):
    pass


class _Bound(functools.partial):
    pass


def _object_steps():
    """name -> () -> (step, change): the target of the cost is read through an object of
    some kind, and the change changes what it gives."""
    def class_reassigned():
        obj = _Gain()
        return _grad_of(lambda: obj.gain()), lambda: setattr(obj, "__class__", _OtherGain)

    def dict_replaced():
        obj = _Gain()
        obj.t = 1.0
        return _grad_of(lambda: obj.t), lambda: setattr(obj, "__dict__", {"t": 3.0})

    def bound_dict_get():
        d = {"t": 1.0}
        get = d.get
        return _grad_of(lambda: get("t")), lambda: d.__setitem__("t", 3.0)

    def bound_array_sum():
        w = np.array([1.0])
        total = w.sum
        return _grad_of(lambda: total()), lambda: w.__setitem__(0, 3.0)

    def array_subclass_attribute():
        a = np.array([1.0]).view(_ScaledArray)
        a.scale = 1.0
        return _grad_of(lambda: a.scale * float(a[0])), lambda: setattr(a, "scale", 3.0)

    def namedtuple_subclass_field():
        p = _Pair(np.array([1.0]), 2.0)
        return _grad_of(lambda: p.a[0]), lambda: p.a.__setitem__(0, 3.0)

    def namedtuple_subclass_property():
        _PROPERTY_SOURCE["value"] = 1.0  # (each run starts from the same setting)
        p = _Pair(np.array([1.0]), 2.0)

        def change():
            _PROPERTY_SOURCE["value"] = 3.0
        return _grad_of(lambda: p.target), change

    def set_subclass():
        tags = _Tags({1.0})
        return _grad_of(lambda: max(tags)), lambda: tags.add(3.0)

    def partial_subclass():
        scaled = _Bound(lambda v, k: v * k, k=1.0)
        return _grad_of(lambda: scaled(1.0)), lambda: scaled.keywords.__setitem__("k", 3.0)

    def wrapped_function_setting():
        def target():
            return 1.0

        @functools.wraps(target)
        def setting():
            return setting.value
        setting.value = 1.0
        return _grad_of(lambda: setting()), lambda: setattr(setting, "value", 3.0)

    return {f.__name__: f for f in (
        class_reassigned, dict_replaced, bound_dict_get, bound_array_sum,
        array_subclass_attribute, namedtuple_subclass_field, namedtuple_subclass_property,
        set_subclass, partial_subclass, wrapped_function_setting)}


@pytest.mark.parametrize("name", list(_object_steps()))
def test_objects_of_every_kind_are_watched(name):
    try:
        jitted, replays_after = _compare(_object_steps()[name])
    finally:
        _PROPERTY_SOURCE["value"] = 1.0
    assert jitted.stats["replays"] > 0 and replays_after > 0, jitted.explain()


def test_an_array_subclass_argument_keys_by_its_attributes():
    def step(theta, a):
        return theta * a.scale

    jitted = scg.jit(step)
    theta = np.array([1.0])
    a = np.array([1.0]).view(_ScaledArray)
    for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
        a.scale = scale
        assert_same(jitted(theta, a), step(theta, a))


def test_an_object_array_runs_afresh():
    def make():
        held = np.empty(1, dtype=object)
        held[0] = np.array([1.0])
        return _grad_of(lambda: held[0][0]), lambda: held[0].__setitem__(0, 3.0)
    jitted, _ = _compare(make)
    assert jitted.stats["replays"] == 0
    assert "array of Python objects" in jitted.explain()


def test_a_library_function_replaced_is_seen():
    original = np.tanh

    def make():
        np.tanh = original  # (each run starts from numpy's own)
        return _grad_of(lambda: np.tanh(1.0)), lambda: setattr(np, "tanh", np.cos)
    try:
        jitted, replays_after = _compare(make)
    finally:
        np.tanh = original
    assert jitted.stats["replays"] > 0 and replays_after > 0


def test_threading_local_settings_are_read_per_thread():
    """A threading.local read by the model: each thread's value, never the value of the
    thread that recorded (an object scg.jit cannot compare: the model runs afresh)."""
    import threading
    local = threading.local()
    theta = np.array([0.3])
    results = {}

    def calls(target, jitted):
        local.target = target
        return [jitted(theta) for _ in range(5)]

    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        return (x - local.target) ** 2
    jitted = scg.jit(scg.grad(scg.expectation(model, n=5, seed=1)))
    eager = scg.grad(scg.expectation(model, n=5, seed=1))
    results["main"] = calls(1.0, jitted)
    worker = threading.Thread(target=lambda: results.__setitem__("other", calls(3.0, jitted)))
    worker.start()
    worker.join()
    want = calls(1.0, eager) + calls(3.0, eager)
    assert_same(want, results["main"] + results["other"])
    assert "runs afresh on every call" in jitted.explain()  # (a threading.local)


_LOCAL_CFG = "scg_test_edges_local_import"


def _import_inside():
    import scg_test_edges_local_import as cfg
    return cfg.TARGET


def _from_import_inside():
    from scg_test_edges_local_import import TARGET
    return TARGET


@pytest.mark.parametrize("read", [_import_inside, _from_import_inside])
def test_a_module_imported_inside_the_function_is_watched(read):
    def make():
        cfg = types.ModuleType(_LOCAL_CFG)
        cfg.TARGET = 1.0
        sys.modules[_LOCAL_CFG] = cfg
        return _grad_of(read), lambda: setattr(cfg, "TARGET", 3.0)
    _changes_seen(make, module=_LOCAL_CFG)


def test_a_structured_array_argument_runs_afresh():
    def step(theta, d):
        return theta * d["b"][0]
    jitted = scg.jit(step)
    d = np.zeros(1, dtype=[("a", "f8"), ("b", "f8")])
    theta = np.array([1.0])
    for b in (1.0, 1.0, 1.0, 3.0):
        d["b"] = b
        assert_same(jitted(theta, d), step(theta, d))
    assert jitted.stats["replays"] == 0
    assert "structured array" in jitted.explain()


def test_a_jitted_function_of_a_module_pickles_with_pickle():
    """`@scg.jit` on a module's function: pickle (multiprocessing, concurrent.futures)
    takes it by its name, as it takes functions; cloudpickle too."""
    import pickle

    import cloudpickle

    from .models import doubled
    for _ in range(4):
        doubled(np.ones(2))
    assert pickle.loads(pickle.dumps(doubled)) is doubled
    assert cloudpickle.loads(cloudpickle.dumps(doubled)) is doubled
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(doubled))(np.ones(2)), 2.0)


# ---------------------------------------------------------------- modules held, not named
_HELD = "scg_test_edges_held_module"


class _HoldsSettings:
    def __init__(self, cfg):
        self.cfg = cfg

    def scale(self):
        return self.cfg.SCALE


def _module_holders():
    """name -> cfg -> read(): a module reached as a value, read by code other than the
    function that reaches it."""
    def bound_method(cfg):
        return _HoldsSettings(cfg).scale

    def object_through_a_closure(cfg):
        holder = _HoldsSettings(cfg)
        return lambda: holder.scale()

    def class_attribute(cfg):
        class Settings:
            module = cfg

            @staticmethod
            def scale():
                return Settings.module.SCALE
        return lambda: Settings.scale()

    def partial_argument(cfg):
        return functools.partial(lambda m: m.SCALE, cfg)

    def two_helpers_of_one_dict(cfg):
        mods = {"cfg": cfg}

        def first():
            return mods["cfg"].OTHER

        def second():
            return mods["cfg"].SCALE
        return lambda: first() * second()
    return {f.__name__: f for f in (bound_method, object_through_a_closure,
                                    class_attribute, partial_argument,
                                    two_helpers_of_one_dict)}


@pytest.mark.parametrize("name", list(_module_holders()))
def test_a_module_held_by_a_value_is_read_by_the_code_that_reads_it(name):
    def make():
        cfg = types.ModuleType(_HELD)
        cfg.SCALE, cfg.OTHER = 1.0, 1.0
        sys.modules[_HELD] = cfg
        return _grad_of(_module_holders()[name](cfg)), lambda: setattr(cfg, "SCALE", 3.0)
    _changes_seen(make, module=_HELD)


def test_a_module_passed_as_an_argument_keys_by_its_settings():
    cfg = types.ModuleType(_HELD)
    cfg.SCALE = 1.0

    def step(theta, settings):
        return theta * settings.SCALE

    jitted = scg.jit(step)
    theta = np.array([1.0])
    for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
        cfg.SCALE = scale
        assert_same(jitted(theta, cfg), step(theta, cfg))


def test_a_value_kept_from_a_recording_runs_afresh_with_the_eager_numbers():
    """A jitted step that stores what it computes in an object it reaches (self.params
    = ...) gives the eager numbers; the next calls run afresh and explain() says why."""
    class Coin:
        def __init__(self):
            self.params = np.array(0.0)
            self.grad = scg.value_and_grad(scg.expectation(self.model, n=8, seed=0))

        def model(self, theta):
            a = scg.sample("a", scg.Bernoulli(logits=theta))
            return (a - 0.3) ** 2

        def step(self):
            loss, g = self.grad(self.params)
            self.params = self.params - 0.1 * g
            return loss

    eager, held = Coin(), Coin()
    jitted = scg.jit(held.step)
    for _ in range(5):
        assert_same(jitted(), eager.step())
        assert float(held.params) == float(eager.params)
    assert "return the new state from the function" in jitted.explain()


class _ReadsByComputedName:
    def __init__(self, cfg):
        self.cfg = cfg

    def scale(self):
        return vars(self.cfg)["".join(["SC", "ALE"])]


def test_a_held_module_read_by_a_computed_name_is_watched_whole():
    def make():
        cfg = types.ModuleType(_HELD)
        cfg.SCALE = 1.0
        sys.modules[_HELD] = cfg
        return _grad_of(_ReadsByComputedName(cfg).scale), lambda: setattr(cfg, "SCALE", 3.0)
    _never_stale(make, module=_HELD)


class _Layers:
    """A class holding numpy, with a method that looks its layers up by computed names."""

    def __init__(self):
        self.xp = np
        self.l0 = np.array([1.0])

    def layer(self, k):
        return getattr(self, f"l{k}")

    def scale(self):
        return float(self.xp.sum(self.l0))

