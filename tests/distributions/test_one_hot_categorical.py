"""OneHotCategorical: Categorical draws as one-hot vectors (the generic family tests cover
it through dist_registry; these check what is particular to it).

Statistical checks use fixed seeds; the tolerances are stated where they are used.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.special as ss
from dist_registry import ONE_HOT, ids

import scg
from tests.tolerances import assert_close_ulps

PROBS = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
LOGITS = np.array([[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])


def _no_warnings(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return f(*args)


# ---------------------------------------------------------------- shapes and values
def test_shapes():
    d = scg.OneHotCategorical(logits=LOGITS)
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    assert not d.has_rsample and d.support.discrete and d.support.event_dim == 1
    x = d.sample(np.random.default_rng(0), (5,))
    assert x.shape == (5, 2, 3) and x.dtype == float
    assert np.shape(d.log_prob(x)) == (5, 2)
    assert np.all(d.support.check(x))
    unbatched = scg.OneHotCategorical(probs=np.array([0.2, 0.8]))
    assert unbatched.batch_shape == () and unbatched.event_shape == (2,)
    assert unbatched.sample(np.random.default_rng(0)).shape == (2,)


@pytest.mark.parametrize("given", [dict(probs=PROBS), dict(logits=LOGITS)],
                         ids=["probs", "logits"])
def test_log_prob_equals_categorical_at_the_argmax(given):
    d, c = scg.OneHotCategorical(**given), scg.Categorical(**given)
    x = d.sample(np.random.default_rng(1), (50,))
    k = np.argmax(x, axis=-1).astype(float)
    np.testing.assert_allclose(d.log_prob(x), c.log_prob(k), rtol=1e-14)
    v = d.support_values()
    np.testing.assert_allclose(d.log_prob(v[:, None, :]), c.log_prob(np.arange(3.0)[:, None]),
                               rtol=1e-14)


def test_log_prob_at_a_category_of_probability_zero():
    d = scg.OneHotCategorical(probs=np.array([0.0, 0.4, 0.6]))
    lp = _no_warnings(d.log_prob, np.eye(3))
    np.testing.assert_allclose(lp, [-np.inf, np.log(0.4), np.log(0.6)])


@pytest.mark.parametrize("outside", [[0.5, 0.5, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0],
                                     [2.0, -1.0, 0.0], [np.nan, 1.0, 0.0], [np.inf, 0.0, 0.0]])
def test_log_prob_outside_the_support_is_minus_inf(outside):
    d = scg.OneHotCategorical(logits=np.array([0.2, 0.3, 0.5]))
    assert _no_warnings(d.log_prob, np.array(outside)) == -np.inf
    assert not d.support.check(np.array(outside))


def test_draws_are_categorical_draws_as_one_hot_vectors():
    """The same generator gives the same categories as Categorical (its sampler)."""
    for given in (dict(probs=PROBS), dict(logits=LOGITS)):
        x = scg.OneHotCategorical(**given).sample(np.random.default_rng(3), (20,))
        k = scg.Categorical(**given).sample(np.random.default_rng(3), (20,))
        np.testing.assert_array_equal(x, np.eye(3)[k.astype(int)])


def test_sample_frequencies_match_probs():
    """Each category's frequency within 5 standard errors sqrt(p (1 - p) / n) of p (a
    false failure rate below 1e-6 per entry), at a fixed seed."""
    n = 40000
    x = scg.OneHotCategorical(probs=PROBS).sample(np.random.default_rng(4), (n,))
    assert np.all(np.sum(x, axis=-1) == 1)
    freq = x.mean(axis=0)
    se = np.sqrt(PROBS * (1 - PROBS) / n)
    assert np.all(np.abs(freq - PROBS) <= 5 * se), (freq, PROBS)
    x = scg.OneHotCategorical(logits=LOGITS).sample(np.random.default_rng(5), (n,))
    p = ss.softmax(LOGITS, axis=-1)
    assert np.all(np.abs(x.mean(axis=0) - p) <= 5 * np.sqrt(p * (1 - p) / n))


def test_mean_and_variance():
    d = scg.OneHotCategorical(logits=LOGITS)
    p = ss.softmax(LOGITS, axis=-1)
    # exp(l - max) / sum by another route: p within a few eps (1 + |l - max|) relative
    # (the rounding of l - max passes through exp), and p (1 - p) within as much of p
    scale = p * (1 + np.max(np.abs(LOGITS), axis=-1, keepdims=True))
    assert_close_ulps(d.mean, p, 10, scale)
    assert_close_ulps(d.variance, p * (1 - p), 10, scale)


# ---------------------------------------------------------------- the support
@pytest.mark.parametrize("ex", ONE_HOT, ids=ids(ONE_HOT))
def test_support_values_list_the_support_and_it_is_normalized(ex):
    d = ex.make()
    K = d.event_shape[0]
    v = d.support_values()
    np.testing.assert_array_equal(v, np.eye(K))
    assert np.all(d.support.check(v))
    lp = np.asarray(d.log_prob(v.reshape((K,) + (1,) * len(d.batch_shape) + (K,))))
    assert lp.shape == (K,) + d.batch_shape
    np.testing.assert_allclose(np.exp(lp).sum(axis=0), 1.0, rtol=1e-12)


def test_support_values_of_an_expanded_distribution():
    d = scg.OneHotCategorical(probs=np.array([0.3, 0.7])).expand((4,))
    assert d.batch_shape == (4,) and d.support_values().shape == (2, 2)


# ---------------------------------------------------------------- gradients
def test_score_of_the_logits():
    x = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    g = scg.grad(lambda l: np.sum(scg.OneHotCategorical(logits=l).log_prob(x)))(LOGITS)
    np.testing.assert_allclose(g, x - ss.softmax(LOGITS, axis=-1), rtol=1e-12)
    gp = scg.grad(lambda p: np.sum(scg.OneHotCategorical(probs=p).log_prob(x)))(PROBS)
    # through the normalization: d/dp log(p_k / sum(p)) = e_k / p_k - 1 / sum(p)
    np.testing.assert_allclose(gp, x / PROBS - 1.0 / PROBS.sum(axis=-1, keepdims=True),
                               rtol=1e-12)


C = np.array([1.0, -2.0, 0.5, 3.0])
L0 = np.array([0.3, -0.4, 1.0, 0.0])


def _exact_grad(logits, c):
    """d/dlogits sum(softmax(logits) * c) = p * (c - p . c)."""
    p = ss.softmax(logits)
    return p * (c - p @ c)


def test_score_function_gradient_matches_the_exact_gradient():
    """E[x . c] = sum(softmax(logits) c): the estimate is within 4 of its standard errors
    (from scg.grad_samples, the same draws) of the exact gradient, at a fixed seed."""
    def model(logits):
        x = scg.sample("x", scg.OneHotCategorical(logits=logits))
        return np.sum(x * C)

    gs = scg.grad_samples(scg.expectation(model, n=4000, seed=0))(L0)
    g = scg.grad(scg.expectation(model, n=4000, seed=0))(L0)   # the same draws
    np.testing.assert_allclose(g, gs.mean, rtol=1e-10, atol=1e-12)
    exact = _exact_grad(L0, C)
    assert np.all(gs.stderr > 0)
    assert np.all(np.abs(gs.mean - exact) <= 4 * gs.stderr), (gs.mean, exact, gs.stderr)
    # the site is a score site, and pathwise is refused
    t = scg.trace(model, L0, n=3, seed=0)
    assert t.sites["x"].kind == "score"
    assert np.asarray(t.sites["x"].value).shape == (3, 4)

    def pathwise(logits):
        return np.sum(scg.sample("x", scg.OneHotCategorical(logits=logits),
                                 estimator="pathwise") * C)

    with pytest.raises(scg.EstimatorError, match="OneHotCategorical has no reparameterization"):
        scg.grad(scg.expectation(pathwise, n=3, seed=0))(L0)


def test_per_sample_parameters_plates_and_to_event():
    """Logits that depend on an earlier draw (per-sample parameters), in a plate, with
    to_event: x_b ~ OneHot(softmax(theta + s_b + d z_b)) with z_b ~ Bernoulli(1/2), so
    E = sum_b (E[c . x_b | z_b = 0] + E[c . x_b | z_b = 1]) / 2 (+ a to_event site of two
    rows at theta); compared with the exact gradient within 4 standard errors."""
    B, K = 3, 4
    shift = np.array([0.0, 1.0, -1.0])
    delta = np.array([1.5, 0.0, -0.5, 0.2])

    def model(theta):
        with scg.plate("rows", B):
            z = scg.sample("z", scg.Bernoulli(probs=np.full(B, 0.5)))
            logits = theta + shift[:, None] + z[:, None] * delta      # (B, K), per sample
            x = scg.sample("x", scg.OneHotCategorical(logits=logits))
            scg.cost("c", np.sum(x * C, axis=-1))
        y = scg.sample("y", scg.OneHotCategorical(logits=theta).expand((2,)).to_event(1))
        assert y.shape == (2, K)
        return np.sum(y * C)

    t = scg.trace(model, L0, n=5, seed=0)
    assert np.asarray(t.sites["x"].value).shape == (5, B, K)
    assert np.asarray(t.sites["y"].value).shape == (5, 2, K)
    assert np.all(np.asarray(t.sites["x"].value).sum(-1) == 1)
    gs = scg.grad_samples(scg.expectation(model, n=4000, seed=1))(L0)
    exact = 2 * _exact_grad(L0, C) + sum(
        (_exact_grad(L0 + s, C) + _exact_grad(L0 + s + delta, C)) / 2 for s in shift)
    assert np.all(np.abs(gs.mean - exact) <= 4 * gs.stderr), (gs.mean, exact, gs.stderr)


def test_a_plate_broadcasts_the_batch_dimension():
    def model(theta):
        with scg.plate("rows", 3):
            x = scg.sample("x", scg.OneHotCategorical(logits=theta))
        assert x.shape == (3, 4)
        return np.sum(x * C)

    t = scg.trace(model, L0, n=2, seed=0)
    assert np.asarray(t.sites["x"].value).shape == (2, 3, 4)
    g = scg.grad(scg.expectation(model, n=50, seed=0))(L0)
    assert g.shape == (4,) and np.all(np.isfinite(g))


def test_a_traced_parameter_refuses_a_plain_draw():
    with pytest.raises(scg.TracingError, match=r"OneHotCategorical\.sample\(rng\): "
                                               r"parameter 'logits'"):
        scg.grad(lambda l: np.sum(scg.OneHotCategorical(logits=l).sample(
            np.random.default_rng(0)) * C))(L0)


# ---------------------------------------------------------------- shapes, pickling
def test_expand_and_to_event():
    d = scg.OneHotCategorical(probs=np.array([0.2, 0.3, 0.5])).expand((4, 2))
    assert d.batch_shape == (4, 2) and d.event_shape == (3,)
    assert d.probs.shape == (4, 2, 3)
    ind = d.to_event(1)
    assert ind.batch_shape == (4,) and ind.event_shape == (2, 3)
    x = ind.sample(np.random.default_rng(0), (5,))
    assert x.shape == (5, 4, 2, 3)
    np.testing.assert_allclose(ind.log_prob(x), np.sum(d.log_prob(x), axis=-1))


def test_pickle_keeps_the_support_object():
    d = scg.OneHotCategorical(logits=LOGITS).to_event(1)
    again = pickle.loads(pickle.dumps(d))
    assert again.support is d.support
    np.testing.assert_array_equal(again.base.logits, LOGITS)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("params, name, text", [
    (dict(probs=np.array([0.5, 0.6])), "probs", "summing to 1"),
    (dict(probs=np.array([[0.5, 0.5], [1.2, -0.2]])), "probs", "1 of 2"),
    (dict(logits=np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 0.0]])), "logits", "real vector"),
    (dict(logits=np.array([0.0, np.inf])), "logits", "real vector"),
])
def test_invalid_parameters_raise(params, name, text):
    with pytest.raises(ValueError) as info:
        scg.OneHotCategorical(**params)
    msg = str(info.value)
    assert "OneHotCategorical" in msg and f"'{name}'" in msg and text in msg, msg
    scg.OneHotCategorical(**params, validate_args=False)   # no error


def test_exactly_one_of_probs_logits_and_a_category_axis():
    with pytest.raises(ValueError, match="OneHotCategorical: give exactly one"):
        scg.OneHotCategorical(probs=np.ones(2) / 2, logits=np.zeros(2))
    with pytest.raises(ValueError, match="OneHotCategorical: give exactly one"):
        scg.OneHotCategorical()
    with pytest.raises(ValueError, match="OneHotCategorical: parameter 'logits' must have at "
                                         "least one dimension"):
        scg.OneHotCategorical(logits=0.5)


def test_validation_sees_through_tracers():
    with pytest.raises(ValueError, match="OneHotCategorical: parameter 'probs'"):
        scg.grad(lambda p: scg.OneHotCategorical(probs=p).log_prob(np.array([1.0, 0.0])))(
            np.array([0.5, 0.7]))
