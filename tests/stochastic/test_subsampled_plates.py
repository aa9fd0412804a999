"""scg.plate(name, size, subsample_size=m): minibatches with unbiased scaling, as in Pyro."""

import numpy as np
import pytest

import scg

RNG = np.random.default_rng(0)
X = RNG.normal(size=200)
Y = 2.0 * X + RNG.normal(size=200)


def regression(w):
    with scg.plate("data", 200, subsample_size=20) as idx:
        scg.sample("y", scg.Normal(w * X[idx], 1.0), obs=Y[idx])


def test_the_minibatch_gradient_is_unbiased_for_the_full_data():
    E = scg.expectation(regression, n=1, seed=0)
    grads = np.array([scg.grad(E)(np.array(1.0)) for _ in range(3000)])
    full = -np.sum((Y - X) * X)  # d/dw of sum_i (y_i - w x_i)^2 / 2 at w = 1
    assert abs(grads.mean() - full) < 5 * grads.std(ddof=1) / np.sqrt(len(grads))


def test_indices_are_distinct_drawn_from_the_expectation_s_generator_and_change():
    seen = []

    def model(w):
        with scg.plate("data", 50, subsample_size=10) as idx:
            seen.append(np.array(idx))
            scg.sample("y", scg.Normal(w * X[idx], 1.0), obs=Y[idx])

    E = scg.expectation(model, n=3, seed=4)
    E(1.0)
    E(1.0)
    first, second = seen
    assert len(set(first)) == 10 and first.min() >= 0 and first.max() < 50
    assert not np.array_equal(first, second)
    seen.clear()
    scg.expectation(model, n=3, seed=4)(1.0)
    np.testing.assert_array_equal(seen[0], first)  # (the same seed, the same minibatch)

    def full(w):
        with scg.plate("data", 50) as idx:
            seen.append(np.array(idx))
    seen.clear()
    scg.expectation(full, n=2, seed=0)(1.0)
    np.testing.assert_array_equal(seen[0], np.arange(50))


def test_a_latent_model_in_a_minibatch_is_unbiased_with_score_function_sites():
    data = RNG.normal(size=40) + 1.0

    def model(mu, m):
        with scg.plate("data", 40, subsample_size=m) as idx:
            z = scg.sample("z", scg.Bernoulli(logits=np.broadcast_to(mu[0], (m,))))
            scg.sample("x", scg.Normal(z * mu[1], 1.0), obs=data[idx])

    mu = np.array([0.3, 0.8])
    full = scg.grad_samples(scg.expectation(model, n=20_000, seed=1))(mu, 40)
    runs = np.array([scg.grad(scg.expectation(model, n=200, seed=s))(mu, 8)
                     for s in range(600)])
    stderr = np.sqrt(runs.var(axis=0, ddof=1) / len(runs) + full.stderr ** 2)
    assert np.all(np.abs(runs.mean(axis=0) - full.mean) < 5 * stderr)


def test_errors_and_jit():
    def bad(w):
        with scg.plate("data", 10, subsample_size=11):
            pass
    with pytest.raises(ValueError, match="subsample_size must be an int from 1 to"):
        scg.expectation(bad, n=2, seed=0)(1.0)
    # under scg.jit: X[idx] reads the indices as plain numbers (a new minibatch each
    # call: recorded again, never replayed stale); scg.take(X, idx) keeps them recorded
    def replayable(w):
        with scg.plate("data", 200, subsample_size=20) as idx:
            scg.sample("y", scg.Normal(w * scg.take(X, idx), 1.0), obs=scg.take(Y, idx))

    for model, replays in ((regression, False), (replayable, True)):
        E, Ej = (scg.expectation(model, n=2, seed=5) for _ in range(2))
        step = scg.jit(scg.grad(Ej))
        for _ in range(6):
            np.testing.assert_allclose(step(np.array(1.5)), scg.grad(E)(np.array(1.5)),
                                       rtol=1e-12)
        assert (step.stats["replays"] >= 2) == replays, step.explain()
