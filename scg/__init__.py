"""scg: gradients of expectations through stochastic computation graphs."""

from ._version import __version__
from . import numpy as _numpy_rules  # noqa: F401  (installs numpy dispatch on traced values)
from .kernels import small as _small_kernels  # noqa: F401  (installs small-array loops)
from .kernels import layers as _layer_kernels  # noqa: F401  (installs log-softmax, tanh passes)
from . import distributions
from .differential_operators import grad, hessian, hvp, jacobian, value_and_grad
from .jit import jit
from .distributions import *  # noqa: F401,F403  (every family: scg.Normal, scg.Bernoulli, ...)
from .errors import (BiasWarning, EstimatorError, NoGradientPathError, RandomnessWarning, VarianceWarning,
                     TracingError)
from .estimators import (ARMS, REBAR, RELAX, VIMCO, DisARM, Enumerate, Estimator, GappedST,
                         GumbelRao, GumbelSoftmax, IndeCateR, Marginalize, MeasureValued,
                         Pathwise, ReinMax, Score, UnorderedSet, baselines)
from .stochastic.expectation import Expectation, GradSamples, expectation, trace
from .stochastic.multisample import logmeanexp
from .stochastic.sites import blackbox, cost, plate, sample
from .stochastic.marginal import factor, markov
from .stochastic.masks import all_ as all, mask  # noqa: A001  (scg.all, as np.all)
from .stochastic.trace import Trace
from .numpy.rules import (log_softmax, logsumexp, relu, sigmoid, softmax, softplus,
                          stop_gradient, take)

__all__ = list(distributions.__all__) + ["__version__",
    "grad", "value_and_grad", "jit", "jacobian", "hessian", "hvp", "stop_gradient",
    "sigmoid", "softplus", "relu", "logsumexp", "softmax", "log_softmax", "take",
    "sample", "cost", "factor", "markov", "plate", "mask", "all", "blackbox", "logmeanexp", "expectation", "grad_samples",
    "trace", "VIMCO", "REBAR", "RELAX", "UnorderedSet", "IndeCateR", "ARMS",
    "Expectation", "GradSamples", "Trace", "Pathwise", "Score", "Enumerate", "DisARM",
    "GumbelSoftmax", "GumbelRao", "ReinMax", "GappedST", "Marginalize", "MeasureValued", "baselines",
    "TracingError", "EstimatorError", "NoGradientPathError", "BiasWarning", "RandomnessWarning",
]

from . import nn, optim  # noqa: E402  (functional layers and optimizers over pytrees)
from .studies import Comparison, compare, grad_samples  # noqa: E402
from .core.progress import progress  # noqa: E402
__all__ += ["nn", "optim", "progress", "compare", "Comparison"]
from . import rl  # noqa: E402  (RL fine-tuning losses and their exact study)
__all__ += ["rl"]
