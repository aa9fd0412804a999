"""The level coupling of k >= 3 categorical draws (scg/estimators/level_coupling.py): its
pair weights are p_a p_b / Q(a, b) for the pair law of the k-tuples enumerated from the
coupling's definition; the sampler draws those k-tuples (within standard errors); every
draw is a draw of p; no pair of distinct values is rarer than under independent draws
(weights at most 1) on random laws; a uniform law is sampled without replacement."""

import itertools

import numpy as np
import pytest

from scg.estimators.level_coupling import level_draws, level_pair_weights

from .coupled_laws import level_law, pair_law, pair_ratios

LAWS = [np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.25, 0.25, 0.25, 0.25]),
        np.array([0.49, 0.49, 0.02]), np.array([0.0, 0.7, 0.3, 0.0]),
        np.array([0.4, 0.4, 0.1, 0.1]), np.array([0.5, 0.5])]


@pytest.mark.parametrize("p, k", [(p, k) for p in LAWS for k in (3, 4, 5)
                                  if len(p) ** (2 * k) <= 300_000],
                         ids=lambda x: str(np.round(x, 2)) if np.ndim(x) else str(x))
def test_pair_weights_are_those_of_the_enumerated_law(p, k):
    tuples, probs = level_law(p, k)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    for i in range(k):  # (every draw a draw of p)
        np.testing.assert_allclose(np.bincount(tuples[:, i], probs, len(p)), p, atol=1e-14)
    want = pair_ratios(p, pair_law(tuples, probs, len(p)))
    pairs = np.array(list(itertools.product(np.flatnonzero(p > 0), repeat=2)))
    z = np.concatenate([pairs, np.repeat(pairs[:, :1], k - 2, axis=1)], axis=1)
    got = level_pair_weights(p, z)[:, 0, 1]
    np.testing.assert_allclose(got, want[pairs[:, 0], pairs[:, 1]], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("p", LAWS[:5], ids=lambda p: str(np.round(p, 2)))
def test_the_sampler_draws_the_enumerated_law(p, k):
    """The frequency of each k-tuple in 200,000 draws within 5 standard errors of its
    probability (and never a tuple of probability 0)."""
    tuples, probs = level_law(p, k)
    n = 200_000
    rng = np.random.default_rng(k)
    z = level_draws(p, rng.random((n, k)), rng.random((n, k)))
    code = z @ (len(p) ** np.arange(k)[::-1])
    freq = np.bincount(code, minlength=len(p) ** k) / n
    want = probs[np.argsort(tuples @ (len(p) ** np.arange(k)[::-1]))]
    stderr = np.sqrt(want * (1 - want) / n)
    assert np.all(np.abs(freq - want) <= 5 * stderr + 1e-12), np.max(np.abs(freq - want))
    assert np.all(freq[want == 0.0] == 0.0)


def test_a_uniform_law_is_sampled_without_replacement():
    p = np.full(6, 1 / 6)
    z = level_draws(p, *np.random.default_rng(3).random((2, 1000, 4)))
    assert all(len(set(row)) == 4 for row in z.tolist())
    z = level_draws(p, *np.random.default_rng(4).random((2, 1000, 9)))  # (a second round)
    assert all(sorted(np.bincount(row, minlength=6)) == [1, 1, 1, 2, 2, 2]
               for row in z)


def test_a_batch_of_laws_per_element_and_per_row():
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(5), size=(7, 3))  # (rows, elements, values)
    u, v = rng.random((2, 7, 3, 4))
    z = level_draws(p, u, v)
    got = level_pair_weights(p, z)
    for r, e in itertools.product(range(7), range(3)):
        np.testing.assert_array_equal(z[r, e], level_draws(p[r, e], u[r, e], v[r, e]))
        np.testing.assert_allclose(got[r, e], level_pair_weights(p[r, e], z[r, e]),
                                   rtol=1e-14)
    np.testing.assert_array_equal(level_draws(p[0], u, v)[4], level_draws(p[0], u[4], v[4]))


def test_no_pair_of_distinct_values_is_rarer_than_under_independent_draws():
    """On 2,000 random laws (2 to 12 values, some of probability 0, concentrations 0.05 to
    5, k from 3 to 64): every weight p_a p_b / Q(a, b) of a pair of distinct values is at
    most 1, and above 0."""
    rng = np.random.default_rng(6)
    for _ in range(2000):
        size = int(rng.integers(2, 13))
        p = rng.dirichlet(np.full(size, rng.choice([0.05, 0.3, 1.0, 5.0])))
        k = int(rng.integers(3, 65))
        pairs = np.array([(a, b) for a, b in itertools.permutations(range(size), 2)
                          if p[a] > 0 and p[b] > 0])
        if not len(pairs):
            continue
        z = np.concatenate([pairs, np.repeat(pairs[:, :1], k - 2, axis=1)], axis=1)
        r = level_pair_weights(p, z)[:, 0, 1]
        assert np.all((r > 0) & (r <= 1.0)), (p, k, r.max())


def test_a_value_with_all_the_probability():
    p = np.array([0.0, 1.0, 0.0])
    z = level_draws(p, *np.random.default_rng(7).random((2, 5, 4)))
    assert np.all(z == 1)
    assert np.all(level_pair_weights(p, z) == 0.0)
