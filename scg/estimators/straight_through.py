"""What the straight-through estimators of a relaxation share (ReinMax, GumbelRao, GappedST):
the model sees an exact draw b of the site's family, and the gradient flows through a plain
Jacobian per draw applied to the derivative of the relaxation's logits.

The value is b + J (a - stop_gradient(a)), a the logits: exactly b, and its derivative in
a is J (transposed: the Jacobians of sigmoid and softmax are symmetric). Each estimator says
which J; none of them knows the family, whose relaxation (`dist.relaxed(T)`, see
scg/distributions/relaxed.py) gives the rounding, the noise and the Jacobians.
"""

import numbers

import numpy as np

from ..core import effects
from ..distributions.base import family_of
from ..numpy import rules as R
from .base import Estimator
from .terms import require_relaxation


class StraightThrough(Estimator):
    """Base class: exact draws, the gradient of a per-draw Jacobian J of the relaxation;
    first derivatives only, biased (subclasses define `jacobian` and `explain_terms`)."""

    differentiable = True  # (the value carries the surrogate's derivative)
    biased = True

    def check(self, name, dist):
        require_relaxation(name, dist, f"scg.{type(self).__name__}()")

    def draw(self, d):
        relaxation = family_of(d.dist).relaxed(1.0)
        b = d.sample()  # (exact draws of the family)
        logits = relaxation.logits
        plain = np.broadcast_to(effects.asarray(logits, dtype=float), np.shape(b))
        jacobian = self.jacobian(d, relaxation, plain, b)
        delta = R.subtract(logits, R.stop_gradient(logits))  # (zero, derivative one)
        return R.add(d.per_draw(b), relaxation.apply_jacobian(d.per_draw(jacobian), delta))

    def jacobian(self, d, relaxation, logits, b):
        """The plain Jacobian per draw (physical rows) that the logits' derivative meets."""
        raise NotImplementedError

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)


def check_temperature(who, temperature, at_least=0.0):
    """A finite temperature > at_least (>= 1 when at_least is 1), as a float."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not np.isfinite(temperature) or temperature <= 0 or temperature < at_least:
        bound = f">= {at_least:g}" if at_least else "> 0"
        raise ValueError(f"{who}: temperature must be a finite number {bound}, got "
                         f"{temperature!r}")
    return float(temperature)
