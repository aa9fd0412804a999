"""A coin's declared log-odds (Distribution.log_odds): what Bernoulli declares, who inherits
the declaration, and the estimators that take a coin's probabilities from it (DisARM,
ARMS, and UnorderedSet and IndeCateR on a coin) against the route through log_prob, which
keeps its checks."""

import numpy as np
import pytest

import scg
from scg.distributions import constraints
from scg.distributions._util import plain
from scg.distributions.base import broadcast_shape, declares

from .exact import numeric_grad, sig

TH = np.array([-2.0, -1.3, -0.7, -0.3, 0.0, 0.2, 0.5, 0.9, 1.4, 2.1])
T = np.array([0.1, 0.9, 0.3, 0.6, 0.2, 0.8, 0.4, 0.7, 0.05, 0.65])


class OwnLogProb(scg.Bernoulli):
    """Bernoulli's law through a log_prob of its own: no log-odds are promised."""

    def log_prob(self, value):
        return super().log_prob(value)


class OwnSupport(scg.Bernoulli):
    def enumerate_support(self, expand=True):
        return super().enumerate_support(expand)


class Renamed(scg.Bernoulli):
    """A user's subclass that changes nothing: Bernoulli's declarations hold."""


@pytest.mark.parametrize("params", [{"logits": np.array([-800.0, -1.5, 0.0, 2.0, 40.0])},
                                    {"probs": np.array([0.0, 1e-300, 0.3, 0.999, 1.0])}],
                         ids=["logits", "probs"])
def test_bernoulli_declares_the_difference_of_its_log_probabilities(params):
    d = scg.Bernoulli(**params)
    assert declares(d, "log_odds") and declares(d.to_event(1), "log_odds")
    with np.errstate(divide="ignore"):
        want = d.log_prob(np.ones(5)) - d.log_prob(np.zeros(5))
    got = d.log_odds()
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if "probs" in params:
        assert got[0] == -np.inf and got[-1] == np.inf


def test_the_log_odds_are_traced_in_the_parameters():
    by_logits = scg.grad(lambda th: np.sum(scg.Bernoulli(logits=th).log_odds()))(TH)
    np.testing.assert_array_equal(by_logits, np.ones_like(TH))
    p = sig(TH)
    by_probs = scg.grad(lambda q: np.sum(scg.Bernoulli(probs=q).log_odds()))(p)
    np.testing.assert_allclose(by_probs, 1.0 / (p * (1.0 - p)), rtol=1e-12)


def test_a_subclass_with_a_law_of_its_own_does_not_inherit_the_declaration():
    assert declares(Renamed(logits=TH), "log_odds")
    for own in (OwnLogProb(logits=TH), OwnSupport(logits=TH)):
        assert not declares(own, "log_odds")
        with pytest.raises(NotImplementedError, match="declares no log-odds"):
            own.log_odds()
    assert not declares(scg.Categorical(logits=np.zeros(2)), "log_odds")
    assert not declares(scg.Normal(0.0, 1.0), "log_odds")


def _model(family, estimator, probs):
    def model(th):
        d = family(probs=scg.sigmoid(th)) if probs else family(logits=th)
        if isinstance(estimator, scg.UnorderedSet):  # (a set per element of a plate)
            with scg.plate("p", TH.size):
                b = scg.sample("b", d, estimator=estimator)
                return (b - T) ** 2
        b = scg.sample("b", d.to_event(1), estimator=estimator)
        return (np.sum(b * T) - 1.0) ** 2
    return model


ESTIMATORS = [scg.DisARM(), scg.ARMS(3), scg.IndeCateR(), scg.UnorderedSet(2)]


@pytest.mark.parametrize("probs", [False, True], ids=["logits", "probs"])
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_the_declared_route_gives_the_estimate_of_the_log_prob_route(estimator, probs):
    """The same draws and the same estimate up to rounding: the probabilities from the
    log-odds differ from exp(log_prob) in the last bits only."""
    declared = scg.value_and_grad(scg.expectation(_model(scg.Bernoulli, estimator, probs),
                                                  n=64, seed=3))(TH)
    by_log_prob = scg.value_and_grad(scg.expectation(_model(OwnLogProb, estimator, probs),
                                                     n=64, seed=3))(TH)
    assert declared[0] == pytest.approx(by_log_prob[0], rel=1e-13)
    np.testing.assert_allclose(declared[1], by_log_prob[1], rtol=1e-13)


@pytest.mark.parametrize("probs", [False, True], ids=["logits", "probs"])
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_jit_replays_the_declared_route_bit_for_bit(estimator, probs):
    model = _model(scg.Bernoulli, estimator, probs)
    eager = scg.value_and_grad(scg.expectation(model, n=16, seed=5))
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=16, seed=5)))
    for i in range(5):
        (v0, g0), (v1, g1) = eager(TH + 0.1 * i), jitted(TH + 0.1 * i)
        assert v0 == v1
        np.testing.assert_array_equal(g0, g1)
    assert jitted.stats["replays"] >= 2, jitted.explain()


@pytest.mark.parametrize("estimator", [scg.DisARM(), scg.ARMS(3)], ids=repr)
def test_an_infinite_log_odds_names_the_site_also_on_a_replay(estimator):
    """Unvalidated logits of inf: one value has probability 0, and the logit the estimate
    differentiates is infinite. A replay's check misses, and the run afresh raises."""
    model = _model(scg.Bernoulli, estimator, False)
    jitted = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
    scg.distributions.set_validation(False)
    try:
        for _ in range(4):
            jitted(TH)
        assert jitted.stats["replays"] >= 1, jitted.explain()
        edge = TH.copy()
        edge[3] = np.inf
        for fn in (jitted, scg.grad(scg.expectation(model, n=4, seed=0))):
            with pytest.raises(scg.EstimatorError, match=r"site 'b'.*probability 0 at some "
                               r"element.*MeasureValued"):
                fn(edge)
    finally:
        scg.distributions.set_validation(True)


@pytest.mark.parametrize("estimator", [scg.DisARM(), scg.ARMS(3)], ids=repr)
def test_per_draw_probs_through_the_log_odds(estimator):
    """probs that depend on a pathwise draw upstream: log_odds of per-draw probs, unbiased
    against quadrature over the draw, and replayed bit for bit."""
    def model(th):
        x = scg.sample("x", scg.Normal(th[0], 1.0))
        b = scg.sample("b", scg.Bernoulli(probs=scg.sigmoid(x + th[1])), estimator=estimator)
        return (b - 0.2) ** 2 + 0.1 * x ** 2

    def value(th, grid=np.linspace(-8, 8, 4001)):
        x = grid + th[0]
        density = np.exp(-0.5 * grid ** 2) / np.sqrt(2 * np.pi)
        p = sig(x + th[1])
        return np.trapezoid(density * (p * 0.8 ** 2 + (1 - p) * 0.2 ** 2 + 0.1 * x ** 2), grid)

    th = np.array([0.3, -0.5])
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=4))(th)
    z = (gs.mean - numeric_grad(value, th)) / gs.stderr
    assert np.all(np.abs(z) < 4.5), z
    eager = scg.value_and_grad(scg.expectation(model, n=16, seed=1))
    jitted = scg.jit(scg.value_and_grad(scg.expectation(model, n=16, seed=1)))
    for i in range(5):
        (v0, g0), (v1, g1) = eager(th + 0.1 * i), jitted(th + 0.1 * i)
        assert v0 == v1
        np.testing.assert_array_equal(g0, g1)
    assert jitted.stats["replays"] >= 2, jitted.explain()


class TruncatedPoisson(scg.Distribution):
    """A user's family that declares the support {0, 1} of a Poisson law: its
    probabilities add up to exp(-r) (1 + r), close to 1 only for a small rate r."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.real

    def __init__(self, rate, validate_args=None):
        self.rate = rate
        super().__init__({"rate": rate}, broadcast_shape(rate), validate_args=validate_args)

    def log_prob(self, value):
        return value * np.log(self.rate) - self.rate

    def _sample(self, rng, shape):
        rate = plain(self.rate)  # (the untraced value)
        p = rate * np.exp(-rate)
        return (rng.random(self._extended_shape(shape)) < p).astype(float)

    def enumerate_support(self, expand=True):
        values = np.array([0.0, 1.0])
        return values if not expand else np.broadcast_to(
            values.reshape((2,) + (1,) * len(self.batch_shape)), (2,) + self.batch_shape)


@pytest.mark.parametrize("estimator", [scg.DisARM(), scg.ARMS(3), scg.IndeCateR()], ids=repr)
def test_the_log_prob_route_checks_that_the_support_holds_all_the_probability(estimator):
    """A declared support that misses values is refused eagerly, and on a replay whose
    parameters make it miss (the recorded call's rate held the probability to 1e-6)."""
    def model(rate):
        x = scg.sample("x", TruncatedPoisson(rate).to_event(1), estimator=estimator)
        return np.sum((x - 0.3) ** 2)

    small = np.full(3, 1e-4)
    jitted = scg.jit(scg.grad(scg.expectation(model, n=4, seed=0)))
    for _ in range(4):
        jitted(small)
    # (IndeCateR draws through the family's own _sample, which calls the generator from
    # the user's code: scg.jit runs such a call afresh every time)
    assert jitted.stats["replays"] >= 1 or isinstance(estimator, scg.IndeCateR), \
        jitted.explain()
    for fn in (jitted, scg.grad(scg.expectation(model, n=4, seed=0))):
        with pytest.raises(scg.EstimatorError, match=r"site 'x'.*TruncatedPoisson.*do not add "
                           r"up to 1.*Declare every value"):
            fn(np.full(3, 0.5))
