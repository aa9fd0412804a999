"""The jitted function itself: its counters, explain(), its arguments, and what runs afresh.

`stats` counts every call; `explain()` says how many calls were replayed, which reads of
values stopped replays (float() conversions, with the line of the user's code that read
them) and why a structure runs afresh (a closure that changes on every call, an object
that cannot be compared, a blackbox outside the rules); scg.jit rejects invalid
arguments and keeps the latest structures when there are many.
"""

import numpy as np
import pytest

import scg

from .compare import assert_same, pair, same_values as same
from .models import normal_pathwise, thetas


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
    assert "recordings differed" in jf.explain()


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


def test_blackbox_outside_the_rules_runs_afresh_and_agrees():
    sim = scg.blackbox(lambda x: np.cumsum(x) / np.arange(1, len(x) + 1))

    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return sim(x) ** 2
    E, Ej = pair(model, n=4, seed=2)
    step = scg.jit(lambda mu: scg.value_and_grad(Ej)(mu))
    for k in range(5):
        assert same(scg.value_and_grad(E)(np.array(0.1 * k)), step(np.array(0.1 * k)))
    assert E.rng.bit_generator.state == Ej.rng.bit_generator.state


def test_an_object_whose_getattr_raises_key_error_is_guarded_by_its_attributes():
    """A user's __getattr__ raising KeyError for a missing name: the guards read the
    object's attributes themselves, and a change is seen."""
    class Config:
        def __init__(self):
            self.__dict__["values"] = {"scale": 2.0}

        def __getattr__(self, name):
            return self.__dict__["values"][name]

    config = Config()

    def f(x):
        return np.sum(x * config.scale)

    jitted = scg.jit(scg.grad(f))
    for _ in range(3):
        np.testing.assert_array_equal(jitted(np.ones(2)), [2.0, 2.0])
    assert jitted.stats["replays"] > 0
    config.values["scale"] = 3.0
    np.testing.assert_array_equal(jitted(np.ones(2)), [3.0, 3.0])
