"""Copies are per-site branches: T sequential copying sites cost 1 + sum of (copies - 1)
evaluations per draw, not the product; only exact sums (Enumerate) that meet in a cost
multiply. Each layout is unbiased against exact enumeration."""

import itertools

import numpy as np
import pytest

import scg

from tests.estimators.exact import numeric_grad, numeric_hessian, sig

W = np.array([1.0, -0.5, 2.0, 0.3, -1.2, 0.8])


def chain(T, estimator):
    """b_t ~ Bernoulli(sigmoid(theta_t + w_t b_{t-1})); cost (sum_t w_t b_t - 1)^2."""
    def model(theta):
        prev, total = 0.0, 0.0
        for t in range(T):
            b = scg.sample(f"b{t}", scg.Bernoulli(logits=theta[t] + W[t % 6] * prev),
                           estimator=estimator)
            total = total + W[t % 6] * b
            prev = b
        return (total - 1.0) ** 2
    return model


def chain_exact(T):
    def value(theta):
        out = 0.0
        for bits in itertools.product((0.0, 1.0), repeat=T):
            prob, prev, total = 1.0, 0.0, 0.0
            for t, b in enumerate(bits):
                p = sig(theta[t] + W[t % 6] * prev)
                prob *= p if b else 1 - p
                total += W[t % 6] * b
                prev = b
            out += prob * (total - 1.0) ** 2
        return out
    return value


def _evaluations(model, theta):
    return scg.trace(model, theta, n=2, seed=0).copies.count


@pytest.mark.parametrize("estimator,per_site", [(scg.DisARM(), 1), (scg.MeasureValued(), 2)],
                         ids=["disarm", "measure-valued"])
def test_a_chain_costs_one_plus_the_extra_copies_of_each_site(estimator, per_site):
    T = 6
    theta = np.linspace(-0.5, 0.5, T)
    assert _evaluations(chain(T, estimator), theta) == 1 + per_site * T
    text = scg.trace(chain(T, estimator), theta, n=2, seed=0).explain()
    assert f"The run holds {1 + per_site * T} evaluations of each draw" in text


@pytest.mark.parametrize("estimator", [scg.DisARM(), scg.MeasureValued()],
                         ids=["disarm", "measure-valued"])
def test_a_chain_of_copying_sites_is_unbiased(estimator):
    T = 5
    theta = np.array([0.3, -0.6, 0.2, 0.9, -0.1])
    exact = numeric_grad(chain_exact(T), theta)
    gs = scg.grad_samples(scg.expectation(chain(T, estimator), n=100_000, seed=4))(theta)
    z = (gs.mean - exact) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    value = scg.expectation(chain(T, estimator), n=100_000, seed=5)(theta)
    assert value == pytest.approx(chain_exact(T)(theta), rel=0.02)


def test_thirty_disarm_sites_take_thirty_one_evaluations():
    T = 30
    theta = np.zeros(T)
    E = scg.expectation(chain(T, scg.DisARM()), n=1_000, seed=0)
    g = scg.grad(E)(theta)
    assert np.all(np.isfinite(g))
    assert E.last_trace.copies.count == 31
    assert E.last_trace.sites["b0"].value.shape == (31_000,)


def test_compare_reports_the_true_evaluations_per_draw():
    T = 6
    cmp = scg.compare(chain(T, "auto"), np.zeros(T),
                      estimators={"disarm": scg.DisARM(), "mvd": scg.MeasureValued()},
                      n=2_000, seed=0, chunk=1_000)
    assert cmp["disarm"].evals_per_draw == T + 1
    assert cmp["mvd"].evals_per_draw == 2 * T + 1


def independent_coins(k, estimator):
    v = np.linspace(-1.0, 2.0, k)

    def model(theta):
        for i in range(k):
            a = scg.sample(f"a{i}", scg.Bernoulli(logits=theta[i]), estimator=estimator)
            scg.cost(f"c{i}", (a - v[i]) ** 2 * (1 + theta[i] ** 2))
    def exact(th):
        return np.sum((sig(th) * (1 - v) ** 2 + (1 - sig(th)) * v ** 2) * (1 + th ** 2))
    return model, exact


def test_independent_enumerated_sites_add_and_are_exact_to_second_order():
    k = 10
    model, exact = independent_coins(k, scg.Enumerate())
    theta = np.linspace(-1.0, 1.0, k)
    E = scg.expectation(model, n=3, seed=0)
    np.testing.assert_allclose(scg.grad(E)(theta), numeric_grad(exact, theta), rtol=1e-6,
                               atol=1e-8)
    assert E.last_trace.copies.count == k + 1  # (not 2^10)
    np.testing.assert_allclose(scg.hessian(E)(theta), numeric_hessian(exact, theta),
                               rtol=1e-4, atol=1e-5)
    assert E(theta) == pytest.approx(exact(theta), rel=1e-12)


def test_enumerated_sites_that_meet_in_a_cost_multiply_and_are_exact():
    k = 4
    v = np.array([0.5, -1.0, 2.0, 1.5])

    def model(theta):
        a = [scg.sample(f"a{i}", scg.Bernoulli(logits=theta[i]), estimator=scg.Enumerate())
             for i in range(k)]
        return (sum(a[i] * v[i] for i in range(k)) - 1.0) ** 2

    def exact(theta):
        p, out = sig(theta), 0.0
        for bits in itertools.product((0.0, 1.0), repeat=k):
            b = np.array(bits)
            out += np.prod(np.where(b == 1, p, 1 - p)) * (np.sum(b * v) - 1.0) ** 2
        return out

    theta = np.array([0.2, -0.3, 0.5, 0.0])
    E = scg.expectation(model, n=2, seed=0)
    np.testing.assert_allclose(scg.grad(E)(theta), numeric_grad(exact, theta), rtol=1e-6,
                               atol=1e-8)
    assert E.last_trace.copies.count == 2 ** k


def test_an_enumerated_site_and_a_disarm_site_that_meet_multiply():
    # a enumerated, b DisARM downstream of it: b's estimate is needed at each value of a
    def model(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta[0]), estimator=scg.Enumerate())
        b = scg.sample("b", scg.Bernoulli(logits=theta[1] + 1.5 * a), estimator=scg.DisARM())
        c = scg.sample("c", scg.Bernoulli(logits=theta[2]), estimator=scg.Enumerate())
        scg.cost("own", (c - 0.2) ** 2)
        return (a + 2 * b - 1.2) ** 2

    def exact(theta):
        pa, pc = sig(theta[0]), sig(theta[2])
        out = pc * 0.64 + (1 - pc) * 0.04
        for a in (0.0, 1.0):
            pb = sig(theta[1] + 1.5 * a)
            inner = pb * (a + 2 - 1.2) ** 2 + (1 - pb) * (a - 1.2) ** 2
            out += (pa if a else 1 - pa) * inner
        return out

    theta = np.array([0.3, -0.4, 0.6])
    E = scg.expectation(model, n=100_000, seed=2)
    gs = scg.grad_samples(E)(theta)
    z = (gs.mean - numeric_grad(exact, theta)) / np.maximum(gs.stderr, 1e-7)  # (c: exact)
    assert np.all(np.abs(z) < 5), z
    # a and b meet in the return cost: 2 x 2; c meets neither, so it adds one branch
    assert E.last_trace.copies.count == 2 * 2 + 1


def test_copying_sites_in_a_plate_and_a_chain_are_per_element_and_unbiased():
    B = 3
    w = np.array([0.5, -1.0, 2.0])

    def model(theta):
        with scg.plate("p", B):
            z1 = scg.sample("z1", scg.Bernoulli(logits=theta[0] * np.ones(B)),
                            estimator=scg.DisARM())
            z2 = scg.sample("z2", scg.Bernoulli(logits=theta[1] + w * z1),
                            estimator=scg.DisARM())
            return (z1 + z2 - w) ** 2

    def exact(theta):
        p1 = sig(theta[0])
        out = 0.0
        for z1 in (0.0, 1.0):
            p2 = sig(theta[1] + w * z1)
            out += np.sum((p1 if z1 else 1 - p1) * (
                p2 * (z1 + 1 - w) ** 2 + (1 - p2) * (z1 - w) ** 2))
        return out

    theta = np.array([0.2, -0.5])
    E = scg.expectation(model, n=100_000, seed=7)
    gs = scg.grad_samples(E)(theta)
    z = (gs.mean - numeric_grad(exact, theta)) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    assert E.last_trace.copies.count == 3


def _ten_coins_and_a_pair(theta):
    for i in range(10):
        b = scg.sample(f"b{i}", scg.Bernoulli(logits=theta[i]), estimator=scg.Enumerate())
        scg.cost(f"c{i}", (b - 0.3 * i) ** 2)
    p = scg.sample("p", scg.Bernoulli(logits=theta[10]), estimator=scg.Enumerate())
    q = scg.sample("q", scg.Bernoulli(logits=theta[11]), estimator=scg.Enumerate())
    return (p + q - 1.5) ** 2


def _ten_coins_and_a_pair_exact(theta):
    s, v = sig(theta), 0.3 * np.arange(10)
    out = np.sum(s[:10] * (1.0 - v) ** 2 + (1.0 - s[:10]) * v ** 2)
    for p, q in itertools.product((0.0, 1.0), repeat=2):
        out += (s[10] if p else 1 - s[10]) * (s[11] if q else 1 - s[11]) * (p + q - 1.5) ** 2
    return out


def test_independent_enumerated_sites_and_a_pair_give_the_exact_gradient():
    E = scg.expectation(_ten_coins_and_a_pair, n=4, seed=0)
    g = scg.grad(E)(np.zeros(12))
    exact = np.concatenate([0.25 * (1.0 - 0.6 * np.arange(10)), [-0.25, -0.25]])
    np.testing.assert_allclose(g, exact, rtol=1e-12, atol=1e-15)
    theta = np.linspace(-1.0, 1.2, 12)
    np.testing.assert_allclose(scg.grad(E)(theta), numeric_grad(
        _ten_coins_and_a_pair_exact, theta), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(scg.hessian(E)(theta), numeric_hessian(
        _ten_coins_and_a_pair_exact, theta), rtol=1e-4, atol=1e-5)
    assert E(theta) == pytest.approx(_ten_coins_and_a_pair_exact(theta), rel=1e-12)
    jitted = scg.jit(lambda t: scg.value_and_grad(E)(t))
    for _ in range(3):
        value, g = jitted(theta)
        assert value == pytest.approx(_ten_coins_and_a_pair_exact(theta), rel=1e-12)
        np.testing.assert_allclose(g, scg.grad(E)(theta), rtol=1e-12)


def test_copies_that_meet_and_copies_that_add_in_a_plate_are_unbiased():
    """A DisARM coin meeting an enumerated one in a cost (2 x 2), beside an enumerated
    coin of its own cost (+ 1), per element of a plate."""
    B = 3
    w = np.array([0.5, -1.0, 2.0])

    def model(theta):
        with scg.plate("p", B):
            a = scg.sample("a", scg.Bernoulli(logits=theta[0] * np.ones(B)),
                           estimator=scg.Enumerate())
            b = scg.sample("b", scg.Bernoulli(logits=theta[1] + w * a), estimator=scg.DisARM())
            c = scg.sample("c", scg.Bernoulli(logits=theta[2] * np.ones(B)),
                           estimator=scg.Enumerate())
            scg.cost("own", (c - w) ** 2)
            return (a + 2 * b - w) ** 2

    def exact(theta):
        pa, pc = sig(theta[0]), sig(theta[2])
        out = np.sum(pc * (1 - w) ** 2 + (1 - pc) * w ** 2)
        for a in (0.0, 1.0):
            pb = sig(theta[1] + w * a)
            inner = pb * (a + 2 - w) ** 2 + (1 - pb) * (a - w) ** 2
            out += np.sum((pa if a else 1 - pa) * inner)
        return out

    theta = np.array([0.3, -0.4, 0.6])
    E = scg.expectation(model, n=100_000, seed=3)
    gs = scg.grad_samples(E)(theta)
    z = (gs.mean - numeric_grad(exact, theta)) / np.maximum(gs.stderr, 1e-7)
    assert np.all(np.abs(z) < 5), z
    assert E.last_trace.copies.count == 2 * 2 + 1
    assert E(theta) == pytest.approx(exact(theta), rel=0.02)


def test_independent_enumerated_sites_add_and_only_a_pair_meeting_in_a_cost_multiplies():
    """API section 7: 1 + 10 * (2 - 1) + (2 * 2 - 1) = 14 evaluations per draw."""
    E = scg.expectation(_ten_coins_and_a_pair, n=4, seed=0)
    scg.grad(E)(np.zeros(12))
    assert E.last_trace.copies.count == 14
    assert E.last_trace.sites["b0"].value.shape == (14 * 4,)
    assert ("holds 14 evaluations of each draw: 14 = 1 + 10 (the extra copies of b0: 2, "
            "b1: 2, b2: 2, b3: 2, b4: 2, b5: 2, b6: 2, b7: 2, b8: 2, b9: 2) + 3 (the "
            "combinations of p: 2 x q: 2, which meet in a cost, less the main run)"
            ) in E.last_trace.explain()
    cmp = scg.compare(_ten_coins_and_a_pair, np.zeros(12),
                      estimators={"enumerate": scg.Enumerate()}, n=4, seed=0)
    assert cmp["enumerate"].evals_per_draw == 14
    # ten such pairs: 1 + 10 x 3 evaluations, not 11 x 11
    def pairs(theta):
        for i in range(10):
            p = scg.sample(f"p{i}", scg.Bernoulli(logits=theta[i]), estimator=scg.Enumerate())
            q = scg.sample(f"q{i}", scg.Bernoulli(logits=-theta[i]), estimator=scg.Enumerate())
            scg.cost(f"c{i}", (p + 2 * q - 1.2) ** 2)
    E = scg.expectation(pairs, n=2, seed=0)
    theta = np.linspace(-1.0, 1.0, 10)
    g = scg.grad(E)(theta)
    assert E.last_trace.copies.count == 31

    def exact(th):
        out = 0.0
        for p, q in itertools.product((0.0, 1.0), repeat=2):
            w = (sig(th) if p else 1 - sig(th)) * (sig(-th) if q else 1 - sig(-th))
            out += np.sum(w * (p + 2 * q - 1.2) ** 2)
        return out
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-6, atol=1e-8)
