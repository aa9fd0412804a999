"""scg.jit never replays stale values: what the function reads outside its arguments.

Closures rebound with nonlocal or changed in place, globals rebound or changed in place,
attributes of user objects, default arguments, estimators chosen by closure variables or
held in dicts, an expectation's number of draws and generator, slots, module and function
attributes, long lists, ordered and default dicts, sets, deeply nested containers, views
of large arrays, arrays changed in place, and values stored outside the call: after any
change the jitted call gives the eager result.
"""

import collections
import dataclasses
import types

import numpy as np
import pytest

import scg

from .compare import assert_same, check_values as check, pair, same_values as same
from .models import shifted_square


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


def test_local_buffer_changed_after_use():
    def f(x):
        acc = np.zeros(2)
        out = []
        for _ in range(3):
            out.append(x * acc)
            acc += 1.0
        return out
    check(f, [(np.ones(2) * (k + 1),) for k in range(4)])


def _outside_cases():
    """name -> () -> (function, change): the function reads 2.0 outside its arguments
    (slots, a class or module attribute, a function attribute, long lists, collections'
    dicts, sets, deep containers, a view of a large array); change() makes it read 3.0."""
    def slots():
        class S:
            __slots__ = ("s",)
        s = S()
        s.s = 2.0
        return (lambda x: s.s * x), lambda: setattr(s, "s", 3.0)

    def class_attribute():
        class C:
            scale = 2.0

            def loss(self, x):
                return self.scale * x
        return C().loss, lambda: setattr(C, "scale", 3.0)

    def module_attribute():
        cfg = types.ModuleType("cfg")
        cfg.scale = 2.0
        return (lambda x: cfg.scale * x), lambda: setattr(cfg, "scale", 3.0)

    def function_attribute():
        def f(x):
            return f.scale * x
        f.scale = 2.0
        return f, lambda: setattr(f, "scale", 3.0)

    def long_list():
        values = [2.0] * 2000
        return (lambda x: values[1500] * x), lambda: values.__setitem__(1500, 3.0)

    def ordered_dict():
        d = collections.OrderedDict(s=2.0)
        return (lambda x: d["s"] * x), lambda: d.__setitem__("s", 3.0)

    def default_dict():
        d = collections.defaultdict(float, s=2.0)
        return (lambda x: d["s"] * x), lambda: d.__setitem__("s", 3.0)

    def set_():
        s = {2.0}
        return (lambda x: max(s) * x), lambda: (s.clear(), s.add(3.0))

    def deep():
        leaf = [2.0]
        d = leaf
        for _ in range(14):
            d = {"k": d}
        top = d

        def f(x):
            t = top
            for _ in range(14):
                t = t["k"]
            return t[0] * x
        return f, lambda: leaf.__setitem__(0, 3.0)

    def large_array_view():
        big = np.full(100_000, 2.0)
        view = big[:]  # (made before scg.jit locks `big`: stays writeable)
        return (lambda x: big[0] * x), lambda: view.__setitem__(0, 3.0)

    return {f.__name__.strip("_"): f for f in (
        slots, class_attribute, module_attribute, function_attribute, long_list,
        ordered_dict, default_dict, set_, deep, large_array_view)}


OUTSIDE_CASES = _outside_cases()


@pytest.mark.parametrize("case", list(OUTSIDE_CASES))
def test_a_change_outside_the_arguments_is_seen(case):
    fn, change = OUTSIDE_CASES[case]()
    jf = scg.jit(fn)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert same(fn(x), jf(x))
    assert jf.stats["replays"] > 0
    change()
    assert same(fn(x), jf(x))


def test_large_closure_array_stays_writable_and_a_write_is_seen():
    """A closure array above the digest limit is not made read-only (eager code may write
    its own array), and a write to it after replays is seen by the next call."""
    data = np.zeros(100_000)

    def f(x):
        return x + data[0]
    jf = scg.jit(f)
    for _ in range(4):
        assert same(jf(np.ones(2)), f(np.ones(2)))
    assert jf.stats["replays"] >= 1
    data[0] = 1.0
    assert data.flags.writeable
    assert same(jf(np.ones(2)), np.full(2, 2.0))


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


def test_closure_namedtuple_array_changed_in_place():
    # (the array itself is the replay's constant: its new contents are used)
    NT = collections.namedtuple("NT", "a")
    nt = NT(np.array([2.0, 2.0]))

    def f(x):
        return nt.a * x
    jf = scg.jit(f)
    x = np.array([1.0, 2.0])
    for k in range(6):
        if k == 4:
            nt.a[0] = 3.0
        assert same(f(x), jf(x))
    assert jf.stats["replays"] > 0
