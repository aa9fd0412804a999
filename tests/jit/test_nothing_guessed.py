"""The contract, nothing is guessed: an object scg.jit cannot compare cheaply (an
`io.StringIO`, a `ctypes` value, a `random.Random`, `os.environ`, an iterator, a lock, a
`threading.local`, an array of Python objects, an object of another library) in what the
code that ran reads makes the call run afresh; it is never assumed unchanged, and
explain() names it.

One table of stale cases (`stale.check_row`: the change is real, every jitted call gives a
fresh call's numbers, the function runs afresh and explain() names the object), then the
cases that are not a value and its change.
"""

import array
import ctypes
import io
import os
import random
import threading
import types

import numpy as np
import pytest

import scg

from .compare import assert_same
from .stale import Row, check_row


def _objects():
    def string_io():
        buf = io.StringIO("2.0")
        return (lambda: float(buf.getvalue())), lambda: (buf.seek(0), buf.write("3.0"))

    def c_double():
        c = ctypes.c_double(2.0)
        return (lambda: c.value), lambda: setattr(c, "value", 3.0)

    def random_random_moved_by_the_caller():
        held = random.Random(4)  # (where the generator is in its stream)
        return (lambda: float(held.getstate()[1][-1])), held.random

    def random_random_drawn_from():
        return random.Random(4).random, None

    def environment():
        os.environ["SCG_TEST_SCALE"] = "2.0"
        return (lambda: float(os.environ["SCG_TEST_SCALE"])), \
            lambda: os.environ.__setitem__("SCG_TEST_SCALE", "3.0")

    def array_module():
        a = array.array("d", [2.0])
        return (lambda: a[0]), lambda: a.__setitem__(0, 3.0)

    def masked_array():
        m = np.ma.MaskedArray([2.0, 5.0], mask=[False, True])
        return (lambda: float(m.sum())), lambda: m.__setitem__(0, 3.0)

    def masked_array_mask():
        m = np.ma.MaskedArray([2.0, 1.0], mask=[False, True])
        return (lambda: float(m.sum())), lambda: m.mask.__setitem__(1, False)

    def bytearray_():
        b = bytearray([2])
        return (lambda: b[0]), lambda: b.__setitem__(0, 3)

    def iterator():
        counter = iter([2.0] * 4 + [3.0] * 4)  # (a Python iterator: no contents to read)
        return (lambda: next(counter)), None

    def object_array():
        held = np.empty(1, dtype=object)
        held[0] = np.array([1.0])
        return (lambda: held[0][0]), lambda: held[0].__setitem__(0, 3.0)

    def torch_tensor():
        torch = pytest.importorskip("torch")
        t = torch.full((2,), 2.0, dtype=torch.float64)
        return (lambda: t.numpy()[0]), lambda: t.mul_(1.5)

    return {
        "io.StringIO": Row(string_io, "afresh"),
        "ctypes.c_double": Row(c_double, "afresh"),
        "random.Random moved by the caller": Row(random_random_moved_by_the_caller,
                                                 "afresh"),
        "random.Random drawn from": Row(random_random_drawn_from, "afresh",
                                        ("Random.random",)),
        "os.environ": Row(environment, "afresh"),
        "array.array": Row(array_module, "afresh"),
        "masked array": Row(masked_array, "afresh"),
        "masked array's mask": Row(masked_array_mask, "afresh"),
        "bytearray": Row(bytearray_, "afresh"),
        "iterator": Row(iterator, "afresh", ("list_iterator", "pass what the function needs")),
        "array of Python objects": Row(object_array, "afresh", ("array of Python objects",)),
        "torch tensor": Row(torch_tensor, "afresh"),
    }


def _python_random():
    """A branch decided by a random.Random the function holds (two recordings agree half
    the time: only the generator's moved state tells)."""
    def instance():
        rng = random.Random(0)
        return lambda: 1.0 if rng.random() < 0.5 else 2.0

    def bound_method():  # (rng.random is a builtin method: followed to its generator)
        coin = random.Random(1).random
        return lambda: 1.0 if coin() < 0.5 else 2.0

    def in_an_object():
        holder = types.SimpleNamespace(rng=random.Random(3))
        return lambda: 1.0 if holder.rng.random() < 0.5 else 2.0

    def system_random():
        rng = random.SystemRandom()
        return lambda: 1.0 if rng.random() < 2.0 else 2.0
    return {"Random instance": Row(lambda: (instance(), None), "afresh", host="step"),
            "Random bound method": Row(lambda: (bound_method(), None), "afresh",
                                       host="step"),
            "Random in an object": Row(lambda: (in_an_object(), None), "afresh",
                                       host="step"),
            "SystemRandom": Row(lambda: (system_random(), None), "afresh",
                                ("SystemRandom",), host="step")}


ROWS = {**_objects(), **_python_random()}


@pytest.mark.parametrize("case", list(ROWS))
def test_an_object_that_cannot_be_compared_runs_afresh(case):
    check_row(ROWS[case])


def test_a_random_random_python_method_in_a_closure_runs_afresh():
    """rng.choice is a Python method of random.Random, drawing through its generator."""
    results = []
    for jit in (False, True):
        choose = random.Random(2).choice
        g = scg.grad(scg.expectation(
            lambda th: scg.sample("x", scg.Normal(th[0], 1.0)) ** 2, n=5, seed=1))
        f = (lambda th: g(th) * choose([1.0, 2.0]))
        f = scg.jit(f) if jit else f
        results.append([f(np.array([0.3])) for _ in range(8)])
    assert_same(results[0], results[1])
    assert f.stats["replays"] == 0 and "runs afresh on every call" in f.explain()


def test_a_random_random_held_but_not_drawn_from_runs_afresh():
    """A random.Random in a closure is an object scg.jit cannot compare: the function runs
    afresh, whether it draws from it or not."""
    rng = random.Random(0)
    unused = [rng]
    jf = scg.jit(lambda x: x * (1.0 + 0 * len(unused)))
    for _ in range(4):
        np.testing.assert_array_equal(jf(np.ones(2)), np.ones(2))
    assert jf.stats["replays"] == 0 and "random.Random" in jf.explain()


def test_threading_local_settings_are_read_per_thread():
    """A threading.local read by the model: each thread's value, never the value of the
    thread that recorded (an object scg.jit cannot compare: the model runs afresh)."""
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
