"""scg.Pathwise(dreg=True): doubly reparameterized gradients of an IWAE bound.

Against the bound of a Gaussian model with K = 2 particles by Gauss-Hermite quadrature:
unbiased like plain pathwise, with far less variance in the proposal's parameters and the
same per-draw gradient in the model's; its signal-to-noise ratio in the proposal's
parameters grows with K where plain pathwise's falls; misuse gets a clear error.
"""

import numpy as np
import pytest

import scg

from .exact import numeric_grad
from .registry import MODELS

IWAE = MODELS["iwae_normal"]


def test_unbiased_with_less_variance_for_the_proposal_and_the_same_model_gradient():
    exact = numeric_grad(IWAE.exact, IWAE.theta)
    plain = scg.grad_samples(scg.expectation(IWAE.build(scg.Pathwise()), n=50_000,
                                             seed=4))(IWAE.theta)
    dreg = scg.grad_samples(scg.expectation(IWAE.build(scg.Pathwise(dreg=True)), n=50_000,
                                            seed=4))(IWAE.theta)
    for gs in (plain, dreg):
        z = (gs.mean - exact) / gs.stderr
        assert np.all(np.abs(z) < 5), (gs.mean, exact, z)
    assert np.all(dreg.var[:2] < 0.1 * plain.var[:2])       # mu, log_s: the proposal's
    # b, the model's parameter: the same gradient, draw for draw
    np.testing.assert_allclose(dreg.samples[:, 2], plain.samples[:, 2], rtol=1e-12,
                               atol=1e-14)


def _snr(K, estimator, n=3_000):
    def model(theta):
        with scg.plate("particles", K):
            q = scg.Normal(theta[0] * np.ones(K), np.exp(theta[1]) * np.ones(K))
            z = scg.sample("z", q, estimator=estimator)
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + scg.Normal(z, 1.0).log_prob(1.3) - \
                q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")
    gs = scg.grad_samples(scg.expectation(model, n=n, seed=0))(np.array([0.4, -0.2]))
    return np.abs(gs.mean) / np.sqrt(gs.var)


def test_the_signal_to_noise_ratio_rises_with_K_for_dreg_and_falls_for_pathwise():
    plain = [_snr(K, scg.Pathwise())[0] for K in (2, 32)]
    dreg = [_snr(K, scg.Pathwise(dreg=True))[0] for K in (2, 32)]
    assert plain[1] < 0.5 * plain[0], plain     # 1 / sqrt(K): a quarter
    assert dreg[1] > 2.0 * dreg[0], dreg        # sqrt(K): about four times


def _iwae_with(log_q_of, extra=None):
    def model(theta):
        with scg.plate("particles", 3):
            q = scg.Normal(theta[0] * np.ones(3), np.exp(theta[1]) * np.ones(3))
            z = scg.sample("z", q, estimator=scg.Pathwise(dreg=True))
            log_w = scg.Normal(0.0, 1.0).log_prob(z) - log_q_of(q, theta, z)
        bound = -scg.logmeanexp(log_w, plate="particles")
        if extra is not None:
            scg.cost("extra", extra(z))
        return bound
    return model


def test_errors_name_the_site_and_say_what_to_do():
    theta = np.array([0.1, -0.2])

    def grad(model):
        return scg.grad(scg.expectation(model, n=8, seed=0))(theta)

    with pytest.raises(scg.EstimatorError, match="log-density at the draw computed as "
                                                 r"q.log_prob\(z\)"):
        grad(_iwae_with(lambda q, th, z: scg.Normal(th[0], np.exp(th[1])).log_prob(z)))
    with pytest.raises(scg.EstimatorError, match="cost 'extra' downstream of the site is "
                                                 "not a multiple"):
        grad(_iwae_with(lambda q, th, z: q.log_prob(z), extra=lambda z: np.sum(z ** 2)))

    def no_plate(theta):
        z = scg.sample("z", scg.Normal(theta[0], 1.0), estimator=scg.Pathwise(dreg=True))
        return z ** 2
    with pytest.raises(scg.EstimatorError, match="this site is in no plate"):
        grad(no_plate)

    def no_bound(theta):
        with scg.plate("particles", 3):
            z = scg.sample("z", scg.Normal(theta[0] * np.ones(3), 1.0),
                           estimator=scg.Pathwise(dreg=True))
        return np.sum(z ** 2)
    with pytest.raises(scg.EstimatorError, match="needs a multi-sample bound"):
        grad(no_bound)

    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(_iwae_with(lambda q, th, z: q.log_prob(z)), n=8,
                                    seed=0))(theta)
    with pytest.raises(TypeError, match="dreg must be True or False"):
        scg.Pathwise(dreg="yes")


def test_under_jit_equal_to_eager():
    E, Ej = (scg.expectation(IWAE.build(scg.Pathwise(dreg=True)), n=64, seed=2)
             for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    for _ in range(5):
        np.testing.assert_allclose(step(IWAE.theta), scg.grad(E)(IWAE.theta), rtol=1e-12,
                                   atol=1e-14)
    assert step.stats["replays"] >= 2, step.explain()


def test_a_data_plate_around_the_particles():
    x = np.array([1.3, -0.4])

    def model(theta):
        with scg.plate("data", 2, dim=-2):
            with scg.plate("particles", 3, dim=-1):
                q = scg.Normal(np.broadcast_to(theta[:2, None], (2, 3)), np.exp(theta[2]))
                z = scg.sample("z", q, estimator=scg.Pathwise(dreg=True))
                log_w = scg.Normal(0.0, 1.0).log_prob(z) + \
                    scg.Normal(z, 1.0).log_prob(x[:, None]) - q.log_prob(z)
            return -scg.logmeanexp(log_w, plate="particles")

    theta = np.array([0.2, -0.1, -0.3])
    dreg = scg.grad_samples(scg.expectation(model, n=40_000, seed=6))(theta)
    pathwise = scg.grad_samples(scg.expectation(model, n=40_000, seed=7,
                                                estimators={"z": scg.Pathwise()}))(theta)
    # the same gradient (both unbiased), DReG with far less variance for the proposal
    stderr = np.sqrt(dreg.stderr ** 2 + pathwise.stderr ** 2)
    assert np.all(np.abs(dreg.mean - pathwise.mean) < 5 * stderr)
    assert np.all(dreg.var < 0.2 * pathwise.var)


def _particle_with_a_dependent_coin(estimator):
    def model(th):
        with scg.plate("particles", 3):
            q = scg.Normal(th[0] * np.ones(3), np.exp(th[1]) * np.ones(3))
            z = scg.sample("z", q, estimator=estimator)
            b = scg.sample("b", scg.Bernoulli(logits=th[2] + 0.8 * z), estimator=scg.Score("loo"))
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + scg.Normal(z + b, 1.0).log_prob(0.7) \
                - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")
    return model


def test_a_site_whose_distribution_depends_on_the_dreg_draw_is_an_error_naming_both():
    # (the reweighting of the derivative at z biased this by 29 standard errors)
    model = _particle_with_a_dependent_coin(scg.Pathwise(dreg=True))
    theta = np.array([0.2, -0.3, 0.1])
    with pytest.raises(scg.EstimatorError, match=r"site 'z'.*site 'b' depends on 'z'"):
        scg.grad(scg.expectation(model, n=100, seed=0))(theta)
    text = scg.trace(model, theta, n=4).explain()
    assert "not valid here" in text and "site 'b' depends on 'z'" in text
    assert "unbiased" not in text.split("z ~")[1].split("b ~")[0]
    # plain pathwise at z serves the same model
    g = scg.grad(scg.expectation(_particle_with_a_dependent_coin(scg.Pathwise()), n=100,
                                 seed=0))(theta)
    assert np.all(np.isfinite(g))
