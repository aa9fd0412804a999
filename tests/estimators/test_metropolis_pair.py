"""The Metropolis pair of categorical draws (scg/estimators/metropolis_pair.py): its law is
p_a K(a, b) exactly (a grid of uniforms), each half is a draw of p, the pair weight is
p_a p_b / P(a, b) and at most 1, and degenerate laws (values of probability 0 or 1)."""

import itertools

import numpy as np
import pytest

from scg.estimators.metropolis_pair import pair_draws, pair_weight

from .coupled_laws import metropolis_kernel

LAWS = [np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.25, 0.25, 0.25, 0.25]),
        np.array([0.49, 0.49, 0.02]), np.array([0.0, 0.7, 0.3, 0.0]),
        np.array([0.9, 0.05, 0.05]), np.array([0.5, 0.5]), np.array([0.3, 0.7])]


@pytest.mark.parametrize("p", LAWS, ids=lambda p: str(np.round(p, 2)))
def test_the_pair_has_the_law_p_a_K_a_b(p):
    """On an N x N grid of uniforms the pair is a deterministic function, so its
    frequencies are p_a K(a, b) to within the grid's resolution; a value of probability 0
    is never drawn."""
    n = 1000
    grid = (np.arange(n) + 0.5) / n
    u = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2)
    z = pair_draws(p, u)
    freq = np.zeros((len(p), len(p)))
    np.add.at(freq, (z[:, 0], z[:, 1]), 1.0 / len(u))
    want = p[:, None] * metropolis_kernel(p)
    assert np.all(np.abs(freq - want) <= 2.0 * len(p) / n), (freq, want)
    assert np.all(freq[want == 0.0] == 0.0)


def test_both_halves_are_draws_of_p_and_the_weight_is_at_most_1():
    """K keeps p (detailed balance); on a coin the pair is DisARM's, P(0, 1) = min(p, 1 -
    p); the weight 1 - min(p_a, p_b) is p_a p_b / P(a, b), at most 1."""
    rng = np.random.default_rng(0)
    for p in LAWS + [rng.dirichlet(np.full(8, a)) for a in (0.1, 1.0, 10.0)]:
        pair = p[:, None] * metropolis_kernel(p)
        np.testing.assert_allclose(pair.sum(axis=0), p, atol=1e-15)
        np.testing.assert_allclose(pair, pair.T, atol=1e-15)
        for a, b in itertools.permutations(np.flatnonzero(p > 0), 2):
            assert pair_weight(p[a], p[b]) == pytest.approx(p[a] * p[b] / pair[a, b],
                                                            rel=1e-12)
            assert pair_weight(p[a], p[b]) <= 1.0
    coin = np.array([0.3, 0.7])
    assert (coin[:, None] * metropolis_kernel(coin))[0, 1] == pytest.approx(0.3)


def test_a_batch_of_laws_per_element_and_per_row():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(5), size=(7, 3))  # (rows, elements, values)
    u = rng.random((7, 3, 2))
    z = pair_draws(p, u)
    for r, e in itertools.product(range(7), range(3)):
        np.testing.assert_array_equal(z[r, e], pair_draws(p[r, e], u[r, e]))
    np.testing.assert_array_equal(pair_draws(p[0], u)[4], pair_draws(p[0], u[4]))


def test_a_value_with_all_the_probability():
    z = pair_draws(np.array([0.0, 1.0, 0.0]), np.random.default_rng(2).random((5, 2)))
    assert np.all(z == 1)
