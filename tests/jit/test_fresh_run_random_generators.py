"""scg.jit and random generators: replays leave every generator where eager calls do.

Generators passed as arguments, numpy's global generator, one generator shared by two
expectations and used outside them, and every bit generator (PCG64, PCG64DXSM, Philox,
SFC64, MT19937): a replay that misses a guard after its draws puts the generator back for
the call that runs afresh, and the position keepers restore the exact saved state.
"""

import numpy as np
import pytest

import scg

from .compare import lockstep_calls as lockstep, same_values as same
from .models import bernoulli_normal_model, normal_model


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.Philox])
def test_position_keeper_goes_back_to_the_saved_position(bit_generator):
    from scg.core.random_state import position_keeper
    rng = np.random.Generator(bit_generator(7))
    rng.integers(0, 10, 3, dtype=np.uint32)  # (leaves a spare 32-bit word in PCG64)
    save, restore = position_keeper(rng)
    position, state = save(), rng.bit_generator.state
    first = (rng.integers(0, 2**31, 5, dtype=np.uint32), rng.standard_normal(4))
    restore(position)
    assert repr(rng.bit_generator.state) == repr(state)  # (Philox: arrays in the state)
    again = (rng.integers(0, 2**31, 5, dtype=np.uint32), rng.standard_normal(4))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_generator_argument_dropout_mask():
    def dropout(x, rng):
        return x * (rng.random(2) < 0.9)
    r_eager, r_jit = np.random.default_rng(0), np.random.default_rng(0)
    jf = scg.jit(dropout)
    x = np.array([1.0, 2.0])
    for _ in range(8):
        assert same(dropout(x, r_eager), jf(x, r_jit))
    assert r_eager.bit_generator.state == r_jit.bit_generator.state


def test_global_numpy_random():
    def f(x):
        return x * (np.random.random() < 0.8)
    saved = np.random.get_state()
    try:
        jf = scg.jit(f)
        x = np.array([1.0, 2.0])
        np.random.seed(0)
        want = [f(x) for _ in range(8)] + [np.random.random()]
        np.random.seed(0)
        got = [jf(x) for _ in range(8)] + [np.random.random()]
    finally:
        np.random.set_state(saved)
    assert same(want, got)


def test_two_expectations_sharing_one_generator():
    ra, rb = np.random.default_rng(5), np.random.default_rng(5)
    E1, E2 = scg.expectation(normal_model, n=4, seed=ra), \
        scg.expectation(bernoulli_normal_model, n=4, seed=ra)
    F1, F2 = scg.expectation(normal_model, n=4, seed=rb), \
        scg.expectation(bernoulli_normal_model, n=4, seed=rb)
    j1, j2 = scg.jit(scg.grad(F1)), scg.jit(scg.grad(F2))
    for i in range(8):
        mu = np.array(0.1 * i)
        assert same((scg.grad(E1)(mu), scg.grad(E2)(mu)), (j1(mu), j2(mu)))
        if i % 3 == 0:  # (the shared generator also used outside)
            ra.random()
            rb.random()
    assert j1.stats["replays"] > 0 and j2.stats["replays"] > 0


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.Philox,
                                           np.random.SFC64, np.random.MT19937,
                                           np.random.PCG64DXSM])
def test_a_missed_replay_puts_any_generator_back(bit_generator):
    """A guard that misses after the draws: the generator (closed over through the
    expectation's seed) must be back in place for the run afresh."""
    def make():
        rng = np.random.Generator(bit_generator(3))

        def model(theta):
            z = scg.sample("z", scg.Normal(theta, 1.0))
            return np.sum(z ** 2)

        E = scg.expectation(model, n=4, seed=rng)

        def step(theta):
            g = scg.grad(E)(theta)
            return g if theta[0] > 0 else -g
        return step

    xs = [np.array([1.0, 2.0])] * 4 + [np.array([-1.0, 2.0])] + [np.array([1.0, 2.0])] * 2
    eager, jitted = make(), scg.jit(make())
    assert lockstep(eager, jitted, [(x,) for x in xs]) == []
    assert jitted.stats["replays"] >= 2
