"""k >= 3 draws of a categorical law coupled by sampling without replacement within the
levels of the law, and the law of a pair of them.

With the values sorted by probability, p_(1) >= ... >= p_(C), the law is a mixture of
uniform laws on its top values (its layer-cake decomposition):

    p = sum_l w_l Uniform(top l values),   w_l = l (p_(l) - p_(l+1)),  p_(C+1) = 0.

Each draw picks a level l with probability w_l, independently of the others, and the draws
that pick the same level take distinct values of it, uniformly: without replacement, and
again from all l once all are taken (so among m draws of a level, each value is taken
floor(m / l) or ceil(m / l) times). Every draw is a draw of p. For a uniform p it is
sampling without replacement.

The estimators are symmetric in the draws (coupled_categorical.py), so they use the pair
law of two draws under a uniformly random relabeling: for distinct values a, b,

    Q(a, b) = p_a p_b + sum over the levels l holding a and b of
              w_l^2 ((1 - s_l) / (l (l - 1)) - 1 / l^2),

s_l the chance that two draws of level l take the same value, averaged over the number m
of draws at the level (m - 2 ~ Binomial(k - 2, w_l)): [r (q + 1) q + (l - r) q (q - 1)] /
(m (m - 1)) for m = q l + r. A balanced allocation collides at most as often as
independent draws would (s_l <= 1 / l), so every term is >= 0: no pair of distinct values
is rarer than under independent draws, each weight p_a p_b / Q(a, b) is at most 1, and
Q(a, b) > 0 whenever p_a p_b > 0 (which unbiasedness needs). A pair's levels are those of
size at least the larger of its ranks, so Q needs one suffix sum over the levels.
"""

import math

import numpy as np


def level_draws(p, u_level, u_value):
    """The indices (..., k) of k coupled draws of the categorical law p (..., C), which
    sums to 1 along its last axis, from 2k uniforms: u_level (..., k) picks each draw's
    level, u_value (..., k) its value among those of the level not yet taken."""
    order, _, w = _levels(p)
    shape = np.broadcast_shapes(order.shape[:-1], u_level.shape[:-1])
    order, w = (np.broadcast_to(x, shape + x.shape[-1:]) for x in (order, w))
    u_level, u_value = (np.broadcast_to(u, shape + u.shape[-1:]) for u in (u_level, u_value))
    size, k = order.shape[-1], u_level.shape[-1]
    cdf = np.cumsum(w, axis=-1)
    # the level's size l for each draw (never a level of weight 0)
    level = 1 + np.minimum(np.sum(cdf[..., None, :] <= (u_level * cdf[..., -1:])[..., None],
                                  axis=-1), size - 1)
    ranks = np.zeros(shape + (k,), dtype=int)
    for i in range(k):
        same = level[..., :i] == level[..., i:i + 1]  # earlier draws of the same level
        round_, taken_now = np.divmod(np.sum(same, axis=-1), level[..., i])
        this_round = same & ((np.cumsum(same, axis=-1) - 1) // level[..., i:i + 1]
                             == round_[..., None])
        # the pick-th value of the level that this round has not taken: step over the
        # taken ranks in increasing order (at most k - 1 of them, whatever C is)
        rank = np.floor(u_value[..., i] * (level[..., i] - taken_now)).astype(int)
        taken = np.sort(np.where(this_round, ranks[..., :i], size), axis=-1)
        for taken_rank in np.moveaxis(taken, -1, 0):
            rank = rank + (taken_rank <= rank)
        ranks[..., i] = rank
    return np.take_along_axis(order, ranks, axis=-1)


def level_pair_weights(p, z):
    """(..., k, k): for draws i != j of different values, p(z_i) p(z_j) / Q(z_i, z_j), Q
    the pair law of the module's docstring; 0 where z_i = z_j (those pairs' terms cancel
    in the estimators) and on the diagonal."""
    k = z.shape[-1]
    order, ps, w = _levels(p)
    size = order.shape[-1]
    shape = np.broadcast_shapes(order.shape[:-1], z.shape[:-1])
    order, ps, w = (np.broadcast_to(x, shape + x.shape[-1:]) for x in (order, ps, w))
    sizes = np.arange(1, size + 1)
    extra = np.arange(k - 1)  # the other draws at the level: Binomial(k - 2, w_l)
    chance = np.array([math.comb(k - 2, j) for j in extra], dtype=float)
    pmf = chance * w[..., None] ** extra * (1.0 - w[..., None]) ** (k - 2 - extra)  # 0^0 = 1
    q, r = np.divmod(2 + extra, sizes[:, None])
    collide = (r * (q + 1) * q + (sizes[:, None] - r) * q * (q - 1)) / \
        ((2 + extra) * (1 + extra))  # (size, k - 1): s_l given m
    s = np.sum(pmf * collide, axis=-1)
    excess = np.where(sizes > 1, w * w * ((1.0 - s) / np.maximum(sizes * (sizes - 1), 1)
                                          - 1.0 / sizes ** 2), 0.0)
    above = np.cumsum(np.maximum(excess, 0.0)[..., ::-1], axis=-1)[..., ::-1]
    rank_of = np.empty_like(order)
    np.put_along_axis(rank_of, order, np.broadcast_to(np.arange(size), order.shape), axis=-1)
    rank = np.take_along_axis(rank_of, z, axis=-1)  # (..., k)
    p_z = np.take_along_axis(ps, rank, axis=-1)
    both = p_z[..., :, None] * p_z[..., None, :]
    larger = np.maximum(rank[..., :, None], rank[..., None, :])
    extra_pairs = np.take_along_axis(above, larger.reshape(shape + (k * k,)), axis=-1)
    differ = rank[..., :, None] != rank[..., None, :]
    return np.where(differ, both / (both + extra_pairs.reshape(shape + (k, k))), 0.0)


def _levels(p):
    """(order: the values by decreasing probability, p in that order, the levels' weights
    w_l = l (p_(l) - p_(l+1)) for the sizes l = 1..C)."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(-p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    below = np.concatenate([ps[..., 1:], np.zeros(ps.shape[:-1] + (1,))], axis=-1)
    return order, ps, np.arange(1, p.shape[-1] + 1) * (ps - below)
