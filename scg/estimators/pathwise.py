"""The pathwise (reparameterization) estimator: differentiate through x = path(noise, params)."""

from ..distributions.base import family_of
from ..errors import EstimatorError
from .antithetic import check_antithetic
from .base import Estimator


class Pathwise(Estimator):
    """Gradients flow along the sampling path; needs `dist.has_rsample` and no jump downstream.

    Args:
        antithetic: draw the noise in pairs (eps and its mirror image); n must be even.

    Example:
        >>> scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.Pathwise())
    """

    name = "pathwise"
    own_draws = True
    draws_from_law = True
    differentiable = True

    def __init__(self, antithetic=False):
        self.antithetic = bool(antithetic)

    def check(self, name, dist):
        if not dist.has_rsample:
            raise EstimatorError(
                f"site {name!r}: estimator='pathwise' but {type(family_of(dist)).__name__} "
                "has no reparameterization path (its draws are discrete or have no "
                "differentiable map from noise); use estimator='score' or 'auto'")
        if self.antithetic:
            check_antithetic(name, dist)

    def draw(self, d):
        return d.noise_path()

    def describe(self, site):
        return "pathwise" + (", antithetic pairs (draw i + n/2 mirrors draw i)"
                             if self.antithetic else "")

    def __repr__(self):
        return "Pathwise(antithetic=True)" if self.antithetic else "Pathwise()"
