"""Parameters reach a model any way Python allows: arguments, closures, functools.partial,
namespaces and dataclasses. The gradient is the same in every case.

The model is x ~ N(mu, 1), cost x^2, so d/dmu E[x^2] = 2 mu. With n = 100 000 draws the
pathwise estimate 2x has standard error 2 / sqrt(n) = 0.0063: every check allows 5 standard
errors (a failure rate below 1e-6 per check with fixed seeds, here none)."""

import dataclasses
import functools
import types

import numpy as np
import pytest

import scg

N = 100_000
MU = 1.5
TOL = 5 * 2 / np.sqrt(N)


def square(mu):
    return scg.sample("x", scg.Normal(mu, 1.0)) ** 2


def test_closure_inside_the_differentiated_function():
    def loss(mu):
        E = scg.expectation(lambda: scg.sample("x", scg.Normal(mu, 1.0)) ** 2, n=N, seed=0)
        return E() + mu ** 2
    assert scg.grad(loss)(MU) == pytest.approx(4 * MU, abs=TOL)


def test_functools_partial():
    def loss(mu):
        return scg.expectation(functools.partial(square, mu), n=N, seed=0)()
    assert scg.grad(loss)(MU) == pytest.approx(2 * MU, abs=TOL)


def test_closure_and_argument_together():
    def loss(mu, sigma):
        def model(m):
            return scg.sample("x", scg.Normal(m, sigma)) ** 2
        return scg.expectation(model, n=N, seed=0)(mu)
    # d/dmu (mu^2 + sigma^2) = 2 mu and d/dsigma = 2 sigma. The per-draw sigma gradient
    # 2 x eps has variance 4 (mu^2 + 2 sigma^2) = 11: 5 standard errors are 0.053
    g_mu, g_sigma = scg.grad(loss, argnums=(0, 1))(MU, 0.5)
    assert g_mu == pytest.approx(2 * MU, abs=TOL)
    assert g_sigma == pytest.approx(1.0, abs=5 * np.sqrt(11 / N))


def test_simple_namespace_argument():
    E = scg.expectation(lambda ns: square(ns.mu), n=N, seed=0)
    g = scg.grad(lambda mu: E(types.SimpleNamespace(mu=mu)))(MU)
    assert g == pytest.approx(2 * MU, abs=TOL)


@dataclasses.dataclass
class Params:
    mu: float
    label: str = "policy"


def test_dataclass_holding_a_traced_value():
    E = scg.expectation(lambda p: square(p.mu), n=N, seed=0)
    g = scg.grad(lambda mu: E(Params(mu)))(MU)
    assert g == pytest.approx(2 * MU, abs=TOL)


def test_score_site_through_a_closure():
    # a Bernoulli's score term must see the closed-over parameter too: d/dp E[(a - 0.3)^2]
    # = (0.7^2 - 0.3^2) = 0.4, estimated with the leave-one-out baseline
    def loss(p):
        E = scg.expectation(lambda: (scg.sample("a", scg.Bernoulli(probs=p)) - 0.3) ** 2,
                            n=N, seed=0)
        return E()
    g = scg.grad(loss)(0.4)
    # per-draw variance of s(a) (f(a) - f_bar) at p = 0.4 is below 1.1: 5 stderr < 0.017
    assert g == pytest.approx(0.4, abs=0.017)


def test_grad_samples_and_plain_value_unchanged():
    E = scg.expectation(square, n=N, seed=0)
    assert E(MU) == pytest.approx(MU ** 2 + 1, abs=5 * np.sqrt(2 * (1 + 2 * MU ** 2) / N))
    gs = scg.grad_samples(E)(MU)
    assert gs.mean == pytest.approx(2 * MU, abs=TOL)
