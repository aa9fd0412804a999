"""The variance of one gradient estimate at equal numbers of model evaluations: IndeCateR
and ARMS(13) against leave-one-out REINFORCE and the unordered set estimator on D coupled
categorical latents, ARMS(k) against leave-one-out with n = k draws on the same latents
(k = 2 is DisARM) and on coupled coins.

    PYTHONPATH=. python benchmarks/indecater_arms.py [--draws 20000]

Categorical model: D = 3 latents of K = 4 values, a cost that couples them,
f = (sum_d T[d, x_d] - 0.8)^2 ("coupled"), or mostly a sum of one term per latent,
f = sum_d (T[d, x_d] - 0.3)^2 + 0.1 (sum_d T[d, x_d] - 0.8)^2 ("nearly separable").
One draw of scg.IndeCateR() costs 1 + D K = 13 evaluations (the draw and D x K branches);
it is compared with scg.Score('loo') with n = 13 draws, with scg.UnorderedSet(13) on the
same law written as one Categorical over the K^D = 64 joint values (UnorderedSet serves
one choice per element; the D latents of one cost are one choice of 64), and with
scg.ARMS(13), 13 coupled draws. On the same latents, one draw
of scg.ARMS(k) against scg.Score('loo') with n = k for k = 2, 4, 8 (k evaluations each).
Coins: D = 5 Bernoulli latents, f = (b . w - 1.5)^2; one draw of scg.ARMS(k) against
scg.Score('loo') with n = k.

Each variance is that of one estimate (one draw of a multi-evaluation estimator, or one
call with n draws for leave-one-out), summed over the parameter's coordinates: measured
over the draws with its standard error, and leave-one-out's exactly (a U-statistic's
variance over the joint states). Parameters at two entropies (logits times 1 and 3).
"""

import argparse
import itertools

import numpy as np

import scg

D, K = 3, 4
TABLE = np.array([[1.0, -0.5, 2.0, 0.3], [0.4, 1.5, -1.0, 0.0], [-0.7, 0.2, 0.9, 1.1]])
JOINT = np.array(list(itertools.product(range(K), repeat=D)))  # (64, D), row-major
SEPARABLE = {"coupled": (0.0, 1.0), "nearly separable": (1.0, 0.1)}


def categorical_cost(parts, kind):
    """The cost from the D looked-up values T[d, x_d]."""
    alone, together = SEPARABLE[kind]
    s = parts[0]
    for x in parts[1:]:
        s = s + x
    out = together * (s - 0.8) ** 2
    for x in parts:
        out = out + alone * (x - 0.3) ** 2
    return out


def joint_costs(kind):
    return categorical_cost([TABLE[d, JOINT[:, d]] for d in range(D)], kind)
W = np.array([1.0, -0.7, 0.4, 0.9, -0.3])


def factorized(kind):
    def build(estimator):
        def model(theta):
            x = scg.sample("x", scg.Categorical(logits=theta).to_event(1),
                           estimator=estimator)
            return categorical_cost([scg.take(TABLE[d], x[..., d]) for d in range(D)], kind)
        return model
    return build


def joint(kind):
    costs = joint_costs(kind)

    def build(estimator):
        def model(theta):
            logits = theta[0][:, None, None] + theta[1][None, :, None] + \
                theta[2][None, None, :]
            j = scg.sample("j", scg.Categorical(logits=np.reshape(logits, (-1,))),
                           estimator=estimator)
            return scg.take(costs, j)
        return model
    return build


def coins(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta).to_event(1), estimator=estimator)
        return (b @ W - 1.5) ** 2
    return model


def per_draw(build, estimator, theta, draws, seed):
    """Variance of one draw's estimate (summed over coordinates) and its standard error."""
    gs = scg.grad_samples(scg.expectation(build(estimator), n=draws, seed=seed))(theta)
    total = np.sum(((gs.samples - gs.mean) ** 2).reshape(draws, -1), axis=1)
    return total.mean(), total.std(ddof=1) / np.sqrt(draws)


def loo_exact(probs, costs, scores, n):
    """The variance of one call's estimate of scg.Score('loo') with n draws, summed over
    the coordinates, exactly. The estimate (1 / (n (n - 1))) sum_{i != j} (f_i - f_j) s_i
    (s the score) is a U-statistic of kernel h(x, y) = (f_x - f_y) (s_x - s_y) / 2, whose
    variance is 2 / (n (n - 1)) (2 (n - 2) zeta_1 + zeta_2), zeta_1 = Var E[h(x, y) | x]
    and zeta_2 = Var h(x, y), over the states of the support (their probabilities, costs
    and scores)."""
    h = 0.5 * (costs[:, None] - costs[None, :])[..., None] * (scores[:, None] - scores[None, :])
    mean = np.einsum("x,y,xyc->c", probs, probs, h)
    given = np.einsum("y,xyc->xc", probs, h)
    zeta_1 = probs @ np.sum((given - mean) ** 2, axis=-1)
    zeta_2 = probs @ np.sum((h - mean) ** 2, axis=-1) @ probs
    return 2.0 / (n * (n - 1)) * (2 * (n - 2) * zeta_1 + zeta_2)


def categorical_law(theta, kind):
    """(probabilities, costs, scores in the logits) of the 64 joint states."""
    p = np.exp(theta - theta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    probs = np.prod(p[np.arange(D), JOINT], axis=1)
    scores = (np.eye(K)[JOINT] - p).reshape(len(JOINT), -1)
    return probs, joint_costs(kind), scores


def coin_law(theta):
    """(probabilities, costs, scores in the logits) of the 32 states of the coins."""
    states = np.array(list(itertools.product([0.0, 1.0], repeat=len(W))))
    p = 1.0 / (1.0 + np.exp(-theta))
    probs = np.prod(np.where(states == 1.0, p, 1.0 - p), axis=1)
    return probs, (states @ W - 1.5) ** 2, states - p


def show(label, var, se, ref):
    print(f"  {label:<44} {var:10.4g} +- {se:8.2g}   ratio to LOO {var / ref:6.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20_000)
    args = ap.parse_args()
    base = np.array([[0.2, -0.3, 0.5, 0.0], [1.0, -0.5, 0.1, 0.3], [-0.4, 0.6, 0.0, -0.2]])
    evals = 1 + D * K
    for kind, scale in itertools.product(SEPARABLE, (1.0, 3.0)):
        theta = scale * base
        law = categorical_law(theta, kind)
        print(f"categorical, {kind}, D = {D}, K = {K}, logits x {scale:g}: {evals} "
              "evaluations each")
        loo = loo_exact(*law, evals)
        ind, ind_se = per_draw(factorized(kind), scg.IndeCateR(), theta, args.draws, 2)
        us, us_se = per_draw(joint(kind), scg.UnorderedSet(evals), theta, args.draws, 3)
        arms, arms_se = per_draw(factorized(kind), scg.ARMS(evals), theta, args.draws, 4)
        show(f"Score('loo'), n = {evals} (exact)", loo, 0.0, loo)
        show("IndeCateR(), one draw", ind, ind_se, loo)
        show(f"UnorderedSet({evals}) on the 64 joint values", us, us_se, loo)
        show(f"ARMS({evals}), one draw", arms, arms_se, loo)
        for k in (2, 4, 8):
            loo = loo_exact(*law, k)
            arms, arms_se = per_draw(factorized(kind), scg.ARMS(k), theta, args.draws, 40 + k)
            show(f"Score('loo'), n = {k} (exact)", loo, 0.0, loo)
            show(f"ARMS({k}), one draw", arms, arms_se, loo)
    th = np.array([-0.4, 0.3, 1.1, -1.2, 0.6])
    for scale in (1.0, 3.0):
        theta = scale * th
        print(f"coins, D = 5, logits x {scale:g}")
        for k in (2, 4, 8):
            loo = loo_exact(*coin_law(theta), k)
            arms, arms_se = per_draw(coins, scg.ARMS(k), theta, args.draws, 20 + k)
            show(f"Score('loo'), n = {k} (exact)", loo, 0.0, loo)
            show(f"ARMS({k}), one draw", arms, arms_se, loo)


if __name__ == "__main__":
    main()
