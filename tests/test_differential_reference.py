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


def _lse(x, axis=None):
    return np.logaddexp.reduce(x, axis=axis)


def _log_normal(x, loc, scale=1.0):
    return stats.norm.logpdf(x, loc, scale)


def test_marginalized_sites_per_element_of_a_subsampled_plate():
    """A global coin c and an assignment z per element, summed out: -log sum_c p(c)
    prod_i sum_z p(z) N(x_i | ...), the elements of a subsampled plate scaled inside the
    sum over c; a drawn mu upstream by quadrature."""
    code = """
def model(theta):
    mu = scg.sample("mu", scg.Normal(theta[0], 1.0))
    c = scg.sample("c", scg.Bernoulli(logits=theta[1]), estimator=scg.Marginalize())
    scg.factor("fc", -0.5 * (c - theta[0]) ** 2)
    with scg.plate("p", 3, subsample_size=2) as idx:
        d = np.array([0.2, -0.3, 0.4])[idx]
        z = scg.sample("z", scg.Categorical(logits=(theta[1] + d)[..., None]
                                            * np.array([0.0, 1.0, -0.5])),
                       estimator=scg.Marginalize())
        scg.sample("x", scg.Normal((theta[0] * np.array([1.0, -0.5, 2.0]))[z] + mu * c, 1.0),
                   obs=d + 1.0)
    scg.cost("m", mu ** 2)
"""
    theta = np.array([0.3, -0.4])
    d = np.array([0.2, -0.3, 0.4])
    idx = np.array([2, 0])
    nodes, weights = np.polynomial.hermite_e.hermegauss(24)
    weights = weights / weights.sum()
    lb = np.array([-np.logaddexp(0, theta[1]), theta[1] - np.logaddexp(0, theta[1])])
    table = theta[0] * np.array([1.0, -0.5, 2.0])

    def evidence(mu, elements, scale):
        per_c = []
        for c in (0, 1):
            total = lb[c] - 0.5 * (c - theta[0]) ** 2
            for i in elements:
                logits = (theta[1] + d[i]) * np.array([0.0, 1.0, -0.5])
                lz = logits - _lse(logits)
                total += scale * _lse(lz + _log_normal(d[i] + 1.0, table + mu * c))
            per_c.append(total)
        return _lse(np.array(per_c))

    for elements, scale, subs in ((idx, 1.5, {"p": idx}), (range(3), 1.0, None)):
        want = sum(w * (mu ** 2 - evidence(mu, elements, scale))
                   for mu, w in zip(theta[0] + nodes, weights))
        assert _exact(code, theta, subsamples=subs) == pytest.approx(want, rel=1e-10)


def test_a_markov_chain_in_nested_plates():
    """scg.markov is a plain loop to the reference; a chain per element of q, a site per
    element of p above it, by brute force."""
    code = """
def model(theta):
    with scg.plate("p", 2, dim=-2) as idx:
        dp = np.array([0.2, -0.3])[idx][:, None]
        a = scg.sample("a", scg.Bernoulli(logits=theta[0] + dp), estimator=scg.Marginalize())
        with scg.plate("q", 2):
            dq = np.array([0.4, -0.1])
            z = 0.0
            for t in scg.markov(range(2)):
                z = scg.sample(f"z_{t}", scg.Bernoulli(logits=0.5 * z - theta[0] + dq + dp),
                               estimator=scg.Marginalize())
                scg.factor(f"f_{t}", -(z - a * theta[0] - dq) ** 2)
"""
    theta = np.array([0.7])
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    dp, dq = np.array([0.2, -0.3]), np.array([0.4, -0.1])
    want = 0.0
    for i in range(2):
        per_a = []
        for a in (0, 1):
            pa = sig(theta[0] + dp[i])
            total = np.log(pa if a else 1 - pa)
            for j in range(2):
                s = 0.0
                for z0 in (0, 1):
                    for z1 in (0, 1):
                        p0 = sig(-theta[0] + dq[j] + dp[i])
                        p1 = sig(0.5 * z0 - theta[0] + dq[j] + dp[i])
                        s += ((p0 if z0 else 1 - p0) * (p1 if z1 else 1 - p1)
                              * np.exp(-(z0 - a * theta[0] - dq[j]) ** 2
                                       - (z1 - a * theta[0] - dq[j]) ** 2))
                total += np.log(s)
            per_a.append(total)
        want -= _lse(np.array(per_a))
    assert _exact(code, theta) == pytest.approx(want, rel=1e-10)
