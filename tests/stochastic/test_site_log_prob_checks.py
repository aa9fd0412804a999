"""The site's finiteness check of log-probabilities, for coins at the edges of their parameters.

A site skips its finiteness check only for a family's own draws whose log-probability is
finite by construction: an enumeration's support points of zero probability and a user
subclass of Bernoulli with its own log_prob still get the site's FloatingPointError;
own draws of coins with probabilities 0 and 1 or logits of +-1e308 (score function,
leave-one-out, DisARM, in a plate) have finite log-probabilities; with validation off an
infinite logit gets the site's error, and under scg.jit a replay re-checks the constraint.
"""

import numpy as np
import pytest

import scg
from scg.core.tape import strip


def test_enumerated_support_point_of_zero_probability_is_not_silently_minus_inf():
    """`Site.log_prob` skips the finiteness check when the estimator has `own_draws` and the
    family sets `finite_log_prob_of_draws`. scg.Enumerate sets own_draws too (for the support
    test), but its values are every point of the support, not draws: a coin with probs
    exactly 0 (a valid, validated parameter) is evaluated at 1, whose log-probability is
    -inf. The site raises its FloatingPointError (or the log-probability is finite): never a
    silent -inf, which with probs that depend on theta would surface only as a non-finite
    gradient from elsewhere."""
    def model(th):
        b = scg.sample("b", scg.Bernoulli(probs=np.array([0.0, 0.4])),
                       estimator=scg.Enumerate())
        return np.sum((b - th) ** 2)

    E = scg.expectation(model, n=3, seed=0)
    try:
        with np.errstate(divide="ignore"):
            scg.value_and_grad(E)(0.25)
    except FloatingPointError as e:
        assert "site 'b': log_prob is not finite" in str(e)
        return
    except scg.EstimatorError as e:  # (said before the run: tests/estimators/test_terms.py)
        assert "site 'b': scg.Enumerate() takes the log-probability of every value" in str(e)
        return
    lp = np.asarray(strip(E.last_trace.sites["b"].log_prob()))
    assert np.isfinite(lp).all(), "a non-finite log-probability without the site's error"


def test_bernoulli_subclass_with_its_own_log_prob_keeps_the_site_check():
    """`finite_log_prob_of_draws` is the promise of Bernoulli's own log_prob, not inherited by
    a user subclass that overrides log_prob (here the textbook formula
    x log p + (1 - x) log(1 - p), which is nan at p = 1, a valid, validated parameter:
    logits 40 give probs that round to 1.0): the site's FloatingPointError naming the site
    is raised, not only a later, vaguer "gradient estimate is not finite". (With probs=
    exactly 1 the subclass, a Bernoulli, gets Bernoulli's own error: the score function
    cannot differentiate probs at the boundary.)"""
    class TextbookCoin(scg.Bernoulli):
        def log_prob(self, value):
            p = scg.sigmoid(self.logits) if self.probs is None else self.probs
            return value * np.log(p) + (1 - value) * np.log(1 - p)

    def model(th):
        b = scg.sample("b", TextbookCoin(logits=th), estimator=scg.Score())
        return (b - 0.3) ** 2

    with np.errstate(all="ignore"), \
            pytest.raises(FloatingPointError, match="site 'b': log_prob is not finite"):
        scg.grad(scg.expectation(model, n=4, seed=0))(np.array([40.0, 0.0]))

    def by_probs(th):
        b = scg.sample("b", TextbookCoin(probs=scg.sigmoid(th)), estimator=scg.Score())
        return (b - 0.3) ** 2

    with np.errstate(all="ignore"), pytest.raises(scg.EstimatorError, match="site 'b'.*logits="):
        scg.grad(scg.expectation(by_probs, n=4, seed=0))(np.array([40.0, 0.0]))


@pytest.mark.parametrize("est", ["score", "loo", "disarm"])
@pytest.mark.parametrize("kw", [{"probs": [0.0, 1.0, 0.4]}, {"logits": [1e308, -1e308, 0.3]}])
def test_own_draws_of_coins_at_the_edges_are_finite(est, kw):
    """probs exactly 0 and 1, logits at +-1e308, inside to_event and a plate: the coin's own
    draws have finite log-probabilities (the skipped check had nothing to find)."""
    estimator = {"score": scg.Score(), "loo": scg.Score(baseline="loo"),
                 "disarm": scg.DisARM()}[est]
    (name, values), = kw.items()

    def model(th):
        with scg.plate("p", 3):
            law = scg.Bernoulli(**{name: np.asarray(values) * (1.0 + 0.0 * th)})
            b = scg.sample("b", law, estimator=estimator)
        return np.sum((b - 0.3) ** 2 * (1.0 + th))

    E = scg.expectation(model, n=6, seed=0)
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            scg.grad(E)(0.5)
    except scg.EstimatorError as e:  # (every estimator here at probs differentiated at 0
        # or 1: its own, earlier error; estimators/terms.py and score.py)
        assert "probs" in kw and "exactly 0 or 1" in str(e), e
        return
    assert np.isfinite(np.asarray(strip(E.last_trace.sites["b"].log_prob()))).all()


def test_coin_checks_with_validation_off_and_under_jit():
    """Validation turned off after a distribution was built keeps its (valid) parameters;
    with validation off an infinite logit gets the site's error; under scg.jit a replay
    with an infinite logit still raises (the constraint is re-checked on replays)."""
    def model(th):
        b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.Score(baseline="loo"))
        return np.sum(b * np.arange(1.0, 4.0))

    good, bad = np.array([0.5, -1.0, 2.0]), np.array([0.5, np.inf, 2.0])
    f = scg.jit(scg.grad(scg.expectation(model, n=8, seed=0)))
    for _ in range(3):
        assert np.isfinite(f(good)).all()
    with pytest.raises(ValueError, match="must be real"):
        f(bad)
    built = scg.Bernoulli(logits=good)
    scg.distributions.set_validation(False)
    try:
        with np.errstate(all="ignore"), \
                pytest.raises(FloatingPointError, match="site 'b': log_prob is not finite"):
            f(bad)
        E = scg.expectation(lambda th: np.sum(scg.sample("b", built, estimator="score") * th),
                            n=8, seed=0)
        assert np.isfinite(scg.grad(E)(1.0))
    finally:
        scg.distributions.set_validation(True)
