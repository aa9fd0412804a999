"""A cost's plate is the plate along whose axis its value lies: a value computed element by
element from a plate's draws (inside the block or after it), wherever it is given, meets
only its own element's scores; a cost that sums over a plate's elements is outside it, and
explain() says which plate each cost is in."""

import numpy as np
import pytest

import scg

F = np.array([[1.0, 3.0], [2.0, -1.0], [0.5, 4.0], [3.0, 3.5]])   # f_b(a) for a in {0, 1}
THETA = np.array([0.1, -0.5, 0.3, 1.0])
P = 1 / (1 + np.exp(-THETA))
EXACT = P * (1 - P) * (F[:, 1] - F[:, 0])


def per_point_cost(a):
    return np.where(a == 1, F[:, 1], F[:, 0])


def returned_inside(theta):
    with scg.plate("data", len(F)):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        return per_point_cost(a)


def cost_inside(theta):
    with scg.plate("data", len(F)):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        scg.cost("c", per_point_cost(a))


def computed_inside_returned_after(theta):
    with scg.plate("data", len(F)):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        loss = per_point_cost(a)
    return loss


def summed_inside(theta):
    with scg.plate("data", len(F)):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        return np.sum(per_point_cost(a))


def draws(model, n=20_000, seed=0):
    return scg.grad_samples(scg.expectation(model, n=n, seed=seed))(THETA)


@pytest.mark.parametrize("model", [returned_inside, computed_inside_returned_after])
def test_a_value_computed_in_a_plate_is_a_cost_of_that_plate(model):
    # the same draws give the same per-draw estimates as scg.cost inside the plate
    ref = draws(cost_inside)
    got = draws(model)
    np.testing.assert_array_equal(got.samples, ref.samples)


def test_returned_inside_a_plate_is_unbiased_with_the_element_wise_variance():
    gs = draws(returned_inside, n=200_000)
    assert np.all(np.abs(gs.mean - EXACT) < 5 * gs.stderr)
    total = draws(summed_inside, n=200_000)
    assert np.all(np.abs(total.mean - EXACT) < 5 * total.stderr)
    # the element-wise estimator's variance is several times below the summed one's
    assert np.all(gs.var < total.var / 3)


def test_explain_says_which_plate_each_cost_is_in():
    text = scg.trace(returned_inside, THETA, n=4, seed=0).explain()
    assert "return in plate data" in text
    text = scg.trace(summed_inside, THETA, n=4, seed=0).explain()
    assert "return (outside every plate); it mixes the elements of plate data" in text


def test_a_cost_given_outside_the_plate_keeps_the_plate_of_its_value():
    def model(theta):
        with scg.plate("data", len(F)):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
            loss = per_point_cost(a)
        scg.cost("c", loss)
    np.testing.assert_array_equal(draws(model).samples, draws(cost_inside).samples)


def test_a_value_computed_after_the_plate_element_by_element_stays_in_it():
    # the plate's axis is known by position: an elementwise cost computed after the block
    # still has element b's value at element b
    def model(theta):
        with scg.plate("data", len(F)):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        return per_point_cost(a)
    np.testing.assert_array_equal(draws(model).samples, draws(cost_inside).samples)


def test_a_value_that_sums_after_the_plate_is_outside_it():
    def model(theta):
        with scg.plate("data", len(F)):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
        return np.sum(per_point_cost(a))  # every score meets all of it
    np.testing.assert_array_equal(draws(model).samples, draws(summed_inside).samples)


W = np.array([1.5, -2.0])
TH2 = np.array([0.3, -0.4])


def enumerate_gradient(cost_of):
    """The exact gradient of E[sum of cost_of(a)] for a_b ~ Bernoulli(sigmoid(TH2_b)), by
    enumerating the four outcomes: sum over a of p(a) * cost(a) * d log p(a) / d theta."""
    p = 1 / (1 + np.exp(-TH2))
    g = np.zeros(2)
    for a0 in (0, 1):
        for a1 in (0, 1):
            a = np.array([a0, a1], dtype=float)
            prob = np.prod(np.where(a == 1, p, 1 - p))
            g += prob * np.sum(cost_of(a)) * (a - p)
    return g


@pytest.mark.parametrize("where", ["return after", "return inside", "scg.cost inside"])
@pytest.mark.parametrize("mix", ["reversed", "centred"])
def test_a_value_that_mixes_the_elements_is_a_cost_outside_the_plate(where, mix):
    def mixed(a):
        return a[::-1] * W if mix == "reversed" else (a - np.mean(a)) ** 2 * W

    def model(theta):
        with scg.plate("b", 2):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator="score")
            c = mixed(a)
            if where == "return inside":
                return c
            if where == "scg.cost inside":
                scg.cost("c", c)
                return None
        return c

    exact = enumerate_gradient(mixed)
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=0))(TH2)
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr), (gs.mean, exact, gs.stderr)
    cost_name = "c" if where == "scg.cost inside" else "return"
    text = scg.trace(model, TH2, n=2, seed=0).explain()
    assert f"{cost_name} (outside every plate); it mixes the elements of plate b" in text


def test_a_per_element_reduction_over_another_axis_stays_in_the_plate():
    # the usual VAE cost: per data point, a sum over the features
    def model(theta):
        with scg.plate("b", 2):
            a = scg.sample("a", scg.Bernoulli(logits=theta[:, None] * np.ones(3)).to_event(1),
                           estimator="score")
            return np.sum(a * np.array([1.0, 2.0, 3.0]), axis=-1)
    assert "return in plate b" in scg.trace(model, TH2, n=2, seed=0).explain()
