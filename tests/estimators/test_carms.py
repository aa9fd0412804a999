"""scg.ARMS(k) and scg.DisARM() on categorical sites (CARMS's pair-weighted leave-one-out
over k coupled draws: a Metropolis pair for k = 2, sampling without replacement within the
levels of the law for k >= 3). Unbiased against enumeration (logits, probs, one-hot, a
plate, a user's own family, Binomial, Multinomial, per-draw parameters, copying sites
upstream); the per-draw mean and variance equal the exact ones, enumerated over the
couplings' joint laws written from their definitions; below leave-one-out REINFORCE with
n = k draws at the same k evaluations (both exact) on the CARMS paper's toy model and a
coupled cost; DisARM is ARMS(2) and its closed form; jit, compare, clear errors."""

import itertools

import numpy as np
import pytest

import scg
from scg.distributions import constraints
from scg.distributions.base import Distribution, broadcast_shape

from .coupled_laws import coupled_law, metropolis_kernel, pair_law, pair_ratios
from .exact import numeric_grad

TABLE = np.array([[1.0, -0.5, 2.0], [0.4, 1.5, -1.0]])
THETA = np.array([[0.2, -0.4, 0.5], [0.9, -0.3, 0.1]])


def softmax(th):
    e = np.exp(th - th.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def coupled_cost(x):
    """(T[0, x_0] + T[1, x_1] - 0.8)^2 for x (..., 2) of indices (plain, for the exact
    references)."""
    return (TABLE[0][x[..., 0]] + TABLE[1][x[..., 1]] - 0.8) ** 2


def exact_value(th, cost=coupled_cost):
    p = softmax(th)
    D, C = p.shape
    states = np.array(list(itertools.product(range(C), repeat=D)))
    return np.prod(p[np.arange(D), states], axis=1) @ cost(states)


def model_for(estimator, cost=None, family="logits"):
    """x ~ Categorical(logits or probs).to_event(1), or its one-hot form; the cost of the
    values looked up in TABLE (or `cost` of the indices, a sum of lookups)."""
    def model(th):
        if family == "one-hot":
            h = scg.sample("x", scg.OneHotCategorical(logits=th).to_event(1),
                           estimator=estimator)
            return (h[..., 0, :] @ TABLE[0] + h[..., 1, :] @ TABLE[1] - 0.8) ** 2
        law = scg.Categorical(logits=th) if family == "logits" else \
            scg.Categorical(probs=scg.softmax(th))
        x = scg.sample("x", law.to_event(1), estimator=estimator)
        if cost is not None:
            return cost(x)
        return (scg.take(TABLE[0], x[..., 0]) + scg.take(TABLE[1], x[..., 1]) - 0.8) ** 2
    return model


# ---------------------------------------------------------------- exact references
def arms_moments(th, k, cost):
    """The exact mean and per-coordinate variance of one draw's estimate of d E / d logits
    of scg.ARMS(k) at a Categorical(logits=th).to_event(1) site, by enumerating the
    elements' independent coupled draws (their laws written from the couplings'
    definitions, tests/estimators/coupled_laws.py)."""
    p = softmax(th)
    D, C = p.shape
    per = [coupled_law(p[d], k) for d in range(D)]
    ratio = [pair_ratios(p[d], pair_law(*per[d], C)) for d in range(D)]
    combos = np.array(list(itertools.product(*[range(len(seqs)) for seqs, _ in per])))
    weight = np.prod([per[d][1][combos[:, d]] for d in range(D)], axis=0)  # (N,)
    keep = weight > 0
    combos, weight = combos[keep], weight[keep]
    z = np.stack([per[d][0][combos[:, d]] for d in range(D)], axis=-1)  # (N, k, D)
    f = cost(z)  # (N, k)
    g = np.zeros((len(z), D, C))
    for d in range(D):
        r = ratio[d][z[:, :, None, d], z[:, None, :, d]]  # (N, k, k), 0 where equal
        w = np.sum(r * (f[:, :, None] - f[:, None, :]), axis=-1) / (k * (k - 1))
        g[:, d] = np.einsum("nk,nkc->nc", w, np.eye(C)[z[:, :, d]] - p[d])
    mean = np.einsum("n,ndc->dc", weight, g)
    return mean, np.einsum("n,ndc->dc", weight, (g - mean) ** 2)


def loo_moments(th, k, cost):
    """The same for leave-one-out REINFORCE with n = k independent draws (scg.Score('loo')
    with n = k; tests/estimators/test_arms.py checks that form against scg)."""
    p = softmax(th)
    D, C = p.shape
    states = np.array(list(itertools.product(range(C), repeat=D)))
    ps = np.prod(p[np.arange(D), states], axis=1)
    draws = np.array(list(itertools.product(range(len(states)), repeat=k)))
    x = states[draws]  # (S, k, D)
    weight = np.prod(ps[draws], axis=1)
    f = cost(x)  # (S, k)
    loo = f - (f.sum(axis=1, keepdims=True) - f) / (k - 1)
    score = np.eye(C)[x] - p  # (S, k, D, C)
    g = np.einsum("sk,skdc->sdc", loo, score) / k
    mean = np.einsum("s,sdc->dc", weight, g)
    return mean, np.einsum("s,sdc->dc", weight, (g - mean) ** 2)


def variance_check(gs, exact_var):
    """The measured per-coordinate variance within 5 of its standard errors of the exact
    one (the standard error from the draws' fourth central moment)."""
    dev = (gs.samples - gs.samples.mean(axis=0)) ** 2
    stderr = dev.std(axis=0, ddof=1) / np.sqrt(gs.n)
    z = (gs.var - exact_var) / np.maximum(stderr, 1e-12)
    assert np.all(np.abs(z) < 5), z


# ---------------------------------------------------------------- unbiased, exact moments
@pytest.mark.parametrize("k", [2, 3, 5])
def test_mean_and_variance_are_the_exact_ones(k):
    mean, var = arms_moments(THETA, k, coupled_cost)
    np.testing.assert_allclose(mean, numeric_grad(exact_value, THETA), atol=1e-8)
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(k)), n=40_000, seed=k))(THETA)
    z = (gs.mean - mean) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    variance_check(gs, var)


@pytest.mark.parametrize("family", ["probs", "one-hot"])
def test_probs_and_one_hot(family):
    g = numeric_grad(exact_value, THETA)
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(4), family=family),
                                          n=40_000, seed=1))(THETA)
    z = (gs.mean - g) / gs.stderr
    assert np.all(np.abs(z) < 5), z


def test_the_value_weighs_each_draw_by_1_over_k():
    E = scg.expectation(model_for(scg.ARMS(4)), n=20_000, seed=2)
    values = np.array([E(THETA) for _ in range(10)])
    assert abs(values.mean() - exact_value(THETA)) < 5 * values.std(ddof=1) / np.sqrt(10)
    assert E.last_trace.copies.count == 4


# ---------------------------------------------------------------- against leave-one-out
# The CARMS paper's toy model (Dimitriev and Zhou 2021, toy.py): D latents of C values, a
# cost linear in the one-hot draws, f = sum_d M[d, x_d] with M = C (1, 2, ..., D C)
TOY_D, TOY_C = 3, 3
TOY_M = TOY_C * np.arange(1.0, TOY_D * TOY_C + 1).reshape(TOY_D, TOY_C)
TOY_THETA = np.log(np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]]))


def toy_cost(x):
    return sum(TOY_M[d][x[..., d]] for d in range(TOY_D))


def toy_model_cost(x):
    return sum(scg.take(TOY_M[d], x[..., d]) for d in range(TOY_D))


@pytest.mark.parametrize("theta, cost, model_cost, k", [
    (TOY_THETA, toy_cost, toy_model_cost, 2), (TOY_THETA, toy_cost, toy_model_cost, 3),
    (THETA, coupled_cost, None, 2), (THETA, coupled_cost, None, 3)],
    ids=["toy-2", "toy-3", "coupled-2", "coupled-3"])
def test_below_leave_one_out_at_equal_evaluations(theta, cost, model_cost, k):
    """One draw of ARMS(k) and one call of scg.Score('loo') with n = k both cost k
    evaluations; the per-coordinate variances summed, both exact: ARMS's below. The
    measured variance of scg's ARMS is the exact one."""
    arms_mean, arms_var = arms_moments(theta, k, cost)
    loo_mean, loo_var = loo_moments(theta, k, cost)
    np.testing.assert_allclose(arms_mean, loo_mean, atol=1e-8)
    assert arms_var.sum() < 0.95 * loo_var.sum(), (arms_var.sum(), loo_var.sum())
    gs = scg.grad_samples(scg.expectation(model_for(scg.ARMS(k), cost=model_cost),
                                          n=40_000, seed=20 + k))(theta)
    variance_check(gs, arms_var)


def test_the_loo_reference_is_scg_score_loo():
    E = scg.expectation(model_for(scg.Score("loo")), n=3, seed=0)
    grads = np.array([scg.grad(E)(THETA) for _ in range(3000)])
    mean, var = loo_moments(THETA, 3, coupled_cost)
    assert np.all(np.abs(grads.mean(0) - mean) < 5 * np.sqrt(var / 3000))
    np.testing.assert_allclose(grads.var(0, ddof=1), var, rtol=0.15)


# ---------------------------------------------------------------- DisARM
def test_disarm_is_arms_2_and_its_closed_form():
    """DisARM() on a categorical is ARMS(2) (the same numbers from the same seed), and its
    variance is that of 1/2 (f(z) - f(z~)) (1 - min(p_z, p_z~)) (grad log p(z) -
    grad log p(z~)) over the pair's law p_a p_b / (1 - min(p_a, p_b)), by enumeration."""
    a = scg.grad_samples(scg.expectation(model_for(scg.DisARM()), n=40_000, seed=3))(THETA)
    b = scg.grad_samples(scg.expectation(model_for(scg.ARMS(2)), n=40_000, seed=3))(THETA)
    np.testing.assert_array_equal(a.samples, b.samples)
    p = softmax(THETA)
    D, C = p.shape
    pairs = [p[d][:, None] * metropolis_kernel(p[d]) for d in range(D)]
    mean = np.zeros((D, C))
    second = np.zeros((D, C))
    for z in itertools.product(range(C), repeat=2 * D):
        z = np.array(z).reshape(D, 2)  # element d's pair (z, z~)
        weight = np.prod([pairs[d][z[d, 0], z[d, 1]] for d in range(D)])
        f = coupled_cost(z.T)
        g = np.array([0.5 * (f[0] - f[1]) * (1 - min(p[d][z[d, 0]], p[d][z[d, 1]]))
                      * (np.eye(C)[z[d, 0]] - np.eye(C)[z[d, 1]]) for d in range(D)])
        mean += weight * g
        second += weight * g ** 2
    np.testing.assert_allclose(mean, numeric_grad(exact_value, THETA), atol=1e-8)
    variance_check(a, second - mean ** 2)


def test_disarm_on_two_one_hot_values_is_disarm_on_the_coin():
    """OneHotCategorical(logits=(0, a)) is a coin written as a categorical: the
    categorical pair has DisARM's law and estimate, so the logit a gets DisARM's variance
    (the coin's own estimator, measured), within sampling error."""
    a = np.array([0.7, -1.2])
    w = np.array([1.0, -0.6])

    def one_hot(a):
        logits = np.stack([np.zeros_like(a), a], axis=-1)
        h = scg.sample("b", scg.OneHotCategorical(logits=logits).to_event(1),
                       estimator=scg.DisARM())
        return (h[..., 1] @ w - 0.3) ** 2

    def coin(a):
        b = scg.sample("b", scg.Bernoulli(logits=a).to_event(1), estimator=scg.DisARM())
        return (b @ w - 0.3) ** 2
    n = 100_000
    g1 = scg.grad_samples(scg.expectation(one_hot, n=n, seed=4))(a)
    g2 = scg.grad_samples(scg.expectation(coin, n=n, seed=5))(a)
    assert np.all(np.abs(g1.mean - g2.mean) < 5 * np.hypot(g1.stderr, g2.stderr))
    np.testing.assert_allclose(g1.var, g2.var, rtol=0.03)


# ---------------------------------------------------------------- where the site sits
def test_in_a_plate_per_element():
    th = np.array([[0.3, -0.2, 0.6], [-0.5, 0.4, 0.0], [0.8, 0.1, -0.3]])
    targets = np.array([0.5, 1.5, 1.0])

    def plated(th):
        with scg.plate("p", 3):
            x = scg.sample("x", scg.Categorical(logits=th), estimator=scg.ARMS(3))
            return (x - targets) ** 2

    def joint(th):  # (the same elements outside a plate: every cost meets every element)
        x = scg.sample("x", scg.Categorical(logits=th).to_event(1), estimator=scg.ARMS(3))
        return np.sum((x - targets) ** 2, axis=-1)

    def value(th):
        return np.sum(softmax(th) * (np.arange(3)[None, :] - targets[:, None]) ** 2)
    g = numeric_grad(value, th)
    per_element = scg.grad_samples(scg.expectation(plated, n=20_000, seed=5))(th)
    together = scg.grad_samples(scg.expectation(joint, n=20_000, seed=5))(th)
    for gs in (per_element, together):
        z = (gs.mean - g) / gs.stderr
        assert np.all(np.abs(z) < 5), z
    assert per_element.var.sum() < 0.5 * together.var.sum()


class Levels(Distribution):
    """A user's own family: three levels -1, 0.5, 2 with probabilities softmax(logits)."""

    arg_constraints = {"logits": constraints.real_vector}
    support = constraints.real
    LEVELS = np.array([-1.0, 0.5, 2.0])

    def __init__(self, logits, validate_args=None):
        self.logits = logits
        super().__init__({"logits": logits}, broadcast_shape(logits)[:-1],
                         validate_args=validate_args)

    def log_prob(self, value):
        lp = self.logits - scg.logsumexp(self.logits, axis=-1, keepdims=True)
        onehot = np.equal(np.expand_dims(value, -1), self.LEVELS).astype(float)
        return np.sum(lp * onehot, axis=-1)

    def _sample(self, rng, shape):
        p = np.exp(self.logits - np.logaddexp.reduce(self.logits, axis=-1, keepdims=True))
        u = rng.random(self._extended_shape(shape))[..., None]
        return self.LEVELS[np.minimum(np.sum(np.cumsum(p, axis=-1) <= u, axis=-1), 2)]

    def enumerate_support(self, expand=True):
        levels = self.LEVELS.reshape((3,) + (1,) * len(self.batch_shape))
        return np.broadcast_to(levels, (3,) + self.batch_shape) if expand else self.LEVELS


@pytest.mark.parametrize("estimator", [scg.ARMS(3), scg.DisARM()], ids=repr)
def test_a_users_family_binomial_and_multinomial(estimator):
    th = np.array([0.4, -0.3, 0.2])

    def users(th):
        return (scg.sample("x", Levels(th), estimator=estimator) - 0.2) ** 2

    def users_value(th):
        return softmax(th) @ (Levels.LEVELS - 0.2) ** 2
    gs = scg.grad_samples(scg.expectation(users, n=40_000, seed=6))(th)
    assert np.all(np.abs((gs.mean - numeric_grad(users_value, th)) / gs.stderr) < 5)

    def binomial(q):
        return (scg.sample("y", scg.Binomial(3, scg.sigmoid(q)), estimator=estimator) - 1.2) ** 2

    def binomial_value(q):
        p = 1 / (1 + np.exp(-q))
        counts = np.arange(4)
        pmf = np.array([1, 3, 3, 1]) * p ** counts * (1 - p) ** (3 - counts)
        return pmf @ (counts - 1.2) ** 2
    gs = scg.grad_samples(scg.expectation(binomial, n=40_000, seed=7))(0.3)
    assert abs((gs.mean - numeric_grad(binomial_value, 0.3)) / gs.stderr) < 5

    weights = np.array([1.0, -0.5, 2.0])

    def multinomial(th):  # (the support: the 6 count vectors of 2 draws among 3)
        x = scg.sample("m", scg.Multinomial(2, logits=th), estimator=estimator)
        return (x @ weights - 0.7) ** 2

    def multinomial_value(th):
        p = softmax(th)
        return sum(p[a] * p[b] * (np.bincount([a, b], minlength=3) @ weights - 0.7) ** 2
                   for a, b in itertools.product(range(3), repeat=2))
    gs = scg.grad_samples(scg.expectation(multinomial, n=40_000, seed=8))(th)
    assert np.all(np.abs((gs.mean - numeric_grad(multinomial_value, th)) / gs.stderr) < 5)


def test_per_draw_parameters_and_copying_sites_upstream():
    """The logits depend on an upstream pathwise draw (per-row parameters) and on a
    DisARM coin (a copying site upstream: the categorical is drawn in the coin's copies
    too); a second ARMS site downstream shares the cost."""
    def model(th):
        s = scg.sample("s", scg.Normal(th[0], 0.5))
        b = scg.sample("b", scg.Bernoulli(logits=th[1]), estimator=scg.DisARM())
        logits = np.stack([s, b * th[2], -s], axis=-1)
        x = scg.sample("x", scg.Categorical(logits=logits), estimator=scg.ARMS(3))
        y = scg.sample("y", scg.Categorical(logits=np.stack([0.0 * x, x * th[3], 0.5 + 0.0 * x],
                                                                     axis=-1)),
                       estimator=scg.ARMS(2))
        return (x - 1.2) ** 2 + 0.5 * y * x + 0.2 * s ** 2

    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()

    def value(th):
        total = 0.0
        for s, ws in zip(th[0] + 0.5 * nodes, weights):
            for b in (0.0, 1.0):
                pb = 1 / (1 + np.exp(-th[1]))
                px = softmax(np.array([s, b * th[2], -s]))
                for x in range(3):
                    py = softmax(np.array([0.0, x * th[3], 0.5]))
                    f = (x - 1.2) ** 2 + 0.5 * np.arange(3) * x + 0.2 * s ** 2
                    total += ws * (pb if b else 1 - pb) * px[x] * (py @ f)
        return total
    th = np.array([0.3, -0.4, 0.8, 0.5])
    gs = scg.grad_samples(scg.expectation(model, n=60_000, seed=8))(th)
    z = (gs.mean - numeric_grad(value, th)) / gs.stderr
    assert np.all(np.abs(z) < 5), z


# ---------------------------------------------------------------- jit, compare, errors
@pytest.mark.parametrize("estimator", [scg.ARMS(4), scg.DisARM()], ids=repr)
def test_jit_replays_the_eager_numbers_bit_for_bit(estimator):
    E = scg.expectation(model_for(estimator), n=50, seed=3)
    eager = [scg.value_and_grad(E)(THETA + 0.1 * i) for i in range(5)]
    E = scg.expectation(model_for(estimator), n=50, seed=3)
    fn = scg.jit(scg.value_and_grad(E))
    jitted = [fn(THETA + 0.1 * i) for i in range(5)]
    assert fn.stats["replays"] >= 2, fn.explain()
    for (v0, g0), (v1, g1) in zip(eager, jitted):
        assert v0 == v1
        np.testing.assert_array_equal(g0, g1)


def test_compare_counts_the_evaluations_and_finds_no_bias():
    cmp = scg.compare(model_for("auto"), THETA, n=20_000, seed=9,
                      estimators={"arms4": scg.ARMS(4), "disarm": scg.DisARM(),
                                  "loo": scg.Score("loo")},
                      reference=numeric_grad(exact_value, THETA))
    assert cmp["arms4"].evals_per_draw == 4 and cmp["disarm"].evals_per_draw == 2
    for label in ("arms4", "disarm"):
        assert np.all(np.abs(cmp[label].z) < 5), (label, cmp[label].z)


def test_errors_and_explain():
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(model_for(scg.ARMS(3)), n=4, seed=0))(THETA)
    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(model_for(scg.DisARM()), n=4, seed=0))(THETA)

    def zero_prob(w):
        probs = np.stack([w, 1.0 - w, 0.0 * w], axis=-1)
        return scg.sample("c", scg.Categorical(probs=probs), estimator=scg.ARMS(3)) ** 2
    with pytest.raises(scg.EstimatorError, match="site 'c': ARMS\\(3\\) differentiates "
                                                 "probs.*exactly 0"):
        scg.grad(scg.expectation(zero_prob, n=4, seed=0))(0.3)
    text = scg.trace(model_for(scg.ARMS(3)), THETA, n=2).explain()
    assert "levels of the law" in text and "3 evaluations of the model downstream per draw" \
        in text
    assert "p(z_i) p(z_j) / Q(z_i, z_j)" in text
    text = scg.trace(model_for(scg.DisARM()), THETA, n=2).explain()
    assert "DisARM for a categorical" in text and "2 evaluations" in text
