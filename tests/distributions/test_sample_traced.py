"""dist.sample(rng) refuses traced parameters: a plain draw has no derivative and, inside a
model, is one draw shared by all n draws (scg.grad and grad_samples used to disagree)."""

import numpy as np
import pytest
from dist_registry import EXAMPLES, ids

import scg

MU = 0.8


def shared_draw_model(mu):
    x = scg.Normal(mu, 1.0).sample(np.random.default_rng(1))  # the port of torch's .sample()
    return x ** 2 * mu


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "grad_samples", "hessian"])
def test_sample_on_a_differentiated_parameter_inside_a_model(transform):
    E = scg.expectation(shared_draw_model, n=100, seed=0)
    with pytest.raises(scg.TracingError) as info:
        getattr(scg, transform)(E)(MU)
    message = str(info.value)
    assert "Normal.sample(rng): parameter 'loc' is a traced value that scg is differentiating" \
        in message
    assert "no derivative" in message and "shared by all n draws" in message
    assert 'scg.sample("name", Normal(...))' in message
    assert "scg.stop_gradient" in message


def test_sample_in_a_plain_function_under_grad():
    rng = np.random.default_rng(0)
    with pytest.raises(scg.TracingError, match=r"Normal\.sample\(rng\): parameter 'scale'"):
        scg.grad(lambda s: np.sum(scg.Normal(0.0, s).sample(rng, (3,))))(1.5)
    with pytest.raises(scg.TracingError, match=r"Normal\.sample\(rng\): parameter 'loc'"):
        scg.grad(lambda m: np.sum(scg.Normal(m, 1.0).to_event(1).sample(rng)))(np.zeros(2))
    with pytest.raises(scg.TracingError, match=r"Normal\.sample"):
        scg.jacobian(lambda m: scg.Normal(m, 1.0).expand((2,)).sample(rng))(0.0)


def test_sample_on_a_parameter_that_depends_on_a_draw():
    def model(mu):
        z = scg.sample("z", scg.Normal(mu, 1.0))
        return scg.Normal(z, 1.0).sample(np.random.default_rng(0)) ** 2

    E = scg.expectation(model, n=50, seed=0)
    for call in (E, scg.grad(E)):  # with or without a derivative
        with pytest.raises(scg.TracingError) as info:
            call(MU)
        message = str(info.value)
        assert "parameter 'loc' differs between the draws of the model (it depends on " \
               "site(s) 'z')" in message
        assert 'scg.sample("name", Normal(...))' in message
        assert "scg.stop_gradient would not help" in message


@pytest.mark.parametrize("example", EXAMPLES, ids=ids(EXAMPLES))
def test_every_family_refuses_a_traced_parameter(example):
    name = (example.score_params or tuple(example.params))[0]

    def f(s):
        d = example.make(**{name: example.params[name] * s})
        return np.sum(d.sample(np.random.default_rng(0), (2,)))

    with pytest.raises(scg.TracingError, match=rf"{example.dist.__name__}\.sample\(rng\): "
                                               rf"parameter '{name}'"):
        scg.grad(f)(1.0)


def test_a_stopped_parameter_gives_one_constant_draw_under_grad_and_grad_samples():
    def model(mu):
        x = scg.Normal(scg.stop_gradient(mu) * np.ones(2), 1.0).to_event(1).sample(
            np.random.default_rng(5))
        return mu * np.sum(x)

    constant = np.sum(scg.Normal(MU * np.ones(2), 1.0).sample(np.random.default_rng(5)))
    E = scg.expectation(model, n=20, seed=0)
    assert np.isclose(scg.grad(E)(MU), constant)
    gs = scg.grad_samples(E)(MU)
    np.testing.assert_allclose(gs.samples, np.full(20, constant))
    assert np.isclose(gs.mean, constant)
    assert np.isclose(E(MU), MU * constant)


def test_scg_sample_with_traced_parameters_still_works():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0).expand((3,)).to_event(1))
        a = scg.sample("a", scg.Bernoulli(probs=scg.sigmoid(np.sum(x))))
        return np.sum(x ** 2) + a

    g = scg.grad(scg.expectation(model, n=2000, seed=0))(MU)
    gs = scg.grad_samples(scg.expectation(model, n=2000, seed=0))(MU)  # the same draws
    assert np.isfinite(g) and np.isclose(gs.mean, g)


def test_plain_sampling_is_unchanged():
    d = scg.Normal(np.zeros(2), np.ones(2)).to_event(1)
    x = d.sample(np.random.default_rng(0), (4,))
    np.testing.assert_array_equal(x, np.random.default_rng(0).standard_normal((4, 2)))
