"""Booleans of per-draw values: |, &, ^, ~, np.logical_*, np.any / np.all along logical axes
(non-differentiable, like comparisons), the same as numpy on each draw."""

import numpy as np
import pytest

import scg

OPS = {
    "or": lambda a, b: a | b, "and": lambda a, b: a & b, "xor": lambda a, b: a ^ b,
    "not": lambda a, b: ~a, "logical_xor": lambda a, b: np.logical_xor(a, b),
    "logical_and": lambda a, b: np.logical_and(a, b),
    "any_axis": lambda a, b: np.any(a | b, axis=-1), "all_axis": lambda a, b: np.all(a, axis=-1),
    "any": lambda a, b: np.any(a & b), "all": lambda a, b: np.all(a | b),
    "with_plain": lambda a, b: a | np.array([True, False, False]),
}


@pytest.mark.parametrize("name", list(OPS))
def test_per_draw_booleans_are_numpys_on_each_draw(name):
    op = OPS[name]

    def model(theta):
        x = scg.sample("x", scg.Normal(theta * np.ones(3), 1.0))
        y = scg.sample("y", scg.Normal(-theta * np.ones(3), 1.0))
        v = op(x > 0, y > 0)
        return np.sum(np.where(v, x, 0.0))

    t = scg.trace(model, 0.3, n=50, seed=0)
    x, y = t.sites["x"].value, t.sites["y"].value
    want = [np.sum(np.where(op(a, b), xi, 0.0)) for a, b, xi in zip(x > 0, y > 0, x)]
    np.testing.assert_allclose(t.costs["return"], want)
    assert np.isfinite(scg.grad(scg.expectation(model, n=50, seed=0))(0.3))


def test_integer_operands_are_bitwise_as_in_numpy():
    def model(theta):
        k = scg.sample("k", scg.Categorical(logits=np.zeros(4) + theta))
        return ((k.astype(int) | 1) ^ 2) * 1.0

    t = scg.trace(model, 0.0, n=20, seed=0)
    k = t.sites["k"].value.astype(int)
    np.testing.assert_array_equal(t.costs["return"], ((k | 1) ^ 2) * 1.0)


def test_any_over_a_plate_mixes_its_elements():
    def model(theta):
        with scg.plate("data", 3):
            z = scg.sample("z", scg.Bernoulli(logits=theta * np.ones(3)))
        return np.any(z > 0) * 1.0

    text = scg.trace(model, 0.1, n=4).explain()
    assert "mixes the elements of plate data" in text
