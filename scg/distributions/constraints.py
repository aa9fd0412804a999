"""Constraints on parameters and supports: singletons with a check and a description."""

import numpy as np


class Constraint:
    """A set of admissible values; `check` returns a boolean array per entry."""

    event_dim = 0
    discrete = False

    def __init__(self, text, check, event_dim=0, discrete=False):
        self.text = text
        self._check = check
        self.event_dim = event_dim
        self.discrete = discrete

    def check(self, value):
        value = np.asarray(value, dtype=float)
        ok = self._check(value) & ~np.isnan(value)  # (comparisons with nan do not warn)
        if self.event_dim:
            ok = np.all(ok, axis=tuple(range(-self.event_dim, 0)))
        return ok

    def __repr__(self):
        return self.text


class _Interval(Constraint):
    """An interval whose bounds are parameters of the distribution (a moving support)."""

    def __init__(self, low, high):
        super().__init__(f"interval({low}, {high})", None)
        self.low_name, self.high_name = low, high


def interval(low_param, high_param):
    """A support bounded by the named parameters: it moves when they change."""
    return _Interval(low_param, high_param)


real = Constraint("real", lambda x: np.isfinite(x))
real_vector = Constraint("real vector", lambda x: np.isfinite(x), event_dim=1)
positive = Constraint("positive", lambda x: (x > 0) & np.isfinite(x))
nonnegative = Constraint("nonnegative", lambda x: (x >= 0) & np.isfinite(x))
unit_interval = Constraint("in [0, 1]", lambda x: (x >= 0) & (x <= 1))
open_unit_interval = Constraint("in (0, 1)", lambda x: (x > 0) & (x < 1))
half_open_unit_interval = Constraint("in (0, 1]", lambda x: (x > 0) & (x <= 1))
boolean = Constraint("0 or 1", lambda x: (x == 0) | (x == 1), discrete=True)
nonnegative_integer = Constraint("a nonnegative integer",
                                 lambda x: (x >= 0) & (x == np.floor(x)) & np.isfinite(x),
                                 discrete=True)
positive_integer = Constraint("a positive integer",
                              lambda x: (x >= 1) & (x == np.floor(x)) & np.isfinite(x),
                              discrete=True)


def _simplex(x):
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, 1e308 + 1e308: not one
        return np.all(x >= 0, axis=-1) & (np.abs(np.sum(x, axis=-1) - 1) < 1e-6)


simplex = Constraint("a probability vector (entries >= 0 summing to 1)",
                     lambda x: np.broadcast_to(_simplex(x)[..., None], x.shape), event_dim=1)


def _lower_cholesky(x):
    tril = np.all(np.triu(x, 1) == 0, axis=(-2, -1))
    diag = np.all(np.diagonal(x, axis1=-2, axis2=-1) > 0, axis=-1)
    return np.broadcast_to((tril & diag & np.all(np.isfinite(x), axis=(-2, -1)))[..., None, None],
                           x.shape)


lower_cholesky = Constraint("lower triangular with a positive diagonal", _lower_cholesky,
                            event_dim=2)


def integer_interval(upper_param):
    """Integers from 0 to the named parameter (Binomial)."""
    c = Constraint(f"an integer in [0, {upper_param}]", None, discrete=True)
    c.upper_name = upper_param
    return c
