"""The reference lesson's worked example: x ~ N(2, 1), f(x) = x^2.

Exact per-sample variances for dF/dmu: pathwise 4, score 87, score with b = 5: 42,
with b* = 7: 38; for dF/dsigma: pathwise 24, score 346. With n = 400 000 the relative
standard error of a sample variance of these heavy-tailed estimates is below 1%, so 5%
is a safe band; means must lie within 5 standard errors of the exact gradient.
"""

import numpy as np
import pytest

import scg

THETA = {"mu": 2.0, "sigma": 1.0}
EXACT_GRAD = {"mu": 4.0, "sigma": 2.0}


def per_sample(estimator, n=400_000, seed=0):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=estimator)
        return x ** 2
    return scg.grad_samples(scg.expectation(model, n=n, seed=seed))(THETA)


@pytest.mark.parametrize("estimator, var_mu, var_sigma", [
    ("pathwise", 4.0, 24.0),
    ("score", 87.0, 346.0),
    (scg.Score(5.0), 42.0, None),
    (scg.Score(7.0), 38.0, None),
])
def test_variances_and_means(estimator, var_mu, var_sigma):
    gs = per_sample(estimator)
    assert gs.n == 400_000
    assert gs.var["mu"] == pytest.approx(var_mu, rel=0.05)
    if var_sigma is not None:
        assert gs.var["sigma"] == pytest.approx(var_sigma, rel=0.05)
    for p in ("mu", "sigma"):
        assert abs(gs.mean[p] - EXACT_GRAD[p]) < 5 * gs.stderr[p]


def test_grad_equals_mean_of_grad_samples_for_the_same_draws():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=scg.Score("loo"))
        return x ** 2
    g = scg.grad(scg.expectation(model, n=1000, seed=3))(THETA)
    gs = scg.grad_samples(scg.expectation(model, n=1000, seed=3))(THETA)
    for p in THETA:
        assert g[p] == pytest.approx(gs.mean[p], rel=1e-12)
        assert gs.samples[p].shape == (1000,)
        assert gs.stderr[p] == pytest.approx(np.sqrt(gs.var[p] / 1000))


def test_auto_chooses_pathwise_here():
    gs = per_sample("auto", n=100_000)
    assert gs.var["mu"] == pytest.approx(4.0, rel=0.05)


def test_demo_prints_the_table(capsys):
    from scg.__main__ import main
    assert main(["demo", "--n", "20000"]) == 0
    out = capsys.readouterr().out
    for label in ("pathwise", "score, b = 5", "score, b* = 7", "leave-one-out", "because"):
        assert label in out
