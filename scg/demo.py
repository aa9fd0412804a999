"""The embedded default study: x ~ N(mu, sigma) at mu = 2, sigma = 1, with f(x) = x^2.

Every estimator's mean and per-sample variance for dF/dmu and dF/dsigma, measured with
`scg.grad_samples`, beside the exact values (Gauss-Hermite quadrature, exact for these
polynomials; closed forms for the measure-valued estimator), and the number of draws needed
for a standard error of 0.1.
"""

import numpy as np

from .estimators import MeasureValued, Pathwise, Score
from .stochastic.expectation import expectation, grad_samples, trace
from .distributions import Normal
from .stochastic.sites import sample

THETA = {"mu": 2.0, "sigma": 1.0}
ESTIMATORS = [  # (label, estimator, the kind of the exact values: a baseline or a name)
    ("pathwise", "pathwise", None),
    ("score", "score", 0.0),
    ("score, b = 5", Score(5.0), 5.0),
    ("score, b* = 7", Score(7.0), 7.0),
    ("leave-one-out", Score("loo"), "loo"),
    ("pathwise, pairs", Pathwise(antithetic=True), "pathwise pairs"),
    ("score, pairs", Score(antithetic=True), "score pairs"),
    ("measure-valued", MeasureValued(), "measure-valued"),
]


def model_with(estimator):
    def model(theta):
        x = sample("x", Normal(theta["mu"], theta["sigma"]), estimator=estimator)
        return x ** 2
    return model


def exact(baseline, mu=2.0, sigma=1.0):
    """Exact mean and variance of one draw's estimate (of a pair's mean for antithetic
    pairs), per parameter, by quadrature; closed forms for the measure-valued one."""
    if baseline == "measure-valued":
        # loc: 4 mu R / sqrt(2 pi) with R Rayleigh; scale: 2 mu M (1 - U) + sigma M^2 (1 - U^2)
        # with M double-sided Maxwell, U uniform (the coupled parts)
        return {"mu": (2 * mu, 16 * mu ** 2 * (2 - np.pi / 2) / (2 * np.pi)),
                "sigma": (2 * sigma, 4 * mu ** 2 + 4 * sigma ** 2)}
    eps, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / w.sum()
    if baseline in ("pathwise pairs", "score pairs"):  # the nodes are symmetric: -eps = eps[::-1]
        one = exact_per_draw("pathwise" if baseline == "pathwise pairs" else 0.0, mu, sigma, eps)
        est = {k: 0.5 * (v + v[::-1]) for k, v in one.items()}
    else:
        est = exact_per_draw(baseline, mu, sigma, eps)
    return {k: (float(w @ v), float(w @ v ** 2 - (w @ v) ** 2)) for k, v in est.items()}


def exact_per_draw(baseline, mu, sigma, eps):
    """One draw's estimate at the noise values eps."""
    x = mu + sigma * eps
    f = x ** 2
    if baseline is None or baseline == "pathwise":  # pathwise: f'(x) dx/dtheta
        est = {"mu": 2 * x, "sigma": 2 * x * eps}
    else:
        # the leave-one-out baseline tends to b = E[f] as n grows
        b = mu ** 2 + sigma ** 2 if baseline == "loo" else baseline
        est = {"mu": (f - b) * eps / sigma, "sigma": (f - b) * (eps ** 2 - 1) / sigma}
    return est


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
        pairs = getattr(estimator, "antithetic", False)  # (n pairs: 2n draws)
        gs = grad_samples(expectation(model_with(estimator), n=2 * n if pairs else n,
                                      seed=seed))(THETA)
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
    print("Pairs: n antithetic pairs (eps, -eps), the variance of a pair's mean. The "
          "measure-valued\nestimator evaluates f five times per draw (x, and x+ and x- "
          "for each parameter).")
    print("\nHow scg estimates the pathwise version, in its own words:\n")
    print(trace(model_with("auto"), THETA, n=4, seed=seed).explain())
