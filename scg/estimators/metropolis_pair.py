"""Two draws of a categorical law coupled by one Metropolis move, and their pair weight.

z ~ p; z~ is one Metropolis move from z that proposes a value b != z with probability
p_b / (1 - p_z) and accepts it with probability min(1, (1 - p_z) / (1 - p_b)) (Liu 1996's
Metropolized independence move), else stays at z. Its kernel,

    K(a, b) = p_b / (1 - min(p_a, p_b))      for b != a,

is reversible with stationary law p, so z~ is a draw of p too, and the pair takes two
distinct values a, b with probability P(a, b) = p_a p_b / (1 - min(p_a, p_b)): at least that
of independent draws, in closed form, and never 0 when p_a p_b > 0. The pair weight
p_a p_b / P(a, b) is 1 - min(p_a, p_b). On a coin the pair is DisARM's antithetic pair
(P(0, 1) = min(p, 1 - p)).

Computation: with the values sorted by probability (ascending), K(a, b) = p_b s_min(a,b),
s = 1 / (1 - p): a row of K is O(C).
"""

import numpy as np


def pair_draws(p, u):
    """The indices (..., 2) of the coupled pair of draws of the categorical law p (..., C),
    which sums to 1 along its last axis, from two uniforms u (..., 2): z by the inverse
    CDF of p, z~ by the inverse CDF of K's row at z."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    shape = np.broadcast_shapes(ps.shape[:-1], u.shape[:-1])
    order, ps = (np.broadcast_to(x, shape + x.shape[-1:]) for x in (order, ps))
    first = _inverse_cdf(ps, u[..., 0])
    second = _inverse_cdf(_kernel_row(ps, first), u[..., 1])
    return np.take_along_axis(order, np.stack([first, second], axis=-1), axis=-1)


def pair_weight(p_a, p_b):
    """p_a p_b / P(a, b) = 1 - min(p_a, p_b), for a pair of distinct values."""
    return 1.0 - np.minimum(p_a, p_b)


def _kernel_row(ps, rank):
    """K(a, .) in ascending order for the rank a of each element: p_b s_b below a, p_b s_a
    above it, and at it what stays, K(a, a) = sum_{b below a} p_b (s_a - s_b) >= 0."""
    one = ps >= 1.0  # (a value with all the probability: the move stays there)
    s = 1.0 / np.where(one, 2.0, 1.0 - ps)  # (s there only meets values of probability 0)
    ranks = np.arange(ps.shape[-1])
    a = rank[..., None]
    s_a = np.take_along_axis(s, a, axis=-1)
    below = ranks < a
    stay = np.sum(np.where(below, ps * (s_a - s), 0.0), axis=-1, keepdims=True)
    stay = np.where(np.take_along_axis(one, a, axis=-1), 1.0, stay)
    row = ps * np.where(below, s, s_a)
    return np.where(ranks == a, stay, row)


def _inverse_cdf(weights, u):
    """The index where u (...) falls in the cumulative sums of weights (..., C), scaled to
    their total: never an index of weight 0."""
    cdf = np.cumsum(weights, axis=-1)
    x = u * cdf[..., -1]
    return np.minimum(np.sum(cdf <= x[..., None], axis=-1), weights.shape[-1] - 1)
