"""Unbiased higher derivatives of expectations (the DiCE form), against exact values.

Standard errors of Hessian estimates come from independent batches: the mean of B batch
estimates has standard error std / sqrt(B); agreement is asked within 5 of them.
"""

import itertools

import numpy as np
import pytest

import scg


def batch_stats(estimate, batches):
    values = np.array([estimate(seed) for seed in range(batches)])
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(batches)


def assert_hessian_matches(model, exact_fn, theta, n=20_000, batches=10):
    """The Hessian estimate of E[model] within 5 standard errors of the exact one."""
    exact = scg.hessian(exact_fn)(theta)
    mean, se = batch_stats(lambda s: scg.hessian(
        scg.expectation(model, n=n, seed=s))(theta), batches)
    assert np.all(np.abs(mean - exact) < 5 * se + 1e-3)
    return mean


# ---------------------------------------------------------------- coupled Bernoulli sites
THETA = np.array([0.3, -0.5, 0.8, 0.0])
CONFIGS = np.array(list(itertools.product([0.0, 1.0], repeat=len(THETA))))


def coupled_cost(x):
    return (np.sum(x, axis=-1) - 1.5) ** 2 + 2.0 * x[..., 0] * x[..., 2]


def exact_expectation(theta):
    """E[cost] by enumeration, as a plain numpy function scg can differentiate."""
    logp = CONFIGS * -scg.softplus(-theta) + (1 - CONFIGS) * -scg.softplus(theta)
    return np.sum(np.exp(np.sum(logp, axis=-1)) * coupled_cost(CONFIGS))


def coupled_model(baseline):
    def model(theta):
        x = scg.sample("x", scg.Bernoulli(logits=theta).to_event(1),
                       estimator=scg.Score(baseline))
        return coupled_cost(x)
    return model


@pytest.mark.parametrize("baseline", [None, "loo"])
def test_hessian_of_coupled_bernoullis_matches_enumeration(baseline):
    mean = assert_hessian_matches(coupled_model(baseline), exact_expectation, THETA)
    assert np.allclose(mean, mean.T)


def test_the_naive_surrogate_differentiated_twice_is_biased():
    """log p(x) * stop_gradient(f(x)) has the right gradient but the wrong Hessian: it
    misses E[f grad log p grad log p^T]."""
    exact = scg.hessian(exact_expectation)(THETA)

    def naive_hessian(seed):
        x = scg.Bernoulli(logits=THETA).sample(np.random.default_rng(seed), (20_000,))
        f = coupled_cost(x)

        def surrogate(theta):
            logp = np.sum(scg.Bernoulli(logits=theta).log_prob(x), axis=-1)
            return np.mean(logp * f)
        return scg.hessian(surrogate)(THETA)

    mean, se = batch_stats(naive_hessian, 10)
    assert np.max(np.abs(mean - exact) / (se + 1e-12)) > 20     # far outside its noise


@pytest.mark.parametrize("estimator", ["pathwise", "score", scg.Score("loo")])
def test_second_derivative_of_x_cubed(estimator):
    """x ~ N(mu, 1), f = x^3: F = mu^3 + 3 mu, F'' = 6 mu."""
    mu = 0.7

    def model(m):
        return scg.sample("x", scg.Normal(m, 1.0), estimator=estimator) ** 3

    mean, se = batch_stats(lambda s: scg.grad(scg.grad(
        scg.expectation(model, n=50_000, seed=s)))(mu), 10)
    assert abs(mean - 6 * mu) < 5 * se


# ---------------------------------------------------------------- a two-step decision process
def mdp_model(baseline):
    """Two steps: action a1 ~ Bernoulli(sigmoid(theta0)); a2 ~ Bernoulli(sigmoid(theta1 +
    theta2 * a1)); a cost at each step."""
    def model(theta):
        a1 = scg.sample("a1", scg.Bernoulli(logits=theta[0]), estimator=scg.Score(baseline))
        scg.cost("c1", 1.0 - 2.0 * a1)
        a2 = scg.sample("a2", scg.Bernoulli(logits=theta[1] + theta[2] * a1),
                        estimator=scg.Score(baseline))
        scg.cost("c2", (a2 - 0.2) ** 2 + 3.0 * a1 * a2)
    return model


def mdp_exact(theta):
    total = 0.0
    for a1 in (0.0, 1.0):
        p1 = scg.sigmoid(theta[0]) if a1 else 1 - scg.sigmoid(theta[0])
        for a2 in (0.0, 1.0):
            q = scg.sigmoid(theta[1] + theta[2] * a1)
            p2 = q if a2 else 1 - q
            total = total + p1 * p2 * ((1 - 2 * a1) + (a2 - 0.2) ** 2 + 3 * a1 * a2)
    return total


MDP_THETA = np.array([0.2, -0.3, 0.5])


@pytest.mark.parametrize("baseline", [None, "loo"])
def test_hessian_of_a_two_step_process(baseline):
    assert_hessian_matches(mdp_model(baseline), mdp_exact, MDP_THETA)


def test_baselines_reduce_the_variance_of_second_derivatives():
    _, se_plain = batch_stats(lambda s: scg.hessian(
        scg.expectation(mdp_model(None), n=5_000, seed=s))(MDP_THETA), 10)
    _, se_loo = batch_stats(lambda s: scg.hessian(
        scg.expectation(mdp_model("loo"), n=5_000, seed=s))(MDP_THETA), 10)
    assert np.sum(se_loo ** 2) < np.sum(se_plain ** 2)


def test_hvp_equals_hessian_times_v_for_the_same_draws():
    v = np.array([1.0, -2.0, 0.5])
    H = scg.hessian(scg.expectation(mdp_model("loo"), n=2_000, seed=3))(MDP_THETA)
    Hv = scg.hvp(scg.expectation(mdp_model("loo"), n=2_000, seed=3))(MDP_THETA, v)
    assert np.allclose(Hv, H @ v, rtol=1e-10, atol=1e-12)


def test_jacobian_of_grad_and_pytrees():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], 1.0))
        a = scg.sample("a", scg.Bernoulli(logits=theta["w"]))
        return x ** 2 * (1.0 + a)

    theta = {"mu": 0.5, "w": 0.2}
    H1 = scg.hessian(scg.expectation(model, n=1_000, seed=0))(theta)
    H2 = scg.jacobian(scg.grad(scg.expectation(model, n=1_000, seed=0)))(theta)
    assert set(H1) == {"mu", "w"} and set(H1["mu"]) == {"mu", "w"}
    for a in theta:
        for b in theta:
            assert H1[a][b] == pytest.approx(H2[a][b])
