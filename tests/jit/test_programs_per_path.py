"""A structure of call whose calls take other paths (a loop ended by `scg.all` at another
step): scg.jit keeps a program per path and replays the one whose guards hold; it stops
recording paths that never come back, and records again once a path repeats."""

import gc
import tracemalloc

import numpy as np

import scg


def _loop(x):
    """Counts up until every entry of s reaches x: as many steps as max(x), at most 60."""
    s = np.zeros_like(x)
    total = 0.0
    for _ in range(60):
        s = s + 1.0
        total = total + np.sum(np.sqrt(s))
        if scg.all(s >= x):
            break
    return total


_GLOBAL_DATA = np.arange(2.0 ** 18)  # (2 MB, compared by the guards of a function reading it)


def _exact(x):
    total = 0.0
    for i in range(1, int(min(max(np.max(x), 1), 60)) + 1):
        total += np.sqrt(i) * x.size
    return total


def test_two_loop_lengths_that_alternate_are_both_replayed():
    f = scg.jit(_loop)
    for k in range(16):
        x = np.array([3.0, 1.0]) if k % 2 else np.array([5.0, 2.0])
        out = f(x)
        assert out == _exact(x)
        assert out == _loop(x)  # (bit for bit the function's own number)
    assert f.stats["replays"] >= 8, f.explain()
    assert "2 program(s)" in f.explain()


def test_lengths_that_never_come_back_stop_being_recorded():
    f = scg.jit(_loop)
    for k in range(40):
        x = np.array([1.0 + k])
        assert f(x) == _exact(x)
    assert f.stats["replays"] == 0
    # (the first tries, and a few after calls that happened to repeat a path: none here)
    assert f.stats["recordings"] <= 5, f.explain()
    assert "runs afresh" in f.explain()


def test_a_length_that_starts_repeating_is_recorded_again_and_replayed():
    f = scg.jit(_loop)
    for k in range(30):  # (a policy that learns: every loop a new length)
        x = np.array([2.0 + k])
        assert f(x) == _exact(x)
    recorded = f.stats["recordings"]
    replays = f.stats["replays"]
    x = np.array([60.0])  # (then the loop runs to its end, call after call)
    for _ in range(8):
        assert f(x) == _exact(x)
    assert f.stats["recordings"] - recorded <= 3, f.explain()
    assert f.stats["replays"] - replays >= 4, f.explain()


def test_a_program_whose_guards_miss_is_kept_for_its_own_path():
    f = scg.jit(_loop)
    long, short = np.array([9.0]), np.array([4.0])
    for _ in range(4):
        f(long)
    assert f.stats["replays"] >= 1
    for _ in range(4):
        f(short)
    replays = f.stats["replays"]
    assert f(long) == _exact(long)
    assert f.stats["replays"] == replays + 1, f.explain()


def test_once_a_program_exists_a_new_path_runs_afresh_until_it_repeats():
    f = scg.jit(_loop)
    long = np.array([9.0])
    for _ in range(4):
        f(long)
    recorded = f.stats["recordings"]
    for k in range(6):  # (each a new length once, between replays of the long one)
        x = np.array([2.0 + k])
        assert f(x) == _exact(x)
        assert f(long) == _exact(long)
    assert f.stats["recordings"] == recorded, f.explain()
    assert f.stats["eager"] == 6


def test_the_programs_of_a_structure_share_the_data_they_read():
    # (each recording copies a writeable array it reads as a constant, and its guards
    # keep the bytes of the arrays they compare: the programs of six loop lengths held six
    # copies of a closure's data matrix, and six of the global's)
    data = np.random.default_rng(0).normal(size=(512, 512))  # 2 MB

    def fit(x):
        s = np.zeros_like(x)
        total = 0.0
        for _ in range(12):
            s = s + 1.0
            total = total + np.sum(data @ (s * x)) + np.sum(_GLOBAL_DATA)
            if scg.all(s >= x):
                break
        return total

    f = scg.jit(fit)
    tracemalloc.start()
    try:
        for k in range(24):  # (six loop lengths, each called four times in a row)
            x = np.full(512, 1.0 + k // 4)
            assert f(x) == fit(x)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "6 program(s)" in f.explain(), f.explain()
    # (once each: the constant copy of the closure's data, and the bytes of it and of the
    # global its guards compare)
    assert held < 3.5 * data.nbytes, (held / data.nbytes, f.explain())


def _episodes_with_a_moving_average():
    def model(theta):
        pos, alive = 0.0, True
        for t in range(8):
            with scg.mask(alive):
                a = scg.sample(f"a{t}", scg.Bernoulli(logits=theta),
                               estimator=scg.Score(scg.baselines.MovingAverage(0.8)))
                scg.cost(f"r{t}", 0.5 - a)
            pos = pos + 2 * a - 1
            alive = alive & (np.abs(pos) < 2)
            if scg.all(~alive):
                break
    return scg.grad(scg.expectation(model, n=3, seed=5))


def test_programs_of_other_paths_update_a_baseline_once_per_call():
    # (a program that misses midway has drawn and updated nothing: the next one tried, or
    # the run afresh, draws the same numbers and updates the baseline once)
    eager, jitted = _episodes_with_a_moving_average(), scg.jit(_episodes_with_a_moving_average())
    for _ in range(40):  # (the step where every episode has ended changes from call to call)
        assert jitted(np.array(0.3)) == eager(np.array(0.3))
    assert jitted.stats["replays"] >= 10, jitted.explain()
    assert "program(s)" in jitted.explain(), jitted.explain()


def test_explain_says_a_structure_was_replayed_before_its_programs_were_dropped():
    factor = [1.0]

    def scaled(x):
        return _loop(x) * factor[0]

    f = scg.jit(scaled)
    for _ in range(4):
        f(np.array([3.0]))
    factor[0] = 2.0  # (what every program read changed: they are dropped)
    assert f(np.array([4.0])) == 2.0 * _exact(np.array([4.0]))
    text = f.explain()
    assert "not yet replayed" not in text, text
    assert "replayed 2 call(s) before what its programs read changed" in text, text
