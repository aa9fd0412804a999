"""Memory before allocating: a layout of draws x copies x values that cannot fit is refused
with a MemoryError that names the site and the copies and suggests a chunk; studies pick
chunks that fit by themselves."""

import numpy as np
import pytest

import scg
from scg.stochastic import memory

V = np.linspace(-1.0, 1.0, 5_000)


def wide_choice(theta):
    k = scg.sample("k", scg.Categorical(logits=theta), estimator=scg.Enumerate())
    return (scg.take(V, k, axis=0) - 0.3) ** 2


def test_an_enumeration_too_large_for_memory_is_scg_s_memory_error():
    # (n such that the draws' parameters alone fit on a machine with a few GiB free, and
    # the enumeration's 5,000 copies of them cannot fit anywhere)
    E = scg.expectation(wide_choice, n=10_000, seed=0)
    with pytest.raises(MemoryError) as info:
        scg.grad(E)(np.zeros(5_000))
    text = str(info.value)
    assert "site 'k'" in text and "x 5,000 evaluations each (5000 (k: 5000))" in text
    assert "scg.grad_samples(E, chunk=" in text and "n = " in text


def chain(T):
    def model(theta):
        prev, total = 0.0, 0.0
        for t in range(T):
            b = scg.sample(f"b{t}", scg.Bernoulli(logits=theta[t] + 0.5 * prev),
                           estimator=scg.DisARM())
            total, prev = total + b, b
        return (total - 4.0) ** 2
    return model


def test_the_estimate_counts_copies_and_parameters():
    trace = scg.trace(chain(5), np.zeros(5), n=10, seed=0)
    per_site = 8 * memory.ARRAYS_PER_SITE * trace.rows  # a coin: one value, one logit
    assert trace.copies.count == 6
    assert trace.bytes_estimate == 5 * per_site
    trace = scg.trace(wide_choice, np.zeros(5_000), n=2, seed=0)
    assert trace.bytes_estimate == 8 * memory.ARRAYS_PER_SITE * trace.rows * 5_000


@pytest.fixture
def little_memory(monkeypatch):
    """A machine with 400 MB available."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 400 * 2 ** 20)
    import scg.studies.chunks as chunks
    monkeypatch.setattr(chunks, "available_bytes", lambda: 400 * 2 ** 20)


def test_compare_picks_a_chunk_that_fits(little_memory):
    T = 20
    cmp = scg.compare(chain(T), np.zeros(T), estimators={"disarm": scg.DisARM()},
                      n=20_000, seed=0)
    measured = memory.bytes_per_draw(lambda k: scg.grad_samples(
        scg.expectation(chain(T), n=k, seed=0))(np.zeros(T)))
    assert cmp.chunk < 20_000
    assert cmp.chunk * measured <= 400 * 2 ** 20 / memory.MEASURED_SHARE * 1.5
    assert cmp["disarm"].evals_per_draw == T + 1
    assert np.all(np.isfinite(cmp["disarm"].mean))


def test_compare_keeps_the_default_chunk_when_it_fits():
    cmp = scg.compare(chain(3), np.zeros(3), estimators={"disarm": scg.DisARM()},
                      n=5_000, seed=0)
    assert cmp.chunk == 5_000


def test_chunked_grad_samples_picks_a_chunk_that_fits(little_memory, monkeypatch):
    import scg.studies.gradients as G
    seen = []
    real = G.chunk_sizes
    monkeypatch.setattr(G, "chunk_sizes", lambda n, c: seen.append(c) or real(n, c))
    T = 20
    E = scg.expectation(chain(T), n=20_000, seed=0)
    gs = scg.grad_samples(E, chunk="auto")(np.zeros(T))
    assert seen and seen[0] < 20_000
    assert gs.n == 20_000 and np.all(np.isfinite(gs.mean))


def test_the_default_chunk_is_even_when_any_estimator_draws_pairs(little_memory):
    # the measure-valued estimator lowers the chunk; the antithetic one needs it even
    v = np.linspace(-1.0, 1.0, 200)

    def model(theta):
        k = scg.sample("k", scg.Categorical(logits=theta[:200]))
        x = scg.sample("x", scg.Normal(theta[200], 1.0))
        return (scg.take(v, k, axis=0) - x) ** 2

    theta = np.zeros(201)
    for order in ([0, 1], [1, 0]):
        specs = [("mvd", {"k": scg.MeasureValued()}),
                 ("pairs", {"x": scg.Pathwise(antithetic=True)})]
        cmp = scg.compare(model, theta, estimators=dict(specs[i] for i in order),
                          n=2_000, seed=0)
        assert cmp.chunk < 2_000 and cmp.chunk % 2 == 0
        assert np.all(np.isfinite(cmp["pairs"].mean))


def test_the_suggested_chunk_is_one_a_study_accepts():
    error = memory.memory_error(10, 10 ** 12, 10 ** 9, "site 'k'")
    assert "chunk=2)" in str(error) and "n = 2 fits" in str(error)
