"""has_aux=True: a model that returns (cost, aux), as in JAX."""

import threading

import numpy as np
import pytest

import scg
from scg.core.tape import Primitive, defvjp


def model(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0))
    return x ** 2, {"x": x, "setting": 3.0}


def test_the_value_the_gradient_and_the_aux():
    E = scg.expectation(model, n=5, seed=0, has_aux=True)
    value, aux = E(1.0)
    draws = E.last_trace.sites["x"].value
    np.testing.assert_array_equal(aux["x"], draws)
    assert aux["setting"] == 3.0 and value == pytest.approx(np.mean(draws ** 2))
    (value, aux), g = scg.value_and_grad(E, has_aux=True)(1.0)
    np.testing.assert_array_equal(aux["x"], E.last_trace.sites["x"].value)
    assert g == pytest.approx(np.mean(2 * aux["x"]))  # pathwise: d/dmu x^2 = 2 x
    g2, aux2 = scg.grad(E, has_aux=True)(1.0)
    assert aux2["x"].shape == (5,)
    # without has_aux in the call, the usual results
    assert np.isscalar(scg.grad(E)(1.0)) or np.ndim(scg.grad(E)(1.0)) == 0


def test_under_jit():
    E, Ej = (scg.expectation(model, n=4, seed=1, has_aux=True) for _ in range(2))
    step = scg.jit(scg.value_and_grad(Ej, has_aux=True))
    for _ in range(5):
        (v, aux), g = scg.value_and_grad(E, has_aux=True)(0.5)
        (vj, auxj), gj = step(0.5)
        np.testing.assert_allclose([vj, gj], [v, g], rtol=1e-12)
        np.testing.assert_array_equal(auxj["x"], aux["x"])
    assert step.stats["replays"] >= 2, step.explain()


def test_clear_errors():
    def pair(mu):
        return scg.sample("x", scg.Normal(mu, 1.0)), {"x": 1.0}
    with pytest.raises(TypeError, match="returned a tuple.*has_aux=True"):
        scg.expectation(pair, n=2, seed=0)(1.0)
    with pytest.raises(TypeError, match="has_aux=True must return \\(cost, aux\\)"):
        scg.expectation(lambda mu: scg.sample("x", scg.Normal(mu, 1.0)), n=2,
                        has_aux=True)(1.0)
    with pytest.raises(TypeError, match="has_aux=True takes an expectation"):
        scg.value_and_grad(lambda x: x ** 2, has_aux=True)
    with pytest.raises(TypeError, match="has_aux must be True or False"):
        scg.expectation(model, has_aux="yes")


def test_the_aux_of_a_gradient_call_is_its_own_while_another_thread_calls():
    """The aux comes back from the call itself: a call in another thread that ends while
    this one is in its backward pass does not swap it."""
    in_backward, release = threading.Event(), threading.Event()

    def hold_then_pass(g, ans, x):
        in_backward.set()
        release.wait(10)
        return g

    gate = Primitive("hold_in_backward", lambda x: x)
    defvjp(gate, hold_then_pass)
    holding = {"on": True}

    def model(theta, tag):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        t = gate(theta) if holding["on"] else theta
        return (x - t) ** 2, tag

    E = scg.expectation(model, n=4, seed=0, has_aux=True)
    out = {}
    first = threading.Thread(target=lambda: out.setdefault(
        "first", scg.grad(E, has_aux=True)(0.5, np.float64(1.0))))
    first.start()
    assert in_backward.wait(10)
    holding["on"] = False
    out["second"] = scg.grad(E, has_aux=True)(0.5, np.float64(2.0))
    release.set()
    first.join(10)
    assert float(out["first"][1]) == 1.0 and float(out["second"][1]) == 2.0
