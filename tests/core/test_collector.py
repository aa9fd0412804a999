"""Python's garbage collector is held while a gradient call's tape is open (its values are
freed by reference counting), counted across nested calls and threads, and on again after
the last."""

import contextlib
import gc
import threading
import weakref

import numpy as np
import pytest

import scg


def _model_seeing(seen):
    def model(theta):
        seen.append(gc.isenabled())
        z = scg.sample("z", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("c", (z - 0.3) ** 2 + x ** 2)
    return model


def test_the_collector_is_held_inside_a_gradient_and_on_again_after():
    assert gc.isenabled()
    seen = []
    scg.grad(scg.expectation(_model_seeing(seen), n=4, seed=0))(np.array(0.2))
    assert seen == [False]
    assert gc.isenabled()


def test_nested_gradients_and_errors_give_it_back():
    seen = []
    E = scg.expectation(_model_seeing(seen), n=4, seed=0)
    scg.hessian(E)(np.array(0.2))
    assert seen and not any(seen)
    assert gc.isenabled()

    def failing(theta):
        raise ValueError("the model's own error")
    with pytest.raises(ValueError):
        scg.grad(scg.expectation(failing, n=2))(np.array(0.2))
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off():
    gc.disable()
    try:
        scg.grad(scg.expectation(_model_seeing([]), n=4, seed=0))(np.array(0.2))
        assert not gc.isenabled()
    finally:
        gc.enable()


@contextlib.contextmanager
def _a_gradient_held_open_in_another_thread():
    """Inside: another thread is inside a gradient call (its model waits)."""
    inside, release = threading.Event(), threading.Event()

    def model(theta):
        inside.set()
        release.wait(10)
        scg.cost("c", scg.sample("x", scg.Normal(theta, 1.0)) ** 2)

    thread = threading.Thread(
        target=lambda: scg.grad(scg.expectation(model, n=2, seed=0))(np.array(0.1)))
    thread.start()
    assert inside.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join(10)


def test_holds_are_counted_across_threads():
    with _a_gradient_held_open_in_another_thread():
        seen = []
        scg.grad(scg.expectation(_model_seeing(seen), n=2, seed=1))(np.array(0.2))
        assert seen == [False]
        assert not gc.isenabled()  # (the other thread's call still holds it)
    assert gc.isenabled()


def test_garbage_is_collected_while_another_thread_holds_the_collector():
    # (threads taking gradients back to back overlap: one of them is nearly always inside
    # a call, and a collector held until the last hold ends would never run again, while
    # every thread's reference cycles pile up)
    class Node:
        pass

    def cycles(count):  # (garbage only the collector frees)
        for _ in range(count):
            node = Node()
            node.self = node

    with _a_gradient_held_open_in_another_thread():
        first = Node()
        first.self = first
        dead = weakref.ref(first)
        del first
        E = scg.expectation(_model_seeing([]), n=4, seed=1)
        for _ in range(20):
            cycles(1000)  # (more than the collector's threshold between two calls)
            scg.grad(E)(np.array(0.2))
        assert not gc.isenabled()  # (the other thread's call still holds it)
        assert dead() is None  # (but the cycle was collected between this thread's calls)
    assert gc.isenabled()
