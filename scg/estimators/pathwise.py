"""The pathwise (reparameterization) estimator: differentiate through x = path(noise, params)."""


class Pathwise:
    """Gradients flow along the sampling path; needs `dist.has_rsample` and no jump downstream.

    Example:
        >>> scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.Pathwise())
    """

    name = "pathwise"

    def __repr__(self):
        return "Pathwise()"
