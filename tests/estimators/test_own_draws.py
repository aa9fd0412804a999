"""The support test of log_prob is skipped for an estimator's own draws, and only there."""

import numpy as np
import pytest

import scg

THETA = np.array([-1.0, 0.3, 2.0])


class _Halves(scg.Score):
    """A misuse on purpose: values of another law (1/2, outside {0, 1}) scored as draws."""
    own_draws = False

    def draw(self, d):
        return np.full(np.shape(d.sample()), 0.5)


class _TrustedHalves(_Halves):
    own_draws = True


def _model(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
        return np.sum(b)
    return model


def test_values_of_another_law_still_meet_the_support_test():
    grad = scg.grad(scg.expectation(_model(_Halves()), n=4, seed=0))
    with pytest.raises(FloatingPointError, match="outside the support"):
        grad(THETA)


def test_own_draws_skip_it():
    # (the flag is the estimator's promise: given values outside the support, the formula's
    # value is used, which is why only the estimators that draw from the site's law set it)
    assert scg.Score.own_draws and scg.Pathwise.own_draws and scg.Enumerate.own_draws
    assert not scg.GumbelSoftmax.own_draws
    g = scg.grad(scg.expectation(_model(_TrustedHalves()), n=4, seed=0))(THETA)
    assert np.all(np.isfinite(g))


def test_replays_of_own_draws_check_no_support():
    grad = scg.jit(scg.grad(scg.expectation(_model(scg.Score(baseline="loo")), n=8, seed=1)))
    eager = scg.grad(scg.expectation(_model(scg.Score(baseline="loo")), n=8, seed=1))
    for _ in range(4):
        np.testing.assert_array_equal(grad(THETA), eager(THETA))
    assert grad.stats["replays"] >= 1
    assert "support" not in grad.explain()


@pytest.mark.parametrize("how", ["validate_args", "set_validation"])
def test_unchecked_parameters_still_have_their_log_probabilities_checked(how):
    """A coin's own draws have finite log-probabilities only if its logits are finite: with
    validation off, an infinite logit still gets the site's error, not a silent number."""
    theta = np.array([0.5, np.inf, -1.0])

    def model(theta):
        law = scg.Bernoulli(logits=theta, validate_args=False) if how == "validate_args" \
            else scg.Bernoulli(logits=theta)
        b = scg.sample("b", law, estimator=scg.Score(baseline="loo"))
        return np.sum(b)

    grad = scg.grad(scg.expectation(model, n=4, seed=0))
    if how == "set_validation":
        scg.distributions.set_validation(False)
    try:
        with np.errstate(invalid="ignore"), \
                pytest.raises(FloatingPointError, match="log_prob is not finite"):
            grad(theta)
    finally:
        scg.distributions.set_validation(True)
    with pytest.raises(ValueError, match="must be"):  # (validated: the constraint's error)
        scg.grad(scg.expectation(lambda t: np.sum(scg.sample(
            "b", scg.Bernoulli(logits=t), estimator="score")), n=4, seed=0))(theta)


def test_only_the_log_probabilities_that_can_fail_are_checked(monkeypatch):
    """A coin with checked logits: its own draws' log-probabilities are finite by
    construction and not checked; a Normal's (whose draws can overflow) still are."""
    from scg.stochastic import sites
    checked = []
    real = sites.count_nonfinite

    def spy(x):
        checked.append(np.shape(x))
        return real(x)
    monkeypatch.setattr(sites, "count_nonfinite", spy)
    scg.grad(scg.expectation(_model(scg.Score(baseline="loo")), n=8, seed=1))(THETA)
    assert (8, 3) not in checked

    def normal(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0), estimator=scg.Score(baseline="loo"))
        return np.sum(x ** 2)
    checked.clear()
    scg.grad(scg.expectation(normal, n=8, seed=1))(THETA)
    assert (8, 3) in checked


def test_a_subclass_that_draws_its_own_values_promises_nothing_unless_it_says_so():
    class Reweighted(scg.Score):  # (a baseline or a weight of its own: the same draws)
        pass

    class Drawing(scg.Score):
        def draw(self, d):
            return np.asarray(d.sample()) * 1.0  # (values it made itself)

    class Promising(Drawing):
        own_draws = True
        draws_from_law = True

    def promised(est):
        return est.own_draws, est.draws_from_law

    assert promised(Reweighted()) == (True, True)
    assert promised(Drawing()) == (False, False)
    assert promised(Promising()) == (True, True)
    # the attributes read what holds: nothing reset behind them
    assert (Drawing.own_draws, Drawing.draws_from_law) == (False, False)
    assert (Reweighted.own_draws, Promising.draws_from_law) == (True, True)
    assert promised(scg.Enumerate()) == (True, False)
    assert promised(scg.GumbelSoftmax()) == (False, False)
    # the site's promises: Drawing's values are its own, so neither holds there
    E = scg.expectation(_model(Drawing()), n=4, seed=0)
    scg.grad(E)(THETA)
    site = E.last_trace.sites["b"]
    assert not site.own_draws and not site.draws_from_law
    # explain() says so, and how to promise it
    assert "set own_draws = True" in E.last_trace.explain()
    E = scg.expectation(_model(Promising()), n=4, seed=0)
    scg.grad(E)(THETA)
    assert E.last_trace.sites["b"].draws_from_law
    assert "set own_draws" not in E.last_trace.explain()

    class Coin(scg.Bernoulli):
        def log_prob(self, value):
            return super().log_prob(value)

    assert scg.Bernoulli.finite_log_prob_of_draws and not Coin.finite_log_prob_of_draws


def test_a_newcomers_estimator_that_returns_the_laws_draws_keeps_both_promises():
    """An estimator written from scratch whose draw returns d.sample() (or d.noise_path())
    itself: its values are the law's draws, so the site skips the support and
    finiteness checks as Score's and Pathwise's do, without declaring anything."""
    class FromScratch(scg.estimators.Estimator):
        name = "from-scratch"

        def draw(self, d):
            return d.sample()

    class Reparameterized(scg.estimators.Estimator):
        name = "reparameterized"
        differentiable = True

        def draw(self, d):
            return d.path(d.noise())

    assert not FromScratch().own_draws
    E = scg.expectation(_model(FromScratch()), n=4, seed=0)
    E(THETA)  # (no term of its own: the value only)
    site = E.last_trace.sites["b"]
    assert site.own_draws and site.draws_from_law

    def normal_model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0), estimator=Reparameterized())
        return np.sum(x ** 2)
    E = scg.expectation(normal_model, n=4, seed=0)
    g = scg.grad(E)(THETA)
    site = E.last_trace.sites["x"]
    assert site.own_draws and site.draws_from_law
    assert np.all(np.isfinite(g))
