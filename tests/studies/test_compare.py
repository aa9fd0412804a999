"""scg.compare and chunked scg.grad_samples in this process: unbiased against exact values,
merged exactly, in memory bounded by one chunk, independent of the order chunks finish."""

import tracemalloc

import numpy as np
import pytest

import scg
from scg.studies.chunks import ChunkTask, chunk_sizes, merge, run_chunk, spawn

THETA = np.array([2.0, 1.0])
EXACT = np.array([4.0, 2.0])


def worked(theta):
    return scg.sample("x", scg.Normal(theta[0], theta[1])) ** 2


def coins(theta):
    b = scg.sample("b", scg.Bernoulli(logits=theta).to_event(1))
    return (np.sum(b * np.array([1.0, -2.0, 0.5])) - 0.5) ** 2


def test_every_estimator_is_unbiased_with_its_known_variance():
    estimators = {"pathwise": "pathwise", "score": "score", "loo": scg.Score("loo"),
                  "pairs": scg.Pathwise(antithetic=True), "mvd": scg.MeasureValued()}
    cmp = scg.compare(worked, THETA, estimators=estimators, n=200_000, seed=0,
                      reference=EXACT, chunk=50_000)
    exact_var = {"pathwise": [4, 24], "score": [87, 346], "loo": [42, 216], "pairs": [0, 8],
                 "mvd": [16 * 4 * (2 - np.pi / 2) / (2 * np.pi), 20]}
    for label, row in cmp.rows.items():
        assert np.all(np.abs(row.z) < 4.5), (label, row.z)
        assert np.allclose(row.var, exact_var[label], rtol=0.06, atol=1e-9), label
        assert row.time_per_draw > 0 and row.efficiency > 0
    assert cmp["pairs"].n == 100_000 and cmp["pairs"].evals_per_draw == 2  # pairs
    assert cmp["mvd"].evals_per_draw == 5 and cmp["pathwise"].n == 200_000
    text = cmp.table()
    assert text.splitlines()[0].startswith("| estimator | mean | stderr | bias | z |")
    assert len(text.splitlines()) == 2 + len(estimators)
    d = cmp.to_dict()
    assert set(d) == set(estimators) and len(d["loo"]["mean"]) == 2


def test_a_spec_per_site_and_sites_that_cannot_use_a_spec_keep_auto():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        a = scg.sample("a", scg.Bernoulli(logits=theta[1]))
        return (x - a) ** 2

    def exact(theta):
        p = 1 / (1 + np.exp(-theta[1]))
        # E[(x - a)^2] = 1 + mu^2 - 2 mu p + p
        return np.array([2 * theta[0] - 2 * p, (1 - 2 * theta[0]) * p * (1 - p)])

    th = np.array([0.3, -0.2])
    cmp = scg.compare(model, th, n=100_000, seed=1, reference=exact(th),
                      estimators={"enumerate a": scg.Enumerate(),  # x keeps auto: pathwise
                                  "disarm a": {"a": scg.DisARM()}})
    for row in cmp.rows.values():
        assert np.all(np.abs(row.z) < 4.5), row
    assert cmp["enumerate a"].evals_per_draw == 2


def test_chunks_merge_exactly_in_chunk_order_whatever_order_they_ran():
    sizes = chunk_sizes(10_000, 3_000)
    assert sizes == [3000, 3000, 3000, 1000]
    seeds = spawn(5, len(sizes))
    tasks = [ChunkTask(worked, (THETA,), {}, s, q) for s, q in zip(sizes, seeds)]
    forward = [run_chunk(t) for t in tasks]
    backward = [run_chunk(t) for t in reversed(tasks)][::-1]
    a, b = merge(forward)[0], merge(backward)[0]
    assert a.count == 10_000
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.m2, b.m2)
    # the merged statistics are those of all the chunks' draws together
    draws = np.concatenate([scg.grad_samples(scg.expectation(
        worked, n=s, seed=np.random.default_rng(q)))(THETA).samples
        for s, q in zip(sizes, seeds)])
    assert np.allclose(a.mean, draws.mean(axis=0), rtol=1e-12)
    assert np.allclose(a.var, draws.var(axis=0, ddof=1), rtol=1e-10)


def test_same_seed_same_result_and_fresh_draws_per_call():
    kw = dict(estimators={"loo": scg.Score("loo")}, n=20_000, seed=3, chunk=6_000)
    one, two = scg.compare(worked, THETA, **kw), scg.compare(worked, THETA, **kw)
    np.testing.assert_array_equal(one["loo"].mean, two["loo"].mean)
    E = scg.expectation(coins, n=30_000, seed=4)
    first = scg.grad_samples(E, chunk=10_000)(np.zeros(3))
    second = scg.grad_samples(E, chunk=10_000)(np.zeros(3))
    assert first.samples is None and first.n == 30_000
    assert not np.array_equal(first.mean, second.mean)
    E2 = scg.expectation(coins, n=30_000, seed=4)
    np.testing.assert_array_equal(scg.grad_samples(E2, chunk=10_000)(np.zeros(3)).mean,
                                  first.mean)


def test_chunked_grad_samples_estimates_the_gradient():
    def exact(theta):
        import itertools
        w = np.array([1.0, -2.0, 0.5])
        p = 1 / (1 + np.exp(-theta))
        g = np.zeros(3)
        for b in itertools.product([0, 1], repeat=3):
            b = np.array(b, dtype=float)
            g += np.prod(np.where(b, p, 1 - p)) * (b @ w - 0.5) ** 2 * (b - p)
        return g

    th = np.array([0.2, -0.3, 0.4])
    gs = scg.grad_samples(scg.expectation(coins, n=200_000, seed=6), chunk=50_000)(th)
    assert np.all(np.abs((gs.mean - exact(th)) / gs.stderr) < 4.5)


def test_memory_is_that_of_one_chunk():
    E = scg.expectation(worked, n=4_000_000, seed=0)
    scg.grad_samples(scg.expectation(worked, n=100_000, seed=0), chunk=100_000)(THETA)  # warm
    tracemalloc.start()
    try:
        gs = scg.grad_samples(E, chunk=100_000)(THETA)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert gs.n == 4_000_000
    assert peak < 100 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MB"
    assert np.all(np.abs((gs.mean - EXACT) / gs.stderr) < 4.5)


def test_clear_errors():
    with pytest.raises(TypeError, match="non-empty dict"):
        scg.compare(worked, THETA, estimators="score", n=100)
    with pytest.raises(ValueError, match=r"estimators\['bad'\]"):
        scg.compare(worked, THETA, estimators={"bad": "reinforce"}, n=100)
    with pytest.raises(ValueError, match="chunk must be an int >= 2"):
        scg.compare(worked, THETA, estimators={"s": "score"}, n=100, chunk=0)
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        scg.compare(worked, THETA, estimators={"s": "score"}, n=1)
    with pytest.raises(ValueError, match="reference has 3 entries"):
        scg.compare(worked, THETA, estimators={"s": "score"}, n=100, reference=np.zeros(3))
    with pytest.raises(ValueError, match="names site\\(s\\) 'X'.*its sites: 'x'"), \
            pytest.warns(UserWarning, match="did not draw"):
        scg.compare(worked, THETA, estimators={"typo": {"X": "score"}}, n=100)
    with pytest.warns(UserWarning, match="names site\\(s\\) 'X', which the model did not"):
        scg.grad(scg.expectation(worked, n=10, estimators={"X": "score"}))(THETA)
    with pytest.raises(scg.EstimatorError) as info:
        scg.compare(worked, THETA, estimators={"coins": {"x": scg.DisARM()}}, n=100)
    assert "estimator 'coins' on 4 draws" in "".join(info.value.__notes__)
    with pytest.raises(ValueError, match="argnums=2 but the model gets 1"):
        scg.compare(worked, THETA, estimators={"s": "score"}, n=100, argnums=2)


def test_plot_has_labelled_axes(tmp_path):
    pytest.importorskip("matplotlib")
    cmp = scg.compare(worked, THETA, estimators={"pathwise": "pathwise", "score": "score"},
                      n=4_000, seed=0)
    path = cmp.plot(tmp_path / "study.png")
    assert path.exists() and path.stat().st_size > 1000


def test_a_stateful_baseline_without_history_is_said_and_a_warmed_one_is_carried():
    ma = scg.Score(scg.baselines.MovingAverage(0.9))
    with pytest.warns(UserWarning, match="had no history"):
        cmp = scg.compare(worked, THETA, n=40_000, chunk=5_000, seed=0, reference=EXACT,
                          estimators={"ma": ma})
    assert np.all(np.abs(cmp["ma"].z) < 4.5)
    E = scg.expectation(worked, n=2_000, seed=0, estimators=ma)
    for _ in range(30):  # the moving average learns E[f] = 5
        scg.grad(E)(THETA)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warmed = scg.grad_samples(E, chunk=10_000)(THETA)
    cold = scg.grad_samples(scg.expectation(worked, n=40_000, seed=1, estimators=ma),
                            chunk=10_000)
    with pytest.warns(UserWarning, match="had no history"):
        cold = cold(THETA)
    assert warmed.var[0] < 0.6 * cold.var[0]  # about 42 against 87: the baseline works


def test_antithetic_pairs_need_even_chunks_up_front_and_a_seed_sequence_is_reusable():
    with pytest.raises(ValueError, match="even number of draws"):
        scg.compare(worked, THETA, estimators={"pairs": scg.Pathwise(antithetic=True)},
                    n=9_001, chunk=1_000)
    seq = np.random.SeedSequence(11)
    kw = dict(estimators={"loo": scg.Score("loo")}, n=4_000, chunk=1_000, seed=seq)
    np.testing.assert_array_equal(scg.compare(worked, THETA, **kw)["loo"].mean,
                                  scg.compare(worked, THETA, **kw)["loo"].mean)


def test_exact_coordinates_references_by_name_and_json():
    import json

    def model(p):
        a = scg.sample("a", scg.Bernoulli(logits=p["logit"]))
        x = scg.sample("x", scg.Normal(p["mu"], 1.0))
        return (a - 0.3) ** 2 + x ** 2

    p = {"mu": 0.3, "logit": 0.4}
    s = 1 / (1 + np.exp(-0.4))
    reference = {"logit": s * (1 - s) * 0.4, "mu": 0.6}  # (keys in another order)
    cmp = scg.compare(model, p, n=2_000, seed=0, reference=reference,
                      estimators={"enumerate, pairs": {"a": scg.Enumerate(),
                                                      "x": scg.Pathwise(antithetic=True)}})
    row = cmp["enumerate, pairs"]
    assert row.z["mu"] == 0.0 and row.z["logit"] == 0.0  # exact: not sqrt(n) from rounding
    assert row.efficiency == np.inf and "exact" in cmp.table()
    json.dumps(cmp.to_dict(), allow_nan=False)
    two = scg.compare(worked, THETA, estimators={"one pair": scg.Pathwise(antithetic=True)},
                      n=2, chunk=2)
    assert np.isnan(two["one pair"].efficiency)
    json.dumps(two.to_dict(), allow_nan=False)


def test_allow_unused_and_a_generator_seed():
    def model(theta, unused):
        return scg.sample("x", scg.Normal(theta, 1.0)) ** 2

    with pytest.raises(scg.NoGradientPathError):
        scg.compare(model, 1.0, 2.0, estimators={"p": "pathwise"}, n=100, argnums=(0, 1))
    cmp = scg.compare(model, 1.0, 2.0, estimators={"p": "pathwise"}, n=100, argnums=(0, 1),
                      allow_unused=True, seed=np.random.default_rng(0))
    assert cmp["p"].mean[1] == 0.0
