"""Marginalization: a finite site summed out of the model's log-likelihood, exactly."""

from ..errors import EstimatorError
from .base import Estimator
from .enumerate import support_of
from .terms import require_open_probs


class Marginalize(Estimator):
    """Sum the site out of the model's likelihood: no draw, no variance, exact gradients.

    The site's value is its whole support, laid along a dimension of its own to the left of
    the plates' dims (as Pyro's parallel enumeration), so the model computes every value's
    log-likelihood at once. The costs downstream of it must be log-likelihood terms: the
    `obs=` sites and `scg.factor(name, log_value)`. The model's cost becomes
    -log sum_z p(z) exp(sum of those terms), computed by variable elimination: each element
    of a plate is summed alone (N x K work), and a chain declared with `scg.markov` by the
    forward algorithm (T x K^2, not K^T). See scg/stochastic/marginal.py.

    Example:
        >>> with scg.plate("data", 1000):
        ...     z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        ...     scg.sample("x", scg.Normal(locs[z], 1.0), obs=data)
    """

    name = "marginalize"
    copies_multiply = True  # (an exact sum: no variance of its own)

    def check(self, name, dist):
        support_of(name, dist, "scg.Marginalize()")
        require_open_probs(name, dist, "scg.Marginalize()")

    def draw(self, d):  # pragma: no cover - the stochastic layer never asks
        raise EstimatorError(f"site {d.name!r}: a marginalized site is not drawn")

    def describe(self, site):
        return "marginalized: summed out of the likelihood exactly (no draw, no variance)"
