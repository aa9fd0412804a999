"""Edge cases of the distributions: boundaries and outside of the support, validation of
event-shaped parameters with batch dimensions, and a few parameter corner cases."""

import warnings

import numpy as np
import pytest
import scipy.stats as st

import scg
from scg.kernels import continuous as C
from scg.kernels.primitives import run

LOG2 = np.log(2.0)


def _no_warnings(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            return f(*args)


# ---------------------------------------------------------------- 1. boundary of the support
@pytest.mark.parametrize("make, value", [
    (lambda: scg.Gamma(1.0, 2.0), 0.0),
    (lambda: scg.Beta(1.0, 2.0), 0.0),
    (lambda: scg.Beta(2.0, 1.0), 1.0),
    (lambda: scg.Dirichlet(np.array([1.0, 2.0])), np.array([0.0, 1.0])),
])
def test_log_prob_at_boundary_with_finite_density_is_finite(make, value):
    lp = _no_warnings(make().log_prob, value)
    np.testing.assert_allclose(lp, LOG2, rtol=1e-12)


def test_log_prob_at_boundary_other_concentrations():
    np.testing.assert_array_equal(scg.Gamma(np.array([0.5, 2.0]), 1.0).log_prob(0.0),
                                  [np.inf, -np.inf])
    np.testing.assert_array_equal(scg.Beta(np.array([0.5, 2.0]), 2.0).log_prob(0.0),
                                  [np.inf, -np.inf])
    d = scg.Dirichlet(np.array([[2.0, 2.0, 1.0], [0.5, 2.0, 1.0], [1.0, 1.0, 1.0]]))
    np.testing.assert_allclose(d.log_prob(np.array([0.0, 0.5, 0.5])),
                               [-np.inf, np.inf, np.log(2.0)])


def test_boundary_kernels_match_twins():
    x = np.array([0.0, 0.0, 0.0, 0.5, 1.0, 1.0])
    a = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 3.0])
    b = np.array([2.0, 1.0, 1.0, 1.0, 1.0, 0.5])
    for which in range(4):
        for kernel, twin in ((C.gamma_density, C.gamma_density_twin),
                             (C.beta_density, C.beta_density_twin)):
            got = run(kernel, which, x, a, b)
            want = _no_warnings(twin, which, x, a, b)
            np.testing.assert_allclose(got, want, rtol=1e-12)
            assert not np.isnan(got).any()
    assert run(C.gamma_density, 0, x[:1], a[:1], b[:1])[0] == pytest.approx(LOG2)


def test_boundary_gradients_are_finite():
    # in the value at x = 0 with a = 1: d/dx (-rate x) = -rate, d/dx (b - 1) log(1 - x) = 1 - b
    assert _no_warnings(scg.grad(lambda x: scg.Gamma(1.0, 2.0).log_prob(x)), 0.0) == -2.0
    assert _no_warnings(scg.grad(lambda x: scg.Beta(1.0, 2.0).log_prob(x)), 0.0) == -1.0
    assert _no_warnings(scg.grad(lambda x: scg.Beta(3.0, 1.0).log_prob(x)), 1.0) == 2.0
    # and in the parameters, unchanged
    assert scg.grad(lambda r: scg.Gamma(1.0, r).log_prob(0.0))(2.0) == pytest.approx(0.5)
    assert scg.grad(lambda b: scg.Beta(1.0, b).log_prob(0.0))(2.0) == pytest.approx(0.5)


# ---------------------------------------------------------------- 2. outside the support
OUTSIDE = {
    "Categorical": (lambda: scg.Categorical(probs=np.array([0.2, 0.3, 0.5])),
                    [3.0, -1.0, 1.5, 7.0], [0.0, 1.0, 2.0]),
    "CategoricalLogits": (lambda: scg.Categorical(logits=np.array([0.2, 0.3, 0.5])),
                          [3.0, -1.0, 0.5], [0.0, 2.0]),
    "Exponential": (lambda: scg.Exponential(2.0), [-1.0, -1e-300], [0.0, 1.5]),
    "Geometric": (lambda: scg.Geometric(0.3), [-1.0, 0.5, 2.5], [0.0, 3.0]),
    "Bernoulli": (lambda: scg.Bernoulli(probs=0.3), [2.0, -1.0, 0.5], [0.0, 1.0]),
    "BernoulliLogits": (lambda: scg.Bernoulli(logits=0.3), [2.0, -1.0, 0.5], [0.0, 1.0]),
    "Poisson": (lambda: scg.Poisson(3.5), [0.5, -1.0, -2.0], [0.0, 4.0]),
    "Binomial": (lambda: scg.Binomial(5, 0.3), [6.0, -1.0, 2.5], [0.0, 2.0, 5.0]),
    "Gamma": (lambda: scg.Gamma(2.0, 1.0), [-1.0, -1e-300], [0.5, 3.0]),
    "Beta": (lambda: scg.Beta(2.0, 1.0), [1.5, -0.5], [0.25, 0.75]),
    "LogNormal": (lambda: scg.LogNormal(0.0, 1.0), [-1.0, 0.0], [0.5, 3.0]),
}

SCIPY = {
    "Categorical": lambda v: np.log(np.array([0.2, 0.3, 0.5])[v.astype(int)]),
    "Exponential": lambda v: st.expon(scale=0.5).logpdf(v),
    "Geometric": lambda v: st.geom(0.3, loc=-1).logpmf(v),
    "Bernoulli": lambda v: st.bernoulli(0.3).logpmf(v),
    "Poisson": lambda v: st.poisson(3.5).logpmf(v),
    "Binomial": lambda v: st.binom(5, 0.3).logpmf(v),
    "Gamma": lambda v: st.gamma(2.0).logpdf(v),
    "Beta": lambda v: st.beta(2.0, 1.0).logpdf(v),
    "LogNormal": lambda v: st.lognorm(1.0).logpdf(v),
}


@pytest.mark.parametrize("name", list(OUTSIDE))
def test_log_prob_outside_support_is_minus_inf(name):
    make, outside, inside = OUTSIDE[name]
    d = make()
    lp = _no_warnings(d.log_prob, np.array(outside))
    np.testing.assert_array_equal(lp, -np.inf)
    lp_in = _no_warnings(d.log_prob, np.array(inside))
    assert np.all(np.isfinite(lp_in))
    if name in SCIPY:
        np.testing.assert_allclose(lp_in, SCIPY[name](np.array(inside)), rtol=1e-10)


def test_categorical_masses_sum_to_one_over_any_range():
    d = scg.Categorical(probs=np.array([0.2, 0.3, 0.5]))
    assert np.exp(d.log_prob(np.arange(-3.0, 8.0))).sum() == pytest.approx(1.0)


def test_dirichlet_outside_support():
    d = scg.Dirichlet(np.array([2.0, 2.0]))
    for v in ([1.5, -0.5], [0.3, 0.3], [1.0, 1.0]):
        assert _no_warnings(d.log_prob, np.array(v)) == -np.inf
    np.testing.assert_allclose(d.log_prob(np.array([0.25, 0.75])),
                               st.dirichlet([2.0, 2.0]).logpdf([0.25, 0.75]), rtol=1e-12)


def test_gradients_inside_support_unchanged_and_zero_outside():
    v = np.array([-1.0, 0.5, 2.0])
    g = _no_warnings(scg.grad(lambda r: np.sum(scg.Exponential(r).log_prob(v[1:]))), 2.0)
    assert g == pytest.approx(2 / 2.0 - 2.5)
    g = scg.grad(lambda r: np.sum(np.where(np.isfinite(scg.Exponential(r).log_prob(v)),
                                           scg.Exponential(r).log_prob(v), 0.0)))(2.0)
    assert g == pytest.approx(2 / 2.0 - 2.5)
    # derivative in the value itself, through the masks
    gx = scg.grad(lambda x: np.sum(scg.Gamma(3.0, 2.0).log_prob(x)))(np.array([0.5, 1.5]))
    np.testing.assert_allclose(gx, 2.0 / np.array([0.5, 1.5]) - 2.0)
    gx = scg.grad(lambda x: np.sum(scg.LogNormal(0.0, 1.0).log_prob(x)))(np.array([0.5, 1.5]))
    y = np.array([0.5, 1.5])
    np.testing.assert_allclose(gx, (-np.log(y) - 1.0) / y)
    gp = scg.grad(lambda p: np.sum(scg.Geometric(p).log_prob(np.array([-1.0, 2.0]))
                                   [1:]))(0.3)
    assert gp == pytest.approx(1 / 0.3 - 2 / 0.7)
    gp = scg.grad(lambda p: np.sum(scg.Categorical(logits=p).log_prob(np.array([2.0]))))(
        np.zeros(3))
    np.testing.assert_allclose(gp, [-1 / 3, -1 / 3, 2 / 3])
    gd = scg.grad(lambda a: scg.Dirichlet(a).log_prob(np.array([0.2, 0.8])))(np.array([2.0, 3.0]))
    assert np.all(np.isfinite(gd))


def test_out_of_support_masks_work_on_per_draw_values():
    def model(m):
        k = scg.sample("k", scg.Poisson(2.0))
        x = scg.sample("x", scg.Normal(m, 1.0))
        scg.cost("cat", np.exp(scg.Categorical(probs=np.array([0.2, 0.3, 0.5])).log_prob(k)))
        scg.cost("gam", np.exp(scg.Gamma(2.0, 1.0).log_prob(x)))
        scg.cost("ber", np.exp(scg.Bernoulli(probs=0.3).log_prob(k)))

    tr = scg.trace(model, 0.3, n=300, seed=0)
    k = np.asarray(tr.sites["k"].value)
    x = np.asarray(tr.sites["x"].value)
    cat = np.where(k <= 2, np.array([0.2, 0.3, 0.5])[np.minimum(k, 2).astype(int)], 0.0)
    np.testing.assert_allclose(tr.costs["cat"], cat, rtol=1e-12)
    np.testing.assert_allclose(tr.costs["gam"], st.gamma(2.0).pdf(x), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(tr.costs["ber"], st.bernoulli(0.3).pmf(k), rtol=1e-12)
    g = scg.grad(scg.expectation(model, n=300, seed=0))(0.3)
    assert np.isfinite(g)


# ---------------------------------------------------------------- 3. event-shaped validation
@pytest.mark.parametrize("name, make, param", [
    ("Categorical", lambda: scg.Categorical(probs=np.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.6]])),
     "probs"),
    ("Categorical", lambda: scg.Categorical(logits=np.array([[0.0, 1.0, np.nan], [0.0, 0, 0]])),
     "logits"),
    ("Dirichlet", lambda: scg.Dirichlet(np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 2.0]])),
     "concentration"),
    ("MultivariateNormal",
     lambda: scg.MultivariateNormal(np.zeros(2), np.stack([np.eye(2), np.eye(2), -np.eye(2)])),
     "scale_tril"),
    ("MultivariateNormal",
     lambda: scg.MultivariateNormal(np.array([[0.0, np.nan], [0, 0], [0, 0]]), np.eye(2)),
     "loc"),
])
def test_batched_event_parameters_raise_named_value_error(name, make, param):
    with pytest.raises(ValueError, match=f"{name}: parameter '{param}'"):
        make()


# ---------------------------------------------------------------- 4. corner cases
def test_binomial_rejects_infinite_total_count():
    with pytest.raises(ValueError, match="Binomial: parameter 'total_count'"):
        scg.Binomial(np.inf, 0.3)


def test_uniform_accepts_lists():
    d = scg.Uniform([0.0, 1.0], 2.0)
    assert d.batch_shape == (2,)
    assert d.sample(np.random.default_rng(0), 3).shape == (3, 2)
    np.testing.assert_allclose(d.log_prob(1.5), [-np.log(2.0), 0.0])


def test_lognormal_variance_does_not_overflow():
    v = scg.LogNormal(360.0, 1e-3).variance
    assert np.isfinite(v)
    np.testing.assert_allclose(v, st.lognorm(1e-3, scale=np.exp(360.0)).var(), rtol=1e-9)
    np.testing.assert_allclose(scg.LogNormal(0.3, 0.7).variance,
                               st.lognorm(0.7, scale=np.exp(0.3)).var(), rtol=1e-12)


def test_invalid_simplex_with_infinities_is_a_value_error_not_a_warning():
    # (the suite turns RuntimeWarnings into errors: inf - inf in the check must not warn)
    with pytest.raises(ValueError, match="probs"):
        scg.Categorical(probs=np.array([np.inf, -np.inf, 0.5]))


def test_log_prob_of_the_same_traced_value_is_evaluated_once():
    calls = []

    def model(theta):
        q = scg.Bernoulli(logits=theta)
        z = scg.sample("z", q, estimator="score")
        lp = q.log_prob(z)
        calls.append(lp is q.log_prob(z))
        return z * 2.0 - lp

    theta = np.array(0.3)
    g = scg.grad(scg.expectation(model, n=200_000, seed=0))(theta)
    p = 1.0 / (1.0 + np.exp(-theta))
    # d/dtheta E[2 z - log q(z)] = 2 p (1 - p) - d/dtheta(-entropy) = p(1-p) (2 - theta)
    assert calls == [True]
    assert abs(g - p * (1 - p) * (2.0 - theta)) < 0.01
    d = scg.Normal(0.0, 1.0)
    x = np.array([0.5])
    first = d.log_prob(x)
    x[0] = 1.5                                    # plain values are evaluated every time
    assert d.log_prob(x) != first


def test_log_prob_reuse_keeps_other_signatures_and_notices_changes():
    class Tempered(scg.Normal):
        def log_prob(self, value, temperature=1.0):
            return super().log_prob(value) / temperature

    assert np.isclose(Tempered(0.0, 1.0).log_prob(0.5, temperature=2.0),
                      scg.Normal(0.0, 1.0).log_prob(0.5) / 2.0)

    class Shifted(scg.Normal):
        def log_prob(self, value):
            return super().log_prob(value) - 100.0

    def model(theta):
        q = Shifted(theta, 1.0)
        x = scg.sample("x", q, estimator="score")
        base = scg.Normal.log_prob(q, x)                 # the parent's method first
        shifted = q.log_prob(x)
        q.loc = theta + 5.0                              # an attribute changed: evaluated again
        moved = q.log_prob(x)
        scg.cost("c", shifted - base)
        scg.cost("d", moved - shifted)
        return 0.0 * x

    t = scg.trace(model, 0.3, n=3, seed=0)
    assert np.allclose(t.costs["c"], -100.0)
    x = t.sites["x"].value
    assert np.allclose(t.costs["d"], 0.5 * ((x - 0.3) ** 2 - (x - 5.3) ** 2))
    prior = scg.Normal(np.zeros(3), 1.0)                 # a traced box is not remembered
    scg.grad(lambda m: np.sum(prior.log_prob(m)))(np.ones(3))
    assert "_last_log_prob" not in vars(prior)



def test_a_recorded_log_probability_changed_in_place_is_not_given_again():
    """Under scg.jit (values recorded, no model run) log_prob of the same value twice,
    the first changed in place in between: the second is the log-probability itself."""
    d = scg.Normal(0.0, 1.0)

    def f(x):
        lp = d.log_prob(x)
        lp += 1.0
        return np.sum(lp + d.log_prob(x))

    x = np.array([0.3, -0.2])
    exact = np.sum(2.0 * (-0.5 * x ** 2 - 0.5 * np.log(2.0 * np.pi)) + 1.0)
    recorded = scg.jit(f)
    for _ in range(3):
        assert recorded(x) == pytest.approx(exact, rel=1e-12)


def test_simplex_check_of_huge_probabilities_is_a_value_error_not_a_warning():
    with pytest.raises(ValueError, match="probs"):
        scg.Categorical(probs=np.array([1e308, 1e308]))


# ---------------------------------------------------------------- concentrations near 0
def _pathwise_mean_gradient(make, theta, n, seed=1):
    def model(theta):
        return scg.sample("x", make(theta), estimator="pathwise")
    return scg.grad_samples(scg.expectation(model, n=n, seed=seed))(theta)


@pytest.mark.parametrize("make, theta, exact", [
    # d E[x] / da of Beta(a, a) in its first argument: 1 / (4 a); of Gamma(a, 1): 1
    (lambda t: scg.Beta(t[0], t[1]), np.array([1e-6, 1e-6]), np.array([2.5e5, -2.5e5])),
    (lambda t: scg.Gamma(t, 1.0), 1e-6, 1.0),
])
def test_a_pathwise_derivative_resting_on_rare_draws_warns(make, theta, exact):
    # at concentration 1e-6 and 20,000 draws the draws that carry the derivative are
    # expected 0.14 times: the estimate is about 0 with a tiny standard error
    with pytest.warns(scg.VarianceWarning, match=r"site 'x': .* concentration 1e-06 .*"
                                                 r"0\.14 expected in 20000 draws.*n >= 1e\+07"):
        gs = _pathwise_mean_gradient(make, theta, 20_000)
    z = (np.ravel(gs.mean)[0] - np.ravel(exact)[0]) / np.ravel(gs.stderr)[0]
    assert abs(z) > 100  # (why it warns: the numbers look confident and are wrong)


@pytest.mark.parametrize("a, n", [(1e-3, 200_000), (1e-5, 1_000_000)])
def test_with_enough_draws_it_is_unbiased_and_silent(a, n):
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.VarianceWarning)
        gs = _pathwise_mean_gradient(lambda t: scg.Beta(t[0], t[1]), np.array([a, a]), n)
    assert np.all(np.abs((gs.mean - np.array([1, -1]) / (4 * a)) / gs.stderr) < 5)


def test_a_dirichlet_whose_gamma_draws_underflow_says_so():
    with pytest.raises(ValueError, match=r"Dirichlet at concentration 0\.001: in \d+\.\d% of "
                                         r"the draws every Gamma variable .* at least about 0\.01"):
        scg.Dirichlet(np.array([1e-3, 1e-3])).sample(np.random.default_rng(0), (10_000,))
    def model(c):
        x = scg.sample("x", scg.Dirichlet(c))
        return x[..., 0]
    with pytest.warns(scg.VarianceWarning, match="concentration 0.02"):
        gs = scg.grad_samples(scg.expectation(model, n=40, seed=0))(np.array([0.02, 0.5]))
    assert np.all(np.isfinite(gs.mean))


def test_poisson_rates_beyond_numpys_exact_draws_are_refused():
    # numpy's draws at rate 3e15 have a variance 10 % high: a score estimate of
    # d E[(k - c)^2] / d rate was 42 standard errors off
    def model(rate):
        return (scg.sample("k", scg.Poisson(rate), estimator=scg.Score("loo")) - 1e15) ** 2
    with pytest.raises(ValueError, match=r"rate 3e\+15 is above 1e\+13.*scg\.Normal\(rate"):
        scg.grad(scg.expectation(model, n=100, seed=0))(3e15)
    rng = np.random.default_rng(1)
    x = scg.Poisson(1e13).sample(rng, (200_000,))
    assert abs(x.var() / 1e13 - 1) < 5 * np.sqrt(2 / len(x))


@pytest.mark.parametrize("scale", [1e-17, 1e-160])
def test_a_score_whose_scale_is_lost_in_the_locs_rounding_is_refused(scale):
    # (at scale 1e-17 beside loc 2 every draw is 2.0 itself: the score gave d/dmu = 0, not
    # 4, with a standard error of 0)
    def model(th, estimator):
        return scg.sample("x", scg.Normal(th["mu"], th["sigma"]), estimator=estimator) ** 2
    theta = {"mu": 2.0, "sigma": scale}
    with pytest.raises(scg.EstimatorError, match=r"site 'x': the score-function estimator "
                                                 r"cannot serve Normal at scale .* beside loc "
                                                 r"2: .*estimator='pathwise'"):
        scg.grad(scg.expectation(model, n=100, seed=0))(theta, "score")
    g = scg.grad_samples(scg.expectation(model, n=1000, seed=0))(theta, "pathwise")
    assert g.mean["mu"] == pytest.approx(4.0)  # (the advice holds: pathwise is exact here)
    offset = scg.grad(scg.expectation(model, n=1000, seed=0))({"mu": 0.0, "sigma": scale},
                                                               "score")
    assert np.isfinite(offset["mu"])  # (about 0: nothing rounds)
