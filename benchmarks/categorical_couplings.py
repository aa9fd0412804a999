"""Which coupling of k categorical draws puts the pair-weighted leave-one-out estimator
(CARMS's) below leave-one-out REINFORCE with k independent draws, over random laws.

    PYTHONPATH=. python benchmarks/categorical_couplings.py [--laws 40] [--draws 100000]

One categorical element of C values with probabilities p and a cost f(z); the estimate of
d E[f] / d logits from k coupled draws z_1..z_k is

    g = 1 / (k (k - 1)) sum_{i != j} p(z_i) p(z_j) / Q(z_i, z_j) (f(z_i) - f(z_j)) (e_{z_i} - p),

Q the law of a pair of the draws (averaged over the pairs (i, j)); with independent draws
(Q = p p^T) it is leave-one-out REINFORCE with n = k. It is unbiased when Q(a, b) > 0 for
every pair of distinct values. The couplings:

  scg               what scg.ARMS(k) and scg.DisARM() use: one Metropolis move for k = 2
                    (scg/estimators/metropolis_pair.py), sampling without replacement
                    within the levels of the law for k >= 3 (level_coupling.py);
  metropolis-chain  for k >= 3, the alternative scg does not use: a chain of k - 1
                    Metropolis moves, Q its pair law averaged over the lags (dense powers
                    of the kernel);
  carms-copula      the CARMS paper's (Dimitriev and Zhou 2021, its code's default): the k
                    uniforms of a Dirichlet copula, u_i = (1 - D_i)^(k-1), mapped by the
                    inverse CDF of p over an order of the values drawn uniformly among the
                    C (C - 1) / 2 orders that put a pair of values first and last (k = 2:
                    u and 1 - u); Q from the copula's bivariate CDF
                    (x^(1/(k-1)) + y^(1/(k-1)) - 1)_+^(k-1), averaged over the orders;
  stick-breaking    Dong, Mnih and Tucker's (2021) importance-weighted pair, k = 2: the
                    antithetic coins 1[u_j < s_j], 1[1 - u_j < s_j] of each stick s_j =
                    p_j / (p_j + ... + p_C) in the values' order.

Leave-one-out's variance is exact (a U-statistic's, over the pairs of values), each
coupling's is measured over `draws` draws (standard errors below 1 % of it); each mean is
exact, from the pair law (the estimate is linear in the pairs' terms). Each row gives,
over the laws drawn (C from 3 to 10, Dirichlet concentrations 0.3, 1 and 5, f standard
normal), the median and the largest ratio of the variance (summed over the logits) to
leave-one-out's, the share of laws where it is above leave-one-out's by more than 3
standard errors, and the largest bias relative to the gradient's norm.
"""

import argparse
import itertools

import numpy as np

from scg.estimators.level_coupling import level_draws, level_pair_weights
from scg.estimators.metropolis_pair import pair_draws, pair_weight


def kernel(p):
    """The Metropolis kernel K(a, b) = p_b / (1 - min(p_a, p_b)), b != a (dense)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        K = p[None, :] / (1.0 - np.minimum(p[:, None], p[None, :]))
    K = np.where(np.eye(len(p), dtype=bool), 0.0, np.nan_to_num(K))
    return K + np.diag(1.0 - K.sum(axis=1))


def inverse_cdf(weights, u):
    cdf = np.cumsum(weights, axis=-1)
    return np.minimum(np.sum(cdf <= (u * cdf[..., -1])[..., None], axis=-1),
                      weights.shape[-1] - 1)  # (never a value of weight 0)


# ---------------------------------------------------------------- the couplings
# Each returns the draws (n, k) and the weight R(a, b) = p_a p_b / Q(a, b) of each pair of
# distinct values (C, C), 0 where the coupling never draws the pair (Q = 0).
def scg_coupling(p, k, n, rng):
    size = len(p)
    if k == 2:
        z = pair_draws(p, rng.random((n, 2)))
        R = pair_weight(p[:, None], p[None, :])
    else:
        z = level_draws(p, rng.random((n, k)), rng.random((n, k)))
        pairs = np.array(list(itertools.product(range(size), repeat=2)))
        padded = np.concatenate([pairs, np.repeat(pairs[:, :1], k - 2, axis=1)], axis=1)
        R = level_pair_weights(p, padded)[:, 0, 1].reshape(size, size)
    return z, np.where(np.eye(size, dtype=bool), 0.0, R)


def chain_coupling(p, k, n, rng):
    K = kernel(p)
    z = [inverse_cdf(p, rng.random(n))]
    for _ in range(k - 1):
        z.append(inverse_cdf(K[z[-1]], rng.random(n)))
    power, mix = np.eye(len(p)), np.zeros_like(K)
    for m in range(1, k):
        power = power @ K
        mix += 2.0 * (k - m) / (k * (k - 1)) * power
    return np.stack(z, axis=-1), ratios(p, p[:, None] * mix)


def copula_coupling(p, k, n, rng):
    size = len(p)
    orders = np.array([[a] + [c for c in range(size) if c not in (a, b)] + [b]
                       for a, b in itertools.combinations(range(size), 2)])
    e = rng.standard_exponential((n, k))
    u = (1.0 - e / e.sum(axis=1, keepdims=True)) ** (k - 1)
    order = orders[rng.integers(len(orders), size=n)]  # (n, C)
    z = np.take_along_axis(order, inverse_cdf(p[order][:, None, :], u), axis=-1)
    a = 1.0 / (k - 1)

    def cdf(x, y):  # (the copula's bivariate CDF)
        return np.maximum(x ** a + y ** a - 1.0, 0.0) ** (k - 1)

    Q = np.zeros((size, size))
    for o in orders:
        right = np.empty(size)
        right[o] = np.cumsum(p[o])
        right[o[-1]] = 1.0
        left = np.clip(right - p, 0.0, 1.0)
        left[o[0]] = 0.0
        R, L = right[:, None], left[:, None]
        Q += (cdf(R, R.T) - cdf(L, R.T) - cdf(R, L.T) + cdf(L, L.T)) / len(orders)
    return z, ratios(p, Q)


def stick_breaking_coupling(p, k, n, rng):
    size = len(p)
    tail = np.cumsum(p[::-1])[::-1]
    stick = p / tail
    u = rng.random((n, size))

    def first(coins):  # (the first stick whose coin is 1; the last value if none)
        return np.argmax(np.concatenate([coins[:, :-1], np.ones((n, 1), bool)], 1), axis=1)
    z = np.stack([first(u < stick), first(1.0 - u < stick)], axis=-1)
    Q = np.zeros((size, size))
    both = 1.0  # P(both have passed the sticks before m)
    for m in range(size - 1):
        s = stick[m]
        split = both * min(s, 1.0 - s) * p[m + 1:] / tail[m + 1]  # one stops at m
        Q[m, m + 1:] += split
        Q[m + 1:, m] += split
        both *= max(1.0 - 2.0 * s, 0.0)
    return z, ratios(p, Q)


def ratios(p, Q):
    """p_a p_b / Q(a, b) for a != b where Q > 0, else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        R = np.where(Q > 0, np.outer(p, p) / Q, 0.0)
    return np.where(np.eye(len(p), dtype=bool), 0.0, R)


# ---------------------------------------------------------------- the estimate
def estimates(p, f, z, R):
    k = z.shape[1]
    fz = f[z]
    r = R[z[:, :, None], z[:, None, :]]
    coef = np.sum(r * (fz[:, :, None] - fz[:, None, :]), axis=-1) / (k * (k - 1))
    return np.einsum("nk,nkc->nc", coef, np.eye(len(p))[z] - p)


def loo_variance(p, f, k):
    """Leave-one-out REINFORCE's variance with n = k, exactly: a U-statistic of kernel
    h(a, b) = (f_a - f_b) (e_a - e_b) / 2, variance 2 / (k (k - 1)) (2 (k - 2) zeta_1 +
    zeta_2), zeta_1 = Var E[h(a, b) | a], zeta_2 = Var h(a, b)."""
    e = np.eye(len(p))
    h = 0.5 * (f[:, None] - f[None, :])[..., None] * (e[:, None] - e[None, :])
    mean = np.einsum("a,b,abc->c", p, p, h)
    given = np.einsum("b,abc->ac", p, h)
    zeta_1 = p @ np.sum((given - mean) ** 2, axis=-1)
    zeta_2 = p @ np.sum((h - mean) ** 2, axis=-1) @ p
    return 2.0 / (k * (k - 1)) * (2 * (k - 2) * zeta_1 + zeta_2)


def exact_mean(p, f, R):
    """The mean of g: sum over the pairs (a, b) of distinct values that the coupling
    draws (R(a, b) > 0) of Q(a, b) R(a, b) (f_a - f_b) (e_a - p) = p_a p_b (f_a - f_b)
    (e_a - p); the gradient when it draws every pair."""
    e = np.eye(len(p))
    terms = (np.outer(p, p) * (f[:, None] - f[None, :]))[..., None] * (e[:, None] - p)
    return np.einsum("ab,abc->c", (R > 0).astype(float), terms)


COUPLINGS = {"scg": scg_coupling, "metropolis-chain": chain_coupling,
             "carms-copula": copula_coupling, "stick-breaking": stick_breaking_coupling}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--laws", type=int, default=40)
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for k in (2, 3, 4, 8):
        rows = {}
        for _ in range(args.laws):
            size = int(rng.integers(3, 11))
            p = rng.dirichlet(np.full(size, rng.choice([0.3, 1.0, 5.0])))
            p = np.maximum(p, 1e-3)
            p /= p.sum()
            f = rng.normal(size=size)
            grad = p * (f - p @ f)
            reference = loo_variance(p, f, k)
            for name, coupling in COUPLINGS.items():
                if (name == "stick-breaking" and k != 2) or (name == "metropolis-chain"
                                                              and k == 2):
                    continue
                z, R = coupling(p, k, args.draws, rng)
                g = estimates(p, f, z, R)
                total = np.sum((g - g.mean(axis=0)) ** 2, axis=1)
                var, stderr = total.mean(), total.std(ddof=1) / np.sqrt(len(total))
                bias = np.linalg.norm(exact_mean(p, f, R) - grad) / np.linalg.norm(grad)
                rows.setdefault(name, []).append(
                    (var / reference, (var - 3 * stderr) / reference, bias))
        print(f"k = {k}: the variance over leave-one-out's with n = {k}, {args.laws} laws")
        for name, got in rows.items():
            ratio, low, bias = np.array(got).T
            print(f"  {name:<17} median {np.median(ratio):6.3f}   largest {ratio.max():6.3f}"
                  f"   above: {np.mean(low > 1.0):4.0%}   largest bias {bias.max():.1e}")


if __name__ == "__main__":
    main()
