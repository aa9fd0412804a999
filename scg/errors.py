"""Errors and warnings that scg raises when an estimate would be wrong or impossible."""


class TracingError(TypeError):
    """A traced value was used where scg cannot follow it (Python control flow, conversion)."""


class EstimatorError(ValueError):
    """An estimator was requested where it does not apply (pathwise without a path)."""


class NoGradientPathError(ValueError):
    """No cost depends on a differentiated argument through any path or score term."""


class BiasWarning(UserWarning):
    """The requested estimator is biased here; the message says what is missing."""


class VarianceWarning(UserWarning):
    """The estimate rests on draws too rare to appear at this n: its value and its
    standard error cannot be trusted; the message says what n would do."""


class RandomnessWarning(UserWarning):
    """A model drew random numbers outside scg.sample: they are shared by all n draws."""
