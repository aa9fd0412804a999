"""Probability distributions: one family per file, all on one base class."""

from .base import Distribution, Independent, set_validation
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .cauchy import Cauchy
from .categorical import Categorical
from .dirichlet import Dirichlet
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .laplace import Laplace
from .lognormal import LogNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .relaxed import RelaxedBernoulli, RelaxedOneHotCategorical
from .studentt import StudentT
from .transformed import TransformedDistribution
from .uniform import Uniform
from .kl import kl_divergence, register_kl  # noqa: E402  (after the families it pairs)
from . import transforms  # noqa: E402
from .transform_to import register_transform, transform_to  # noqa: E402

__all__ = ["Distribution", "Independent", "set_validation",
           "Normal", "MultivariateNormal", "LogNormal", "Uniform", "Exponential", "Laplace",
           "Gumbel", "Gamma", "Beta", "Dirichlet", "Bernoulli", "Categorical", "Poisson",
           "Binomial", "Geometric", "OneHotCategorical", "StudentT", "Cauchy", "HalfNormal",
           "HalfCauchy", "NegativeBinomial", "Multinomial", "MixtureSameFamily",
           "TransformedDistribution", "RelaxedBernoulli", "RelaxedOneHotCategorical",
           "kl_divergence", "register_kl", "transforms",
           "transform_to", "register_transform"]
