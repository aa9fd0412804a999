"""ReinMax (Liu, Zhao, Yang, Tu and Gao 2023, "Bridging Discrete and Backpropagation:
Straight-Through and Beyond"): a straight-through estimator that is second-order accurate
(Heun's method where straight-through is Euler's), at straight-through's cost.

With pi0 = softmax(a) (a the logits) and b the exact one-hot draw, the gradient g of the
cost in the draw's value reaches the logits as

    2 J(pi1) g - J(pi0) g / 2,    pi1 = (softmax(a / T) + b) / 2,

where J(y) = diag(y) - y y^T is the softmax's Jacobian at the point y. A coin is served as
two categories of logits (0, a): J(y) = y (1 - y), with sigmoid for softmax.
"""

from .straight_through import StraightThrough, check_temperature


class ReinMax(StraightThrough):
    """ReinMax for the sites whose family declares a concrete relaxation (Bernoulli,
    OneHotCategorical): exact discrete values, a second-order approximation of the
    gradient through them; biased, first derivatives only.

    Args:
        temperature: T >= 1 of softmax(a / T) in pi1 (the paper's range: below 1 the
            second-order term is overweighted).

    Example:
        >>> scg.sample("z", scg.OneHotCategorical(logits=h), estimator=scg.ReinMax(1.0))
    """

    name = "reinmax"

    def __init__(self, temperature=1.0):
        self.temperature = check_temperature("ReinMax", temperature, at_least=1.0)

    def jacobian(self, d, relaxation, logits, b):
        return relaxation.reinmax_jacobian(logits, b, self.temperature)

    def describe(self, site):
        return (f"ReinMax at temperature {self.temperature:g}: exact discrete values, the "
                "gradient 2 J(pi1) - J(pi0) / 2 of the softmax's Jacobians")

    def explain_terms(self, site, trace):
        return [f"biased: {site.name} takes exact discrete values b and its gradient g "
                "reaches the logits a as (2 J(pi1) - J(pi0) / 2) g, J(y) = diag(y) - y y^T, "
                f"pi0 = softmax(a), pi1 = (softmax(a / {self.temperature:g}) + b) / 2: in "
                "expectation exact for a cost quadratic in the draw at T = 1, an "
                "approximation otherwise"]

    def __repr__(self):
        return f"ReinMax(temperature={self.temperature!r})"
