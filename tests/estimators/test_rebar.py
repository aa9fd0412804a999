"""scg.REBAR: unbiased at any fixed temperature and scale (learn=False), and with learn=True
the temperature and scale tuned by an unbiased estimate of the gradient of the estimate's
variance, the estimate unbiased while they learn.

The toy of the REBAR and RELAX papers, f(b) = (b - 0.45)^2 with one coin, against its
exact gradient; a plate of coins with per-element costs; three evaluations per draw; the
control variate's values taken out of the objective's value; clear errors.
"""

import cloudpickle
import numpy as np
import pytest

import scg
from scg.stochastic.tuning import variance_gradient

TARGET = 0.45


def toy(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
        return (b - TARGET) ** 2
    return model


def toy_gradient(theta):
    p = 1.0 / (1.0 + np.exp(-theta))
    return p * (1.0 - p) * ((1.0 - TARGET) ** 2 - TARGET ** 2)


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("scale", [0.0, 1.0, 2.5])
def test_unbiased_on_the_toy_at_any_temperature_and_scale(temperature, scale):
    theta = np.array(0.3)
    gs = scg.grad_samples(scg.expectation(toy(scg.REBAR(temperature, scale, learn=False)), n=40_000,
                                          seed=7))(theta)
    z = (gs.mean - toy_gradient(theta)) / gs.stderr
    assert abs(z) < 5, (gs.mean, toy_gradient(theta), z)


def test_the_value_is_the_expectation_of_the_discrete_draws():
    theta = np.array(0.3)
    E = scg.expectation(toy(scg.REBAR(0.5, 1.0, learn=False)), n=1000, seed=0)
    value, _ = scg.value_and_grad(E)(theta)
    b = E.last_trace.sites["b"].value[:1000]  # (copy 0: the discrete draws)
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert value == pytest.approx(np.mean((b - 0.45) ** 2), rel=1e-12)


def test_a_plate_of_coins_is_unbiased_with_three_evaluations_per_draw():
    target = np.array([0.1, 0.7, 0.4, 0.9])

    def model(theta):
        with scg.plate("coins", 4):
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.REBAR(0.5, 1.0, learn=False))
            return (b - target) ** 2
    theta = np.array([-0.5, 0.2, 0.8, 1.5])
    E = scg.expectation(model, n=40_000, seed=3)
    gs = scg.grad_samples(E)(theta)
    p = 1.0 / (1.0 + np.exp(-theta))
    exact = p * (1 - p) * ((1 - target) ** 2 - target ** 2)
    assert np.all(np.abs((gs.mean - exact) / gs.stderr) < 5)
    assert E.last_trace.copies.count == 3
    assert "REBAR at temperature 0.5" in E.last_trace.explain()


def test_errors():
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        scg.REBAR(temperature=0.0)
    with pytest.raises(TypeError, match="learn must be True or False"):
        scg.REBAR(learn="yes")

    def normal(theta):
        return scg.sample("x", scg.Normal(theta, 1.0), estimator=scg.REBAR()) ** 2
    with pytest.raises(scg.EstimatorError, match="declares a concrete relaxation"):
        scg.grad(scg.expectation(normal, n=4, seed=0))(0.3)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(toy(scg.REBAR()), n=8, seed=0))(np.array(0.3))


def test_one_hot_categorical_needs_logits():
    def with_probs(p):
        k = scg.sample("k", scg.OneHotCategorical(probs=p), estimator=scg.REBAR())
        return np.sum(k * np.arange(3.0))
    with pytest.raises(scg.EstimatorError, match="needs logits="):
        scg.grad(scg.expectation(with_probs, n=4, seed=0))(np.array([0.2, 0.3, 0.5]))


# ---------------------------------------------------------------- learn=True
# On the toy the REBAR estimate g(u, v) is a function of the two uniforms, so its second
# moment, and by finite differences its derivatives in the temperature and scale, are
# computed exactly by quadrature (split where b switches).

def rebar_by_hand(u, v, a, T, eta, c=0.0):
    """The REBAR estimate of d E[f(b)] / da on the toy, for uniforms u, v; with c, RELAX's
    with the control r(s) = c s^2 added to eta f(s)."""
    def sig(x):
        return 1.0 / (1.0 + np.exp(-x))

    def f(x):
        return (x - TARGET) ** 2

    def df(x):
        return 2.0 * (x - TARGET)
    p = sig(a)
    b = (u > 1.0 - p).astype(float)
    s = sig((a + np.log(u) - np.log1p(-u)) / T)
    ut = b * (1.0 - p + v * p) + (1.0 - b) * v * (1.0 - p)
    st = sig((a + np.log(ut) - np.log1p(-ut)) / T)
    dzt = 1.0 + p * (1.0 - p) * (b * (v - 1.0) - (1.0 - b) * v) / (ut * (1.0 - ut))
    ds, dst = s * (1.0 - s) / T, st * (1.0 - st) / T * dzt
    return ((f(b) - eta * f(st) - c * st ** 2) * (b - p)
            + (eta * df(s) + 2 * c * s) * ds - (eta * df(st) + 2 * c * st) * dst)


def moments(a, T, eta, c=0.0, points=400):
    """(E[g], E[g^2]) by Gauss-Legendre quadrature over (u, v), u split at 1 - p."""
    x, w = np.polynomial.legendre.leggauss(points)
    cut = 1.0 - 1.0 / (1.0 + np.exp(-a))
    v, wv = (x + 1.0) / 2.0, w / 2.0
    total = np.zeros(2)
    for lo, hi in ((0.0, cut), (cut, 1.0)):
        u, wu = lo + (hi - lo) * (x + 1.0) / 2.0, w * (hi - lo) / 2.0
        g = rebar_by_hand(u[:, None], v[None, :], a, T, eta, c)
        weights = wu[:, None] * wv[None, :]
        total += [np.sum(weights * g), np.sum(weights * g ** 2)]
    return total


def second_moment(a, T, eta):
    return moments(a, T, eta)[1]


def exact_variance(a, T, eta):
    return second_moment(a, T, eta) - toy_gradient(a) ** 2


def test_the_variance_gradient_is_unbiased_against_quadrature():
    a, T, eta = 0.3, 0.3, 0.7
    estimator = scg.REBAR(T, eta)
    E = scg.expectation(toy(estimator), n=2000, seed=5)
    runs = np.array([
        [v, g["log_temperature"], g["scale"]] for v, g in (
            variance_gradient(E, "b", estimator, estimator.initial_params(), (np.array(a),), {})
            for _ in range(300))])
    h = 1e-4
    exact = [second_moment(a, T, eta),
             (second_moment(a, T * np.exp(h), eta) - second_moment(a, T * np.exp(-h), eta)) / (2 * h),
             (second_moment(a, T, eta + h) - second_moment(a, T, eta - h)) / (2 * h)]
    z = (runs.mean(axis=0) - exact) / (runs.std(axis=0, ddof=1) / np.sqrt(len(runs)))
    assert np.all(np.abs(z) < 5), (runs.mean(axis=0), exact, z)


def test_the_quadrature_is_the_variance_scg_measures():
    """The integrand by hand is scg's estimator: its exact variance is the per-draw
    variance scg.grad_samples measures, to the sample variance's standard error."""
    a, T, eta = 0.3, 0.5, 1.0
    gs = scg.grad_samples(scg.expectation(toy(scg.REBAR(T, eta, learn=False)), n=200_000,
                                          seed=1))(np.array(a))
    g = gs.samples
    centred = (g - g.mean()) ** 2
    stderr = np.sqrt(np.var(centred) / len(g))
    assert abs(gs.var - exact_variance(a, T, eta)) < 5 * stderr, (gs.var, stderr)


def test_unbiased_while_learning():
    a = np.array(0.3)
    E = scg.expectation(toy(scg.REBAR(0.1, 1.0, lr=0.05)), n=500, seed=2)
    grads = np.array([scg.grad(E)(a) for _ in range(400)])
    z = (grads.mean() - toy_gradient(0.3)) / (grads.std(ddof=1) / np.sqrt(len(grads)))
    assert abs(z) < 5, (grads.mean(), toy_gradient(0.3), z)
    params = E.states["b"].estimator["params"]
    assert params["log_temperature"] != np.log(0.1) and params["scale"] != 1.0


def test_learning_lowers_the_variance_from_where_it_starts():
    a = 0.3
    E = scg.expectation(toy(scg.REBAR(0.1, 1.0, lr=0.05)), n=200, seed=4)
    for _ in range(300):
        scg.grad(E)(np.array(a))
    tuned = E.states["b"].estimator["params"]
    T, eta = float(np.exp(tuned["log_temperature"])), float(tuned["scale"])
    start, end = exact_variance(a, 0.1, 1.0), exact_variance(a, T, eta)
    assert end < 0.25 * start, (start, end, T, eta)
    assert end < 1.02 * exact_variance(a, 1.0, 0.0), (end, T, eta)   # REINFORCE's, or below


def test_the_tuning_reaches_far_below_reinforce_where_the_best_is_far_away():
    """On the toy REBAR's best lies at a large temperature and a scale near 100 (eta f(1/2)
    then acts as a baseline near E[f], the relaxation's slope as a correction): 1,600 times
    below REINFORCE's variance by quadrature. Tuning from the default start gets there with
    a step size that lets the scale travel that far."""
    a = 0.3
    reinforce = exact_variance(a, 1.0, 0.0)
    assert exact_variance(a, 1000.0, 100.0) < reinforce / 1000
    E = scg.expectation(toy(scg.REBAR(0.5, 1.0, lr=1.0)), n=200, seed=4)
    for _ in range(500):
        scg.grad(E)(np.array(a))
    tuned = E.states["b"].estimator["params"]
    T, eta = float(np.exp(tuned["log_temperature"])), float(tuned["scale"])
    assert exact_variance(a, T, eta) < reinforce / 20, (T, eta, exact_variance(a, T, eta))


def test_the_state_lives_in_the_expectation_and_explain_shows_it():
    estimator = scg.REBAR(0.5, 1.0, lr=0.05)
    E1 = scg.expectation(toy(estimator), n=100, seed=0)
    E2 = scg.expectation(toy(estimator), n=100, seed=0)
    for _ in range(5):
        scg.grad(E1)(np.array(0.3))
    assert E1.states["b"].estimator["optimizer"]["t"] == 5
    assert "b" not in E2.states
    text = E1.last_trace.explain()
    assert "tuned over 5 calls to temperature" in text, text
    # a pickled expectation continues with its tuned values
    E3 = cloudpickle.loads(cloudpickle.dumps(E1))
    np.testing.assert_array_equal(scg.grad(E3)(np.array(0.3)), scg.grad(E1)(np.array(0.3)))
    assert repr(E3.states) == repr(E1.states)
    # a plain call (no gradient) tunes nothing
    E1(np.array(0.3))
    assert E1.states["b"].estimator["optimizer"]["t"] == 6


def test_a_plate_of_coins_learns_per_element_and_stays_unbiased():
    target = np.array([0.1, 0.7, 0.4, 0.9])

    def model(theta):
        with scg.plate("coins", 4):
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=scg.REBAR(0.3, 1.0, lr=0.05))
            return (b - target) ** 2
    theta = np.array([-0.5, 0.2, 0.8, 1.5])
    E = scg.expectation(model, n=400, seed=3)
    grads = np.array([scg.grad(E)(theta) for _ in range(300)])
    p = 1.0 / (1.0 + np.exp(-theta))
    exact = p * (1 - p) * ((1 - target) ** 2 - target ** 2)
    z = (grads.mean(axis=0) - exact) / (grads.std(axis=0, ddof=1) / np.sqrt(len(grads)))
    assert np.all(np.abs(z) < 5), z


def test_a_categorical_site_learns_and_stays_unbiased():
    values = np.array([0.0, 1.0, 3.0])

    def model(logits):
        k = scg.sample("k", scg.OneHotCategorical(logits=logits), estimator=scg.REBAR(0.5, 1.0, lr=0.05))
        return (np.sum(k * values) - 1.2) ** 2
    logits = np.array([0.2, -0.4, 0.1])
    E = scg.expectation(model, n=400, seed=6)
    grads = np.array([scg.grad(E)(logits) for _ in range(300)])
    p = np.exp(logits) / np.sum(np.exp(logits))
    f = (values - 1.2) ** 2
    exact = p * (f - np.sum(p * f))
    z = (grads.mean(axis=0) - exact) / (grads.std(axis=0, ddof=1) / np.sqrt(len(grads)))
    assert np.all(np.abs(z) < 5), z
    assert E.states["k"].estimator["optimizer"]["t"] == 300


def test_errors_of_the_tuning():
    with pytest.raises(ValueError, match="lr must be a positive finite number"):
        scg.REBAR(lr=0.0)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(toy(scg.REBAR()), n=8, seed=0))(np.array(0.3))


# ---------------------------------------------------------------- log q(z) at the relaxed copies
def elbo_model(estimator, prior_probs):
    """An ELBO as users write it: q.log_prob(z) and a prior's log_prob at the draw."""
    def model(a):
        q = scg.Bernoulli(logits=a).to_event(1)
        z = scg.sample("z", q, estimator=estimator)
        prior = scg.Bernoulli(probs=prior_probs).to_event(1)
        return np.sum((z - 0.4) ** 2) + q.log_prob(z) - prior.log_prob(z)
    return model


def elbo_gradient(a, prior_probs):
    def value(a):
        p = 1.0 / (1.0 + np.exp(-a))
        bits = np.array(np.meshgrid(*[[0.0, 1.0]] * len(a), indexing="ij")).reshape(len(a), -1).T
        lq = np.sum(bits * np.log(p) + (1 - bits) * np.log1p(-p), axis=1)
        lp = np.sum(bits * np.log(prior_probs) + (1 - bits) * np.log1p(-prior_probs), axis=1)
        return np.sum(np.exp(lq) * (np.sum((bits - 0.4) ** 2, axis=1) + lq - lp))
    h = 1e-6
    return np.array([(value(a + h * e) - value(a - h * e)) / (2 * h) for e in np.eye(len(a))])


@pytest.mark.parametrize("estimator", [scg.REBAR(0.5, 1.0, learn=False), scg.REBAR(),
                                       scg.RELAX()], ids=["fixed", "learning", "relax"])
def test_an_elbo_with_log_prob_at_the_draw_is_unbiased(estimator):
    a, prior = np.array([0.3, -0.5, 1.0]), np.array([0.3, 0.5, 0.8])
    E = scg.expectation(elbo_model(estimator, prior), n=200, seed=1)
    grads = np.array([scg.grad(E)(a) for _ in range(200)])
    z = (grads.mean(axis=0) - elbo_gradient(a, prior)) / \
        (grads.std(axis=0, ddof=1) / np.sqrt(len(grads)))
    assert np.all(np.abs(z) < 5), z


def test_an_elbo_under_jit_gives_the_eager_numbers():
    a, prior = np.array([0.3, -0.5, 1.0]), np.array([0.3, 0.5, 0.8])
    eager = scg.expectation(elbo_model(scg.REBAR(), prior), n=50, seed=2)
    jitted = scg.expectation(elbo_model(scg.REBAR(), prior), n=50, seed=2)
    step = scg.jit(scg.grad(jitted))
    for _ in range(6):
        np.testing.assert_allclose(step(a), scg.grad(eager)(a), rtol=1e-10, atol=1e-12)
    assert step.stats["replays"] >= 3
    # (the tuning's probe is recorded with the call: a replay tunes as an eager call does)
    assert repr(jitted.states) == repr(eager.states)
    assert jitted.states["z"].estimator["optimizer"]["t"] == 6


def test_a_categorical_elbo_with_log_prob_at_the_draw_is_unbiased():
    values, logits = np.arange(3.0), np.array([0.3, -0.5, 1.0])

    def model(logits):
        q = scg.OneHotCategorical(logits=logits)
        k = scg.sample("k", q, estimator=scg.REBAR(0.5, 1.0, learn=False))
        return np.sum(k * values) + q.log_prob(k)
    gs = scg.grad_samples(scg.expectation(model, n=40_000, seed=1))(logits)
    p = np.exp(logits) / np.sum(np.exp(logits))
    f = values + np.log(p)
    exact = p * (f - np.sum(p * f))  # (the derivative of E[log q] itself is zero)
    assert np.all(np.abs((gs.mean - exact) / gs.stderr) < 5), (gs.mean, exact)


def test_relaxed_log_prob_is_log_prob_at_zero_and_one_and_its_slope_between():
    p = np.array([0.2, 0.5, 0.9])
    for d in (scg.Bernoulli(probs=p), scg.Bernoulli(logits=np.log(p) - np.log1p(-p))):
        for x in (0.0, 1.0):
            np.testing.assert_allclose(d.relaxed_log_prob(np.full(3, x)),
                                       d.log_prob(np.full(3, x)), rtol=1e-12)
        s = np.array([0.1, 0.5, 0.7])
        np.testing.assert_allclose(d.relaxed_log_prob(s),
                                   s * np.log(p) + (1 - s) * np.log1p(-p), rtol=1e-12)
    # at probs exactly 0 or 1 only the value with probability 1 is finite
    edge = scg.Bernoulli(probs=np.array([0.0, 1.0]))
    np.testing.assert_array_equal(edge.relaxed_log_prob(np.array([0.0, 1.0])), [0.0, 0.0])
    assert np.all(np.isneginf(edge.relaxed_log_prob(np.array([0.5, 0.5]))))
    cat = scg.OneHotCategorical(probs=np.array([0.2, 0.3, 0.5]))
    for e in np.eye(3):
        np.testing.assert_allclose(cat.relaxed_log_prob(e), cat.log_prob(e), rtol=1e-12)
    s = np.array([0.2, 0.2, 0.6])
    np.testing.assert_allclose(cat.relaxed_log_prob(s), np.sum(s * np.log([0.2, 0.3, 0.5])))


def test_a_term_not_finite_at_the_relaxed_values_says_why():
    def model(a):
        z = scg.sample("z", scg.Bernoulli(logits=a), estimator=scg.REBAR())
        with np.errstate(divide="ignore"):
            return np.sum(np.log(z))  # (-inf at z = 0, finite between)
    with pytest.raises(FloatingPointError, match=r"site 'z' is drawn by REBAR.*relaxed values"
                                                 r".*z \* logits - softplus\(logits\)"):
        scg.grad(scg.expectation(model, n=10, seed=1))(np.array([0.3, -0.5]))


def elbo_like(estimator):
    """A small VAE's negative ELBO: coins z of logits x @ W (a plate of 3 images, 2
    latents), whose cost depends on W besides the draw, through log q(z)."""
    x = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    decoder = np.array([[1.5, -2.0, 0.5], [-1.0, 1.0, 2.0]])

    def model(W):
        with scg.plate("images", 3):
            logits = x @ W
            z = scg.sample("z", scg.Bernoulli(logits=logits).to_event(1), estimator=estimator)
            out = z @ decoder
            log_lik = np.sum(x * out - scg.softplus(out), axis=-1)
            log_q = np.sum(z * logits - scg.softplus(logits), axis=-1)
            return log_q - log_lik
    return model


def _sin_control(params, s):
    return np.sin(s @ params["w"])[..., None]


@pytest.mark.parametrize("make", [
    lambda learn: scg.REBAR(0.5, 1.0, learn=learn),
    lambda learn: scg.RELAX((_sin_control, {"w": np.array([0.7, -1.3])}), learn=learn)],
    ids=["REBAR", "RELAX"])
def test_the_probe_measures_the_second_moment_of_the_calls_own_estimate(make):
    """The tuning descends mean(|g|^2) of the probe's g: g must be the estimate the call
    gives, with the cost's own dependence on the parameters (log q) in it. Against the
    per-draw gradients of scg.grad_samples, at the same temperature, scale and control
    (fixed there, learn=False)."""
    W = np.array([[0.3, -0.5], [0.8, 0.1], [-0.4, 0.6]])
    E = scg.expectation(elbo_like(make(False)), n=500, seed=3)
    estimator = make(True)
    per_draw = np.array([np.sum(scg.grad_samples(E)(W).samples ** 2, axis=(1, 2)).mean()
                         for _ in range(40)])
    E = scg.expectation(elbo_like(estimator), n=500, seed=4)
    probed = np.array([variance_gradient(E, "z", estimator, estimator.initial_params(),
                                         (W,), {})[0] for _ in range(40)])
    se = np.sqrt(per_draw.var(ddof=1) / len(per_draw) + probed.var(ddof=1) / len(probed))
    z = (probed.mean() - per_draw.mean()) / se
    assert abs(z) < 5, (probed.mean(), per_draw.mean(), z)


def test_a_site_whose_logits_depend_on_no_argument_warns_that_it_cannot_tune():
    def model(scale):
        b = scg.sample("b", scg.Bernoulli(logits=0.3), estimator=scg.REBAR())
        return scale * (b - TARGET) ** 2

    with pytest.warns(UserWarning, match="cannot tune itself here.*learn=False"):
        scg.grad(scg.expectation(model, n=10, seed=0))(np.array(2.0))


@pytest.mark.parametrize("make", [lambda: scg.REBAR(learn=False), lambda: scg.RELAX()])
def test_through_a_jump_explain_says_biased_as_the_warning_does(make):
    def model(th):
        b = scg.sample("b", scg.Bernoulli(logits=th), estimator=make())
        return np.floor(b * 1.5 + 0.3)

    with pytest.warns(scg.BiasWarning, match="crosses a jump"):
        text = scg.trace(model, 0.3, n=4).explain()
    assert "unbiased" not in text and "biased: a path from 'b' to cost 'return'" in text
