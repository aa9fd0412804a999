"""Errors a new user meets in the first hour: each names what was wrong and what to do."""

import numpy as np
import pytest

import scg


def model(mu):
    return scg.sample("x", scg.Normal(mu, 1.0)) ** 2


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_n_is_a_positive_int_everywhere(n):
    error = ValueError
    with pytest.raises(error, match="n must be a positive int"):
        scg.trace(model, 0.0, n=n)
    with pytest.raises(error, match="n must be a positive int"):
        scg.expectation(model, n=n)
    E = scg.expectation(model, n=2)
    with pytest.raises(error, match="n must be a positive int"):
        E.n = n
    assert E.n == 2


def test_a_seed_is_not_a_bool():
    for make in (lambda: scg.trace(model, 0.0, n=2, seed=True),
                 lambda: scg.expectation(model, n=2, seed=True)):
        with pytest.raises(TypeError, match="seed must be an int"):
            make()


def test_flags_are_bools():
    with pytest.raises(TypeError, match="hard must be True or False"):
        scg.GumbelSoftmax(hard="False")
    with pytest.raises(TypeError, match="antithetic must be True or False"):
        scg.Pathwise(antithetic="no")
    with pytest.raises(TypeError, match="antithetic must be True or False"):
        scg.Score(antithetic="no")


def test_distribution_messages_name_the_family():
    with pytest.raises(ValueError, match="Categorical: parameter 'logits' has no categories"):
        scg.Categorical(logits=np.zeros(0))
    with pytest.raises(ValueError, match=r"Normal: the parameters have shapes \(3,\) and "
                                         r"\(2,\), which do not broadcast"):
        scg.Normal(np.zeros(3), np.ones(2))
    with pytest.raises(TypeError, match=r"Normal.sample\(rng\): rng must be a numpy Generator"):
        scg.Normal(0.0, 1.0).sample(None)


def test_a_cost_that_is_not_a_number_is_named():
    with pytest.raises(TypeError, match="cost 'return' must be a number.*got str 'abc'"):
        scg.expectation(lambda mu: "abc", n=2)(0.0)
    with pytest.raises(TypeError, match="cost 'c' must be a number.*got NoneType"):
        scg.expectation(lambda mu: scg.cost("c", None), n=2)(0.0)


def test_a_blackbox_written_for_one_draw():
    step = scg.blackbox(lambda x: 1.0 if x > 0 else 0.0)

    def per_draw(mu):
        return step(scg.sample("x", scg.Normal(mu, 1.0)))
    with pytest.raises(ValueError) as info:
        scg.expectation(per_draw, n=3, seed=0)(0.0)
    assert "vectorize=True" in " ".join(getattr(info.value, "__notes__", []))

    step = scg.blackbox(lambda x: 1.0 if x > 0 else 0.0, vectorize=True)
    E = scg.expectation(per_draw, n=40_000, seed=0)
    gs = scg.grad_samples(E)(0.0)
    # d/dmu P(x > 0) at mu = 0 is the standard normal density at 0 (score function)
    assert abs(gs.mean - 1.0 / np.sqrt(2.0 * np.pi)) < 5 * gs.stderr


def test_a_hessian_through_straight_through_gumbel_softmax_is_refused():
    def coins(t):
        b = scg.sample("b", scg.Bernoulli(logits=t), estimator=scg.GumbelSoftmax(0.5, hard=True))
        return np.sum(b * t)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(coins, n=4, seed=0))(np.array([0.1, 0.2]))


def test_a_generator_of_the_model_s_own_draws_one_number_for_all_draws_and_warns():
    rng = np.random.default_rng(0)

    def closes_over(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return (x + rng.normal()) ** 2

    def takes_it(mu, gen):
        return (scg.sample("x", scg.Normal(mu, 1.0)) + gen.normal()) ** 2

    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator of its own"):
        scg.expectation(closes_over, n=10, seed=1)(0.0)
    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator of its own"):
        scg.expectation(takes_it, n=10, seed=1)(0.0, np.random.default_rng(2))
    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator of its own"):
        scg.trace(closes_over, 0.0, n=4)

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.RandomnessWarning)
        # the expectation's own generator, and a generator the model reaches but does not
        # draw from, are fine
        scg.expectation(lambda mu: scg.sample("x", scg.Normal(mu, 1.0)) ** 2, n=10,
                        seed=rng)(0.0)
        unused = np.random.default_rng(3)
        scg.expectation(lambda mu: scg.sample("x", scg.Normal(mu, 1.0)) ** 2 +
                        0.0 * (unused is None), n=10, seed=1)(0.0)


class _UpdatedFirst(scg.baselines.Baseline):
    """The reference program's mistake: the baseline updated with the current cost before
    it is used."""
    stateful = True

    def value(self, q, state):
        state["b"] = 0.5 * state.get("b", 0.0) + 0.5 * float(np.mean(q))
        return state["b"]


def test_a_baseline_that_uses_its_own_draw_is_caught_at_n_1_and_explain_says_biased():
    def bandit(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Score(_UpdatedFirst()))
        return np.where(a == 1, 3.0, 1.0)
    E = scg.expectation(bandit, n=1, seed=0)
    with pytest.warns(scg.BiasWarning, match="uses each draw's own cost"):
        scg.grad(E)(0.3)
    scg.grad(E)(0.3)  # (checked once; the verdict stays)
    assert "biased;" in E.last_trace.explain()
    good = scg.expectation(bandit, n=1, seed=0,
                           estimators={"a": scg.Score(scg.baselines.MovingAverage(0.9))})
    scg.grad(good)(0.3)
    assert "unbiased;" in good.last_trace.explain()
