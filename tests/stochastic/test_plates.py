"""Plates: element b of a site's score meets only the costs of element b."""

import numpy as np
import pytest

import scg

F = np.array([[1.0, 3.0], [2.0, -1.0], [0.5, 4.0], [3.0, 3.5]])   # f_b(a) for a in {0, 1}
THETA = np.array([0.1, -0.5, 0.3, 1.0])
P = 1 / (1 + np.exp(-THETA))
EXACT = P * (1 - P) * (F[:, 1] - F[:, 0])


def minibatch(use_plate, baseline=None):
    def model(theta):
        def body():
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(baseline))
            scg.cost("c", np.where(a == 1, F[:, 1], F[:, 0]))
        if use_plate:
            with scg.plate("data", len(F)):
                body()
        else:
            body()
    return model


def exact_variances():
    """Per-sample variance of score_b * own cost (element-wise) and score_b * total cost."""
    s = {1: 1 - P, 0: -P}                     # score of a_b for the logits
    own = sum(np.where(a == 1, P, 1 - P) * (s[a] * F[:, a]) ** 2 for a in (0, 1)) - EXACT ** 2
    # total-cost estimator: enumerate all 2^4 joint outcomes
    second = np.zeros(4)
    for bits in range(16):
        a = np.array([(bits >> b) & 1 for b in range(4)])
        prob = np.prod(np.where(a == 1, P, 1 - P))
        total = np.sum(F[np.arange(4), a])
        second += prob * (np.where(a == 1, 1 - P, -P) * total) ** 2
    return own, second - EXACT ** 2


def test_plate_gives_the_element_wise_variance():
    own, total = exact_variances()
    gs = scg.grad_samples(scg.expectation(minibatch(True), n=200_000, seed=0))(THETA)
    assert np.all(np.abs(gs.mean - EXACT) < 5 * gs.stderr)
    # 200 000 draws: the relative error of a sample variance here is below 2%
    assert gs.var == pytest.approx(own, rel=0.05)
    assert np.all(own < total / 5)


def test_without_a_plate_every_score_meets_the_total_cost():
    _, total = exact_variances()
    gs = scg.grad_samples(scg.expectation(minibatch(False), n=200_000, seed=0))(THETA)
    assert np.all(np.abs(gs.mean - EXACT) < 5 * gs.stderr)
    assert gs.var == pytest.approx(total, rel=0.05)


def test_leave_one_out_per_element():
    gs = scg.grad_samples(scg.expectation(minibatch(True, "loo"), n=100_000, seed=1))(THETA)
    assert np.all(np.abs(gs.mean - EXACT) < 5 * gs.stderr)
    # with a per-element baseline b_b = E[f_b]: Var[s_b (f_b - E f_b)]
    mean_f = P * F[:, 1] + (1 - P) * F[:, 0]
    s = {1: 1 - P, 0: -P}
    var = sum(np.where(a == 1, P, 1 - P) * (s[a] * (F[:, a] - mean_f)) ** 2
              for a in (0, 1)) - EXACT ** 2
    # the shared sample mean in the baseline (off by about 1/sqrt(n)) shifts the sample
    # variance by up to 2 |mean error| |E[s^2 (f - E f)]|, about 2e-4 here
    assert gs.var == pytest.approx(var, rel=0.05, abs=5e-4)


def test_costs_outside_the_plate_meet_every_element():
    def model(theta):
        with scg.plate("data", 4):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        scg.cost("total", np.sum(a) ** 2)      # outside: depends on all elements
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=2))(THETA)
    # exact: d/dtheta_b E[(sum a)^2] = p_b(1-p_b) * (1 + 2 * sum_{k != b} p_k)
    exact = P * (1 - P) * (1 + 2 * (P.sum() - P))
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr)


def test_nested_plates_and_to_event():
    """A (2, 3) grid: rows in plate dim -2, columns summed as an event."""
    logits = np.array([[0.2, -0.1, 0.4], [1.0, 0.0, -0.3]])
    weights = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])

    def model(theta):
        with scg.plate("rows", 2, dim=-1):
            z = scg.sample("z", scg.Bernoulli(logits=theta).to_event(1), estimator="score")
            scg.cost("c", np.sum(z * weights, axis=-1))
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=3))(logits)
    p = 1 / (1 + np.exp(-logits))
    exact = p * (1 - p) * weights
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr + 1e-12)
    assert gs.samples.shape == (200_000, 2, 3)


def test_plate_broadcasts_a_scalar_parameter():
    def model(theta):
        with scg.plate("data", 5):
            x = scg.sample("x", scg.Normal(theta, 1.0))
            assert x.shape == (5,)
            scg.cost("c", x ** 2)
    g = scg.grad(scg.expectation(model, n=50_000, seed=4))(0.5)
    assert g == pytest.approx(5 * 2 * 0.5, abs=0.05)


def test_a_plate_name_used_twice_in_one_nesting_is_an_error():
    # (logmeanexp(plate="a") silently took the inner plate)
    def model(theta):
        with scg.plate("a", 2):
            with scg.plate("a", 3, dim=-2):
                z = scg.sample("z", scg.Normal(theta * np.ones((3, 2)), 1.0))
                return np.sum(scg.logmeanexp(z, plate="a"))

    with pytest.raises(ValueError, match="plate 'a' is opened inside a plate of the same name"):
        scg.grad(scg.expectation(model, n=10, seed=0))(0.3)


def test_a_plate_name_reused_after_the_plate_closed_is_fine():
    def model(theta):
        with scg.plate("a", 2):
            x = scg.sample("x", scg.Normal(theta * np.ones(2), 1.0))
        with scg.plate("a", 2):
            y = scg.sample("y", scg.Normal(theta * np.ones(2), 1.0))
        return np.sum(x + y)

    g = scg.grad(scg.expectation(model, n=10, seed=0))(0.3)
    assert g == pytest.approx(4.0)
