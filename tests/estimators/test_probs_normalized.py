"""Categorical(probs=p) and OneHotCategorical(probs=p): the log-probability is that of the
normalized probabilities, so every estimator gives the expected gradient (f_k - F) / sum(p),
whatever its baseline, as torch.distributions' log_prob does."""

import numpy as np
import pytest

import scg

TABLE = np.array([1.0, -0.5, 2.0])
P = np.array([0.2, 0.5, 0.3])
EXACT = (TABLE - P @ TABLE) / P.sum()   # d/dp of sum_k p_k / sum(p) f_k

ESTIMATORS = {
    "score": (scg.Score, ()), "score_constant": (scg.Score, (5.0,)),
    "score_loo": (scg.Score, ("loo",)),
    "score_moving_average": (lambda: scg.Score(scg.baselines.MovingAverage(0.5)), ()),
    "enumerate": (scg.Enumerate, ()), "measure_valued": (scg.MeasureValued, ()),
    "unordered_set": (scg.UnorderedSet, (2,)),
}
EXACT_ESTIMATORS = ("enumerate", "measure_valued")


def _model(family, estimator):
    def model(p):
        if family == "categorical":
            k = scg.sample("k", scg.Categorical(probs=p), estimator=estimator)
            return scg.take(TABLE, k)
        k = scg.sample("k", scg.OneHotCategorical(probs=p), estimator=estimator)
        return k @ TABLE
    return model


@pytest.mark.parametrize("family", ["categorical", "onehot"])
@pytest.mark.parametrize("label", list(ESTIMATORS))
def test_every_estimator_differentiates_through_the_normalization(family, label):
    make, args = ESTIMATORS[label]
    E = scg.expectation(_model(family, make(*args)), n=40_000, seed=3)
    if label == "score_moving_average":
        E(P)  # (the average starts from the first call's costs)
    gs = scg.grad_samples(E)(P)
    if label in EXACT_ESTIMATORS:
        np.testing.assert_allclose(gs.mean, EXACT, rtol=1e-12, atol=1e-12)
    else:
        z = (gs.mean - EXACT) / gs.stderr
        assert np.all(np.abs(z) < 5), (label, gs.mean, EXACT, z)


def test_a_constant_baseline_changes_nothing_in_expectation():
    # with the raw log p_k the constant 5 gave f - 5: the score had mean 1 in each p_k
    g = scg.grad(scg.expectation(_model("categorical", scg.Score(5.0)), n=200_000, seed=0))(P)
    np.testing.assert_allclose(g, EXACT, atol=0.06)
    assert np.all(np.abs(g - (TABLE - 5.0)) > 1.0)


def test_log_prob_value_is_unchanged_and_its_gradient_is_torchs():
    d = scg.Categorical(probs=P)
    np.testing.assert_allclose(d.log_prob(1), np.log(0.5), rtol=1e-15)
    # d/dp log(p_1 / sum(p)) = e_1 / p_1 - 1 / sum(p)
    g = scg.grad(lambda p: scg.Categorical(probs=p).log_prob(1))(P)
    np.testing.assert_allclose(g, np.array([0.0, 2.0, 0.0]) - 1.0, rtol=1e-12)
    g1 = scg.grad(lambda p: scg.OneHotCategorical(probs=p).log_prob(np.eye(3)[1]))(P)
    np.testing.assert_allclose(g1, g, rtol=1e-12)


def test_probs_must_still_sum_to_one():
    with pytest.raises(ValueError, match="probs"):
        scg.Categorical(probs=np.array([0.2, 0.5]))


def test_probabilities_from_a_pathwise_draw_keep_its_path():
    # (the log of probs went through a comparison, taken for a jump: a Dirichlet upstream
    # fell back to the score function, or warned when forced pathwise)
    def model(a):
        w = scg.sample("w", scg.Dirichlet(np.exp(a)))
        k = scg.sample("k", scg.Categorical(probs=w), estimator=scg.Enumerate())
        return scg.take(TABLE, k)

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.BiasWarning)
        t = scg.trace(model, np.zeros(3), n=4)
        assert t.sites["w"].kind == "pathwise"
        # E[f] = E[w] . f = softmax(a) . f for a Dirichlet(exp(a))
        gs = scg.grad_samples(scg.expectation(model, n=20_000, seed=0))(np.zeros(3))
    p = np.full(3, 1 / 3)
    exact = p * (TABLE - p @ TABLE)
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr)


def test_the_log_of_a_zero_probability_has_no_derivative_where_nothing_reaches_it():
    p = np.array([0.5, 0.5, 0.0])
    g = scg.grad(lambda q: scg.Categorical(probs=q).log_prob(1))(p)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, [-1.0, 1.0, -1.0])   # e_1 / p_1 - 1 / sum(p)
