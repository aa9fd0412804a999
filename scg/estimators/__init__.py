"""Gradient estimators for sample sites, and their baselines.

Every estimator derives from `Estimator` (see `base.py` for the protocol), one file each.
"""

from . import baselines
from .arms import ARMS
from .base import Estimator
from .disarm import DisARM
from .enumerate import Enumerate
from .gapped_st import GappedST
from .gumbel_rao import GumbelRao
from .gumbel_softmax import GumbelSoftmax
from .indecater import IndeCateR
from .marginalize import Marginalize
from .measure_valued import MeasureValued
from .pathwise import Pathwise
from .rebar import REBAR
from .reinmax import ReinMax
from .relax import RELAX
from .score import Score
from .terms import linear_term, magic_box
from .unordered_set import UnorderedSet
from .vimco import VIMCO

_NAMED = {"pathwise": Pathwise, "score": Score}


def as_estimator(spec):
    """'auto', or an Estimator object, from what a user passed as estimator=."""
    if isinstance(spec, Estimator):
        return spec
    if isinstance(spec, str):
        if spec == "auto":
            return "auto"
        if spec in _NAMED:
            return _NAMED[spec]()
    if isinstance(spec, type) and issubclass(spec, Estimator):
        raise TypeError(f"estimator={spec.__name__} is a class; pass an instance: "
                        f"estimator={spec.__name__}()")
    raise ValueError(f"estimator must be 'auto', 'pathwise', 'score' or an estimator object "
                     f"(scg.Pathwise(), scg.Score(baseline=...), scg.Enumerate(), ...), "
                     f"got {spec!r}")


__all__ = ["ARMS", "DisARM", "Enumerate", "Estimator", "GappedST", "GumbelRao", "GumbelSoftmax",
           "IndeCateR", "Marginalize", "MeasureValued", "Pathwise", "REBAR", "RELAX", "ReinMax",
           "Score", "UnorderedSet", "VIMCO", "as_estimator", "baselines", "linear_term",
           "magic_box"]
