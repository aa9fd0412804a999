"""The model's effects go through this thread's effect stack (scg/core/effects.py).

A run of a model, its plates and a caller's choice of estimators are handlers on the stack
while the model runs; none is left behind when the model returns from inside a plate or
raises inside one; each thread has its own stack; and a handler pushed around a site sees
its message before the run performs it, as Pyro's messengers do.
"""

import threading

import numpy as np
import pytest

import scg
from scg.core import effects


def _plated(theta):
    with scg.plate("data", 3):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return np.sum(x ** 2)  # (returning from inside the plate)


def test_nothing_is_left_on_the_stack_after_a_run():
    scg.grad(scg.expectation(_plated, n=8, seed=0))(0.5)
    assert effects.innermost() is None


def test_an_error_inside_a_plate_leaves_the_stack_empty():
    def model(theta):
        with scg.plate("data", 3):
            scg.sample("x", scg.Normal(theta, 1.0))
            raise KeyError("the model's own error")

    with pytest.raises(KeyError, match="the model's own error"):
        scg.expectation(model, n=4, seed=0)(0.5)
    assert effects.innermost() is None
    # (and the next run is fine)
    assert np.isfinite(scg.expectation(_plated, n=4, seed=0)(0.5))


def test_while_a_model_runs_its_plate_and_run_are_handlers():
    seen = []

    def model(theta):
        seen.append([type(h).__name__ for h in effects.handlers()])
        with scg.plate("data", 2):
            seen.append([type(h).__name__ for h in effects.handlers()])
            x = scg.sample("x", scg.Normal(theta, 1.0))
        return np.sum(x)

    scg.expectation(model, n=2, seed=0, estimators={"x": "pathwise"})(0.0)
    assert seen[0] == ["EstimatorChoice", "Trace", "CopyLayout"]
    assert seen[1] == ["PlateHandler", "EstimatorChoice", "Trace", "CopyLayout"]


class _CopyWatcher(effects.Handler):
    """Sees the "copies" messages of the sites drawn inside it."""
    takes_values = False

    def __init__(self):
        self.asked = []

    def process(self, msg):
        if msg.kind == "copies":
            self.asked.append((msg.name, msg.fields["count"]))

    def postprocess(self, msg):
        if msg.kind == "copies":
            self.asked.append((msg.name, msg.value.count))


def test_copies_are_laid_out_by_a_handler_outside_the_run():
    watcher = _CopyWatcher()

    def model(theta):
        effects.push(watcher)
        try:
            a = scg.sample("a", scg.Bernoulli(probs=theta), estimator=scg.Enumerate())
            b = scg.sample("b", scg.Bernoulli(probs=theta), estimator=scg.Enumerate())
        finally:
            effects.pop(watcher)
        return a * b + a

    E = scg.expectation(model, n=3, seed=0)
    g = scg.grad(E)(0.3)
    assert np.isclose(g, 2 * 0.3 + 1)  # (exact: d/dp (p^2 + p))
    # each site asks for its 2 copies; the first runs, laid out without copies, stop for
    # a new layout until the two exact sums are in factors of their own (2 x 2 blocks)
    assert watcher.asked[-4:] == [("a", 2), ("a", 4), ("b", 2), ("b", 4)]
    assert E.last_trace.copies.blocks == [2, 2]


class _Renamer(effects.Handler):
    """A handler of one's own: sees every sample message first, and forces the score
    function on the sites it is around."""
    takes_values = False

    def __init__(self):
        self.names = []

    def process(self, msg):
        if msg.kind == "sample":
            self.names.append((msg.name, msg.plates))
            msg.fields["estimator"] = scg.Score()


def test_a_handler_around_a_site_sees_its_message_first():
    handler = _Renamer()

    def model(theta):
        effects.push(handler)
        try:
            with scg.plate("data", 2):
                x = scg.sample("x", scg.Normal(theta, 1.0))
        finally:
            effects.pop(handler)
        y = scg.sample("y", scg.Normal(theta, 1.0))
        return np.sum(x) + y

    E = scg.expectation(model, n=4, seed=0)
    scg.grad(E)(0.0)
    # (the plate, pushed inside the handler, saw the message first and added itself)
    assert [(name, [p.name for p in plates]) for name, plates in handler.names] == \
        [("x", ["data"])]
    assert E.last_trace.sites["x"].kind == "score"
    assert E.last_trace.sites["y"].kind == "pathwise"


def test_each_thread_has_its_own_stack():
    barrier = threading.Barrier(2)
    stacks = {}

    def model(theta):
        barrier.wait(timeout=10)  # (both threads inside a model at once)
        stacks[threading.get_ident()] = [id(h) for h in effects.handlers()]
        return scg.sample("x", scg.Normal(theta, 1.0)) ** 2

    def job():
        scg.grad(scg.expectation(model, n=4, seed=0))(0.3)

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    first, second = stacks.values()
    assert len(first) == len(second) == 2 and not set(first) & set(second)
