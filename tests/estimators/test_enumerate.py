"""scg.Enumerate(): exact sums over finite supports, alone, in plates, with other sites."""

import itertools

import numpy as np
import pytest

import scg

from .exact import numeric_grad, numeric_hessian, sig


def test_one_bernoulli_is_exact_with_one_draw():
    def model(th):
        a = scg.sample("a", scg.Bernoulli(logits=th), estimator=scg.Enumerate())
        return (a - 0.3) ** 2

    def exact(th):
        p = sig(th)
        return p * 0.49 + (1 - p) * 0.09

    E = scg.expectation(model, n=1, seed=0)
    assert E(0.4) == pytest.approx(exact(0.4), rel=1e-12)
    assert scg.grad(E)(0.4) == pytest.approx(numeric_grad(exact, 0.4), rel=1e-7)
    assert scg.hessian(E)(0.4) == pytest.approx(numeric_hessian(exact, 0.4), rel=1e-4)
    gs = scg.grad_samples(scg.expectation(model, n=5, seed=0))(0.4)
    assert np.allclose(gs.var, 0.0, atol=1e-25)  # the site adds no variance


@pytest.mark.parametrize("family", ["categorical", "onehot", "binomial"])
def test_families_are_exact(family):
    c = np.array([1.0, -2.0, 0.5, 3.0])

    def dist(th):
        if family == "categorical":
            return scg.Categorical(logits=th)
        if family == "onehot":
            return scg.OneHotCategorical(logits=th)
        return scg.Binomial(3, probs=scg.sigmoid(th[0]))

    def model(th):
        x = scg.sample("x", dist(th), estimator=scg.Enumerate())
        if family == "onehot":
            return np.sum(x * c)
        return scg.take(c, x, axis=0) if family == "categorical" else x ** 2

    def exact(th):
        if family in ("categorical", "onehot"):
            p = np.exp(th - np.max(th))
            p /= p.sum()
            return float(np.sum(p * c))
        from math import comb
        p = sig(th[0])
        return sum(comb(3, k) * p ** k * (1 - p) ** (3 - k) * k ** 2 for k in range(4))

    th = np.array([0.2, -0.3, 0.5, 0.1])
    E = scg.expectation(model, n=2, seed=0)
    assert E(th) == pytest.approx(exact(th), rel=1e-12)
    assert np.allclose(scg.grad(E)(th), numeric_grad(exact, th), atol=1e-7)


def test_a_batch_outside_plates_is_enumerated_jointly_and_exactly():
    w = np.array([1.0, -2.0, 0.5])

    def model(th):
        b = scg.sample("b", scg.Bernoulli(logits=th).to_event(1), estimator=scg.Enumerate())
        return (np.sum(w * b) - 0.5) ** 2  # couples the elements

    def exact(th):
        p = sig(th)
        total = 0.0
        for bits in itertools.product([0, 1], repeat=3):
            b = np.array(bits)
            total += np.prod(np.where(b, p, 1 - p)) * (np.sum(w * b) - 0.5) ** 2
        return total

    th = np.array([0.3, -0.2, 0.7])
    E = scg.expectation(model, n=1, seed=0)
    assert scg.trace(model, th).copies.count == 8
    assert E(th) == pytest.approx(exact(th), rel=1e-12)
    assert np.allclose(scg.grad(E)(th), numeric_grad(exact, th), atol=1e-7)
    assert np.allclose(scg.hessian(E)(th), numeric_hessian(exact, th), atol=1e-4)


def test_a_plate_is_enumerated_element_by_element():
    t = np.linspace(-1, 1, 24)

    def model(th):
        with scg.plate("p", 24):
            a = scg.sample("a", scg.Bernoulli(logits=th * t), estimator=scg.Enumerate())
            return (a - t) ** 2

    def exact(th):
        p = sig(th * t)
        return np.sum(p * (1 - t) ** 2 + (1 - p) * t ** 2)

    assert scg.trace(model, 0.5, n=2).copies.count == 2  # 24 sums of 2, not 2^24
    E = scg.expectation(model, n=2, seed=0)
    assert E(0.5) == pytest.approx(exact(0.5), rel=1e-12)
    assert scg.grad(E)(0.5) == pytest.approx(numeric_grad(exact, 0.5), rel=1e-7)
    assert scg.hessian(E)(0.5) == pytest.approx(numeric_hessian(exact, 0.5), rel=1e-4)


def test_a_cost_mixing_an_enumerated_plate_is_refused():
    def model(th):
        with scg.plate("p", 4):
            a = scg.sample("a", scg.Bernoulli(logits=th * np.ones(4)),
                           estimator=scg.Enumerate())
            return np.sum(a) ** 2

    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
        scg.grad(scg.expectation(model, n=2, seed=0))(0.3)


def test_the_budget_is_a_clear_error():
    def model(th):
        return np.sum(scg.sample("b", scg.Bernoulli(logits=th).to_event(1),
                                 estimator=scg.Enumerate(max_combinations=1000)))

    with pytest.raises(scg.EstimatorError, match=r"2\^20 copies.*max_combinations=1,000"):
        scg.grad(scg.expectation(model, n=1))(np.zeros(20))

    def two(th):
        a = scg.sample("a", scg.Bernoulli(logits=th).to_event(1),
                       estimator=scg.Enumerate(max_combinations=300))
        b = scg.sample("b", scg.Bernoulli(logits=th).to_event(1),
                       estimator=scg.Enumerate(max_combinations=300))
        return np.sum(a * b)

    with pytest.raises(scg.EstimatorError, match="together take 65,536 copies"):
        scg.grad(scg.expectation(two, n=1))(np.zeros(8))


def test_other_families_are_refused_with_the_supported_list():
    def model(mu):
        return scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.Enumerate())

    with pytest.raises(scg.EstimatorError, match="Bernoulli, Binomial, Categorical, OneHot"):
        scg.expectation(model, n=1)(0.0)


def _two_sites(order):
    def model(th):
        if order == "score first":
            z = scg.sample("z", scg.Bernoulli(logits=th[0]), estimator=scg.Score("loo"))
            a = scg.sample("a", scg.Bernoulli(logits=th[1] + 2 * z), estimator=scg.Enumerate())
        else:
            a = scg.sample("a", scg.Bernoulli(logits=th[1]), estimator=scg.Enumerate())
            z = scg.sample("z", scg.Bernoulli(logits=th[0] - 2 * a), estimator=scg.Score("loo"))
        x = scg.sample("x", scg.Normal(a + z * th[1], 1.0))
        return (a - 0.3) ** 2 + 3 * z * a + z + x ** 2

    def exact(th):
        total = 0.0
        for a, z in itertools.product([0, 1], repeat=2):
            if order == "score first":
                pz, pa = sig(th[0]), sig(th[1] + 2 * z)
            else:
                pa, pz = sig(th[1]), sig(th[0] - 2 * a)
            w = (pz if z else 1 - pz) * (pa if a else 1 - pa)
            m = a + z * th[1]
            total += w * ((a - 0.3) ** 2 + 3 * z * a + z + m ** 2 + 1)
        return total

    return model, exact


@pytest.mark.parametrize("order", ["score first", "enumerated first"])
def test_with_score_and_pathwise_sites_it_is_unbiased(order):
    model, exact = _two_sites(order)
    th = np.array([0.2, -0.4])
    gs = scg.grad_samples(scg.expectation(model, n=40_000, seed=3))(th)
    z = (gs.mean - numeric_grad(exact, th)) / gs.stderr
    assert np.all(np.abs(z) < 4), z
    H = scg.hessian(scg.expectation(model, n=200_000, seed=4))(th)
    assert np.allclose(H, numeric_hessian(exact, th), atol=0.05)


def test_the_value_and_explain():
    model, exact = _two_sites("enumerated first")
    th = np.array([0.2, -0.4])
    values = [scg.expectation(model, n=20_000, seed=s)(th) for s in range(3)]
    assert np.mean(values) == pytest.approx(exact(th), rel=0.02)
    text = scg.trace(model, th, n=2).explain()
    assert "enumerate: the exact sum over its 2 values" in text
    assert "2 evaluations of the model downstream per draw" in text
    assert "p(a), summed over its values" in text
    assert "The run holds 2 evaluations of each draw" in text


def test_a_cost_shared_by_all_draws_counts_once():
    def model(th):
        a = scg.sample("a", scg.Bernoulli(logits=th), estimator=scg.Enumerate())
        scg.cost("prior", th ** 2)  # depends on no draw
        return a

    E = scg.expectation(model, n=3, seed=0)
    assert E(0.5) == pytest.approx(sig(0.5) + 0.25, rel=1e-12)
    assert scg.grad(E)(0.5) == pytest.approx(sig(0.5) * (1 - sig(0.5)) + 1.0, rel=1e-10)
    assert np.allclose(scg.trace(model, 0.5, n=3).costs["prior"], 0.25)


def _forty_coins(budget):
    def model(theta):
        s = 0.0
        for i in range(40):
            s = s + scg.sample(f"b{i}", scg.Bernoulli(logits=theta[i]),
                               estimator=scg.Enumerate(max_combinations=budget))
        return (s - 20.0) ** 2
    return model


@pytest.mark.parametrize("budget,error,text", [
    (100_000, scg.EstimatorError, r"site 'b0': the enumerated sites together take "
                                  r"1,099,511,627,776 copies of the run .*b39: 2.*above "
                                  r"max_combinations=100,000"),
    (10 ** 16, MemoryError, r"the copies of the run for sites .b0., .b1., .b2. and 37 more: each draw takes 1,099,511,627,776 "
                            r"evaluations of the model \(2 \(b0: 2\) x .* no number of draws "
                            r"fits.*enumerate fewer of them jointly"),
])
def test_a_layout_too_large_is_refused_before_a_run_with_every_draw(budget, error, text):
    """Forty coins meeting in one cost: 2^40 copies, found with runs of a few draws, before
    a run at n = 10^6 allocates anything of that size."""
    import tracemalloc
    E = scg.expectation(_forty_coins(budget), n=10 ** 6, seed=0)
    tracemalloc.start()
    try:
        with pytest.raises(error, match=text):
            scg.grad(E)(np.zeros(40))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2 ** 20  # (a run with every draw would take 8 MB per array)


def test_a_model_without_a_sampled_site_is_evaluated_once_whatever_n():
    w = np.array([1.0, -0.7, 0.4])

    def model(th):
        b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.Enumerate())
        return (b @ w - 0.5) ** 2

    states = np.array(list(itertools.product([0.0, 1.0], repeat=3)))

    def exact(th):
        p = sig(th)
        return np.prod(np.where(states == 1, p, 1 - p), axis=1) @ (states @ w - 0.5) ** 2

    th = np.array([-0.4, 0.3, 1.1])
    E = scg.expectation(model, n=64, seed=0)
    first = scg.grad(E)(th)
    assert E.last_trace.n == 64                 # (the first call finds that nothing is drawn)
    later = scg.grad(E)(th)
    assert E.last_trace.n == 1 and E(th) == pytest.approx(exact(th), rel=1e-12)
    np.testing.assert_allclose(later, numeric_grad(exact, th), rtol=1e-7)
    np.testing.assert_allclose(later, first, rtol=1e-13)
    gs = scg.grad_samples(E)(th)                # per-draw estimates: still n of them
    assert gs.n == 64 and np.allclose(gs.var, 0.0, atol=1e-25)


def test_a_model_with_a_sampled_site_or_a_minibatch_keeps_its_n():
    def with_a_draw(th):
        b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.Enumerate())
        x = scg.sample("x", scg.Normal(th, 1.0))
        return b * x

    def with_a_minibatch(th):
        with scg.plate("data", 10, subsample_size=2):
            b = scg.sample("b", scg.Bernoulli(logits=th * np.ones(2)), estimator=scg.Enumerate())
            scg.cost("c", b)

    for model in (with_a_draw, with_a_minibatch):
        E = scg.expectation(model, n=16, seed=0)
        for _ in range(3):
            scg.grad(E)(0.3)
        assert E.last_trace.n == 16
