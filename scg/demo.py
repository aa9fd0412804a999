"""The embedded default study: x ~ N(mu, sigma) at mu = 2, sigma = 1, with f(x) = x^2.

Every estimator's mean and per-sample variance for dF/dmu and dF/dsigma, measured with
`scg.grad_samples`, beside the exact values (Gauss-Hermite quadrature, exact for these
polynomials), and the number of draws needed for a standard error of 0.1.
"""

import numpy as np

from .estimators import Score
from .stochastic.expectation import expectation, grad_samples, trace
from .distributions import Normal
from .stochastic.sites import sample

THETA = {"mu": 2.0, "sigma": 1.0}
ESTIMATORS = [  # (label, estimator, baseline as a number for the exact values)
    ("pathwise", "pathwise", None),
    ("score", "score", 0.0),
    ("score, b = 5", Score(5.0), 5.0),
    ("score, b* = 7", Score(7.0), 7.0),
    ("leave-one-out", Score("loo"), "loo"),
]


def model_with(estimator):
    def model(theta):
        x = sample("x", Normal(theta["mu"], theta["sigma"]), estimator=estimator)
        return x ** 2
    return model


def exact(baseline, mu=2.0, sigma=1.0):
    """Exact mean and variance of one draw's estimate, per parameter, by quadrature."""
    eps, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / w.sum()
    x = mu + sigma * eps
    f = x ** 2
    if baseline is None:  # pathwise: f'(x) dx/dtheta
        est = {"mu": 2 * x, "sigma": 2 * x * eps}
    else:
        # the leave-one-out baseline tends to b = E[f] as n grows
        b = mu ** 2 + sigma ** 2 if baseline == "loo" else baseline
        est = {"mu": (f - b) * eps / sigma, "sigma": (f - b) * (eps ** 2 - 1) / sigma}
    return {k: (float(w @ v), float(w @ v ** 2 - (w @ v) ** 2)) for k, v in est.items()}


def _check(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"the demo needs n, the number of draws per estimator, as an integer "
                         f">= 2 (a per-sample variance needs at least 2 draws); got {n!r}")


def study(n=400_000, seed=0):
    """Rows of (label, parameter, mean, stderr, variance, exact mean, exact variance).

    `n` (an integer >= 2) draws per estimator; `seed` as in scg.expectation.
    """
    _check(n)
    rows = []
    for label, estimator, baseline in ESTIMATORS:
        gs = grad_samples(expectation(model_with(estimator), n=n, seed=seed))(THETA)
        truth = exact(baseline)
        for p in ("mu", "sigma"):
            rows.append((label, p, float(gs.mean[p]), float(gs.stderr[p]), float(gs.var[p]),
                         *truth[p]))
    return rows


def main(n=400_000, seed=0):
    """Print the study's table for `n` draws per estimator (an integer >= 2), then scg's
    explanation of the pathwise estimate. This is `python -m scg demo [--n N] [--seed S]`.

    Example:
        >>> scg.demo.main(n=2000)
    """
    _check(n)
    print("Worked example: x ~ N(mu, sigma), mu = 2, sigma = 1, f(x) = x^2;")
    print(f"exact gradient dF/dmu = 4, dF/dsigma = 2; n = {n:,} draws per estimator.\n")
    header = (f"{'estimator':<16}{'param':<7}{'mean':>8}{'stderr':>9}{'variance':>11}"
              f"{'exact var':>11}{'N for se 0.1':>14}")
    print(header)
    print("-" * len(header))
    for label, p, mean, se, var, _, exact_var in study(n, seed):
        print(f"{label:<16}{p:<7}{mean:>8.3f}{se:>9.4f}{var:>11.1f}{exact_var:>11.1f}"
              f"{var / 0.01:>14,.0f}")
    print("\nThe leave-one-out baseline's exact variance is its large-n limit (b = E[f] = 5).")
    print("\nHow scg estimates the pathwise version, in its own words:\n")
    print(trace(model_with("auto"), THETA, n=4, seed=seed).explain())
