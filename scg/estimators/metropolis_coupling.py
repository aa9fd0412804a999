"""k draws of a categorical law coupled by a Metropolis chain, and the law of a pair of them.

The chain: z_1 ~ p, then each z_{t+1} is one Metropolis move from z_t that proposes a value
b != z_t with probability p_b / (1 - p_{z_t}) and accepts it with probability
min(1, (1 - p_{z_t}) / (1 - p_b)) (Liu 1996's Metropolized independence move). Its
kernel,

    K(a, b) = p_b / (1 - min(p_a, p_b))      for b != a,

is reversible with stationary law p, so every z_t is a draw of p, and a pair of adjacent
draws meets two distinct values a, b with probability p_a p_b / (1 - min(p_a, p_b)), at
least that of independent draws. On a coin it is DisARM's antithetic pair.

The estimators built on it (coupled_categorical.py) are symmetric in the k draws, so they
take the same value for every relabeling of the draws: under a uniformly random one, every
pair of draws has the law of a random lag m = |i - j| of the chain, which is

    Q(a, b) = p_a sum_{m=1}^{k-1} w_m K^m(a, b),   w_m = 2 (k - m) / (k (k - 1)),

(w_m the share of the k (k - 1) ordered pairs at lag m). That is the pair law the
importance weights p_a p_b / Q(a, b) use. Q(a, b) >= w_1 p_a K(a, b) > 0 for every pair of
distinct values of positive probability, which unbiasedness needs.

Computation: with the values sorted by probability (ascending), K(a, b) = p_b s_min(a,b),
s = 1 / (1 - p), so a row vector times K is two cumulative sums: O(C) per step, O(k^2 C) for
the pair law of k draws of one element.
"""

import numpy as np


def chain_draws(p, u):
    """The indices (..., k) of k coupled draws of the categorical law p (..., C), which sums
    to 1 along its last axis, from k uniforms u (..., k): z_1 by the inverse CDF of p, each
    next draw by the inverse CDF of the chain's kernel row at the last one."""
    order, ps, s, stay = _sorted(p)
    shape = np.broadcast_shapes(ps.shape[:-1], u.shape[:-1])
    ps, s, stay = (np.broadcast_to(x, shape + x.shape[-1:]) for x in (ps, s, stay))
    rank = _inverse_cdf(ps, u[..., 0])
    ranks = [rank]
    for t in range(1, u.shape[-1]):
        rank = _inverse_cdf(_kernel_row(ps, s, stay, rank), u[..., t])
        ranks.append(rank)
    order = np.broadcast_to(order, shape + order.shape[-1:])
    return np.take_along_axis(order, np.stack(ranks, axis=-1), axis=-1)


def pair_weights(p, z):
    """(..., k, k): for draws i != j of different values, p(z_i) p(z_j) / Q(z_i, z_j), Q the
    pair law of the randomly relabeled chain (the module's docstring); 0 where z_i = z_j
    (those pairs' terms cancel in the estimators) and on the diagonal."""
    k = z.shape[-1]
    order, ps, s, stay = _sorted(p)
    shape = np.broadcast_shapes(ps.shape[:-1], z.shape[:-1])
    ps, s, stay, order = (np.broadcast_to(x, shape + x.shape[-1:])
                          for x in (ps, s, stay, order))
    rank_of = np.empty_like(order)
    np.put_along_axis(rank_of, order, np.arange(order.shape[-1]), axis=-1)
    rank = np.take_along_axis(rank_of, z, axis=-1)  # (..., k)
    # the rows e_{z_i} sum_m w_m K^m, all k at once: (..., k, C)
    size = ps.shape[-1]
    v = (rank[..., None] == np.arange(size)).astype(float)
    acc = np.zeros_like(v)
    ps_k, s_k, stay_k = (x[..., None, :] for x in (ps, s, stay))
    for m in range(1, k):
        v = _times_kernel(v, ps_k, s_k, stay_k)
        acc += (2.0 * (k - m) / (k * (k - 1))) * v
    to = np.take_along_axis(acc, np.broadcast_to(rank[..., None, :], acc.shape[:-1] + (k,)),
                            axis=-1)  # [i, j] = sum_m w_m K^m(z_i, z_j)
    p_to = np.take_along_axis(ps, rank, axis=-1)[..., None, :]  # p(z_j)
    differ = rank[..., :, None] != rank[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(differ, p_to / to, 0.0)  # p_i p_j / (p_i to_ij)


def _sorted(p):
    """(order, p sorted ascending, s = 1 / (1 - p) there, K's diagonal there)."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    one = ps >= 1.0  # (a value that holds all the probability: the chain stays there)
    s = 1.0 / np.where(one, 2.0, 1.0 - ps)  # (s there only meets empty sums)
    # K(a, a) = sum_{b below a} p_b (s_a - s_b) = s_a (p_a A_a - B_a) >= 0, A and B the
    # sums below a of p s and p^2 s: 0 at the least likely value, and no 1 - (a sum near 1)
    below = _exclusive_cumsum(ps * s)
    below_sq = _exclusive_cumsum(ps * ps * s)
    stay = np.where(one, 1.0, np.maximum(s * (ps * below - below_sq), 0.0))
    return order, ps, s, stay


def _kernel_row(ps, s, stay, rank):
    """K(a, .) in sorted order for the rank a of each element: p_b s_b below a, p_b s_a
    above it, K(a, a) at it."""
    ranks = np.arange(ps.shape[-1])
    a = rank[..., None]
    s_a = np.take_along_axis(s, a, axis=-1)
    row = ps * np.where(ranks < a, s, s_a)
    return np.where(ranks == a, np.take_along_axis(stay, a, axis=-1), row)


def _times_kernel(v, ps, s, stay):
    """v K for row vectors v (..., C) in sorted order: (v K)_b = p_b (sum_{a<b} v_a s_a +
    s_b sum_{a>b} v_a) + v_b K(b, b)."""
    below = _exclusive_cumsum(v * s)
    above = _exclusive_cumsum(v[..., ::-1])[..., ::-1]
    return ps * (below + s * above) + v * stay


def _inverse_cdf(weights, u):
    """The index where u (...) falls in the cumulative sums of weights (..., C), scaled to
    their total: never an index of weight 0."""
    cdf = np.cumsum(weights, axis=-1)
    x = u * cdf[..., -1]
    return np.minimum(np.sum(cdf <= x[..., None], axis=-1), weights.shape[-1] - 1)


def _exclusive_cumsum(x):
    """sum_{a < b} x_a along the last axis (no subtraction: exact zeros stay zeros)."""
    out = np.zeros_like(x)
    np.cumsum(x[..., :-1], axis=-1, out=out[..., 1:])
    return out
