"""Probability distributions: one family per file, all on one base class."""

from .base import Distribution, Independent, set_validation
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .laplace import Laplace
from .lognormal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .uniform import Uniform
from .kl import kl_divergence, register_kl  # noqa: E402  (after the families it pairs)

__all__ = ["Distribution", "Independent", "set_validation",
           "Normal", "MultivariateNormal", "LogNormal", "Uniform", "Exponential", "Laplace",
           "Gumbel", "Gamma", "Beta", "Dirichlet", "Bernoulli", "Categorical", "Poisson",
           "Binomial", "Geometric", "OneHotCategorical", "kl_divergence", "register_kl"]
