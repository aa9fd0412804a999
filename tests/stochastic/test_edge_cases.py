"""Edge cases of models: each test pins down a behaviour that was once wrong."""

import numpy as np
import pytest
import scipy.stats as scipy_stats

import scg
from scg.core.tape import strip

SIG = scg.sigmoid


def test_sequential_plates_at_the_same_dim_are_different_plates():
    """Element i of plate A meets every cost of a later plate B, not element i of B."""
    t = np.array([0.1, 0.5, 0.9])

    def model(theta):
        with scg.plate("A", 3):
            a = scg.sample("a", scg.Bernoulli(logits=theta))
        with scg.plate("B", 3):
            scg.cost("c", (a[::-1] - t) ** 2)

    theta = np.array([0.2, -0.4, 0.7])
    p = SIG(theta)
    exact = p * (1 - p) * ((1 - t[::-1]) ** 2 - t[::-1] ** 2)
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(theta)
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr + 1e-12)


def test_mixed_second_derivatives_over_different_arguments():
    """d/dtheta d/dphi E[theta * a], a ~ Bernoulli(sigmoid(phi)) = sigmoid'(phi)."""
    def model(theta, phi):
        return theta * scg.sample("a", scg.Bernoulli(logits=phi))

    exact = SIG(0.3) * (1 - SIG(0.3))
    E = scg.expectation(model, n=100_000, seed=0)
    d2 = scg.jacobian(scg.grad(E, argnums=1), argnums=0)(1.5, 0.3)
    d2_other = scg.jacobian(scg.grad(E, argnums=0), argnums=1)(1.5, 0.3)
    assert abs(d2 - exact) < 0.01 and abs(d2_other - exact) < 0.01


def test_blackbox_sees_per_draw_keyword_arguments():
    sim = scg.blackbox(lambda x, scale: scale * np.round(x))

    def model(mu):
        return sim(x=scg.sample("x", scg.Normal(mu, 1.0)), scale=3.0)

    E = scg.expectation(model, n=100_000, seed=0)
    value = E(0.5)
    assert abs(value - 3.0 * 0.5) < 0.05
    scg.grad(E)(0.5)
    assert E.last_trace.sites["x"].kind == "score"


def test_per_draw_vector_dot_products():
    m = np.array([1.0, -2.0, 0.5])

    def model(w):
        x = scg.sample("x", scg.Normal(m, 1.0))
        return x @ w + np.dot(x, w) + x @ x          # gradient in w: 2 E[x] = 2 m

    g = scg.grad(scg.expectation(model, n=5, seed=0))(np.ones(3))
    t = scg.trace(model, np.ones(3), n=5, seed=0)         # the same five draws
    x = t.sites["x"].value
    assert np.allclose(t.costs["return"], 2 * x.sum(axis=1) + np.sum(x ** 2, axis=1))
    assert np.allclose(g, 2 * x.mean(axis=0))


def test_traced_keyword_arguments_of_an_expectation():
    def model(theta=0.0):
        return scg.sample("x", scg.Normal(theta, 1.0)) ** 2

    E = scg.expectation(model, n=50_000, seed=0)
    assert abs(scg.grad(lambda th: E(theta=th))(0.5) - 1.0) < 0.05


def test_to_event_inside_a_plate():
    def model(mu):
        with scg.plate("data", 5):
            z = scg.sample("z", scg.Normal(mu, 1.0).to_event(1))
            assert z.shape == (5, 10)
            scg.cost("c", np.sum(z ** 2, axis=-1))

    g = scg.grad(scg.expectation(model, n=20_000, seed=0))(np.full(10, 0.5))
    assert np.allclose(g, 5 * 2 * 0.5, atol=0.1)


def test_integer_and_array_indices_separated_by_a_slice_are_refused():
    def model(_):
        x = scg.sample("x", scg.Normal(np.zeros((3, 4, 5)), 1.0))
        return np.sum(x[0, :, [1, 2]])

    with pytest.raises(scg.TracingError, match="two steps"):
        scg.trace(model, 0.0, n=7)


def test_grad_samples_keeps_parameters_plain_where_it_matters():
    """Parameters copied once per draw still branch like plain values and reach black
    boxes without the draws' axis."""
    shape_seen = {}

    def peek(v):
        shape_seen["v"] = np.shape(v)
        return np.sum(v)

    box = scg.blackbox(peek)

    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], 1.0))
        scale = 2.0 if theta[1] > 0 else 1.0
        return scale * x ** 2 + box(scg.stop_gradient(theta)) * 0.0

    E = scg.expectation(model, n=1_000, seed=0)
    gs = scg.grad_samples(E, allow_unused=True)(np.array([0.5, 1.0, 2.0]))
    assert shape_seen["v"] == (3,)
    g = scg.grad(scg.expectation(model, n=1_000, seed=0), allow_unused=True)(
        np.array([0.5, 1.0, 2.0]))
    assert np.allclose(gs.mean, g)


def test_take_along_axis_with_per_draw_categorical_indices():
    table = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

    def model(logits):
        k = scg.sample("k", scg.Categorical(logits=logits))
        idx = np.broadcast_to(k, (2, 1))
        return np.sum(np.take_along_axis(table, idx, axis=1))

    t = scg.trace(model, np.zeros(3), n=6, seed=0)
    k = t.sites["k"].value.astype(int)
    assert np.allclose(t.costs["return"], table[0, k] + table[1, k])


def test_a_score_site_no_cost_depends_on_gives_no_gradient_path():
    def model(theta):
        scg.sample("a", scg.Bernoulli(logits=theta))
        scg.cost("c", 1.0)

    with pytest.raises(scg.NoGradientPathError):
        scg.grad(scg.expectation(model, n=10, seed=0))(0.0)


def test_grad_samples_raises_on_a_non_finite_gradient():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("bad", np.sqrt(np.maximum(x, 0.0)))

    with np.errstate(divide="ignore", invalid="ignore"):
        with pytest.raises(FloatingPointError, match="cost 'bad'"):
            scg.grad_samples(scg.expectation(model, n=50, seed=0))(-0.5)


def test_auto_switches_only_the_site_next_to_the_jump():
    def model(mu):
        x = scg.sample("x", scg.Normal(mu, 1.0))
        y = scg.sample("y", scg.Normal(x, 1.0))
        return np.floor(y)

    E = scg.expectation(model, n=200_000, seed=0)
    gs = scg.grad_samples(E)(0.3)
    kinds = {name: s.kind for name, s in E.last_trace.sites.items()}
    assert kinds == {"x": "pathwise", "y": "score"}
    # y ~ N(mu, 2): d/dmu E[floor(y)] = sum over k of the N(mu, 2) density at k
    from scipy import stats
    exact = sum(stats.norm.pdf(k, 0.3, np.sqrt(2.0)) for k in range(-20, 21))
    assert abs(gs.mean - exact) < 5 * gs.stderr


def test_multivariate_normal_score_site_and_per_draw_parameters():
    # the triangular solve of its log-density batches over draws (score sites, per-draw loc)
    L = np.array([[1.0, 0.0], [0.5, 2.0]])
    loc = np.array([0.3, -0.2])

    def model(loc):
        x = scg.sample("x", scg.MultivariateNormal(loc, L), estimator="score")
        return np.sum(x)

    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(loc)
    assert np.all(np.abs(gs.mean - 1.0) < 5 * gs.stderr)      # d/dloc E[sum x] = 1

    def per_draw(m0):
        m = scg.sample("m", scg.Normal(m0, 1.0))
        x = scg.sample("x", scg.MultivariateNormal(np.stack([m, m]), L), estimator="score")
        return np.sum(x)

    gs = scg.grad_samples(scg.expectation(per_draw, n=100_000, seed=1))(0.5)
    assert abs(gs.mean - 2.0) < 5 * gs.stderr
    t = scg.trace(model, loc, n=4, seed=2)
    x = t.sites["x"].value
    expected = scipy_stats.multivariate_normal(loc, L @ L.T).logpdf(x)
    assert np.allclose(np.asarray(strip(t.sites["x"].log_prob())), expected)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_finite_costs_whose_sum_overflows_are_averaged_without_overflow():
    # (costs of 1e308 per draw gave inf; numpy warns of the overflow of the plain sum)
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        return 1e308 * (1.0 + 0.1 * np.tanh(x))

    E = scg.expectation(model, n=200, seed=0)
    value = E(0.5)
    assert np.isfinite(value) and 1e308 < value < 1.1e308
    E2 = scg.expectation(model, n=200, seed=1)
    (v, g), gs = scg.value_and_grad(E2)(0.5), scg.grad_samples(E2)(0.5)
    assert np.isfinite(v) and 1e308 < v < 1.1e308 and np.isfinite(g)
    assert np.isfinite(gs.mean)
    score = scg.expectation(lambda t: 1e308 * (1.0 + 0.1 * np.tanh(
        scg.sample("x", scg.Normal(t, 1.0), estimator="score"))), n=200, seed=0)
    v, g = scg.value_and_grad(score)(0.5)
    assert np.isfinite(v) and np.isfinite(g)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_mean_beyond_the_largest_float_is_a_floating_point_error():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("big", 1.7e308 + 0.0 * x)
        return 1.7e308 + 0.0 * x

    with pytest.raises(FloatingPointError, match="costs 'big', 'return' exceeds the largest"):
        scg.value_and_grad(scg.expectation(model, n=10, seed=0))(0.5)
