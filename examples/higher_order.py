"""Newton's method on a stochastic objective, with scg's unbiased Hessian estimate.

Three coins x_i ~ Bernoulli(sigmoid(theta_i)) and a Normal draw y ~ N(theta_0, 1); the cost
couples them: (w . x + 0.3 y - 1.2)^2, plus a small ridge on theta. scg.hessian of the
expectation (its DiCE surrogate) is printed beside the exact Hessian (enumeration of the
coins, closed form in y), then a few Newton steps with estimated gradient and Hessian are
compared with the exact objective.

Run: python examples/higher_order.py [--n 100000] [--steps 5] [--seed 0]
"""

import itertools

import numpy as np

import scg

W = np.array([1.0, -0.5, 0.8])
RIDGE = 0.05


def model(theta):
    x = scg.sample("x", scg.Bernoulli(logits=theta).to_event(1))
    y = scg.sample("y", scg.Normal(theta[0], 1.0))
    scg.cost("ridge", RIDGE * np.sum(theta ** 2))
    return (np.sum(W * x) + 0.3 * y - 1.2) ** 2


COINS = np.array(list(itertools.product([0.0, 1.0], repeat=3)))


def exact_objective(theta):
    """E[cost]: enumerate the coins; E[(a + 0.3 y)^2] = (a + 0.3 theta_0)^2 + 0.09."""
    logp = COINS * -scg.softplus(-theta) + (1 - COINS) * -scg.softplus(theta)
    a = COINS @ W - 1.2
    inner = (a + 0.3 * theta[0]) ** 2 + 0.09
    return np.sum(np.exp(np.sum(logp, axis=-1)) * inner) + RIDGE * np.sum(theta ** 2)


def main(n=100_000, steps=5, seed=0):
    theta = np.array([1.0, -1.0, 0.5])
    E = scg.expectation(model, n=n, seed=seed)
    np.set_printoptions(precision=3, suppress=True)
    print(f"Hessian at theta = {theta}, n = {n:,} draws")
    print("estimated:\n", scg.hessian(E)(theta))
    print("exact:\n", scg.hessian(exact_objective)(theta))
    print("\nNewton steps with estimated gradient and Hessian:")
    print(f"  step 0: exact objective {exact_objective(theta):.5f}")
    for step in range(1, steps + 1):
        g = scg.grad(E)(theta)
        H = scg.hessian(E)(theta)
        theta = theta - np.linalg.solve(H, g)
        print(f"  step {step}: exact objective {exact_objective(theta):.5f}, theta {theta}")
    best = _exact_minimum()
    print(f"exact minimum {exact_objective(best):.5f} at theta {best}")
    return theta, best


def _exact_minimum(iterations=50):
    theta = np.array([1.0, -1.0, 0.5])
    for _ in range(iterations):
        theta = theta - np.linalg.solve(scg.hessian(exact_objective)(theta),
                                        scg.grad(exact_objective)(theta))
    return theta


def _arguments():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="draws per estimate")
    parser.add_argument("--steps", type=int, default=5, help="Newton steps")
    parser.add_argument("--seed", type=int, default=0, help="seed of the expectation")
    return parser.parse_args()


if __name__ == "__main__":
    args = _arguments()
    main(n=args.n, steps=args.steps, seed=args.seed)
