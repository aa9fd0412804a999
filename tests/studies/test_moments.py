"""The exact merge of chunk statistics (Chan, Golub and LeVeque)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scg.studies import Moments
from scg.studies.moments import merge_all


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.integers(0, 2 ** 31))
def test_merging_chunks_equals_the_statistics_of_all_draws(sizes, seed):
    x = np.random.default_rng(seed).normal(3.0, 2.0, (sum(sizes), 3)) * [1.0, 1e3, 1e-3]
    parts, k = [], 0
    for s in sizes:
        parts.append(Moments.of(x[k:k + s]))
        k += s
    m = merge_all(parts)
    assert m.count == x.shape[0]
    assert np.allclose(m.mean, x.mean(axis=0), rtol=1e-12, atol=0)
    if x.shape[0] > 1:
        assert np.allclose(m.var, x.var(axis=0, ddof=1), rtol=1e-9, atol=0)
        assert np.allclose(m.stderr, np.sqrt(x.var(axis=0, ddof=1) / x.shape[0]), rtol=1e-9)


def test_columns_side_by_side_and_small_counts():
    a, b = np.arange(6.0).reshape(3, 2), np.arange(3.0)[:, None] ** 2
    m = Moments.of_columns([a, b])
    assert np.allclose(m.mean, [2.0, 3.0, 5 / 3])
    assert np.isnan(Moments.of(np.ones((1, 2))).var).all()
    assert merge_all([]).count == 0


def test_the_merge_is_stable_far_from_zero():
    # a naive sum of squares would lose every digit of the variance here
    x = 1e9 + np.random.default_rng(0).normal(0.0, 1.0, (100_000, 1))
    m = merge_all(Moments.of(c) for c in np.array_split(x, 100))
    assert np.allclose(m.var, x.var(axis=0, ddof=1), rtol=1e-6)
