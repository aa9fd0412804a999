"""scg.jit: the density and path kernels of draws replayed as specialized calls.

Kernel calls are replayed through calls made for the recorded kinds of their arguments
(numpy scalars, 0-d and one-entry arrays, Python floats, per-draw arrays, vectors), around
the size thresholds of the kernels and with float32 parameters: values and gradients are
the eager ones, for score-function and pathwise estimators.
"""

import numpy as np
import pytest

import scg

from .compare import lockstep_calls as lockstep


@pytest.mark.parametrize("family", ["Normal", "Laplace", "Gumbel", "LogNormal"])
@pytest.mark.parametrize("kind", ["scalar", "one-entry", "per-draw", "plain-float"])
def test_kernel_calls_replayed_as_specialized_calls_match_eager(family, kind):
    """The density and path kernels of small draws are replayed through calls made for
    the recorded kinds of their arguments (a numpy scalar, a one-entry array, an array of
    the draw's shape, a Python float): values and gradients as eager, score and pathwise."""
    law = getattr(scg, family)

    def model(theta):
        scale = np.exp(theta[1])
        if kind == "scalar":
            loc = theta[0]
        elif kind == "one-entry":
            loc, scale = theta[:1], np.exp(theta[1:2])
        elif kind == "per-draw":  # (a location that is a draw of its own)
            loc = scg.sample("z", scg.Normal(theta[0], 1.0)) * theta[2]
        else:
            loc = 0.3
        x = scg.sample("x", law(loc, scale))
        y = scg.sample("y", law(loc, scale), estimator=scg.Score(baseline="loo"))
        return np.sum(np.tanh(x) * np.sin(y))

    theta = np.array([0.2, -0.4, 0.7])
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=4, seed=5)))
    eager = scg.value_and_grad(scg.expectation(model, n=4, seed=5))
    for _ in range(4):
        (v1, g1), (v2, g2) = jitted(theta), eager(theta)
        assert v1 == v2
        np.testing.assert_array_equal(g1, g2)
    assert jitted.stats["replays"] >= 1, jitted.explain()
    program = next(e.program for e in jitted._entries.values() if e.program)
    assert any(getattr(c, "__name__", "") == "call" for c in program.__globals__.values())


@pytest.mark.parametrize("n", [4095, 4096, 65535, 65536])
def test_kernel_calls_around_the_size_thresholds(n):
    def model(theta):
        x = scg.sample("x", scg.LogNormal(theta[0], np.exp(theta[1])))
        y = scg.sample("y", scg.Normal(theta[:1], np.exp(theta[1:2])),
                       estimator=scg.Score(baseline="loo"))
        return np.sum(np.tanh(x) * np.sin(y))

    theta = np.array([0.2, -0.4])
    eager = scg.value_and_grad(scg.expectation(model, n=n, seed=5))
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=n, seed=5)))
    assert lockstep(eager, jitted, [(theta,)] * 4) == []
    assert jitted.stats["replays"] >= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_calls_with_float32_parameters(dtype):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], np.exp(theta[1])))
        y = scg.sample("y", scg.Normal(theta[:1], np.exp(theta[1:2])),
                       estimator=scg.Score(baseline="loo"))
        return np.sum(np.tanh(x) * np.sin(y))

    theta = np.array([0.2, -0.4], dtype=dtype)
    for make in (lambda: scg.expectation(model, n=4, seed=1),
                 lambda: scg.value_and_grad(scg.expectation(model, n=4, seed=1))):
        eager, jitted = make(), scg.jit(make())
        assert lockstep(eager, jitted, [(theta,)] * 5) == []
        assert jitted.stats["replays"] >= 1


def test_kernel_parameters_of_every_kind_in_turn():
    """A parameter that is a numpy scalar, a 0-d array, a one-entry array, a Python float,
    a (1, 1) array or a vector on successive calls: each kind is its own structure (or
    its own specialized call), values and gradients as eager."""
    def model(loc, scale):
        x = scg.sample("x", scg.Normal(loc, scale))
        y = scg.sample("y", scg.Gumbel(loc, scale), estimator=scg.Score(baseline="loo"))
        return np.sum(np.tanh(x) * np.sin(y))

    kinds = [np.float64(0.3), np.array(0.3), np.array([0.3]), 0.3, np.array([[0.3]]),
             np.array([0.3, 0.1, -0.2])]
    calls = []
    for k in kinds:
        calls += [(k, np.float64(1.2))] * 3 + [(k, np.array([1.2]))] * 3
    for make in (lambda: scg.expectation(model, n=4, seed=1),
                 lambda: scg.grad(scg.expectation(model, n=4, seed=1), argnums=(0, 1))):
        eager, jitted = make(), scg.jit(make())
        assert lockstep(eager, jitted, calls) == []
        assert jitted.stats["replays"] >= len(kinds)
