"""What families declare for estimators (enumerate_support, relaxed, weak_derivative,
antithetic_noise), and a user's own family served through its declarations alone."""

import numpy as np
import pytest

import scg
from scg.distributions import constraints
from scg.distributions import weak
from scg.distributions._util import plain
from scg.distributions.base import Distribution, broadcast_shape, declares
from tests.estimators.exact import numeric_grad

FINITE = [
    scg.Bernoulli(probs=np.array([0.2, 0.7])),
    scg.Categorical(logits=np.array([[0.1, -0.3, 0.5], [0.0, 0.2, 0.0]])),
    scg.OneHotCategorical(probs=np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
    scg.Binomial(3, np.array([0.3, 0.6])),
    scg.Multinomial(2, probs=np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
]


@pytest.mark.parametrize("dist", FINITE, ids=lambda d: type(d).__name__)
def test_a_finite_support_holds_all_the_probability(dist):
    assert declares(dist, "enumerate_support")
    values = dist.enumerate_support(expand=False)
    assert values.shape[1:] == dist.event_shape
    full = dist.enumerate_support()
    assert full.shape == values.shape[:1] + dist.batch_shape + dist.event_shape
    total = np.exp(dist.log_prob(full)).sum(axis=0)
    np.testing.assert_allclose(total, np.ones(dist.batch_shape), rtol=1e-12)


@pytest.mark.parametrize("dist", FINITE, ids=lambda d: type(d).__name__)
def test_the_log_probability_of_the_whole_support_is_log_prob_at_each_value(dist):
    """log_prob_of_support(): (S,) + batch_shape, log_prob of every value at once (the
    Categorical's without comparing the values: its normalized log-probabilities), bit for
    bit, and so is its derivative."""
    values = dist.enumerate_support(expand=False)
    laid = values.reshape(values.shape[:1] + (1,) * len(dist.batch_shape) + dist.event_shape)
    np.testing.assert_array_equal(dist.log_prob_of_support(), dist.log_prob(laid))
    name = "logits" if "logits" in dist.params else "probs"
    given = dist.params[name]
    others = {k: v for k, v in dist.params.items() if k != name}
    weights = np.random.default_rng(0).normal(size=values.shape[:1] + dist.batch_shape)

    def through(method):
        def f(x):
            d = type(dist)(**others, **{name: x})
            out = d.log_prob_of_support() if method else d.log_prob(laid)
            return np.sum(weights * out)
        return f

    np.testing.assert_array_equal(scg.grad(through(True))(given), scg.grad(through(False))(given))


def test_families_without_a_finite_support_declare_none():
    assert not declares(scg.Normal(0.0, 1.0), "enumerate_support")
    assert not declares(scg.Poisson(2.0), "enumerate_support")
    with pytest.raises(NotImplementedError, match="Normal declares no finite support"):
        scg.Normal(0.0, 1.0).enumerate_support()


class ThreeLevels(Distribution):
    """A user's own family: the values -1, 0 and 2 with probabilities softmax(logits)."""

    arg_constraints = {"logits": constraints.real_vector}
    support = constraints.real
    LEVELS = np.array([-1.0, 0.0, 2.0])

    def __init__(self, logits, validate_args=None):
        self.logits = logits
        super().__init__({"logits": logits}, broadcast_shape(logits)[:-1],
                         validate_args=validate_args)

    def log_prob(self, value):
        log_p = self.logits - scg.logsumexp(self.logits, axis=-1)[..., None]
        hit = np.equal(np.expand_dims(value, -1), self.LEVELS)
        return np.sum(np.where(hit, log_p, 0.0), axis=-1)

    def _sample(self, rng, shape):
        logits = plain(self.logits)  # (the untraced value)
        p = np.exp(logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True))
        u = rng.random(self._extended_shape(shape))
        index = np.sum(u[..., None] > np.cumsum(p, axis=-1)[..., :-1], axis=-1)
        return self.LEVELS[index]

    def weak_derivative(self, param):
        return weak.over_support(weak.softmax) if param == "logits" else None

    def enumerate_support(self, expand=True):
        return self.LEVELS if not expand else np.broadcast_to(
            self.LEVELS.reshape((3,) + (1,) * len(self.batch_shape)), (3,) + self.batch_shape)


def _three_levels_exact(theta):
    p = np.exp(theta - np.logaddexp.reduce(theta))
    return float(p @ (ThreeLevels.LEVELS - 0.5) ** 2)


def test_a_users_family_that_declares_its_support_is_enumerated():
    theta = np.array([0.3, -0.2, 0.5])

    def model(theta):
        x = scg.sample("x", ThreeLevels(theta), estimator=scg.Enumerate())
        return (x - 0.5) ** 2

    value, g = scg.value_and_grad(scg.expectation(model, n=2))(theta)
    assert value == pytest.approx(_three_levels_exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(_three_levels_exact, theta), atol=1e-8)


def test_a_users_family_that_declares_its_support_is_marginalized():
    theta = np.array([0.3, -0.2, 0.5])
    data = np.array([-0.8, 1.9, 0.1])

    def model(theta):
        with scg.plate("data", 3):
            x = scg.sample("x", ThreeLevels(theta), estimator=scg.Marginalize())
            scg.sample("y", scg.Normal(x, 1.0), obs=data)

    def exact(theta):
        log_p = theta - np.logaddexp.reduce(theta)
        joint = log_p[:, None] - 0.5 * (data[None] - ThreeLevels.LEVELS[:, None]) ** 2 \
            - 0.5 * np.log(2 * np.pi)
        return -np.sum(np.logaddexp.reduce(joint, axis=0))

    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), atol=1e-8)


def test_a_users_family_that_declares_a_weak_derivative_gets_measure_valued_gradients():
    theta = np.array([0.3, -0.2, 0.5])

    def model(theta):
        x = scg.sample("x", ThreeLevels(theta), estimator=scg.MeasureValued())
        return (x - 0.5) ** 2

    # (every value evaluated for the one site: exact, no variance)
    g = scg.grad(scg.expectation(model, n=8, seed=3))(theta)
    np.testing.assert_allclose(g, numeric_grad(_three_levels_exact, theta), atol=1e-8)


def test_a_folded_normal_declares_its_weak_derivative_in_scale():
    """E[(x - 0.5)^2] = s^2 - s sqrt(2/pi) + 0.25 for x ~ HalfNormal(s)."""
    def model(s):
        x = scg.sample("x", scg.HalfNormal(s), estimator=scg.MeasureValued())
        return (x - 0.5) ** 2

    g = scg.grad_samples(scg.expectation(model, n=40_000, seed=1))(1.3)
    assert abs(g.mean - (2 * 1.3 - np.sqrt(2 / np.pi))) < 5 * g.stderr


def test_a_family_without_a_support_is_refused_by_its_capability():
    def model(theta):
        return scg.sample("x", scg.Poisson(theta), estimator=scg.Enumerate())
    with pytest.raises(scg.EstimatorError, match="Poisson declares none \\(a family declares "
                       "one with an enumerate_support"):
        scg.grad(scg.expectation(model, n=2))(1.0)
