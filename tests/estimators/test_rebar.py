"""scg.REBAR at a fixed temperature and scale (learn=False): unbiased at any temperature and scale.

The toy of the REBAR and RELAX papers, f(b) = (b - 0.45)^2 with one coin, against its
exact gradient; a plate of coins with per-element costs; three evaluations per draw; the
control variate's values taken out of the objective's value; clear errors.
"""

import numpy as np
import pytest

import scg


def toy(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
        return (b - 0.45) ** 2
    return model


def toy_gradient(theta):
    p = 1.0 / (1.0 + np.exp(-theta))
    return p * (1.0 - p) * ((1.0 - 0.45) ** 2 - 0.45 ** 2)


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("scale", [0.0, 1.0, 2.5])
def test_unbiased_on_the_toy_at_any_temperature_and_scale(temperature, scale):
    theta = np.array(0.3)
    gs = scg.grad_samples(scg.expectation(toy(scg.REBAR(temperature, scale, learn=False)), n=40_000,
                                          seed=7))(theta)
    z = (gs.mean - toy_gradient(theta)) / gs.stderr
    assert abs(z) < 5, (gs.mean, toy_gradient(theta), z)


def test_the_value_is_the_expectation_of_the_discrete_draws():
    theta = np.array(0.3)
    E = scg.expectation(toy(scg.REBAR(0.5, 1.0, learn=False)), n=1000, seed=0)
    value, _ = scg.value_and_grad(E)(theta)
    b = E.last_trace.sites["b"].value[:1000]  # (copy 0: the discrete draws)
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert value == pytest.approx(np.mean((b - 0.45) ** 2), rel=1e-12)


def test_a_plate_of_coins_is_unbiased_with_three_evaluations_per_draw():
    target = np.array([0.1, 0.7, 0.4, 0.9])

    def model(theta):
        with scg.plate("coins", 4):
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.REBAR(0.5, 1.0, learn=False))
            return (b - target) ** 2
    theta = np.array([-0.5, 0.2, 0.8, 1.5])
    E = scg.expectation(model, n=40_000, seed=3)
    gs = scg.grad_samples(E)(theta)
    p = 1.0 / (1.0 + np.exp(-theta))
    exact = p * (1 - p) * ((1 - target) ** 2 - target ** 2)
    assert np.all(np.abs((gs.mean - exact) / gs.stderr) < 5)
    assert E.last_trace.copies.count == 3
    assert "REBAR at temperature 0.5" in E.last_trace.explain()


def test_errors():
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        scg.REBAR(temperature=0.0)
    with pytest.raises(TypeError, match="learn must be True or False"):
        scg.REBAR(learn="yes")

    def normal(theta):
        return scg.sample("x", scg.Normal(theta, 1.0), estimator=scg.REBAR()) ** 2
    with pytest.raises(scg.EstimatorError, match="serves Bernoulli and OneHotCategorical"):
        scg.grad(scg.expectation(normal, n=4, seed=0))(0.3)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(toy(scg.REBAR()), n=8, seed=0))(np.array(0.3))


def test_one_hot_categorical_needs_logits():
    def with_probs(p):
        k = scg.sample("k", scg.OneHotCategorical(probs=p), estimator=scg.REBAR())
        return np.sum(k * np.arange(3.0))
    with pytest.raises(scg.EstimatorError, match="needs logits="):
        scg.grad(scg.expectation(with_probs, n=4, seed=0))(np.array([0.2, 0.3, 0.5]))
