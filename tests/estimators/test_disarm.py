"""scg.DisARM() on coins: unbiased against enumeration, with the variance of DisARM written
by hand. Categorical sites: test_carms.py."""

import itertools

import numpy as np
import pytest

import scg

from .exact import numeric_grad, sig

TH = np.linspace(-1, 1, 10) * 0.8
T = np.linspace(0, 1, 10)
W = np.linspace(-1, 1.5, 10)
STATES = np.array(list(itertools.product([0, 1], repeat=10)), dtype=float)


def cost(b, coupled):
    return (b @ W - 1.5) ** 2 if coupled else np.sum((b - T) ** 2, axis=-1)


def exact(th, coupled):
    p = sig(th)
    return np.prod(np.where(STATES == 1, p, 1 - p), axis=1) @ cost(STATES, coupled)


def by_hand(th, coupled, n, seed):
    """DisARM per draw, written in numpy (Dong et al. 2020, eq. 6)."""
    u = np.random.default_rng(seed).random((n, th.size))
    b = (u < sig(th)).astype(float)
    bt = (1 - u < sig(th)).astype(float)
    df = 0.5 * (cost(b, coupled) - cost(bt, coupled))
    return df[:, None] * np.where(b != bt, (-1.0) ** bt, 0.0) * sig(np.abs(th))


def model_for(coupled, plate=False, probs=False):
    def model(th):
        p = dict(probs=scg.sigmoid(th)) if probs else dict(logits=th)
        if plate:
            with scg.plate("p", 10):
                b = scg.sample("b", scg.Bernoulli(**p), estimator=scg.DisARM())
                return (b - T) ** 2
        b = scg.sample("b", scg.Bernoulli(**p).to_event(1), estimator=scg.DisARM())
        return cost(b, coupled)
    return model


@pytest.mark.parametrize("coupled", [False, True])
def test_unbiased_with_the_variance_of_disarm_by_hand(coupled):
    gs = scg.grad_samples(scg.expectation(model_for(coupled), n=100_000, seed=0))(TH)
    z = (gs.mean - numeric_grad(lambda t: exact(t, coupled), TH)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z
    hand = by_hand(TH, coupled, 400_000, 1)
    assert np.all(np.abs((hand.mean(0) - gs.mean) / np.hypot(gs.stderr, hand.std(0) / 632))
                  < 4.5)
    # per-coordinate variances agree within sampling error (a few percent at these n)
    assert np.allclose(gs.var, hand.var(0), rtol=0.05, atol=1e-3)


def test_value_weights_both_halves_of_the_pair():
    values = [scg.expectation(model_for(True), n=50_000, seed=s)(TH) for s in range(3)]
    assert np.mean(values) == pytest.approx(exact(TH, True), rel=0.01)


def test_plates_and_probs():
    g = numeric_grad(lambda t: exact(t, False), TH)
    for kwargs in (dict(plate=True), dict(probs=True)):
        gs = scg.grad_samples(scg.expectation(model_for(False, **kwargs), n=50_000,
                                              seed=2))(TH)
        assert np.all(np.abs((gs.mean - g) / gs.stderr) < 4.5), kwargs
    # per element, each logit meets its own cost only: a much smaller variance
    plate = scg.grad_samples(scg.expectation(model_for(False, plate=True), n=20_000,
                                             seed=3))(TH)
    joint = scg.grad_samples(scg.expectation(model_for(False), n=20_000, seed=3))(TH)
    assert plate.var.sum() < 0.2 * joint.var.sum()


def test_upstream_pathwise_site_and_downstream_score_site():
    def model(th):
        x = scg.sample("x", scg.Normal(th[0], 1.0))
        b = scg.sample("b", scg.Bernoulli(logits=x + th[1]), estimator=scg.DisARM())
        c = scg.sample("c", scg.Bernoulli(logits=th[1] - b), estimator=scg.Score("loo"))
        return (b - 0.2) ** 2 + c * (1 + b) + 0.1 * x ** 2

    def value(th, grid=np.linspace(-8, 8, 4001)):  # quadrature over x
        x = grid + th[0]
        dens = np.exp(-0.5 * grid ** 2) / np.sqrt(2 * np.pi)
        pb = sig(x + th[1])
        inner = 0.0
        for b in (0, 1):
            pc = sig(th[1] - b)
            inner = inner + np.where(b, pb, 1 - pb) * ((b - 0.2) ** 2 + pc * (1 + b))
        return np.trapezoid(dens * (inner + 0.1 * x ** 2), grid)

    th = np.array([0.3, -0.5])
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=4))(th)
    z = (gs.mean - numeric_grad(value, th)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z


def test_errors_and_explain():
    def normal(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.DisARM())

    with pytest.raises(scg.EstimatorError, match="site 'x'.*finite support.*not Normal"):
        scg.expectation(normal, n=2)(0.0)
    E = scg.expectation(model_for(False), n=4, seed=0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(E)(TH)
    text = scg.trace(model_for(False), TH, n=2).explain()
    assert "DisARM" in text and "2 evaluations of the model downstream per draw" in text


def test_a_plate_of_vectors_with_to_event():
    # a plate of 3 data points, each with 4 coupled coins (to_event): per point, DisARM
    # meets that point's cost only
    t = np.array([[0.2, 0.9, 0.1, 0.5], [0.7, 0.3, 0.6, 0.4], [0.5, 0.5, 0.0, 1.0]])
    th = np.array([[0.3, -0.5, 0.8, 0.1], [-0.2, 0.4, 0.0, 0.6], [0.9, -0.9, 0.2, -0.3]])

    def model(th):
        with scg.plate("data", 3):
            b = scg.sample("b", scg.Bernoulli(logits=th).to_event(1), estimator=scg.DisARM())
            return (np.sum(b * t, axis=-1) - 1.0) ** 2

    states = np.array(list(itertools.product([0, 1], repeat=4)), dtype=float)

    def exact(th):
        p = sig(th)
        return sum(np.prod(np.where(states == 1, p[i], 1 - p[i]), axis=1)
                   @ ((states @ t[i] - 1.0) ** 2) for i in range(3))

    gs = scg.grad_samples(scg.expectation(model, n=50_000, seed=5))(th)
    z = (gs.mean - numeric_grad(exact, th)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z
