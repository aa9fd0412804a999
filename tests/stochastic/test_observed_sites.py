"""scg.sample(name, dist, obs=value): an observed site adds -log p(value) as a cost."""

import numpy as np
import pytest

import scg

Y = np.array([0.3, 1.1, 0.7])


def test_an_observed_site_returns_the_value_and_adds_its_negative_log_likelihood():
    def model(theta):
        y = scg.sample("y", scg.Normal(theta, 0.5), obs=Y)
        assert y is Y
        return 0.0
    E = scg.expectation(model, n=3, seed=0)
    theta = np.array([0.1, 0.2, 0.3])
    value, g = scg.value_and_grad(E)(theta)
    nll = np.sum(0.5 * ((Y - theta) / 0.5) ** 2 + np.log(0.5) + 0.5 * np.log(2 * np.pi))
    assert value == pytest.approx(nll, rel=1e-12)
    np.testing.assert_allclose(g, -(Y - theta) / 0.25, rtol=1e-12)
    assert "y" in E.last_trace.cost_sites and "y" not in E.last_trace.sites


def test_a_latent_variable_model_in_a_plate_is_unbiased():
    def model(mu):
        with scg.plate("data", 3):
            x = scg.sample("x", scg.Normal(mu, 1.0))
            scg.sample("y", scg.Normal(x, 0.5), obs=Y)

    mu = np.array([0.0, 0.5, -0.2])
    gs = scg.grad_samples(scg.expectation(model, n=20_000, seed=1))(mu)
    exact = -(Y - mu) / 0.25  # d/dmu of E[(y - x)^2 / (2 * 0.25)], x ~ N(mu, 1)
    assert np.all(np.abs((gs.mean - exact) / gs.stderr) < 5)


def test_clear_errors():
    def outside(theta):
        scg.sample("y", scg.Bernoulli(logits=theta), obs=np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match="observed site 'y'.*not finite for 1 of 2"):
        scg.expectation(outside, n=2, seed=0)(np.zeros(2))

    def with_estimator(theta):
        scg.sample("y", scg.Normal(theta, 1.0), obs=1.0, estimator=scg.Score())
    with pytest.raises(ValueError, match="observed site 'y'.*has no estimator"):
        scg.expectation(with_estimator, n=2, seed=0)(0.0)

    def twice(theta):
        x = scg.sample("y", scg.Normal(theta, 1.0))
        scg.sample("y", scg.Normal(x, 1.0), obs=1.0)
    with pytest.raises(ValueError, match="used twice"):
        scg.expectation(twice, n=2, seed=0)(0.0)


def test_an_observed_value_of_the_wrong_shape_names_the_site_and_the_shapes():
    def model(theta, y):
        x = scg.sample("x", scg.Normal(theta, 1.0), obs=y)
        return np.sum(x)

    E = scg.expectation(model, n=8, seed=0)
    with pytest.raises(ValueError, match=r"observed site 'x': the observed value has shape "
                       r"\(4,\).*values of shape \(3,\)"):
        scg.grad(E)(np.zeros(3), np.zeros(4))
    mvn = scg.MultivariateNormal(np.zeros(3), np.eye(3))
    with pytest.raises(ValueError, match=r"observed site 'v'.*shape \(1,\).*event dims"):
        scg.trace(lambda t: scg.sample("v", mvn, obs=np.zeros(1)) @ t, np.ones(3), n=2)
    # a value that broadcasts (several observations of one distribution) is fine
    assert np.isfinite(scg.grad(E)(np.zeros(3), np.zeros((2, 3)))).all()
