"""scg.MeasureValued(): unbiased for every family it serves (against closed forms, exact sums
and quadrature), with the per-draw variances of the worked examples computed by quadrature."""

import itertools
import math

import numpy as np
import pytest

import scg

from .exact import numeric_grad, sig

W3 = np.array([0.8, -1.1, 0.6])
STATES3 = np.array(list(itertools.product([0, 1], repeat=3)), dtype=float)


def mv(coupled=True):
    return scg.MeasureValued(coupled=coupled)


def softmax(a):
    e = np.exp(a - np.max(a, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def binom_pmf(n, p):
    k = np.arange(n + 1)
    return np.array([math.comb(n, int(j)) for j in k]) * p ** k * (1 - p) ** (n - k)


GEO = np.arange(3000.0)


def geo_pmf(p):  # failures before the first success
    return p * (1 - p) ** GEO


POIS = np.arange(120.0)


def pois_pmf(lam):
    return np.exp(POIS * np.log(lam) - lam - np.array([math.lgamma(k + 1) for k in POIS]))


# every case: (model(th, estimator), exact E[f](th), th)
CASES = {
    "normal": (
        lambda th, e: (lambda x: np.sum(np.sin(x)) + x[0] * x[1])(scg.sample(
            "x", scg.Normal(th[:2], np.exp(th[2:])).to_event(1), estimator=e)),
        lambda th: np.sum(np.sin(th[:2]) * np.exp(-0.5 * np.exp(2 * th[2:]))) + th[0] * th[1],
        np.array([0.3, -0.4, np.log(0.7), np.log(1.3)])),
    "lognormal": (
        lambda th, e: (scg.sample("y", scg.LogNormal(th[0], np.exp(th[1])), estimator=e)
                       - 1.0) ** 2,
        lambda th: (np.exp(2 * th[0] + 2 * np.exp(2 * th[1]))
                    - 2 * np.exp(th[0] + 0.5 * np.exp(2 * th[1])) + 1),
        np.array([0.1, np.log(0.5)])),
    "exponential": (
        lambda th, e: (lambda x: np.sin(x[0]) + x[0] * x[1])(scg.sample(
            "x", scg.Exponential(np.exp(th)).to_event(1), estimator=e)),
        lambda th: (np.exp(th[0]) / (np.exp(2 * th[0]) + 1) + np.exp(-th[0] - th[1])),
        np.array([0.2, -0.3])),
    "gamma": (
        lambda th, e: (lambda x: np.cos(x[0]) + x[0] * x[1])(scg.sample(
            "x", scg.Gamma(np.array([2.5, 0.7]), np.exp(th)).to_event(1), estimator=e)),
        lambda th: (np.real((1 - 1j / np.exp(th[0])) ** -2.5)
                    + 2.5 * 0.7 / np.exp(th[0] + th[1])),
        np.array([0.4, -0.2])),
    "poisson": (
        lambda th, e: (lambda x: x[0] ** 2 + np.sin(x[1]) + x[0] * x[1])(scg.sample(
            "x", scg.Poisson(np.exp(th)).to_event(1), estimator=e)),
        lambda th: (pois_pmf(np.exp(th[0])) @ POIS ** 2 + pois_pmf(np.exp(th[1])) @ np.sin(POIS)
                    + np.exp(th[0] + th[1])),
        np.array([0.5, 0.9])),
    "bernoulli_logits": (
        lambda th, e: (scg.sample("b", scg.Bernoulli(logits=th).to_event(1), estimator=e)
                       @ W3 - 0.5) ** 2,
        lambda th: np.prod(np.where(STATES3 == 1, sig(th), 1 - sig(th)), axis=1)
        @ (STATES3 @ W3 - 0.5) ** 2,
        np.array([0.3, -1.0, 0.8])),
    "bernoulli_probs": (
        lambda th, e: (scg.sample("b", scg.Bernoulli(probs=scg.sigmoid(th)).to_event(1),
                                  estimator=e) @ W3 - 0.5) ** 2,
        lambda th: np.prod(np.where(STATES3 == 1, sig(th), 1 - sig(th)), axis=1)
        @ (STATES3 @ W3 - 0.5) ** 2,
        np.array([0.3, -1.0, 0.8])),
    "binomial": (
        lambda th, e: (lambda x: np.sin(x[0]) + x[0] * x[1] / 5)(scg.sample(
            "x", scg.Binomial(np.array([3.0, 5.0]), scg.sigmoid(th)).to_event(1),
            estimator=e)),
        lambda th: (binom_pmf(3, sig(th[0])) @ np.sin(np.arange(4.0))
                    + 3 * sig(th[0]) * 5 * sig(th[1]) / 5),
        np.array([0.2, -0.6])),
    "geometric": (
        lambda th, e: (lambda x: np.sin(x[0]) + 0.1 * x[0] * x[1])(scg.sample(
            "x", scg.Geometric(scg.sigmoid(th)).to_event(1), estimator=e)),
        lambda th: (geo_pmf(sig(th[0])) @ np.sin(GEO)
                    + 0.1 * (geo_pmf(sig(th[0])) @ GEO) * (geo_pmf(sig(th[1])) @ GEO)),
        np.array([0.1, 0.7])),
    "categorical_logits": (
        lambda th, e: (lambda x: (x[0] - 1.2) ** 2 + 0.5 * x[0] * x[1])(scg.sample(
            "x", scg.Categorical(logits=th).to_event(1), estimator=e)),
        lambda th: sum(softmax(th)[0, i] * softmax(th)[1, j] * ((i - 1.2) ** 2 + 0.5 * i * j)
                       for i in range(3) for j in range(3)),
        np.array([[0.3, -0.5, 0.1], [0.7, 0.0, -0.4]])),
    "categorical_probs": (
        lambda th, e: (scg.sample("x", scg.Categorical(probs=scg.softmax(th)), estimator=e)
                       - 1.3) ** 2,
        lambda th: softmax(th) @ (np.arange(4.0) - 1.3) ** 2,
        np.array([0.3, -0.5, 0.1, 0.6])),
    "one_hot": (
        lambda th, e: (lambda x: (x @ W3) ** 2 + x[1])(scg.sample(
            "x", scg.OneHotCategorical(logits=th), estimator=e)),
        lambda th: softmax(th) @ (W3 ** 2 + np.array([0.0, 1.0, 0.0])),
        np.array([0.2, -0.3, 0.5])),
}


@pytest.mark.parametrize("coupled", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_unbiased_for_every_family(case, coupled):
    model, exact, th = CASES[case]
    E = scg.expectation(lambda t: model(t, mv(coupled)), n=100_000, seed=7)
    gs = scg.grad_samples(E)(th)
    # (a single Categorical is differentiated exactly: f(k) - f(x) has no variance once
    # chained through the probabilities, which sum to 1)
    z = (gs.mean - numeric_grad(exact, th, h=1e-5).reshape(th.shape)) / (gs.stderr + 1e-8)
    assert np.all(np.abs(z) < 4.5), (case, z)


def test_poisson_variance_is_four_times_the_rate():
    # d/drate E[x^2] = 2 rate + 1, estimated by (X + 1)^2 - X^2 = 2 X + 1: variance 4 rate
    E = scg.expectation(lambda r: scg.sample("x", scg.Poisson(r), estimator=mv()) ** 2,
                        n=200_000, seed=1)
    gs = scg.grad_samples(E)(3.0)
    assert gs.mean == pytest.approx(7.0, abs=4.5 * gs.stderr)
    assert gs.var == pytest.approx(12.0, rel=0.03)


def _quad(f, *grids):
    """The integral of f over a product grid (trapezoid rule)."""
    mesh = np.meshgrid(*grids, indexing="ij")
    out = f(*mesh)
    for g in reversed(grids):
        out = np.trapezoid(out, g, axis=-1)
    return out


def _mvd_moments(coupled, mu=2.0, s=1.0):
    """The mean and variance of the MVD of E[x^2], x ~ N(mu, s^2), in loc and in scale,
    by quadrature over the Rayleigh, Maxwell, uniform and normal variables."""
    def f(x):
        return x ** 2

    r = np.linspace(0, 12, 1201)
    m = np.linspace(-12, 12, 2401)
    u = np.linspace(0, 1, 401)
    e = np.linspace(-10, 10, 2001)
    rayleigh = r * np.exp(-0.5 * r ** 2)
    maxwell = m ** 2 * np.exp(-0.5 * m ** 2) / np.sqrt(2 * np.pi)
    normal = np.exp(-0.5 * e ** 2) / np.sqrt(2 * np.pi)
    c = 1 / (s * np.sqrt(2 * np.pi))
    out = []
    if coupled:
        est = c * (f(mu + s * r) - f(mu - s * r))
        out.append([np.trapezoid(est ** k * rayleigh, r) for k in (1, 2)])
        est = (f(mu + s * m[:, None]) - f(mu + s * m[:, None] * u)) / s
        out.append([np.trapezoid(np.trapezoid(est ** k, u, axis=1) * maxwell, m)
                    for k in (1, 2)])
    else:
        est = c * (f(mu + s * r[:, None]) - f(mu - s * r[None, :]))
        out.append([np.trapezoid(np.trapezoid(est ** k * rayleigh[None, :], r, axis=1)
                                 * rayleigh, r) for k in (1, 2)])
        est = (f(mu + s * m[:, None]) - f(mu + s * e[None, :])) / s
        out.append([np.trapezoid(np.trapezoid(est ** k * normal[None, :], e, axis=1)
                                 * maxwell, m) for k in (1, 2)])
    return np.array([m1 for m1, _ in out]), np.array([m2 - m1 ** 2 for m1, m2 in out])


@pytest.mark.parametrize("coupled", [True, False])
def test_worked_example_variances_by_quadrature(coupled):
    mean, var = _mvd_moments(coupled)
    assert mean == pytest.approx([4.0, 2.0], rel=1e-4)  # d/dloc, d/dscale of loc^2 + scale^2
    if coupled:  # c^2 16 loc^2 Var(R), Var(R) = 2 - pi/2
        assert var[0] == pytest.approx(64 / (2 * np.pi) * (2 - np.pi / 2), rel=1e-4)

    def model(th):
        return scg.sample("x", scg.Normal(th[0], th[1]), estimator=mv(coupled)) ** 2

    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=2))(np.array([2.0, 1.0]))
    assert np.all(np.abs((gs.mean - [4.0, 2.0]) / gs.stderr) < 4.5)
    assert gs.var == pytest.approx(var, rel=0.04)


def test_coupling_lowers_the_variance_for_a_smooth_cost():
    # in loc, with e and o the even and odd parts of f(loc + scale r) in r: coupled
    # 4 Var o(R), uncoupled 2 Var e(R) + 2 Var o(R); lower for an f nearly even around loc
    def model(th, coupled):
        x = scg.sample("x", scg.Normal(th, 0.8), estimator=mv(coupled))
        return np.cos(x) + x ** 2

    var = [scg.grad_samples(scg.expectation(lambda t: model(t, c), n=50_000, seed=3))(0.2).var
           for c in (True, False)]
    assert var[0] < 0.5 * var[1]
    # the worked example (f = x^2 at loc 2, odd part dominant): coupling helps in scale
    # (20 against 72), not in loc (4.37 against 3.46)
    (_, coupled), (_, independent) = _mvd_moments(True), _mvd_moments(False)
    assert coupled[1] < 0.3 * independent[1] and coupled[0] > independent[0]


def test_value_is_that_of_the_draw():
    model, exact, th = CASES["normal"]
    E = scg.expectation(lambda t: model(t, mv()), n=50_000, seed=4)
    value, _ = scg.value_and_grad(E)(th)
    assert value == pytest.approx(exact(th), abs=0.03)


def test_upstream_pathwise_site_and_downstream_score_site():
    def model(th):
        x = scg.sample("x", scg.Normal(th[0], 1.0))
        y = scg.sample("y", scg.Normal(x + th[1], 0.7), estimator=mv())
        c = scg.sample("c", scg.Bernoulli(logits=th[1] - y), estimator=scg.Score("loo"))
        return (y - 0.2) ** 2 + c * (1 + y) + 0.1 * x ** 2

    z, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()

    def value(th):  # Gauss-Hermite over x and y
        x = th[0] + z[:, None]
        y = x + th[1] + 0.7 * z[None, :]
        f = (y - 0.2) ** 2 + sig(th[1] - y) * (1 + y) + 0.1 * x ** 2
        return w @ f @ w

    th = np.array([0.3, -0.5])
    gs = scg.grad_samples(scg.expectation(model, n=50_000, seed=5))(th)
    z_ = (gs.mean - numeric_grad(value, th)) / gs.stderr
    assert np.all(np.abs(z_) < 4.5), z_


def test_composes_with_enumerate_upstream_and_disarm_downstream():
    def model(th):
        a = scg.sample("a", scg.Bernoulli(logits=th[0]), estimator=scg.Enumerate())
        x = scg.sample("x", scg.Poisson(np.exp(th[1] + 0.5 * a)), estimator=mv())
        b = scg.sample("b", scg.Bernoulli(logits=th[2] - 0.3 * x), estimator=scg.DisARM())
        return (x - 2.0) ** 2 * (1 + a) + b * (1 + x)

    def value(th):
        total = 0.0
        for a in (0, 1):
            px = pois_pmf(np.exp(th[1] + 0.5 * a))
            inner = (POIS - 2.0) ** 2 * (1 + a) + sig(th[2] - 0.3 * POIS) * (1 + POIS)
            total = total + (sig(th[0]) if a else 1 - sig(th[0])) * (px @ inner)
        return total

    th = np.array([0.2, 0.4, -0.3])
    gs = scg.grad_samples(scg.expectation(model, n=50_000, seed=6))(th)
    z = (gs.mean - numeric_grad(value, th)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z


T5 = np.linspace(-1, 1, 5)


def plate_model(th, plate, mixed=False):
    if plate:
        with scg.plate("p", 5):
            x = scg.sample("x", scg.Normal(th, 1.0), estimator=mv())
            scg.cost("c", (x - T5) ** 2 + np.sin(x))
        if mixed:
            return np.sum(x) ** 2
        return None
    x = scg.sample("x", scg.Normal(th, 1.0).to_event(1), estimator=mv())
    return np.sum((x - T5) ** 2 + np.sin(x))


def test_plates_replace_every_element_at_once():
    th = np.linspace(-0.5, 0.5, 5)
    exact = 2 * (th - T5) + np.cos(th) * np.exp(-0.5)
    for plate, evaluations in ((True, 3), (False, 11)):
        gs = scg.grad_samples(scg.expectation(lambda t: plate_model(t, plate), n=40_000,
                                              seed=8))(th)
        assert np.all(np.abs((gs.mean - exact) / gs.stderr) < 4.5), plate
        text = scg.trace(lambda t: plate_model(t, plate), th, n=2).explain()
        assert f"{evaluations} evaluations of the model downstream per draw" in text
    E = scg.expectation(lambda t: plate_model(t, True, mixed=True), n=10, seed=0)
    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
        scg.grad(E)(th)


def test_errors_and_explain():
    def laplace(mu):
        return scg.sample("x", scg.Laplace(mu, 1.0), estimator=mv())

    with pytest.raises(scg.EstimatorError, match="Laplace declares none.*Geometric"):
        scg.expectation(laplace, n=2)(0.0)

    def gamma(a):
        return scg.sample("x", scg.Gamma(a, 1.0), estimator=mv())

    E = scg.expectation(gamma, n=4, seed=0)
    E(2.0)  # a constant concentration is fine
    with pytest.raises(scg.EstimatorError,
                       match="in its parameter 'concentration' \\(Gamma declares one in rate\\)"):
        scg.grad(E)(2.0)
    model, _, th = CASES["normal"]
    E = scg.expectation(lambda t: model(t, mv()), n=4, seed=0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(E)(th)
    with pytest.raises(ValueError, match="coupled"):
        scg.MeasureValued(coupled="yes")
    text = scg.trace(lambda t: model(t, mv()), th, n=2).explain()
    assert "measure-valued derivative (coupled) of Normal in loc, scale" in text
    assert "unbiased; 9 evaluations of the model downstream per draw" in text
    assert "R Rayleigh (the same R)" in text and "M double-sided Maxwell" in text
    assert repr(scg.MeasureValued(coupled=False)) == "MeasureValued(coupled=False)"


def test_categorical_in_its_probabilities_agrees_with_enumeration():
    f = np.array([1.0, 4.0, 9.0])

    def model(p, est):
        x = scg.sample("x", scg.Categorical(probs=p), estimator=est)
        return scg.take(f, x, axis=0)

    p = np.array([0.2, 0.3, 0.5])
    exact = scg.grad(scg.expectation(model, n=2, seed=0))(p, scg.Enumerate())
    assert np.allclose(exact, (f - p @ f) / p.sum())  # d/dp_k sum_j p_j / sum(p) f_j
    gs = scg.grad_samples(scg.expectation(model, n=4_000, seed=1))(p, scg.MeasureValued())
    assert np.allclose(gs.mean, exact)
