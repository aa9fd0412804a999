"""Constraints on parameters and supports: singletons with a check and a description.

Checks are module-level functions, not lambdas, so that a constraint (and a distribution
that holds one, such as `to_event`'s Independent) can be pickled; the module-level
constraints pickle as references to themselves (see `pickle_by_name`).
"""

import importlib
import math

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

    @property
    def finiteness(self):
        """Is the constraint "every entry finite" (then its test can join the others of
        that kind: one pass over them all under scg.jit)?"""
        return type(self).check is Constraint.check and self._check is _finite

    def holds(self, value):
        """Does every entry of value satisfy the constraint?"""
        if self._check is _simplex and type(value) is np.ndarray and value.size and \
                value.dtype == np.float64 and type(self).check is Constraint.check:
            # (one pass each, no error-state switch: the entries in [0, 1] cannot overflow
            # the sums; a nan fails the first test)
            if not (value.min() >= 0.0 and value.max() <= 1.0):
                return False
            return bool((np.abs(np.add.reduce(value, axis=-1) - 1.0) < 1e-6).all())
        if type(self).check is Constraint.check and not self.event_dim:
            if type(value) is np.float64:  # (one number: without the array checks)
                test = _ONE_NUMBER.get(self._check)
                return test(float(value)) if test is not None else \
                    value == value and bool(self._check(value))
            if self._check is _finite and type(value) is np.ndarray and \
                    value.dtype == np.float64 and math.isfinite(np.add.reduce(value, None)):
                return True  # (a finite sum: every entry is finite)
        return bool(np.all(self.check(value)))

    def __repr__(self):
        return self.text

    def __reduce_ex__(self, protocol):
        where = self.__dict__.get("_where")
        if where is not None:  # a module-level constraint: unpickled as that same object
            return (_named_constraint, where)
        return super().__reduce_ex__(protocol)


def _named_constraint(module, name):
    return getattr(importlib.import_module(module), name)


def pickle_by_name(namespace):
    """Make the constraints defined at the top level of a module (pass its `globals()`)
    pickle as references to themselves: unpickled, `support is constraints.real` holds."""
    for name, value in list(namespace.items()):
        if isinstance(value, Constraint) and "_where" not in value.__dict__:
            value._where = (namespace["__name__"], name)


class _Interval(Constraint):
    """An interval whose bounds are parameters of the distribution (a moving support)."""

    def __init__(self, low, high):
        super().__init__(f"interval({low}, {high})", None)
        self.low_name, self.high_name = low, high


def interval(low_param, high_param):
    """A support bounded by the named parameters: it moves when they change."""
    return _Interval(low_param, high_param)


def _finite(x):
    return np.isfinite(x)


def _positive(x):
    return (x > 0) & np.isfinite(x)


def _nonnegative(x):
    return (x >= 0) & np.isfinite(x)


def _unit_interval(x):
    return (x >= 0) & (x <= 1)


def _open_unit_interval(x):
    return (x > 0) & (x < 1)


def _half_open_unit_interval(x):
    return (x > 0) & (x <= 1)


def _unit_interval_below_one(x):
    return (x >= 0) & (x < 1)


def _zero_or_one(x):
    return (x == 0) | (x == 1)


def _nonnegative_integer(x):
    return (x >= 0) & (x == np.floor(x)) & np.isfinite(x)


def _positive_integer(x):
    return (x >= 1) & (x == np.floor(x)) & np.isfinite(x)


# the same tests of one Python float (nan fails each), without numpy's per-call cost
def _positive_number(v):
    return 0.0 < v < math.inf


def _nonnegative_number(v):
    return 0.0 <= v < math.inf


def _unit_interval_number(v):
    return 0.0 <= v <= 1.0


def _open_unit_interval_number(v):
    return 0.0 < v < 1.0


_ONE_NUMBER = {_finite: math.isfinite, _positive: _positive_number,
               _nonnegative: _nonnegative_number, _unit_interval: _unit_interval_number,
               _open_unit_interval: _open_unit_interval_number}


real = Constraint("real", _finite)
real_vector = Constraint("real vector", _finite, event_dim=1)
positive = Constraint("positive", _positive)
positive_vector = Constraint("positive (every entry of the vector)", _positive, event_dim=1)
nonnegative = Constraint("nonnegative", _nonnegative)
unit_interval = Constraint("in [0, 1]", _unit_interval)
open_unit_interval = Constraint("in (0, 1)", _open_unit_interval)
half_open_unit_interval = Constraint("in (0, 1]", _half_open_unit_interval)
unit_interval_below_one = Constraint("in [0, 1)", _unit_interval_below_one)
boolean = Constraint("0 or 1", _zero_or_one, discrete=True)
nonnegative_integer = Constraint("a nonnegative integer", _nonnegative_integer, discrete=True)
positive_integer = Constraint("a positive integer", _positive_integer, discrete=True)


def _simplex(x):
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, 1e308 + 1e308: not one
        ok = np.all(x >= 0, axis=-1) & (np.abs(np.sum(x, axis=-1) - 1) < 1e-6)
    return np.broadcast_to(ok[..., None], x.shape)


simplex = Constraint("a probability vector (entries >= 0 summing to 1)", _simplex, event_dim=1)


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


pickle_by_name(globals())
