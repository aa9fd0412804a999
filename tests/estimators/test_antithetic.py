"""Antithetic pairs for Pathwise and Score: unbiased, with the pair variances in closed form
for the worked example x ~ N(mu, sigma), f = x^2."""

import numpy as np
import pytest

import scg

MU, SIGMA = 2.0, 1.0


def worked(estimator):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], theta[1]), estimator=estimator)
        return x ** 2
    return model


def test_pathwise_pairs_cancel_the_mean_gradient_noise():
    gs = scg.grad_samples(scg.expectation(worked(scg.Pathwise(antithetic=True)), n=200_000,
                                          seed=0))(np.array([MU, SIGMA]))
    assert gs.n == 100_000 and gs.samples.shape == (100_000, 2)
    # d/dmu: (2 x + 2 x') / 2 = 2 mu exactly; d/dsigma: 2 sigma eps^2, variance 8 sigma^2
    assert np.allclose(gs.samples[:, 0], 2 * MU)
    assert gs.mean[1] == pytest.approx(2 * SIGMA, abs=4 * gs.stderr[1])
    assert gs.var[1] == pytest.approx(8 * SIGMA ** 2, rel=0.03)


def test_score_pairs_have_the_closed_form_variance():
    gs = scg.grad_samples(scg.expectation(worked(scg.Score(antithetic=True)), n=400_000,
                                          seed=1))(np.array([MU, SIGMA]))
    # d/dmu pair mean: eps ((mu + eps)^2 - (mu - eps)^2) / 2 = 2 mu eps^2: variance 8 mu^2
    assert gs.mean[0] == pytest.approx(2 * MU, abs=4 * gs.stderr[0])
    assert gs.var[0] == pytest.approx(8 * MU ** 2, rel=0.03)
    assert gs.mean[1] == pytest.approx(2 * SIGMA, abs=4 * gs.stderr[1])


def test_leave_one_out_leaves_out_the_pair():
    # with the partner in the baseline, the estimate would be biased; leaving it out is not
    for seed in range(3):
        gs = scg.grad_samples(scg.expectation(worked(scg.Score("loo", antithetic=True)),
                                              n=8, seed=seed))(np.array([MU, SIGMA]))
        assert gs.n == 4
    many = [scg.grad(scg.expectation(worked(scg.Score("loo", antithetic=True)), n=4,
                                     seed=s))(np.array([MU, SIGMA])) for s in range(6_000)]
    many = np.array(many)
    z = (many.mean(0) - np.array([2 * MU, 2 * SIGMA])) / (many.std(0) / np.sqrt(len(many)))
    assert np.all(np.abs(z) < 4), z


@pytest.mark.parametrize("family", ["uniform", "exponential", "gumbel", "lognormal"])
def test_other_noises_are_unbiased(family):
    def dist(th):
        return {"uniform": lambda: scg.Uniform(th, th + 2.0),
                "exponential": lambda: scg.Exponential(th),
                "gumbel": lambda: scg.Gumbel(th, 1.0),
                "lognormal": lambda: scg.LogNormal(th, 0.5)}[family]()

    exact = {"uniform": lambda t: 2 * t + 2,  # d/dt E[x^2] for U(t, t + 2): 2t + 2
             "exponential": lambda t: -4 / t ** 3,  # E[x^2] = 2 / t^2
             "gumbel": lambda t: 2 * (t + np.euler_gamma),  # E[x^2] = (t + g)^2 + pi^2/6
             "lognormal": lambda t: 2 * np.exp(2 * t + 0.5)}[family]  # E[x^2] = e^(2t+1/2)

    def model(th):
        return scg.sample("x", dist(th), estimator=scg.Pathwise(antithetic=True)) ** 2

    th = 0.7
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=2))(th)
    assert gs.mean == pytest.approx(exact(th), abs=4.5 * gs.stderr + 1e-9)


def test_errors():
    with pytest.raises(scg.EstimatorError, match="n must be even"):
        scg.expectation(worked(scg.Pathwise(antithetic=True)), n=3)(np.array([MU, SIGMA]))

    def coin(p):
        return scg.sample("a", scg.Bernoulli(probs=p), estimator=scg.Score(antithetic=True))

    with pytest.raises(scg.EstimatorError, match="antithetic draws need a sampling path"):
        scg.expectation(coin, n=2)(0.3)

    def gamma(a):
        return scg.sample("g", scg.Gamma(a, 1.0), estimator=scg.Pathwise(antithetic=True))

    with pytest.raises(scg.EstimatorError, match="Gamma declares none.*Normal"):
        scg.expectation(gamma, n=2)(2.0)
    text = scg.trace(worked(scg.Score("loo", antithetic=True)), np.array([MU, SIGMA]),
                     n=4).explain()
    assert "antithetic pairs" in text and "leaves out the draw's pair" in text


def test_hessian_of_antithetic_pathwise_is_unbiased():
    H = scg.hessian(scg.expectation(worked(scg.Pathwise(antithetic=True)), n=100_000,
                                    seed=5))(np.array([MU, SIGMA]))
    assert np.allclose(H, [[2.0, 0.0], [0.0, 2.0]], atol=0.05)


def test_antithetic_is_a_bool():
    with pytest.raises(TypeError, match="antithetic must be True or False"):
        scg.Pathwise(antithetic="no")
    with pytest.raises(TypeError, match="antithetic must be True or False"):
        scg.Score(antithetic="no")



def test_explain_antithetic_score_without_baseline():
    """The evolution-strategies setup: mirrored pairs, no baseline."""
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0), estimator=scg.Score(antithetic=True))
        return np.sum((x - 1.0) ** 2)

    text = scg.trace(model, np.zeros(2), n=4).explain()
    assert "antithetic pairs" in text and "baseline: none" in text
    assert "central difference" in text
    assert "grad log p(x) * (return)" in text
