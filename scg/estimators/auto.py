"""The "auto" policy: which estimator a site gets when the model names none.

One place for it: a site with a sampling path is pathwise; one without is a score-function
site with a leave-one-out baseline (none at n = 1, where there is nothing to leave out).
After a run, a pathwise site whose path to a cost crosses a jump or a black box becomes a
score-function site of the same kind, and the model runs again.
"""

from .baselines import LeaveOneOut
from .pathwise import Pathwise
from .score import Score


def _score(n):
    return Score(LeaveOneOut() if n > 1 else None)


def first_choice(dist, family, n):
    """(estimator, reason) for an "auto" site met for the first time."""
    if not dist.has_rsample:
        return _score(n), f"{family} has no reparameterization path"
    return Pathwise(), (f"{family} has a reparameterization path and every path from the "
                        "draw to a cost is differentiable")


def after_a_jump(n, where):
    """(estimator, reason) for an "auto" pathwise site whose path crosses `where`."""
    return _score(n), (f"a path from the draw to {where} crosses a jump or a black box, so "
                       "the pathwise gradient would be biased")
