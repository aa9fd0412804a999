"""Situations scg cannot estimate right get a clear error or warning, never a number that
looks right; and natural code that used to crash works."""

import pickle
import warnings

import numpy as np
import pytest

import scg


def square(mu):
    return scg.sample("x", scg.Normal(mu, 1.0)) ** 2


# ---------------------------------------------------------------- randomness outside scg
def test_numpy_global_randomness_in_a_model_warns():
    def model(mu):
        return scg.sample("x", scg.Normal(mu, 1.0)) + np.random.normal()
    E = scg.expectation(model, n=100, seed=0)
    # (numpy's legacy normal draws two numbers at a time and keeps one for the next call,
    # which changes no state that is cheap to read: a model is flagged on its first or
    # second call)
    with pytest.warns(scg.RandomnessWarning, match=r"shared by all n draws.*scg\.sample"):
        E(0.0)
        E(0.0)
    with pytest.warns(scg.RandomnessWarning):
        scg.grad(E)(0.0)
        scg.grad(E)(0.0)


def test_numpy_global_uniform_draws_in_a_model_warn_on_every_call():
    def model(mu):
        return scg.sample("x", scg.Normal(mu, 1.0)) + np.random.rand()
    E = scg.expectation(model, n=100, seed=0)
    for _ in range(3):
        with pytest.warns(scg.RandomnessWarning):
            E(0.0)


def test_a_model_without_numpy_randomness_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scg.grad(scg.expectation(square, n=100, seed=0))(0.0)


# ---------------------------------------------------------------- baselines
class LearnerBaseline(scg.baselines.Baseline):
    """The learner's b = 0.9 b + 0.1 r, updated before use: it includes the current draws."""

    def value(self, q, state):
        state["b"] = 0.9 * state.get("b", 0.0) + 0.1 * np.mean(q, axis=0)
        return state["b"]


def bernoulli_model(baseline):
    def model(p):
        a = scg.sample("a", scg.Bernoulli(probs=p), estimator=scg.Score(baseline))
        return (a - 0.3) ** 2
    return model


def test_a_baseline_that_uses_its_own_draw_warns_once_per_expectation():
    E = scg.expectation(bernoulli_model(LearnerBaseline()), n=10, seed=0)
    with pytest.warns(scg.BiasWarning, match="site 'a'.*own cost"):
        scg.grad(E)(0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scg.grad(E)(0.4)  # checked once


def test_the_check_leaves_the_baseline_state_as_the_call_made_it():
    E = scg.expectation(bernoulli_model(LearnerBaseline()), n=10, seed=0)
    with pytest.warns(scg.BiasWarning):
        scg.grad(E)(0.4)
    q = scg.trace(bernoulli_model(None), 0.4, n=10, seed=0).costs["return"]
    # one update with this call's draws (same seed): 0.1 * mean(q), not two or three
    assert E.states["a"].baseline["b"] == pytest.approx(0.1 * np.mean(q))


@pytest.mark.parametrize("baseline", [None, 0.5, "loo", scg.baselines.MovingAverage(0.9)])
def test_unbiased_baselines_do_not_warn(baseline):
    E = scg.expectation(bernoulli_model(baseline), n=10, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            scg.grad(E)(0.4)


def test_an_expectation_built_again_in_every_step_warns_that_its_baseline_forgets():
    model = bernoulli_model(scg.baselines.MovingAverage(0.9))
    with pytest.warns(UserWarning, match="starts without history.*Build the expectation once"):
        for _ in range(4):
            scg.grad(scg.expectation(model, n=8, seed=0))(0.4)


def test_expectations_called_many_times_each_do_not_warn():
    def model(p):  # (its own code: the history is kept per model code)
        a = scg.sample("a", scg.Bernoulli(probs=p),
                       estimator=scg.Score(scg.baselines.MovingAverage(0.9)))
        return (a - 0.3) ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            E = scg.expectation(model, n=8, seed=0)
            for _ in range(3):
                scg.grad(E)(0.4)


# ---------------------------------------------------------------- moving supports
def test_a_support_moving_with_a_discrete_draw_is_not_a_bias():
    def model(p):
        m = scg.sample("m", scg.Poisson(3.0))
        k = scg.sample("k", scg.Binomial(total_count=m, probs=p))
        u = scg.sample("u", scg.Uniform(0.0, 1.0 + k), estimator="score")
        return u
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scg.grad(scg.expectation(model, n=100, seed=0))(0.4)


def test_a_support_moving_with_a_pathwise_draw_still_warns():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return scg.sample("u", scg.Uniform(0.0, 5.0 + x), estimator="score")
    with pytest.warns(scg.BiasWarning, match="support"):
        scg.grad(scg.expectation(model, n=100, seed=0))(0.4)


# ---------------------------------------------------------------- degenerate parameters
@pytest.mark.parametrize("family", [
    lambda mu: scg.Normal(mu, 0.0), lambda mu: scg.Laplace(mu, 0.0),
    lambda mu: scg.Gumbel(mu, 0.0), lambda mu: scg.LogNormal(mu, 0.0),
    lambda mu: scg.Exponential(1e-200 * mu)])
def test_a_degenerate_parameter_without_validation_names_the_site(family):
    scg.distributions.set_validation(False)
    try:
        def model(mu):
            return scg.sample("x", family(mu), estimator="score") ** 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(FloatingPointError, match="site 'x'|cost 'return'"):
                scg.grad(scg.expectation(model, n=10, seed=0))(1.0)
    finally:
        scg.distributions.set_validation(True)


# ---------------------------------------------------------------- derivatives in a model
def test_a_model_may_differentiate_a_function_of_its_own_draw():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return scg.grad(lambda y: y ** 3)(x)  # 3 x^2, per draw
    t = scg.trace(model, 1.0, n=5, seed=0)
    x = t.sites["x"].value
    np.testing.assert_allclose(t.costs["return"], 3 * x ** 2)
    # d/dmu E[3 x^2] = 6 mu: pathwise per-draw 6 x, standard deviation 6
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(1.0)
    assert abs(gs.mean - 6.0) < 5 * gs.stderr


def test_value_and_grad_inside_a_model():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        value, slope = scg.value_and_grad(lambda y: np.sin(y))(x)
        return value + slope
    t = scg.trace(model, 0.3, n=4, seed=0)
    x = t.sites["x"].value
    np.testing.assert_allclose(t.costs["return"], np.sin(x) + np.cos(x))


def test_an_expectation_inside_a_model_is_refused():
    inner = scg.expectation(square, n=3, seed=0)

    def outer(mu):
        x = scg.sample("y", scg.Normal(mu, 1.0))
        return inner(x)
    with pytest.raises(scg.TracingError, match="inside the model of another"):
        scg.expectation(outer, n=4, seed=0)(0.0)


# ---------------------------------------------------------------- arguments
@pytest.mark.parametrize("size", [2.7, "3", -1, 0, True, None])
def test_plate_size_must_be_a_positive_int(size):
    def model(mu):
        with scg.plate("data", size):
            return scg.sample("x", scg.Normal(mu, 1.0))
    with pytest.raises(ValueError, match=f"plate 'data': size must be a positive int.*{size!r}"):
        scg.expectation(model, n=3)(0.0)


@pytest.mark.parametrize("dim", [0, 1, -1.0, True, "-1"])
def test_plate_dim_must_be_a_negative_int(dim):
    def model(mu):
        with scg.plate("data", 3, dim=dim):
            return scg.sample("x", scg.Normal(mu, 1.0))
    with pytest.raises(ValueError, match="plate 'data': dim must be a negative int"):
        scg.expectation(model, n=3)(0.0)


@pytest.mark.parametrize("n", [True, False, 0, -3, 2.0, "10", None])
def test_n_must_be_a_positive_int(n):
    with pytest.raises(ValueError, match="n must be a positive int"):
        scg.expectation(square, n=n)


def test_more_draws_than_memory_is_refused_before_allocating():
    with pytest.raises(MemoryError, match=r"n = 1,000,000,000,000 draws.*GiB.*fewer draws"):
        scg.expectation(square, n=10 ** 12)


def test_a_site_too_large_for_memory_is_refused_when_drawn():
    def model(mu):
        return np.sum(scg.sample("x", scg.Normal(mu * np.ones(10 ** 7), 1.0)))
    E = scg.expectation(model, n=10 ** 6)  # one scalar per draw would fit
    with pytest.raises(MemoryError, match="site 'x'"):
        E(0.0)


# ---------------------------------------------------------------- no gradient path
def test_a_jump_as_the_only_path_is_named():
    def model(mu):
        return scg.sample("x", scg.Normal(np.round(mu), 1.0)) ** 2
    with pytest.raises(scg.NoGradientPathError, match="went through round") as info:
        scg.grad(scg.expectation(model, n=10, seed=0))(1.2)
    assert "scg.sample" in str(info.value)
    assert "stop_gradient" not in str(info.value)


def test_a_stop_gradient_as_the_only_path_is_named():
    def model(mu):
        return scg.sample("x", scg.Normal(scg.stop_gradient(mu), 1.0)) ** 2
    with pytest.raises(scg.NoGradientPathError, match="went through scg.stop_gradient"):
        scg.grad(scg.expectation(model, n=10, seed=0))(1.2)


def test_an_unused_argument_blames_neither():
    def model(mu, unused):
        return scg.sample("x", scg.Normal(mu, 1.0)) ** 2
    with pytest.raises(scg.NoGradientPathError, match="does not use it") as info:
        scg.grad(scg.expectation(model, n=10, seed=0), argnums=1)(1.2, 3.0)
    assert "stop_gradient" not in str(info.value)


# ---------------------------------------------------------------- pickling
def test_an_expectation_pickles_after_a_call():
    E = scg.expectation(square, n=10, seed=0)
    scg.grad(E)(1.0)
    again = pickle.loads(pickle.dumps(E))
    assert again.last_trace is None
    # the generator's state travels: both continue with the same draws
    assert scg.grad(again)(1.0) == scg.grad(E)(1.0)


def test_expectations_run_side_by_side_do_not_warn():
    def make(decay):
        def model(p):
            a = scg.sample("a", scg.Bernoulli(probs=p),
                           estimator=scg.Score(scg.baselines.MovingAverage(decay)))
            return (a - 0.3) ** 2
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Es = [scg.expectation(make(d), n=8, seed=i) for i, d in enumerate([0.5, 0.9, 0.99])]
        for _ in range(3):
            for E in Es:
                scg.grad(E)(0.4)


def test_many_sites_that_fit_in_memory_run():
    def model(mu):
        total = 0.0
        for t in range(60):
            total = total + scg.sample(f"x{t}", scg.Normal(mu, 1.0))
        return total
    assert np.isfinite(scg.grad(scg.expectation(model, n=400_000, seed=0))(0.5))


def _one_draw(mu):
    return scg.sample("x", scg.Normal(mu, 1.0)) ** 2


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_n_is_a_positive_int_everywhere(n):
    error = ValueError
    with pytest.raises(error, match="n must be a positive int"):
        scg.trace(_one_draw, 0.0, n=n)
    with pytest.raises(error, match="n must be a positive int"):
        scg.expectation(_one_draw, n=n)
    E = scg.expectation(_one_draw, n=2)
    with pytest.raises(error, match="n must be a positive int"):
        E.n = n
    assert E.n == 2


def test_a_seed_is_not_a_bool():
    for make in (lambda: scg.trace(_one_draw, 0.0, n=2, seed=True),
                 lambda: scg.expectation(_one_draw, n=2, seed=True)):
        with pytest.raises(TypeError, match="seed must be an int"):
            make()
