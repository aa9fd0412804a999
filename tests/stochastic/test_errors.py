"""Bad input gets a clear error that names the site, the argument and what to do."""

import numpy as np
import pytest

import scg


def test_stop_gradient_before_the_distribution_names_the_argument():
    """The reference question's mistake: parameters detached before the distribution."""
    def model(theta):
        mu = scg.stop_gradient(theta["mu"])
        a = scg.sample("a", scg.Normal(mu, 1.0), estimator="score")
        return (a - 3.0) ** 2

    E = scg.expectation(model, n=100, seed=0)
    with pytest.raises(scg.NoGradientPathError, match=r"argument 0\['mu'\].*stop_gradient"):
        scg.grad(E)({"mu": 0.0})
    g = scg.grad(E, allow_unused=True)({"mu": 0.0})
    assert g == {"mu": 0.0}
    with pytest.raises(scg.NoGradientPathError):
        scg.grad_samples(E)({"mu": 0.0})


def test_unused_argument_among_used_ones():
    def model(theta, other):
        return scg.sample("x", scg.Normal(theta, 1.0)) ** 2

    E = scg.expectation(model, n=10, seed=0)
    with pytest.raises(scg.NoGradientPathError, match="argument 1"):
        scg.grad(E, argnums=(0, 1))(1.0, 2.0)
    g0, g1 = scg.grad(E, argnums=(0, 1), allow_unused=True)(1.0, 2.0)
    assert g1 == 0.0


def test_non_finite_cost_names_the_cost():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("log_of_negative", np.log(np.abs(x) * 0.0))
        return x

    with pytest.raises(FloatingPointError, match="log_of_negative"):
        with np.errstate(divide="ignore"):
            scg.expectation(model, n=10, seed=0)(0.0)


def test_non_finite_gradient_names_its_source():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return np.sqrt(np.maximum(x, 0.0)) + x * 0.0   # infinite slope at the clipped draws

    E = scg.expectation(model, n=50, seed=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        with pytest.raises(FloatingPointError, match="cost 'return'"):
            scg.grad(E)(-0.5)


def test_sites_outside_a_model():
    with pytest.raises(scg.TracingError, match="outside a model"):
        scg.sample("x", scg.Normal(0.0, 1.0))
    with pytest.raises(scg.TracingError, match="outside a model"):
        scg.cost("c", 1.0)


def test_duplicate_site_names():
    def model(theta):
        scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("x", 1.0)

    with pytest.raises(ValueError, match="'x' is used twice"):
        scg.expectation(model, n=2)(0.0)


def test_plate_size_mismatch_and_dim_conflict():
    def wrong_size(theta):
        with scg.plate("data", 3):
            scg.sample("z", scg.Normal(np.zeros(4), 1.0))

    with pytest.raises(ValueError, match="plate 'data'"):
        scg.expectation(wrong_size, n=2)(0.0)

    def same_dim(theta):
        with scg.plate("a", 2), scg.plate("b", 3):
            pass

    with pytest.raises(ValueError, match="dim=-2"):
        scg.expectation(same_dim, n=2)(0.0)


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_invalid_number_of_draws(n):
    with pytest.raises(ValueError, match="positive int"):
        scg.expectation(lambda t: t, n=n)


def test_unknown_estimator_and_baseline():
    def model(theta):
        return scg.sample("x", scg.Normal(theta, 1.0), estimator="magic")

    with pytest.raises(ValueError, match="estimator must be"):
        scg.expectation(model)(0.0)
    with pytest.raises(ValueError, match="unknown baseline"):
        scg.Score("best")


def test_blackbox_must_keep_the_draws():
    summarize = scg.blackbox(lambda x: np.mean(x))

    def model(theta):
        return summarize(scg.sample("x", scg.Normal(theta, 1.0)))

    with pytest.raises(ValueError, match="leading axis of length n = 5"):
        scg.expectation(model, n=5)(0.0)


def test_seeding_rules():
    def model(theta):
        return scg.sample("x", scg.Normal(theta, 1.0))

    a, b = scg.expectation(model, n=3, seed=11), scg.expectation(model, n=3, seed=11)
    first = [a(0.0), a(0.0)]
    assert first == [b(0.0), b(0.0)]          # same seed, same sequence
    assert first[0] != first[1]               # each call draws fresh samples
    rng = np.random.default_rng(5)
    c = scg.expectation(model, n=3, seed=rng)
    assert c.rng is rng
    with pytest.raises(TypeError, match="seed"):
        scg.expectation(model, seed="five")


def test_extra_model_arguments_pass_through():
    def model(theta, data, scale=1.0):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return scale * np.sum((x - data) ** 2)

    E = scg.expectation(model, n=20_000, seed=0)
    data = np.array([1.0, 2.0])
    g = scg.grad(E)(0.5, data, scale=2.0)    # d/dtheta 2 * sum((theta - d)^2 + 1)
    assert g == pytest.approx(2.0 * np.sum(2 * (0.5 - data)), abs=0.1)


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


def test_a_generator_of_the_model_s_own_draws_one_number_for_all_draws_and_warns():
    rng = np.random.default_rng(0)

    def closes_over(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        return (x + rng.normal()) ** 2

    def takes_it(mu, gen):
        return (scg.sample("x", scg.Normal(mu, 1.0)) + gen.normal()) ** 2

    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator or a random.Random of its own"):
        scg.expectation(closes_over, n=10, seed=1)(0.0)
    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator or a random.Random of its own"):
        scg.expectation(takes_it, n=10, seed=1)(0.0, np.random.default_rng(2))
    with pytest.warns(scg.RandomnessWarning, match="a numpy Generator or a random.Random of its own"):
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


def test_python_random_numbers_in_a_model_warn():
    """random.random() or a random.Random the model holds: one number for all n draws,
    warned of as numpy's are."""
    import random
    held = random.Random(0)

    def global_module(mu):
        return (scg.sample("x", scg.Normal(mu, 1.0)) + random.random()) ** 2

    def its_own(mu):
        return (scg.sample("x", scg.Normal(mu, 1.0)) + held.gauss(0.0, 1.0)) ** 2

    with pytest.warns(scg.RandomnessWarning, match="Python's random module"):
        scg.expectation(global_module, n=10, seed=1)(0.0)
    with pytest.warns(scg.RandomnessWarning, match="a random.Random of its own"):
        scg.expectation(its_own, n=10, seed=1)(0.0)


def test_a_hand_written_term_that_is_not_one_number_names_the_estimator_and_the_shape():
    from scg.estimators import Estimator

    class PerDrawTerm(Estimator):
        """A mistake users make: the score term left per draw, not averaged."""
        name = "per-draw-term"

        def draw(self, d):
            return d.sample()

        def term(self, site, ctx):
            return ctx.log_prob(site) * ctx.spread(ctx.q(site), site) / ctx.n

        def dice_log_prob(self, site, ctx):
            self.unsupported_order(site)

    def model(theta):
        with scg.plate("p", 3):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=PerDrawTerm())
        return (a - 1.0) ** 2
    with pytest.raises(scg.EstimatorError, match=r"site 'a': the term of estimator "
                                                 r"PerDrawTerm\(\) is of shape \(10, 3\); a "
                                                 r"term is one number.*linear_term"):
        scg.grad(scg.expectation(model, n=10, seed=3))(np.array([0.4, 0.1, 0.2]))


def test_a_blackbox_of_a_differentiated_parameter_is_an_error():
    # (the gradient through it was silently 0: 1.0 where 3.0 is right)
    cube = scg.blackbox(lambda t: t ** 3)

    def model(theta):
        x = scg.sample("x", scg.Normal(0.0, 1.0))
        return cube(theta) + x

    for call in (lambda E: scg.grad(E)(1.0), lambda E: scg.grad_samples(E)(1.0)):
        with pytest.raises(scg.EstimatorError, match="blackbox.*differentiated value"):
            call(scg.expectation(model, n=10, seed=0))

    def held(theta):  # a zero derivative asked for
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return cube(scg.stop_gradient(theta)) + x

    assert scg.grad(scg.expectation(held, n=10, seed=0))(1.0) == pytest.approx(1.0)

    def of_a_draw(theta):  # the black box of a draw: the score function, unbiased
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return cube(x)

    gs = scg.grad_samples(scg.expectation(of_a_draw, n=200_000, seed=0))(1.0)
    assert abs(gs.mean - 6.0) < 5 * gs.stderr   # d/dt E[(t + e)^3] = 3 t^2 + 3


@pytest.mark.parametrize("value, kind", [
    (lambda x: x * 1j, "complex"),
    (lambda x: np.datetime64("2020-01-01"), "times to numbers"),
    (lambda x: np.timedelta64(3, "s"), "durations to numbers"),
    (lambda x: np.array(["a", "b"]), "a number or an array of numbers"),
])
def test_a_cost_that_is_not_real_numbers_is_a_type_error_naming_it(value, kind):
    # (a complex cost gave 0.0)
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("c", value(x))
        return x

    with pytest.raises(TypeError, match=f"cost 'c' must be real numbers.*{kind}"):
        scg.grad(scg.expectation(model, n=10, seed=0))(1.0)
def test_a_generator_as_a_cost_names_the_return_value_or_the_cost():
    def returns_generator(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return (v ** 2 for v in [x])

    def costs_generator(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("squares", map(np.square, [x]))
        return x

    with pytest.raises(TypeError, match=r"the return value of the model 'returns_generator' "
                       r"\(its cost 'return'\) is a generator.*np.sum\(\[f\(x\)"):
        scg.grad(scg.expectation(returns_generator, n=8, seed=0))(np.zeros(3))
    with pytest.raises(TypeError, match=r"cost 'squares' is a map, not a number"):
        scg.grad(scg.expectation(costs_generator, n=8, seed=0))(np.zeros(3))


def test_an_integer_leaf_used_as_a_size_names_the_leaf():
    def sized(theta):
        x = scg.sample("x", scg.Normal(theta["w"], 1.0))
        return np.sum(x ** 2) + np.sum(np.zeros(theta["k"]))

    def counted(theta):
        x = scg.sample("x", scg.Normal(theta["w"], 1.0))
        return sum(x[i] ** 2 for i in range(theta["k"]))

    theta = {"w": np.ones(3), "k": 3}
    for model in (sized, counted):
        E = scg.expectation(model, n=8, seed=0)
        with pytest.raises(scg.TracingError, match=r"argument 0\['k'\] \(3\) is an integer "
                           r"inside the differentiated arguments.*argnums=0.*closure"):
            scg.grad(E)(theta)
    # the advice works: k as an argument that is not differentiated
    E = scg.expectation(lambda w, k: sized({"w": w, "k": k}), n=8, seed=0)
    assert scg.grad(E, argnums=0)(np.ones(3), 3).shape == (3,)
    with pytest.raises(scg.TracingError, match=r"argument 1 \(2\) is an integer"):
        scg.grad(lambda x, k: np.sum(np.ones(k) * x), argnums=(0, 1))(1.0, 2)
