"""Probability distributions: one family per file, all on one base class."""

from .base import Distribution, Independent, set_validation
from .bernoulli import Bernoulli
from .normal import Normal

__all__ = ["Distribution", "Independent", "set_validation", "Normal", "Bernoulli"]
