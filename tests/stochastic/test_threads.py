"""Gradients taken in several threads at once: each thread has its own tape and models.

A barrier inside the models holds both threads inside a model run at the same time, so
every test interleaves two runs for certain, not by chance of the scheduler."""

import threading

import numpy as np
import pytest

import scg


def run_in_threads(*jobs):
    """Run the jobs at once, one thread each; their results in order (or raise)."""
    results, errors = [None] * len(jobs), []

    def work(k):
        try:
            results[k] = jobs[k]()
        except BaseException as e:  # (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def models_meeting_at(barrier):
    def gaussian(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        barrier.wait(timeout=10)  # the other thread is inside its model now
        y = scg.sample("y", scg.Normal(x, 0.5))
        return y ** 2

    def bernoulli(p):
        a = scg.sample("a", scg.Bernoulli(probs=p))
        barrier.wait(timeout=10)
        b = scg.sample("b", scg.Bernoulli(probs=p))
        return (a + b - 0.5) ** 2
    return gaussian, bernoulli


def test_two_threads_inside_models_at_once_get_their_own_gradients():
    gaussian, bernoulli = models_meeting_at(threading.Barrier(2))
    Eg = scg.expectation(gaussian, n=1000, seed=0)
    Eb = scg.expectation(bernoulli, n=1000, seed=1)
    got_g, got_b = run_in_threads(lambda: scg.grad(Eg)(1.0), lambda: scg.grad(Eb)(0.3))
    alone_g, alone_b = models_meeting_at(threading.Barrier(1))
    assert got_g == scg.grad(scg.expectation(alone_g, n=1000, seed=0))(1.0)
    assert got_b == scg.grad(scg.expectation(alone_b, n=1000, seed=1))(0.3)


def test_many_gradients_in_two_threads_match_one_thread():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    rng = np.random.default_rng(0)
    inputs = [(rng.normal(size=(3, 2)), rng.normal(size=(5, 3))) for _ in range(2)]
    expected = [scg.hessian(loss)(w, x) for w, x in inputs]

    def job(k):
        return lambda: [scg.hessian(loss)(*inputs[k]) for _ in range(200)]
    for k, results in enumerate(run_in_threads(job(0), job(1))):
        for r in results:
            np.testing.assert_array_equal(r, expected[k])


def test_a_site_outside_a_model_in_another_thread_is_refused():
    barrier = threading.Barrier(2)

    def model(mu):
        barrier.wait(timeout=10)  # a model runs in the main thread ...
        barrier.wait(timeout=10)  # ... while the other thread calls scg.sample
        return scg.sample("x", scg.Normal(mu, 1.0))

    def stray():
        barrier.wait(timeout=10)
        try:
            with pytest.raises(scg.TracingError, match="outside a model"):
                scg.sample("z", scg.Normal(0.0, 1.0))
        finally:
            barrier.wait(timeout=10)
        return True

    E = scg.expectation(model, n=10, seed=0)
    assert run_in_threads(lambda: E(0.0), stray)[1] is True
