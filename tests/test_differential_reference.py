"""The differential tester's exact reference (tests/differential/reference.py) against
closed forms: it runs a model's source with no scg at all, by enumeration and quadrature."""

import numpy as np
import pytest
from scipy import stats

from tests.differential.harness import Compiled
from tests.differential import reference


def _exact(code, theta, nodes=24, subsamples=None):
    return Compiled(code).exact_function(nodes, subsamples)(np.asarray(theta, dtype=float))


def test_normal_and_gamma_moments_by_quadrature():
    code = """
def model(theta):
    x = scg.sample("x", scg.Normal(theta[0], np.exp(theta[1])))
    g = scg.sample("g", scg.Gamma(2.5, np.exp(theta[0])))
    scg.cost("c", x ** 2 + g ** 2 + x * g)
"""
    mu, s, a, r = 0.3, np.exp(-0.2), 2.5, np.exp(0.3)
    want = mu ** 2 + s ** 2 + a * (a + 1) / r ** 2 + mu * a / r
    assert _exact(code, [0.3, -0.2]) == pytest.approx(want, rel=1e-10)


def test_dependent_discrete_sites_by_enumeration():
    code = """
def model(theta):
    b = scg.sample("b", scg.Bernoulli(logits=theta[0]))
    k = scg.sample("k", scg.Categorical(logits=np.array([0.0, 1.0, -0.5]) * b + theta[1]))
    n = scg.sample("n", scg.Poisson(2.0 * scg.sigmoid(theta[0] + 0.5 * k)))
    scg.cost("c", np.where(b > 0.5, n, -1.0) + scg.take(np.array([1.0, -0.5, 2.0]), k, axis=0))
"""
    theta = np.array([0.4, -0.3])
    p = 1 / (1 + np.exp(-theta[0]))
    want = 0.0
    for b, pb in ((0, 1 - p), (1, p)):
        logits = np.array([0.0, 1.0, -0.5]) * b + theta[1]
        pk = np.exp(logits) / np.exp(logits).sum()
        for k in range(3):
            rate = 2.0 / (1 + np.exp(-(theta[0] + 0.5 * k)))
            want += pb * pk[k] * ((rate if b else -1.0) + [1.0, -0.5, 2.0][k])
    assert _exact(code, theta) == pytest.approx(want, rel=1e-10)


def test_plates_logmeanexp_and_subsamples():
    code = """
def model(theta):
    with scg.plate("p", 3, subsample_size=2) as idx:
        d = np.array([0.2, -0.3, 0.4])[idx]
        z = scg.sample("z", scg.Bernoulli(logits=theta[0] + d))
        scg.cost("c", z * d)
    with scg.plate("q", 2):
        y = scg.sample("y", scg.Bernoulli(logits=theta[0] + np.array([0.1, -0.1])))
        lw = 2.0 * y
    return -scg.logmeanexp(lw, plate="q")
"""
    theta = np.array([0.5])
    d = np.array([0.2, -0.3, 0.4])
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    idx = np.array([2, 0])
    minibatch = 3 / 2 * np.sum(sig(theta[0] + d[idx]) * d[idx])
    py = sig(theta[0] + np.array([0.1, -0.1]))
    bound = 0.0
    for y0 in (0, 1):
        for y1 in (0, 1):
            w = (py[0] if y0 else 1 - py[0]) * (py[1] if y1 else 1 - py[1])
            bound += w * -np.log(np.mean(np.exp(2.0 * np.array([y0, y1]))))
    got = _exact(code, theta, subsamples={"p": idx})
    assert got == pytest.approx(minibatch + bound, rel=1e-12)
    full = _exact(code, theta)
    assert full == pytest.approx(np.sum(sig(theta[0] + d) * d) + bound, rel=1e-12)


def test_poisson_support_holds_the_mass():
    assert stats.poisson.sf(reference.POISSON_SUPPORT - 1, reference.POISSON_MAX_RATE) < 1e-12


def test_derivatives_by_finite_differences():
    f = lambda t: np.sin(t[0]) * np.exp(t[1])  # noqa: E731
    t = np.array([0.3, -0.2])
    np.testing.assert_allclose(reference.gradient(f, t),
                               [np.cos(0.3) * np.exp(-0.2), np.sin(0.3) * np.exp(-0.2)],
                               rtol=1e-8)
    np.testing.assert_allclose(reference.hessian(f, t),
                               [[-np.sin(0.3) * np.exp(-0.2), np.cos(0.3) * np.exp(-0.2)],
                                [np.cos(0.3) * np.exp(-0.2), np.sin(0.3) * np.exp(-0.2)]],
                               rtol=1e-5)
