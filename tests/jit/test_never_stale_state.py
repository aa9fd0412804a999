"""scg.jit never replays stale values: state a user replaces between calls, switches
read at each call, and Python's own random numbers.

A checkpoint of an expectation's kept state restored (`E.states = saved`, a site's
baseline or estimator state replaced), parameter validation turned back on after a
recording made without it, and a model that draws from Python's random module: the
jitted calls give the eager ones."""

import copy
import random
import warnings

import numpy as np
import pytest

import scg


def _moving_average(theta):
    x = scg.sample("x", scg.Normal(theta[0], 1.0),
                   estimator=scg.Score(scg.baselines.MovingAverage(0.5)))
    return x ** 2


def _rebar(theta):
    b = scg.sample("b", scg.Bernoulli(logits=theta).to_event(1), estimator=scg.REBAR(lr=0.5))
    return np.sum((b - 0.4) ** 2) + b[0] * b[1]


def _restored(model, site, how, jit):
    E = scg.expectation(model, n=4, seed=1)
    f = scg.jit(scg.grad(E)) if jit else scg.grad(E)
    theta = np.array([0.3, -0.2])
    f(theta)
    saved = copy.deepcopy(E.states)
    for _ in range(4):
        f(theta)
    if how == "states":
        E.states = copy.deepcopy(saved)
    elif how == "baseline":
        E.states[site].baseline = copy.deepcopy(saved[site].baseline)
    else:
        E.states[site].estimator = copy.deepcopy(saved[site].estimator)
    out = [f(theta) for _ in range(3)]
    return out, (f.stats if jit else None), E


@pytest.mark.parametrize("model, site, how", [
    (_moving_average, "x", "states"), (_moving_average, "x", "baseline"),
    (_rebar, "b", "states"), (_rebar, "b", "estimator")])
def test_a_restored_checkpoint_of_the_kept_state_is_the_one_replays_use(model, site, how):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, _, E_eager = _restored(model, site, how, jit=False)
        jitted, stats, E_jit = _restored(model, site, how, jit=True)
    assert stats["replays"] >= 2, stats
    for a, b in zip(jitted, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    kept = [E_jit.states[site].baseline, E_jit.states[site].estimator]
    want = [E_eager.states[site].baseline, E_eager.states[site].estimator]
    assert repr(kept) == repr(want)


def test_states_takes_only_an_expectations_states():
    E = scg.expectation(_moving_average, n=2, seed=0)
    with pytest.raises(TypeError, match=r"copy.deepcopy\(E.states\)"):
        E.states = {}


def test_validation_turned_back_on_checks_the_parameters_of_a_replay():
    def model(theta):
        return scg.sample("x", scg.Normal(0.0, theta[0])) ** 2

    f = scg.jit(scg.grad(scg.expectation(model, n=5, seed=1)))
    scg.distributions.set_validation(False)
    try:
        for _ in range(3):
            f(np.array([1.0]))
    finally:
        scg.distributions.set_validation(True)
    with pytest.raises(ValueError, match="scale"):
        f(np.array([-1.0]))
    for _ in range(3):  # (and replays again with it on)
        f(np.array([1.0]))
    assert f.stats["replays"] >= 1, f.explain()


def test_draws_from_pythons_random_module_run_afresh():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        return x if random.random() < 0.5 else 3.0 + 0.0 * x  # (epsilon-greedy)

    def run(jit):
        random.seed(7)
        g = scg.grad(scg.expectation(model, n=1, seed=2))
        f = scg.jit(g) if jit else g
        return [f(np.array([0.1]))[0] for _ in range(12)], f

    # (a model's own random numbers: warned of, eagerly and under scg.jit alike)
    with pytest.warns(scg.RandomnessWarning, match="Python's random module"):
        eager, _ = run(False)
    with pytest.warns(scg.RandomnessWarning, match="Python's random module"):
        jitted, f = run(True)
    assert jitted == eager
    assert f.stats["replays"] == 0
    assert "runs afresh on every call" in f.explain() and "Random.random" in f.explain()
