"""transform_to(constraint): a bijection from unconstrained reals onto a constraint's set.

As torch.distributions.transform_to: optimize an unconstrained value u and use
`transform_to(c)(u)` where a parameter must satisfy c. One entry per constraint that a
family's parameters use; a discrete constraint (counts) has no such bijection.
"""

from . import constraints
from .negative_binomial import NegativeBinomial  # noqa: F401  (its constraint: [0, 1))
from .transforms import (ExpTransform, IdentityTransform, LowerCholeskyTransform,
                         SigmoidTransform, StickBreakingTransform)

_TRANSFORMS = {
    constraints.real: IdentityTransform,
    constraints.real_vector: IdentityTransform,
    constraints.positive: ExpTransform,
    constraints.positive_vector: ExpTransform,
    constraints.nonnegative: ExpTransform,
    constraints.unit_interval: SigmoidTransform,
    constraints.open_unit_interval: SigmoidTransform,
    constraints.half_open_unit_interval: SigmoidTransform,
    constraints.unit_interval_below_one: SigmoidTransform,
    constraints.simplex: StickBreakingTransform,
    constraints.lower_cholesky: LowerCholeskyTransform,
}


def transform_to(constraint):
    """The transform from unconstrained reals onto the values `constraint` admits.

    Args:
        constraint: a constraint of scg.distributions.constraints (a family's
            `arg_constraints[name]` or `support`).

    Returns:
        A Transform t: t(u) satisfies the constraint for every real u (of the constraint's
        event shape minus one entry for the simplex), t.inv maps back.

    Example:
        >>> t = scg.transform_to(scg.Normal.arg_constraints["scale"])
        >>> t(np.log(2.0))   # 2.0
    """
    make = _TRANSFORMS.get(constraint)
    if make is not None:
        return make()
    if getattr(constraint, "discrete", False):
        raise NotImplementedError(
            f"transform_to: the constraint {constraint!r} is a set of integers, which no "
            "bijection from the reals reaches; such parameters (total_count) are not "
            "optimized by gradient: pass them as plain numbers")
    known = ", ".join(sorted({repr(c) for c in _TRANSFORMS}))
    raise NotImplementedError(f"transform_to: no transform onto {constraint!r} in scg (there "
                              f"are transforms onto: {known})")


def register_transform(constraint, make):
    """Register `make()` as the transform onto `constraint` (a constraint of your own)."""
    _TRANSFORMS[constraint] = make
