"""The Metropolis coupling of k categorical draws (scg/estimators/metropolis_coupling.py):
the pair of adjacent draws has the law p_a K(a, b), K the Metropolized independence
kernel, exactly (a grid of uniforms); the pair weights equal p_a p_b / Q(a, b) computed
with dense matrix powers; and every pair of distinct values is at least as likely as
under independent draws (weights at most 1) on random laws."""

import itertools

import numpy as np
import pytest

from scg.estimators.metropolis_coupling import chain_draws, pair_weights


def kernel(p):
    """K(a, b) = p_b / (1 - min(p_a, p_b)) off the diagonal, the rest on it (dense)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        K = p[None, :] / (1.0 - np.minimum(p[:, None], p[None, :]))
    K = np.where(np.eye(len(p), dtype=bool), 0.0, np.nan_to_num(K))
    return K + np.diag(1.0 - K.sum(axis=1))


def pair_law(p, k):
    """Q(a, b) = p_a sum_{m=1}^{k-1} w_m K^m(a, b), w_m = 2 (k - m) / (k (k - 1))."""
    K = kernel(p)
    power, total = np.eye(len(p)), np.zeros((len(p), len(p)))
    for m in range(1, k):
        power = power @ K
        total += 2.0 * (k - m) / (k * (k - 1)) * power
    return p[:, None] * total


LAWS = [np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.25, 0.25, 0.25, 0.25]),
        np.array([0.49, 0.49, 0.02]), np.array([0.0, 0.7, 0.3, 0.0]),
        np.array([0.9, 0.05, 0.05]), np.array([0.5, 0.5])]


@pytest.mark.parametrize("p", LAWS, ids=lambda p: str(np.round(p, 2)))
def test_the_first_two_draws_have_the_law_p_a_K_a_b(p):
    """On an N x N grid of uniforms the pair (z_1, z_2) is a deterministic function, so its
    frequencies are p_a K(a, b) to within the grid's resolution (2 cells per boundary)."""
    n = 1000
    grid = (np.arange(n) + 0.5) / n
    u = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2)
    z = chain_draws(p, u)
    freq = np.zeros((len(p), len(p)))
    np.add.at(freq, (z[:, 0], z[:, 1]), 1.0 / len(u))
    want = p[:, None] * kernel(p)
    assert np.all(np.abs(freq - want) <= 2.0 * len(p) / n), (freq, want)
    assert np.all(freq[want == 0.0] == 0.0)  # (never a value of probability 0)


def test_every_draw_is_a_draw_of_p_and_depends_on_the_last_only():
    """K keeps p (detailed balance p_a K(a, b) = p_b K(b, a)); z_3 given (z_1, z_2) is a
    function of z_2 and u_3 (the same u_3 after different z_1 with equal z_2)."""
    for p in LAWS:
        K = kernel(p)
        np.testing.assert_allclose(p @ K, p, atol=1e-15)
        np.testing.assert_allclose(p[:, None] * K, (p[:, None] * K).T, atol=1e-15)
    p = LAWS[0]
    rng = np.random.default_rng(0)
    u = rng.random((20_000, 3))
    z = chain_draws(p, u)
    u2 = u.copy()
    u2[:, 0] = rng.random(len(u))
    z2 = chain_draws(p, u2)
    same = z[:, 1] == z2[:, 1]
    np.testing.assert_array_equal(z[same, 2], z2[same, 2])


@pytest.mark.parametrize("k", [2, 3, 5, 9])
def test_pair_weights_are_p_a_p_b_over_the_pair_law(k):
    rng = np.random.default_rng(k)
    for p in LAWS + [rng.dirichlet(np.full(6, a)) for a in (0.2, 1.0, 5.0)]:
        Q = pair_law(p, k)
        values = np.flatnonzero(p > 0)
        z = rng.choice(values, size=(50, k))
        got = pair_weights(p, z)
        differ = z[:, :, None] != z[:, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.where(differ, p[z][:, :, None] * p[z][:, None, :]
                            / Q[z[:, :, None], z[:, None, :]], 0.0)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=0.0)
        assert np.all(Q[np.ix_(values, values)][~np.eye(len(values), dtype=bool)] > 0)


def test_a_batch_of_laws_per_element_and_per_row():
    """Laws of shape (rows, elements, values): each element's draws and weights are those
    of its law alone, with its own uniforms."""
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=(7, 3))
    u = rng.random((7, 3, 4))
    z = chain_draws(p, u)
    got = pair_weights(p, z)
    for r, e in itertools.product(range(7), range(3)):
        np.testing.assert_array_equal(z[r, e], chain_draws(p[r, e], u[r, e]))
        np.testing.assert_allclose(got[r, e], pair_weights(p[r, e], z[r, e]), rtol=1e-14)
    shared = chain_draws(p[0], u)  # (one law per element, broadcast over the rows)
    np.testing.assert_array_equal(shared[3], chain_draws(p[0], u[3]))


def test_a_value_with_all_the_probability_and_values_of_none():
    p = np.array([0.0, 1.0, 0.0])
    z = chain_draws(p, np.random.default_rng(2).random((5, 4)))
    assert np.all(z == 1)
    assert np.all(pair_weights(p, z) == 0.0)


def test_no_pair_of_distinct_values_is_rarer_than_under_independent_draws():
    """Q(a, b) >= p_a p_b for a != b on 2,000 random laws (2 to 12 values, concentrations
    0.05 to 5, k from 2 to 20): each pair's weight p_a p_b / Q(a, b) is at most 1."""
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(2000):
        size = int(rng.integers(2, 13))
        p = rng.dirichlet(np.full(size, rng.choice([0.05, 0.3, 1.0, 5.0])))
        p = np.maximum(p, 1e-9)
        p /= p.sum()
        k = int(rng.integers(2, 21))
        Q = pair_law(p, k)
        off = ~np.eye(size, dtype=bool)
        worst = max(worst, np.max((p[:, None] * p[None, :])[off] / Q[off]))
    assert worst <= 1.0 + 1e-9, worst
