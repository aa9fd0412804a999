"""The zero-mean term of an ELBO: log q(z) of a site's own distribution at its own draw,
entering a cost linearly, has a derivative in q's parameters of mean zero. scg leaves it
out of first derivatives for the score function (as Pyro's TraceGraph_ELBO) and with
scg.Pathwise(stl=True); second derivatives keep it, and a model that uses log q(z)
otherwise (a multi-sample bound) keeps it, or, for stl=True, gets EstimatorError."""

import gc
import itertools

import numpy as np
import pytest

import scg

from .exact import numeric_grad, numeric_hessian, sig

LOG_JOINT = np.array([[-0.7, 0.4], [0.2, -1.3], [1.1, -0.2]])   # log p(x, z_i) at z_i = 0, 1


def coins_elbo(phi, estimator):
    with scg.plate("d", 3):
        q = scg.Bernoulli(logits=phi)
        z = scg.sample("z", q, estimator=estimator)
        log_joint = LOG_JOINT[:, 0] * (1 - z) + LOG_JOINT[:, 1] * z
        elbo = log_joint - q.log_prob(z)
    return -np.sum(elbo)


def coins_exact(phi):
    p = sig(phi)
    return -np.sum(p * (LOG_JOINT[:, 1] - np.log(p)) + (1 - p) * (LOG_JOINT[:, 0] - np.log(1 - p)))


PHI = np.array([0.3, -0.5, 1.0])


def _pyro_variance(phi):
    """The exact per-draw variance of the estimator without the term, no baseline:
    g_i = (z_i - p_i) * cost(z), enumerated over the 8 states."""
    p = sig(phi)
    second, first = np.zeros(3), np.zeros(3)
    for zs in itertools.product([0.0, 1.0], repeat=3):
        zs = np.array(zs)
        weight = np.prod(np.where(zs == 1, p, 1 - p))
        log_q = np.where(zs == 1, np.log(p), np.log(1 - p))
        cost = -np.sum(np.where(zs == 1, LOG_JOINT[:, 1], LOG_JOINT[:, 0]) - log_q)
        g = (zs - p) * cost
        first += weight * g
        second += weight * g ** 2
    return second - first ** 2


@pytest.mark.parametrize("estimator", [scg.Score, lambda: scg.Score("loo")])
def test_the_elbo_gradient_is_unbiased_without_the_term(estimator):
    gs = scg.grad_samples(scg.expectation(coins_elbo, n=50_000, seed=0))(PHI, estimator())
    exact = numeric_grad(coins_exact, PHI)
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr)


def test_the_per_draw_variance_is_that_of_the_estimator_without_the_term():
    gs = scg.grad_samples(scg.expectation(coins_elbo, n=400_000, seed=1))(PHI, scg.Score())
    np.testing.assert_allclose(gs.var, _pyro_variance(PHI), rtol=0.03)


def test_explain_says_the_term_is_left_out():
    text = scg.trace(coins_elbo, PHI, scg.Score("loo"), n=4).explain()
    assert "log p(z) at its own draw enters 'return' linearly" in text
    assert "left out of first derivatives" in text


def test_second_derivatives_keep_the_term():
    Hs = scg.hessian(scg.expectation(coins_elbo, n=200_000, seed=0))(PHI, scg.Score("loo"))
    np.testing.assert_allclose(Hs, numeric_hessian(coins_exact, PHI), atol=0.02)


# a multi-sample bound: log q(z) inside a logmeanexp, where the term's mean is not zero
K = 3
PAIRS = np.array(list(itertools.product([0.0, 1.0], repeat=2)))
IWAE_JOINT = np.array([[-1.2, 0.4], [-0.3, -2.0]])


def iwae(theta):
    with scg.plate("particles", K):
        q = scg.Bernoulli(logits=np.broadcast_to(theta, (K, 2))).to_event(1)
        z = scg.sample("z", q, estimator=scg.Score("loo"))
        a, b = z[..., 0], z[..., 1]
        log_joint = (IWAE_JOINT[0, 0] * (1 - a) * (1 - b) + IWAE_JOINT[0, 1] * (1 - a) * b
                     + IWAE_JOINT[1, 0] * a * (1 - b) + IWAE_JOINT[1, 1] * a * b)
        log_w = log_joint - q.log_prob(z)
    return -scg.logmeanexp(log_w, plate="particles")


def iwae_exact(theta):
    log_q = np.sum(PAIRS * theta - np.logaddexp(0.0, theta), axis=-1)
    log_w = IWAE_JOINT[PAIRS[:, 0].astype(int), PAIRS[:, 1].astype(int)] - log_q
    return sum(np.exp(np.sum(log_q[list(ks)])) * -(np.logaddexp.reduce(log_w[list(ks)])
                                                    - np.log(K))
               for ks in itertools.product(range(4), repeat=K))


def test_a_bound_that_uses_log_q_nonlinearly_keeps_the_term():
    theta = np.array([0.4, -0.7])
    E = scg.expectation(iwae, n=50_000, seed=0)
    gs = scg.grad_samples(E)(theta)
    assert np.all(np.abs(gs.mean - numeric_grad(iwae_exact, theta)) < 5 * gs.stderr)
    assert "left out" not in scg.trace(iwae, theta, n=4).explain()


# sticking the landing: q = N(mu, s), p(z) = N(0, 1), p(x | z) = N(z, 1) at x = 1.2; the
# posterior is N(x / 2, 1 / 2)
X = 1.2


def gaussian_elbo(theta, estimator):
    q = scg.Normal(theta[0], np.exp(theta[1]))
    z = scg.sample("z", q, estimator=estimator)
    return -(scg.Normal(0.0, 1.0).log_prob(z) + scg.Normal(z, 1.0).log_prob(X) - q.log_prob(z))


def gaussian_exact(theta):
    mu, s = theta[0], np.exp(theta[1])
    # -ELBO = KL(q || N(0, 1)) - E_q[log N(x; z, 1)]
    kl = 0.5 * (s ** 2 + mu ** 2 - 1) - np.log(s)
    return kl + 0.5 * ((X - mu) ** 2 + s ** 2) + 0.5 * np.log(2 * np.pi)


@pytest.mark.parametrize("theta", [np.array([0.1, -0.4]), np.array([X / 2, 0.5 * np.log(0.5)])])
def test_sticking_the_landing_is_unbiased(theta):
    gs = scg.grad_samples(scg.expectation(gaussian_elbo, n=50_000, seed=0))(
        theta, scg.Pathwise(stl=True))
    exact = numeric_grad(gaussian_exact, theta)
    assert np.all(np.abs(gs.mean - exact) < 5 * gs.stderr + 1e-12)


def test_sticking_the_landing_has_no_variance_at_the_posterior():
    theta = np.array([X / 2, 0.5 * np.log(0.5)])
    stl = scg.grad_samples(scg.expectation(gaussian_elbo, n=1_000, seed=0))(
        theta, scg.Pathwise(stl=True))
    plain = scg.grad_samples(scg.expectation(gaussian_elbo, n=1_000, seed=0))(
        theta, scg.Pathwise())
    assert np.all(stl.var < 1e-24) and np.all(plain.var > 0.1)
    assert "sticking the landing" in scg.trace(gaussian_elbo, theta, scg.Pathwise(stl=True),
                                              n=2).explain()


def test_sticking_the_landing_in_a_multi_sample_bound_points_to_dreg():
    def bound(theta):
        with scg.plate("particles", 4):
            q = scg.Normal(theta[0] * np.ones(4), np.exp(theta[1]) * np.ones(4))
            z = scg.sample("z", q, estimator=scg.Pathwise(stl=True))
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + scg.Normal(z, 1.0).log_prob(X) \
                - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")

    with pytest.raises(scg.EstimatorError, match="site 'z'.*stl=True.*dreg=True"):
        scg.grad(scg.expectation(bound, n=10, seed=0))(np.array([0.1, -0.4]))
    with pytest.raises(scg.EstimatorError, match="drop stl=True"):
        scg.Pathwise(stl=True, dreg=True)


def test_the_held_log_probability_leaves_no_cycle_of_the_run():
    # (a score site's held log-probability once held the run, which holds the site: every
    # run's values and arrays then waited for a collection. The dependency sets'
    # one-entry caches may refer to each other: small, and hold no value)
    def model(theta):
        z = scg.sample("z", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
        x = scg.sample("x", scg.Normal(theta, 1.0))
        scg.cost("c", (z - 0.3) ** 2 + x ** 2)

    E = scg.expectation(model, n=4, seed=0)
    scg.grad(E)(np.array(0.2))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            scg.grad(E)(np.array(0.2))
        gc.collect()
        ours = {type(o).__qualname__ for o in gc.garbage
                if type(o).__module__.startswith("scg.")}
        arrays = [o for o in gc.garbage if isinstance(o, np.ndarray)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert ours <= {"Deps"}, sorted(ours)
    assert not arrays
