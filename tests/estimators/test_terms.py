"""The estimators' shared checks (estimators/terms.py), for a coin whose probs is exactly
0 or 1: the derivative exists (f(1) - f(0) in p), so an estimator gives it exactly or says
why it cannot, and which estimator can."""

import numpy as np
import pytest

import scg


def coin(estimator):
    def model(p):
        b = scg.sample("b", scg.Bernoulli(probs=p), estimator=estimator)
        return (b - 0.3) ** 2
    return model


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_measure_valued_is_exact_at_the_boundary(p):
    g = scg.grad(scg.expectation(coin(scg.MeasureValued()), n=50, seed=0))(np.float64(p))
    assert g == pytest.approx(0.7 ** 2 - 0.3 ** 2, rel=1e-12)


@pytest.mark.parametrize("p", [0.0, 1.0])
@pytest.mark.parametrize("estimator", [scg.DisARM(), scg.Enumerate(),
                                       scg.REBAR(learn=False), scg.RELAX(learn=False)],
                         ids=["disarm", "enumerate", "rebar", "relax"])
def test_estimators_that_need_both_log_probabilities_say_so(estimator, p):
    with pytest.raises(scg.EstimatorError, match=r"probs is exactly 0 or 1.*MeasureValued"):
        scg.grad(scg.expectation(coin(estimator), n=50, seed=0))(np.float64(p))


def test_inside_the_interval_nothing_changes():
    g = scg.grad(scg.expectation(coin(scg.Enumerate()), n=2, seed=0))(np.float64(0.4))
    assert g == pytest.approx(0.7 ** 2 - 0.3 ** 2, rel=1e-12)


def test_the_check_holds_under_jit_replays():
    E = scg.expectation(coin(scg.DisARM()), n=8, seed=0)
    step = scg.jit(scg.grad(E))
    for _ in range(3):
        step(np.float64(0.4))
    with pytest.raises(scg.EstimatorError, match="probs is exactly 0 or 1"):
        step(np.float64(1.0))


def test_unordered_set_needs_k_categories_of_nonzero_probability():
    def model(p):
        c = scg.sample("c", scg.Categorical(probs=p), estimator=scg.UnorderedSet(3))
        return c ** 2
    with pytest.raises(scg.EstimatorError, match="fewer than 3 have a probability above 0"):
        scg.grad(scg.expectation(model, n=8, seed=0))(np.array([0.5, 0.5, 0.0, 0.0]))
    scg.grad(scg.expectation(model, n=8, seed=0))(np.array([0.5, 0.3, 0.2, 0.0]))


@pytest.mark.parametrize("p", [0.0, 1.0])
@pytest.mark.parametrize("estimator", ["score", scg.Score("loo")], ids=["score", "loo"])
def test_the_score_function_at_the_boundary_says_it_cannot_see_the_other_outcome(estimator, p):
    # (it used to give f(1) or 0: every draw is the same outcome, f(0) never seen)
    with pytest.raises(scg.EstimatorError, match=r"site 'b': the score-function .* exactly 0 "
                                                 r"or 1.*logits=.*MeasureValued"):
        scg.grad(scg.expectation(coin(estimator), n=50, seed=0))(np.float64(p))
    # the advice holds: MeasureValued is exact there (above), and so is logits= nearby
    with pytest.raises(scg.EstimatorError, match="probability above 0"):
        def choice(probs):
            return scg.sample("k", scg.Categorical(probs=probs), estimator=estimator) * 1.0
        scg.grad(scg.expectation(choice, n=50, seed=0))(np.array([0.5, 0.5, 0.0]))


def test_the_score_function_at_boundary_probs_that_are_not_differentiated_runs():
    def model(x):
        b = scg.sample("b", scg.Bernoulli(probs=1.0), estimator="score")
        return b * x ** 2
    assert scg.grad(scg.expectation(model, n=10, seed=0))(1.5) == pytest.approx(3.0)
