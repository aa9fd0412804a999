"""Nested use of scg.jit: jitted functions under scg.grad and inside other jitted functions.

A jitted function differentiated (to second order) runs eagerly and still replays when
called alone; a jitted expectation under value_and_grad, a jitted function calling another
one, and a jitted training step calling a jitted gradient give the eager results and
replay.
"""

import numpy as np

import scg

from .compare import assert_same, pair
from .models import shifted_square


def test_jitted_function_under_grad_runs_eagerly():
    def f(x):
        return np.sum(np.sin(x) * x)
    jf = scg.jit(f)
    x = np.array([0.3, -1.2, 2.0])
    for _ in range(4):
        assert_same(f(x), jf(x))
    assert jf.stats["replays"] > 0
    eager_before = jf.stats["eager"]
    g = scg.grad(jf)(x)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-12)
    assert jf.stats["eager"] == eager_before + 1
    # second order through the jitted function
    h = scg.grad(lambda y: np.sum(scg.grad(jf)(y)))(x)
    np.testing.assert_allclose(h, -np.sin(x) * x + 2 * np.cos(x), rtol=1e-12)
    # and replays still work afterwards
    replays = jf.stats["replays"]
    assert_same(f(x), jf(x))
    assert jf.stats["replays"] == replays + 1


def test_jitted_expectation_under_grad_matches_eager():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return (x - 2.0) ** 2
    E, Ej = pair(model, n=8, seed=51)
    jE = scg.jit(Ej)
    mu = np.array(0.4)
    for _ in range(4):
        assert_same(E(mu), jE(mu))
    assert jE.stats["replays"] > 0
    for _ in range(3):
        assert_same(scg.value_and_grad(E)(mu), scg.value_and_grad(jE)(mu))


def nested_jitted():
    inner = scg.jit(lambda x: np.sin(x) * 2.0)
    outer = scg.jit(lambda x: np.sum(inner(x) + x ** 2))
    grad_outer = scg.jit(scg.grad(lambda x: np.sum(inner(x) * x)))
    return inner, outer, grad_outer


def test_jit_of_a_function_calling_a_jitted_function():
    inner, outer, grad_outer = nested_jitted()
    for k in range(8):
        x = np.array([0.1, 0.5, -0.3]) * (k + 1)
        assert_same(np.sum(np.sin(x) * 2.0 + x ** 2), outer(x))
        np.testing.assert_allclose(grad_outer(x), 2 * np.cos(x) * x + 2 * np.sin(x),
                                   rtol=1e-12)
        assert_same(np.sin(x) * 2.0, inner(x))
    assert inner.stats["eager"] > 0  # (inside another recording or a gradient: eager)
    assert inner.stats["replays"] > 0  # (called alone: replayed)


def test_jit_of_a_function_calling_a_jitted_function_replays():
    """The inner jitted function's counters change on every call: not part of the outer
    function's guards."""
    inner, outer, grad_outer = nested_jitted()
    for k in range(8):
        x = np.array([0.1, 0.5, -0.3]) * (k + 1)
        outer(x)
        grad_outer(x)
    assert outer.stats["replays"] > 0
    assert grad_outer.stats["replays"] > 0
    step = scg.jit(lambda mu: mu - 0.1 * inner(mu))
    for k in range(8):
        step(np.array(0.1 * k))
    assert step.stats["replays"] > 0


def test_jitted_step_calling_a_jitted_gradient():
    model = shifted_square
    E, Ej = pair(model, n=8, seed=52)
    inner = scg.jit(scg.grad(Ej))
    step = scg.jit(lambda mu: mu - 0.1 * inner(mu))
    mu_e = mu_j = np.array(0.0)
    for _ in range(8):
        mu_e = mu_e - 0.1 * scg.grad(E)(mu_e)
        mu_j = step(mu_j)
        assert_same(mu_e, mu_j)
    assert inner.stats["eager"] > 0
    assert step.stats["replays"] > 0
