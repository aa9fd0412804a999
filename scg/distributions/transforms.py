"""Bijections for TransformedDistribution and transform_to: x -> y with log|det dy/dx|.

Each transform has `__call__(x)` (forward), `inv(y)`, `log_abs_det_jacobian(x, y)`,
`domain` and `codomain` (constraints), `event_dim` (how many rightmost dimensions one
application mixes: 0 elementwise, 1 for a vector) and, for elementwise ones, `sign` (+1
increasing, -1 decreasing). All are written with numpy calls on traced values, so they are
differentiable (to any order) in their input and in their own parameters. `inside(y)` says
where y is in the codomain (a TransformedDistribution's log-density is -inf elsewhere) and
`safe` is a point of the codomain where the inverse stays finite.
"""

import numpy as np

from ..core.tape import Tracer
from ..numpy import rules as R
from . import constraints


class Transform:
    """A bijection between `domain` and `codomain`; see the module's docstring."""

    domain = constraints.real
    codomain = constraints.real
    event_dim = 0
    sign = 1
    safe = 0.0
    params = {}

    def __call__(self, x):
        raise NotImplementedError

    def inv(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        """log|det dy/dx| at x (with y = self(x)), shape x.shape without `event_dim` dims."""
        raise NotImplementedError

    def inside(self, y):
        """Where y lies in the codomain (boolean, y's shape without `event_dim` dims)."""
        return np.isfinite(y)

    def forward_shape(self, shape):
        """The shape of y for an x of `shape`."""
        return tuple(shape)

    def rebuild(self, params):
        """The same transform with other parameter values (see `params`)."""
        return self

    def safe_point(self, shape):
        """A value of the codomain of `shape` where the inverse is finite."""
        return np.full(shape, self.safe)

    def __repr__(self):
        return f"{type(self).__name__}()"


class IdentityTransform(Transform):
    """y = x (transform_to of an unconstrained real)."""

    def __call__(self, x):
        return x

    def inv(self, y):
        return y

    def log_abs_det_jacobian(self, x, y):
        return 0.0 * x


class ExpTransform(Transform):
    """y = exp(x), onto the positive reals.

    Example:
        >>> scg.transforms.ExpTransform().inv(1.0)   # 0.0
    """

    codomain = constraints.positive
    safe = 1.0

    def __call__(self, x):
        return np.exp(x)

    def inv(self, y):
        return np.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x

    def inside(self, y):
        return np.greater(y, 0.0)


class AffineTransform(Transform):
    """y = loc + scale * x; loc and scale may be traced (differentiable) and broadcast
    against x; scale must not be 0.

    Args:
        loc: the shift.
        scale: the factor (negative flips the order).
        event_dim: 0 elementwise; k to treat the rightmost k dims as one event (their
            log-determinants are summed).

    Example:
        >>> scg.transforms.AffineTransform(1.0, 2.0)(3.0)   # 7.0
    """

    def __init__(self, loc, scale, event_dim=0):
        self.loc, self.scale, self.event_dim = loc, scale, int(event_dim)
        self.params = {"loc": loc, "scale": scale}
        self.sign = 0  # (unknown for a traced scale)
        if not isinstance(scale, Tracer):
            plain_scale = np.asarray(scale, dtype=float)
            if np.any(plain_scale == 0) or not np.all(np.isfinite(plain_scale)):
                raise ValueError("AffineTransform: parameter 'scale' must be nonzero and "
                                 "finite (a scale of 0 is not invertible); fix the value "
                                 "passed as scale=")
            self.sign = 1 if np.all(plain_scale > 0) else (-1 if np.all(plain_scale < 0) else 0)

    def rebuild(self, params):
        out = AffineTransform.__new__(AffineTransform)
        out.__dict__.update(self.__dict__)
        out.loc, out.scale = params["loc"], params["scale"]
        out.params = {"loc": out.loc, "scale": out.scale}
        return out

    def __call__(self, x):
        return self.loc + self.scale * x

    def inv(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        ladj = np.log(np.abs(self.scale)) + 0.0 * x
        if self.event_dim:
            ladj = np.sum(ladj, axis=tuple(range(-self.event_dim, 0)))
        return ladj

    def inside(self, y):
        finite = np.isfinite(y)
        return np.all(finite, axis=tuple(range(-self.event_dim, 0))) if self.event_dim else finite

    def forward_shape(self, shape):
        return tuple(np.broadcast_shapes(tuple(shape), R.shape(self.loc), R.shape(self.scale)))

    def __repr__(self):
        return f"AffineTransform(event_dim={self.event_dim})"


class SigmoidTransform(Transform):
    """y = 1 / (1 + exp(-x)), onto (0, 1)."""

    codomain = constraints.open_unit_interval
    safe = 0.5

    def __call__(self, x):
        return R.sigmoid(x)

    def inv(self, y):
        return np.log(y) - np.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        return -R.softplus(-x) - R.softplus(x)

    def inside(self, y):
        return np.logical_and(np.greater(y, 0.0), np.less(y, 1.0))


class TanhTransform(Transform):
    """y = tanh(x), onto (-1, 1) (the squashing of bounded actions)."""

    codomain = constraints.Constraint("in (-1, 1)", None)
    safe = 0.0

    def __call__(self, x):
        return np.tanh(x)

    def inv(self, y):
        return 0.5 * (np.log1p(y) - np.log1p(-y))

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2 x)): no cancellation for large |x|
        return 2.0 * (np.log(2.0) - x - R.softplus(-2.0 * x))

    def inside(self, y):
        return np.logical_and(np.greater(y, -1.0), np.less(y, 1.0))


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)), onto the positive reals."""

    codomain = constraints.positive
    safe = 1.0

    def __call__(self, x):
        return R.softplus(x)

    def inv(self, y):
        # log(exp(y) - 1) = y + log(1 - exp(-y)), finite for large y
        return y + np.log(-np.expm1(-y))

    def log_abs_det_jacobian(self, x, y):
        return -R.softplus(-x)

    def inside(self, y):
        return np.greater(y, 0.0)


class StickBreakingTransform(Transform):
    """Vectors of K - 1 reals onto the simplex of K probabilities, by breaking a stick.

    Entry i takes the fraction z_i = sigmoid(x_i - log(K - 1 - i)) of what is left, the
    last entry the rest; x = 0 maps to the uniform vector. event_dim 1.

    Example:
        >>> scg.transforms.StickBreakingTransform()(np.zeros(2))   # [1/3, 1/3, 1/3]
    """

    domain = constraints.real_vector
    codomain = constraints.simplex
    event_dim = 1

    def __call__(self, x):
        shifted = _shifted(x)
        # log of what is left after breaks 0..i: the cumulative sum of log(1 - z)
        log_left = _cumsum(-R.softplus(shifted))
        head = R.sigmoid(shifted) * np.exp(log_left + R.softplus(shifted))  # z_i * left before i
        return np.concatenate([head, np.exp(log_left[..., -1:])], axis=-1)

    def inv(self, y):
        m = R.shape(y)[-1] - 1
        head = y[..., :-1]
        left = 1.0 - _cumsum(head)                    # left after breaks 0..i
        return np.log(head) - np.log(np.maximum(left, 1e-300)) + np.log(np.arange(m, 0, -1.0))

    def log_abs_det_jacobian(self, x, y):
        return np.sum(np.log(y[..., :-1]) - R.softplus(_shifted(x)), axis=-1)

    def inside(self, y):
        return np.logical_and(np.all(np.greater(y, 0.0), axis=-1),
                              np.less(np.abs(np.sum(y, axis=-1) - 1.0), 1e-6))

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)

    def safe_point(self, shape):
        return np.full(shape, 1.0 / shape[-1])


class LowerCholeskyTransform(Transform):
    """Square matrices onto lower-triangular ones with a positive diagonal: the strict lower
    triangle kept, the diagonal exponentiated (transform_to of MultivariateNormal's
    scale_tril). event_dim 2."""

    codomain = constraints.lower_cholesky
    event_dim = 2

    def __call__(self, x):
        k = R.shape(x)[-1]
        eye = np.eye(k)
        return x * np.tril(np.ones((k, k)), -1) + np.exp(x * eye) * eye

    def inv(self, y):
        k = R.shape(y)[-1]
        eye = np.eye(k)
        diagonal = y * eye + (1.0 - eye)              # (1 off the diagonal: log 1 = 0)
        return y * np.tril(np.ones((k, k)), -1) + np.log(diagonal) * eye

    def log_abs_det_jacobian(self, x, y):
        return np.sum(x * np.eye(R.shape(x)[-1]), axis=(-2, -1))


def _cumsum(x):
    """The cumulative sum along the last axis (a product with a triangle of ones)."""
    m = R.shape(x)[-1]
    return x @ np.triu(np.ones((m, m)))


def _shifted(x):
    """x_i - log(K - 1 - i): the stick-breaking logits, 0 breaking evenly."""
    m = R.shape(x)[-1]
    return x - np.log(np.arange(m, 0, -1.0))
