"""Gradient estimators for sample sites, and their baselines."""

from . import baselines
from .pathwise import Pathwise
from .score import Score


def as_estimator(spec):
    """'auto', or a Pathwise / Score object, from what a user passed as estimator=."""
    if spec == "auto":
        return "auto"
    if spec == "pathwise":
        return Pathwise()
    if spec == "score":
        return Score()
    if isinstance(spec, (Pathwise, Score)):
        return spec
    raise ValueError(f"estimator must be 'auto', 'pathwise', 'score', scg.Pathwise() or "
                     f"scg.Score(baseline=...), got {spec!r}")


__all__ = ["Pathwise", "Score", "baselines", "as_estimator"]
