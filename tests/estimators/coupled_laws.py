"""Exact joint laws of the couplings of categorical draws that ARMS and DisARM use on
categorical sites, written from their definitions (not from scg's code): every k-tuple of
values with its probability, and the pair law the estimators weigh with."""

import itertools

import numpy as np


def metropolis_kernel(p):
    """K(a, b) = p_b / (1 - min(p_a, p_b)) off the diagonal, the rest on it (dense)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        K = p[None, :] / (1.0 - np.minimum(p[:, None], p[None, :]))
    K = np.where(np.eye(len(p), dtype=bool), 0.0, np.nan_to_num(K))
    return K + np.diag(1.0 - K.sum(axis=1))


def metropolis_pair_law(p):
    """The pairs (z, z~), z ~ p and z~ one Metropolis move from z, and their probabilities."""
    pairs = np.array(list(itertools.product(range(len(p)), repeat=2)))
    return pairs, (p[:, None] * metropolis_kernel(p))[pairs[:, 0], pairs[:, 1]]


def level_law(p, k):
    """The k-tuples of the level coupling and their probabilities: each draw picks the
    level of the top l values (by decreasing probability) with probability
    w_l = l (p_(l) - p_(l+1)), independently; the draws of a level, in their order, take
    its values without replacement in rounds of l (each round a uniformly random ordering
    of them)."""
    size = len(p)
    order = np.argsort(-p, kind="stable")
    ps = p[order]
    w = np.arange(1, size + 1) * (ps - np.append(ps[1:], 0.0))
    tuples = np.array(list(itertools.product(range(size), repeat=k)))
    probs = np.zeros(len(tuples))
    for levels in itertools.product(range(1, size + 1), repeat=k):
        weight = np.prod(w[np.array(levels) - 1])
        if weight == 0.0:
            continue
        for t, values in enumerate(tuples):
            probs[t] += weight * _given_levels(order, levels, values)
    return tuples, probs


def _given_levels(order, levels, values):
    """P(the draws take `values` | their levels)."""
    prob = 1.0
    for level in set(levels):
        draws = [values[i] for i in range(len(levels)) if levels[i] == level]
        allowed = set(order[:level].tolist())
        for start in range(0, len(draws), level):
            round_ = draws[start:start + level]
            if len(set(round_)) < len(round_) or not set(round_) <= allowed:
                return 0.0
            for j in range(len(round_)):
                prob /= level - j
    return prob


def coupled_law(p, k):
    """The law ARMS(k) and DisARM (k = 2) draw a categorical element's k values from."""
    return metropolis_pair_law(p) if k == 2 else level_law(p, k)


def pair_law(tuples, probs, size):
    """Q(a, b): the law of a pair of the draws under a uniformly random relabeling (the
    average over the ordered pairs (i, j), i != j)."""
    k = tuples.shape[1]
    Q = np.zeros((size, size))
    for i, j in itertools.permutations(range(k), 2):
        np.add.at(Q, (tuples[:, i], tuples[:, j]), probs / (k * (k - 1)))
    return Q


def pair_ratios(p, Q):
    """p_a p_b / Q(a, b) for a != b (0 on the diagonal and where p_a p_b = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(np.outer(p, p) > 0, np.outer(p, p) / Q, 0.0)
    return np.where(np.eye(len(p), dtype=bool), 0.0, r)
