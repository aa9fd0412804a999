"""The concrete (Gumbel-softmax) relaxations of Bernoulli and OneHotCategorical (Maddison,
Mnih and Teh 2017; Jang, Gu and Poole 2017): what the relaxation estimators ask of a family.

`Bernoulli.relaxed(T)` and `OneHotCategorical.relaxed(T)` return them. Each is a
distribution of its own (a draw in (0, 1) or inside the simplex, with a path from uniform
noise and the concrete log-density), and it gives the relaxation estimators (GumbelSoftmax,
ReinMax, GumbelRao, GappedST, REBAR, RELAX) what they use without their knowing the
family:

- `logits`: the traced logits (scores) of the family;
- `noise_of(u)`: uniform numbers to the relaxation's noise (logistic, or Gumbel per
  category); `soft(scores)`: the map to relaxed values at temperature 1 (sigmoid,
  softmax), so the relaxed draw is `soft((logits + noise_of(u)) / T)`;
- `hard(y)`: the exact discrete value a relaxed value rounds to (y > 1/2, the one-hot
  argmax), distributed as the family when y is a relaxed draw;
- `conditional(b, v, wrap)`: scores z~ = logits + noise distributed as the noise given
  that the draw rounds to b, along a path in the logits (REBAR's z~ | b, Gumbel-Rao's
  conditional Gumbels; a category's scores up to a common shift, which soft and hard
  ignore);
- `soft_jacobian(y, mean_axis=None)`: plain, the derivative of `soft` at the scores whose
  image is y (y (1 - y), or diag(y) - y y^T: symmetric; averaged over axis 0), and `apply_jacobian(J, delta)`, traced,
  J delta: a straight-through estimator is one plain Jacobian per draw, applied to the
  logits' derivative; `conditional_jacobian(b, v, T)`, plain, the mean of the Jacobians
  at the conditional scores over T (Gumbel-Rao's; one numba pass for the categories);
  `reinmax_jacobian(logits, b, T)`, plain, 2 J(pi1) - J(pi0) / 2 with pi0 = soft(logits)
  and pi1 = (soft(logits / T) + b) / 2 (ReinMax's; one numba pass for the categories);
- `gap_offset(logits, b, gap)`: the smallest move of the scores after which they round
  to b with a margin of `gap` (the gapped straight-through estimator's perturbation);
- `log_prob(y)`: the concrete log-density; `form`: the relaxed draw in words.

Example:
    >>> r = scg.OneHotCategorical(logits=np.zeros(3)).relaxed(0.5)
    >>> y = r.sample(np.random.default_rng(0))   # a point inside the simplex
    >>> r.hard(y)                                # its one-hot rounding
"""

import numbers
from math import lgamma

import numpy as np

from ..core import effects
from ..numpy import rules as R
from ..kernels.relaxed import conditional_softmax_jacobian, reinmax_softmax_jacobian
from . import constraints
from .base import Distribution, broadcast_shape

_TINY = np.finfo(float).tiny
_BELOW_ONE = 1.0 - np.finfo(float).epsneg  # the largest float below 1


def _temperature(cls, temperature):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"{cls}: temperature must be a positive finite number, got "
                         f"{temperature!r}")
    return float(temperature)


def open_uniform(u):
    """u clipped into (0, 1): a uniform draw of exactly 0 has no finite noise."""
    return np.clip(u, _TINY, _BELOW_ONE)


class _Concrete(Distribution):
    """What both relaxations share: the temperature beside the logits, uniform noise, and
    the path soft((logits + noise_of(u)) / T). A subclass gives `noise_of`, `soft` and
    `_plain_soft` (numpy's own formula of `soft`, for plain values)."""

    has_rsample = True

    def _rebuild(self, params):
        out = type(self)(self.temperature, **params, validate_args=False)
        out._checked = self._checked
        return out

    def noise(self, rng, shape=()):
        return rng.random(self._extended_shape(shape))

    def path(self, noise):
        scores = R.divide(R.add(self.logits, self.noise_of(noise)), self.temperature)
        if _is_plain(self.logits, noise):  # (numpy's own formula: the same bits every call)
            return self._plain_soft(scores)
        return self.soft(scores)

    def conditional_jacobian(self, b, v, temperature):
        """Plain, on plain logits: the mean over axis 0 of v (k uniform draws) of the
        Jacobian of soft at the conditional scores given b, over T (Gumbel-Rao's)."""
        y = self.soft(R.divide(self.conditional(b, v), temperature))
        return R.divide(self.soft_jacobian(y, mean_axis=0), temperature)

    def reinmax_jacobian(self, logits, b, temperature):
        """Plain, on plain logits (broadcast to the draws b): ReinMax's 2 J(pi1) - J(pi0) /
        2, pi0 = soft(logits), pi1 = (soft(logits / T) + b) / 2, J the Jacobian of soft."""
        pi0 = self.soft(logits)
        pi1 = 0.5 * (self.soft(logits / temperature) + b)
        return 2.0 * self.soft_jacobian(pi1) - 0.5 * self.soft_jacobian(pi0)


class RelaxedBernoulli(_Concrete):
    """The binary concrete distribution: y = sigmoid((logits + L) / T) with logistic noise L
    = log u - log(1 - u); `hard(y) = 1[y > 1/2]` is a Bernoulli(logits=logits) draw.

    Args:
        temperature: T > 0 (the draws approach 0 and 1 as T -> 0).
        logits: the coin's logits, possibly traced.

    Example:
        >>> scg.RelaxedBernoulli(0.5, logits=0.3).log_prob(0.7)
    """

    arg_constraints = {"logits": constraints.real}
    support = constraints.unit_interval
    form = "sigmoid((logits + logistic noise) / T)"  # (for explain())

    def __init__(self, temperature, logits, validate_args=None):
        self.temperature = _temperature("RelaxedBernoulli", temperature)
        self.logits = logits
        super().__init__({"logits": logits}, broadcast_shape(logits),
                         validate_args=validate_args)

    # ------------------------------------------------------------ the relaxation
    @staticmethod
    def noise_of(u):
        u = open_uniform(u)
        return np.log(u) - np.log1p(-u)  # logistic

    @staticmethod
    def soft(scores):
        return R.sigmoid(scores)

    @staticmethod
    def _plain_soft(scores):
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-scores))

    @staticmethod
    def hard(y):
        return effects.opaque(_round_half, y)

    @staticmethod
    def soft_jacobian(y, mean_axis=None):
        j = y * (1.0 - y)
        return j if mean_axis is None else np.mean(j, axis=mean_axis)

    @staticmethod
    def apply_jacobian(jacobian, delta):
        return R.multiply(jacobian, delta)

    def conditional(self, b, v, wrap=lambda x: x):
        """Logistic scores z~ given that they round to b (plain 0/1), from uniforms v: the
        noise's uniform lies on (1 - p, 1) for b = 1, on (0, 1 - p) for b = 0, so u~ = 1 -
        p + v p or v (1 - p), a path in the logits through p = sigmoid(logits). `wrap`
        lifts plain per-draw arrays (b, v) into the caller's draws."""
        v = open_uniform(v)
        p = R.sigmoid(self.logits)
        one_minus_p = R.subtract(1.0, p)
        u_tilde = R.add(R.multiply(wrap(b), R.add(one_minus_p, R.multiply(wrap(v), p))),
                        R.multiply(wrap(1.0 - b), R.multiply(wrap(v), one_minus_p)))
        return R.add(self.logits, R.subtract(R.log(u_tilde), R.log1p(R.negative(u_tilde))))

    @staticmethod
    def gap_offset(logits, b, gap):
        """Plain: the move of the logits to max(a, gap) for b = 1, min(a, -gap) for b = 0
        (a two-category gapped perturbation, scores (0, a))."""
        return effects.opaque(_bernoulli_gap, logits, b, gap)

    # ------------------------------------------------------------ as a distribution
    def log_prob(self, value):
        # the logistic density of x = logit(y) (location logits / T, scale 1 / T), times
        # |dx/dy| = 1 / (y (1 - y))
        log_y, log_not = np.log(value), np.log1p(-value)
        z = R.subtract(R.multiply(self.temperature, R.subtract(log_y, log_not)), self.logits)
        return (np.log(self.temperature) - z - 2.0 * R.softplus(R.negative(z))
                - log_y - log_not)

    @property
    def mean(self):  # (no closed form: the mean of its rounding is sigmoid(logits))
        raise NotImplementedError("RelaxedBernoulli has no closed-form mean in scg")


class RelaxedOneHotCategorical(_Concrete):
    """The concrete distribution on the simplex: y = softmax((logits + G) / T) with Gumbel
    noise G = -log(-log u) per category; `hard(y)`, the one-hot argmax, is a
    OneHotCategorical(logits=logits) draw.

    Args:
        temperature: T > 0.
        logits: the categories' logits along the last axis, possibly traced.

    Example:
        >>> scg.RelaxedOneHotCategorical(1.0, logits=np.zeros(3)).log_prob(np.ones(3) / 3)
    """

    arg_constraints = {"logits": constraints.real_vector}
    support = constraints.simplex
    form = "softmax((logits + Gumbel noise) / T)"  # (for explain())

    def __init__(self, temperature, logits, validate_args=None):
        self.temperature = _temperature("RelaxedOneHotCategorical", temperature)
        self.logits = logits
        shape = R.shape(logits)
        if len(shape) < 1 or shape[-1] == 0:
            raise ValueError("RelaxedOneHotCategorical: logits need a last axis of at least "
                             f"one category, got shape {tuple(shape)}")
        self.num_categories = shape[-1]
        super().__init__({"logits": logits}, shape[:-1], shape[-1:],
                         validate_args=validate_args)

    # ------------------------------------------------------------ the relaxation
    @staticmethod
    def noise_of(u):
        return -np.log(-np.log(open_uniform(u)))  # Gumbel

    @staticmethod
    def soft(scores):
        return R.softmax(scores, axis=-1)

    @staticmethod
    def _plain_soft(scores):
        e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)

    @staticmethod
    def hard(y):
        return effects.opaque(_one_hot_argmax, y)

    @staticmethod
    def soft_jacobian(y, mean_axis=None):
        # diag(y) - y y^T over the last two axes; with mean_axis (the first), its mean over
        # that axis: diag(mean y) - mean(y y^T), the outer products as one batched product
        K = y.shape[-1]
        if mean_axis is None:
            return y[..., :, None] * (np.eye(K) - y[..., None, :])
        if mean_axis != 0:
            raise ValueError("soft_jacobian: mean_axis must be None or 0")
        k = y.shape[0]
        outer = np.matmul(np.moveaxis(y, 0, -1), np.moveaxis(y, 0, -2)) / k
        return np.mean(y, axis=0)[..., None] * np.eye(K) - outer

    @staticmethod
    def apply_jacobian(jacobian, delta):
        return R.squeeze(R.matmul(jacobian, R.expand_dims(delta, -1)), -1)

    def conditional_jacobian(self, b, v, temperature):
        # (one pass of a numba kernel: numpy's passes reduce over the short category axis)
        return effects.opaque(conditional_softmax_jacobian, self.logits, b, v, temperature)

    def reinmax_jacobian(self, logits, b, temperature):
        # (one pass of a numba kernel, for numpy's fifteen over (rows, K) and (rows, K, K))
        return effects.opaque(reinmax_softmax_jacobian, logits, b, temperature)

    def conditional(self, b, v, wrap=lambda x: x):
        """Gumbel scores z~ given that their argmax is b (plain one-hot), from uniforms v,
        with theta the log-probabilities: z~_k = -log(-log v_k) for the chosen k (the max
        of the Gumbels theta + G is Gumbel-distributed at logsumexp theta = 0) and z~_i =
        -log(-log(v_i) e^(-theta_i) - log v_k) for the others (Gumbels truncated below
        z~_k), along paths in theta: the scores theta + G, a shift of logits + G. `wrap` lifts plain per-draw arrays into the caller's
        draws."""
        theta = R.log_softmax(self.logits, axis=-1)
        v = open_uniform(v)
        minus_log_v = -np.log(v)
        top = np.broadcast_to(np.sum(b * minus_log_v, axis=-1, keepdims=True), np.shape(v))
        others = R.negative(R.log(R.add(R.multiply(wrap(minus_log_v), R.exp(R.negative(theta))),
                                        wrap(top))))
        return R.add(wrap(b * -np.log(top)), R.multiply(wrap(1.0 - b), others))

    @staticmethod
    def gap_offset(logits, b, gap):
        """Plain: raise the chosen category's score to the maximum, and lower every other
        one to at most the maximum minus `gap` (Fan et al. 2022, eq. 7)."""
        return effects.opaque(_categorical_gap, logits, b, gap)

    # ------------------------------------------------------------ as a distribution
    def log_prob(self, value):
        # (K - 1)! T^(K - 1) prod_k a_k y_k^(-T - 1) / (sum_k a_k y_k^-T)^K, a = exp(logits)
        # (Maddison et al. 2017, eq. 5), on the first K - 1 coordinates
        K, T = self.num_categories, self.temperature
        log_y = np.log(value)
        scores = R.subtract(self.logits, R.multiply(T, log_y))
        return (lgamma(K) + (K - 1) * np.log(T)
                + R.sum_(R.subtract(scores, log_y), axis=-1)
                - K * R.logsumexp(scores, axis=-1))


def logits_of(params, pairs):
    """The traced logits of a family's parameters: as given, or from its probs (log p, or
    log p - log(1 - p) for a coin, `pairs`); probs of 0 or 1 give infinite logits, their
    logs taken where they are finite, without np.errstate (which scg.jit cannot replay)."""
    if params.get("logits") is not None:
        return params["logits"]
    p = params["probs"]
    if not pairs:
        return _log_positive(p)
    below_one = np.less(p, 1.0)
    log_not = np.where(below_one, R.log1p(R.negative(np.where(below_one, p, 0.0))), -np.inf)
    return R.subtract(_log_positive(p), log_not)


def _log_positive(p):
    positive = np.greater(p, 0.0)
    return np.where(positive, R.log(np.where(positive, p, 1.0)), -np.inf)


def _is_plain(*values):
    return all(isinstance(v, (np.ndarray, float, int, np.floating)) for v in values)


def _round_half(y):
    return (np.asarray(y) > 0.5).astype(float)


def _one_hot_argmax(y):
    y = np.asarray(y)
    return np.equal(np.argmax(y, axis=-1)[..., None], np.arange(y.shape[-1])).astype(float)


def _bernoulli_gap(a, b, gap):
    return np.where(b > 0.5, np.maximum(a, gap), np.minimum(a, -gap)) - a


def _categorical_gap(theta, b, gap):
    top = np.max(theta, axis=-1, keepdims=True)
    return (top - theta) * b - np.maximum(theta - top + gap, 0.0) * (1.0 - b)
