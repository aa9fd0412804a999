"""scg.jit under threads: jitted functions used from several threads at once.

Two threads each recording their own jitted function at the same time, one jitted
function shared by four threads over several argument structures, and one shared by two
threads that each read their own expectation through the thread (each thread has its own
recordings): every call gives the eager result.
"""

import threading

import numpy as np

import scg
from tests.stochastic.test_threads import run_in_threads

from .compare import assert_same, pair, same_values as same
from .models import bernoulli_plate, normal_pathwise, thetas


def test_two_threads_each_with_its_own_jitted_function():
    rng = np.random.default_rng(5)
    logits = [rng.normal(size=10) for _ in range(8)]
    ths = thetas()

    # eager references, one thread
    E1, E1j = pair(normal_pathwise, n=16, seed=41)
    E2, E2j = pair(bernoulli_plate, n=8, seed=42)
    want1 = [scg.value_and_grad(E1)(t) for t in ths]
    want2 = [scg.value_and_grad(E2)(lg) for lg in logits]

    start = threading.Barrier(2)
    first_call = threading.Barrier(2)
    waited = [False, False]

    def job(k, E, args):
        def fn(a):
            if not waited[k]:  # both threads record their first call at the same time
                waited[k] = True
                first_call.wait(timeout=30)
            return scg.value_and_grad(E)(a)
        jitted = scg.jit(fn, trust=(threading.Barrier,))  # (the wait: not part of a replay)
        start.wait(timeout=30)
        return jitted, [jitted(a) for a in args]

    results = run_in_threads(lambda: job(0, E1j, ths), lambda: job(1, E2j, logits))
    for (jitted, got), want in zip(results, (want1, want2)):
        for w, g in zip(want, got):
            assert_same(w, g)
        assert jitted.stats["replays"] > 0, jitted.explain()


def test_one_jitted_function_shared_by_threads():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)
    jgrad = scg.jit(scg.grad(loss))

    def work(k):
        rng = np.random.default_rng(k)
        mismatches = []
        for i in range(40):
            size = 3 + (i + k) % 3  # (three structures, shared by the threads)
            w, x = rng.normal(size=size), rng.normal(size=(4, size))
            if not np.allclose(jgrad(w, x), scg.grad(loss)(w, x), rtol=1e-12, atol=0):
                mismatches.append((k, i))
        return mismatches

    mismatches = sum(run_in_threads(*[lambda k=k: work(k) for k in range(4)]), [])
    assert mismatches == []
    assert jgrad.stats["replays"] > 0


def test_a_jitted_function_shared_by_threads_each_with_its_own_expectation():
    """One jitted step, each thread drawing from its own expectation (looked up by the
    thread's name): every call gives what the same thread gives eagerly, whether or not
    a recording saw the other thread's draws, and explain() does not blame the function
    alone for them."""
    steps = 12
    names = ["a", "b"]

    def build():
        return {k: scg.grad(scg.expectation(bernoulli_plate, n=8, seed=s))
                for s, k in enumerate(names)}

    logits = np.linspace(-1.0, 1.0, 10)
    eager = build()
    want = {k: [eager[k](logits) for _ in range(steps)] for k in names}
    shared = build()
    jitted = scg.jit(lambda x: shared[threading.current_thread().name](x))
    got = {}

    def job(k):
        got[k] = [jitted(logits) for _ in range(steps)]
    threads = [threading.Thread(target=job, args=(k,), name=k) for k in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in names:
        for w, g in zip(want[k], got[k]):
            assert_same(w, g)
    if "numpy Generator itself" in jitted.explain():
        assert "or another thread drew from it" in jitted.explain()


def test_a_thread_pool_shares_the_recordings_of_a_function_that_does_not_read_the_thread():
    """Workers of a pool, each a new thread, replay what the first recorded: a function
    that does not read the thread calling it has one set of recordings."""
    from concurrent.futures import ThreadPoolExecutor
    E, Ej = pair(bernoulli_plate, n=8, seed=3)
    eager, jitted = scg.grad(E), scg.jit(scg.grad(Ej))
    logits = np.linspace(-1.0, 1.0, 10)
    want = [eager(logits) for _ in range(40)]
    got = []
    for _ in range(4):  # (a new pool, new threads, each time)
        with ThreadPoolExecutor(max_workers=3) as pool:
            got += list(pool.map(lambda _: None, range(1)))  # (threads started)
        with ThreadPoolExecutor(max_workers=1) as pool:
            got += list(pool.map(lambda _: jitted(logits), range(10)))
    got = [g for g in got if g is not None]
    for w, g in zip(want, got):
        assert_same(w, g)
    assert jitted.stats["recordings"] == 2, jitted.explain()
