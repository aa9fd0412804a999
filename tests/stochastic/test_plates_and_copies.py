"""Plates with copying estimators: a plate's elements mixed through a site outside it, per-
element indexing inside it, and the layouts that must raise clear errors instead."""

import itertools

import numpy as np
import pytest

import scg

from tests.estimators.exact import numeric_grad, sig

W = np.array([0.5, -1.0, 2.0])


def through_a_site(ez, ea):
    """z per element of plate p; a outside it depends on all of z; a cost per element uses
    both: element b's cost depends on every element of z through a."""
    def model(th):
        with scg.plate("p", 3):
            z = scg.sample("z", scg.Bernoulli(logits=th[0] + W), estimator=ez)
        a = scg.sample("a", scg.Bernoulli(logits=th[1] + np.sum(z * W)), estimator=ea)
        with scg.plate("p", 3):
            scg.cost("c", (z - a) ** 2 * W ** 2)
    return model


def exact_through_a_site(th):
    p = sig(th[0] + W)
    total = 0.0
    for z in itertools.product((0, 1), repeat=3):
        z = np.array(z)
        pa = sig(th[1] + np.sum(z * W))
        total += np.prod(np.where(z, p, 1 - p)) * (
            pa * np.sum((z - 1) ** 2 * W ** 2) + (1 - pa) * np.sum(z ** 2 * W ** 2))
    return total


@pytest.mark.parametrize("ez", [scg.Score("loo"), scg.DisARM()], ids=["score", "disarm"])
def test_mixing_through_a_site_outside_the_plate_is_unbiased(ez):
    th = np.array([0.2, -0.3])
    gs = scg.grad_samples(scg.expectation(through_a_site(ez, scg.Enumerate()), n=40_000,
                                          seed=1))(th)
    z = (gs.mean - numeric_grad(exact_through_a_site, th)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z


@pytest.mark.parametrize("ez", [scg.Enumerate(), scg.MeasureValued()],
                         ids=["enumerate", "measure-valued"])
def test_mixing_through_a_site_with_per_element_copies_is_refused(ez):
    E = scg.expectation(through_a_site(ez, scg.Enumerate()), n=4, seed=0)
    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
        scg.grad(E)(np.array([0.2, -0.3]))


def test_a_value_computed_after_the_plate_block_mixes_it():
    def model(th):
        with scg.plate("p", 3):
            z = scg.sample("z", scg.Bernoulli(logits=th + W), estimator=scg.Enumerate())
        s = np.sum(z * W)  # after the block: all elements
        with scg.plate("p", 3):
            return (z - s) ** 2

    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
        scg.expectation(model, n=2)(0.3)


def test_a_table_indexed_per_element_inside_a_plate_keeps_the_elements():
    V = np.array([1.0, -2.0, 0.5, 3.0])

    def model(th):
        with scg.plate("p", 3):
            z = scg.sample("z", scg.Categorical(logits=th * np.ones((3, 4))),
                           estimator=scg.Enumerate())
            return (scg.take(V, z) - 1.0) ** 2

    def exact(th):
        p = np.exp(th - th.max())
        p /= p.sum()
        return 3 * np.sum(p * (V - 1) ** 2)

    th = np.array([0.2, -0.1, 0.5, 0.0])
    E = scg.expectation(model, n=2, seed=0)
    assert E(th) == pytest.approx(exact(th), rel=1e-12)
    assert np.allclose(scg.grad(E)(th), numeric_grad(exact, th), atol=1e-7)
    assert "return in plate p" in scg.trace(model, th, n=2).explain()


def test_grad_samples_equals_grad_when_parameters_are_indexed_inside_a_plate():
    T = np.array([1.0, 0.0, 2.0])

    def model(th, est):
        with scg.plate("b", 3):
            z = scg.sample("z", scg.Bernoulli(logits=th[0] + np.zeros(3)), estimator=est)
            scg.cost("c", (z * th[1] - T) ** 2)

    th = np.array([0.3, -0.7])
    for est in (scg.Enumerate(), scg.Score("loo"), scg.DisARM()):
        g = scg.grad(scg.expectation(model, n=100, seed=0))(th, est)
        gs = scg.grad_samples(scg.expectation(model, n=100, seed=0))(th, est)
        assert np.allclose(gs.mean, g), est


def test_a_support_of_one_value_needs_no_copies():
    def model(th):
        a = scg.sample("a", scg.Categorical(logits=th[:1]), estimator=scg.Enumerate())
        y = scg.sample("y", scg.Normal(th[1] + a, 1.0))
        return y ** 2

    th = np.array([0.0, 0.5])
    gs = scg.grad_samples(scg.expectation(model, n=20_000, seed=0))(th)
    assert gs.mean[0] == 0.0
    assert gs.mean[1] == pytest.approx(2 * th[1], abs=4.5 * gs.stderr[1])


def test_a_new_axis_on_a_plate_draw_keeps_the_elements():
    # the one-hot comparison a PyTorch port writes: a[..., None] == arange(K)
    rewards = np.array([[1.0, 0.0, 2.0], [0.5, 3.0, -1.0]])

    def model(logits):
        with scg.plate("data", 2):
            a = scg.sample("a", scg.Categorical(logits=logits), estimator=scg.Enumerate())
            return -np.sum(np.where(a[..., None] == np.arange(3), 1.0, 0.0) * rewards, axis=-1)

    def exact(logits):
        p = np.exp(logits)
        p /= p.sum(-1, keepdims=True)
        return -np.sum(p * rewards)

    logits = np.array([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1]])
    E = scg.expectation(model, n=2, seed=0)
    assert E(logits) == pytest.approx(exact(logits), rel=1e-12)
    assert np.allclose(scg.grad(E)(logits), numeric_grad(exact, logits), atol=1e-7)
    assert "return in plate data" in scg.trace(model, logits, n=2).explain()
