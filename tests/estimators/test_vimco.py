"""VIMCO and scg.logmeanexp: the IWAE bound of a small discrete model, by enumeration.

K = 3 particles of two coins each, log-weights log p(x, z) - log q(z); the bound
log (1/K) sum_k w_k is enumerated over all 4^3 particle assignments. VIMCO is unbiased
for its gradient, with a per-draw variance below leave-one-out's at the same n; the
control variate L_-j is checked against its definition; misuse gets a clear error.
"""

import itertools

import numpy as np
import pytest

import scg
from scg.estimators.vimco import leave_one_out_bounds

from .exact import numeric_grad

K = 3
LOG_JOINT = np.array([[-1.2, 0.4], [-0.3, -2.0]])  # log p(x, z) for z in {0, 1}^2
PHI = np.array([0.4, -0.7])
STATES = np.array(list(itertools.product([0.0, 1.0], repeat=2)))


def _log_q(phi, z):
    return np.sum(z * phi - np.logaddexp(0.0, phi), axis=-1)


def exact_bound(phi):
    """E over the K particles of log (1/K) sum_k exp(log p(x, z_k) - log q(z_k))."""
    log_q_states = _log_q(phi, STATES)
    log_w_states = LOG_JOINT[STATES[:, 0].astype(int), STATES[:, 1].astype(int)] - \
        log_q_states
    total = 0.0
    for ks in itertools.product(range(4), repeat=K):
        ks = list(ks)
        prob = np.exp(np.sum(log_q_states[ks]))
        total += prob * (np.logaddexp.reduce(log_w_states[ks]) - np.log(K))
    return total


def model(estimator, sign=-1.0):
    def iwae(phi):
        with scg.plate("particles", K):
            q = scg.Bernoulli(logits=np.broadcast_to(phi, (K, 2))).to_event(1)
            z = scg.sample("z", q, estimator=estimator)
            log_w = _log_joint(z) - q.log_prob(z)
        return sign * scg.logmeanexp(log_w, plate="particles")
    return iwae


def _log_joint(z):
    a, b = z[..., 0], z[..., 1]
    return (LOG_JOINT[0, 0] * (1 - a) * (1 - b) + LOG_JOINT[0, 1] * (1 - a) * b
            + LOG_JOINT[1, 0] * a * (1 - b) + LOG_JOINT[1, 1] * a * b)


def test_logmeanexp_is_the_bound_and_its_value_is_unbiased():
    E = scg.expectation(model(scg.VIMCO(), sign=1.0), n=40_000, seed=0)
    value = E(PHI)
    per_draw = E.last_trace.costs["return"]
    stderr = per_draw.std(ddof=1) / np.sqrt(per_draw.size)
    assert abs(value - exact_bound(PHI)) < 5 * stderr


def test_unbiased_against_enumeration_with_less_variance_than_leave_one_out():
    exact = -numeric_grad(exact_bound, PHI)
    rows = {}
    for label, est in (("vimco", scg.VIMCO()), ("loo", scg.Score("loo"))):
        gs = scg.grad_samples(scg.expectation(model(est), n=40_000, seed=3))(PHI)
        z = (gs.mean - exact) / gs.stderr
        assert np.all(np.abs(z) < 5), (label, gs.mean, exact, z)
        rows[label] = gs.var
    assert np.all(rows["vimco"] < 0.5 * rows["loo"]), rows


def test_the_control_variate_is_the_bound_with_the_others_mean():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 5)) * 3.0
    w[0] = [700.0, -700.0, 0.0, 1.0, 1.0]  # (exp over- and underflows in the naive form)
    w[1] = [2.0, 2.0, 2.0, 2.0, 2.0]       # (ties at the largest)
    got = leave_one_out_bounds(w)
    for r in range(6):
        for j in range(5):
            others = np.delete(w[r], j)
            want = np.logaddexp.reduce(np.append(others, others.mean())) - np.log(5)
            assert got[r, j] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_errors_name_the_site_and_say_what_to_do():
    def no_bound(phi):
        with scg.plate("particles", K):
            z = scg.sample("z", scg.Bernoulli(logits=np.broadcast_to(phi[0], (K,))),
                           estimator=scg.VIMCO())
        return np.sum(z)
    with pytest.raises(scg.EstimatorError, match="site 'z'.*none is downstream"):
        scg.grad(scg.expectation(no_bound, n=8, seed=0))(PHI)

    def bound_inside_another_cost(phi):
        with scg.plate("particles", K):
            z = scg.sample("z", scg.Bernoulli(logits=np.broadcast_to(phi[0], (K,))),
                           estimator=scg.VIMCO())
            log_w = 0.3 * z
        return scg.logmeanexp(log_w, plate="particles") ** 2
    with pytest.raises(scg.EstimatorError, match="no cost downstream of it is a multiple"):
        scg.grad(scg.expectation(bound_inside_another_cost, n=8, seed=0))(PHI)

    with pytest.raises(scg.EstimatorError, match="first derivatives only"):
        scg.hessian(scg.expectation(model(scg.VIMCO()), n=8, seed=0))(PHI)

    def outside_a_plate(phi):
        x = scg.sample("x", scg.Normal(phi[0], 1.0))
        return scg.logmeanexp(x, plate="particles")
    with pytest.raises(ValueError, match="lies along no axis of plate 'particles'"):
        scg.expectation(outside_a_plate, n=4, seed=0)(PHI)


def test_under_jit_equal_to_eager():
    E, Ej = (scg.expectation(model(scg.VIMCO()), n=64, seed=2) for _ in range(2))
    step = scg.jit(scg.grad(Ej))
    for _ in range(5):
        np.testing.assert_allclose(step(PHI), scg.grad(E)(PHI), rtol=1e-12, atol=1e-14)
    assert step.stats["replays"] >= 2, step.explain()


# a minibatch of two data points around the particles: each point b its own log-joint
TABLES = np.array([[-1.2, 0.4], [0.3, -0.9]])  # log p(x_b, z) for z in {0, 1}


def _two_plates(estimator, per_element):
    def model(phi):
        with scg.plate("data", 2, dim=-2):
            with scg.plate("particles", K, dim=-1):
                q = scg.Bernoulli(logits=np.broadcast_to(phi[:, None], (2, K)))
                z = scg.sample("z", q, estimator=estimator)
                log_w = TABLES[:, :1] * (1 - z) + TABLES[:, 1:] * z - q.log_prob(z)
            bound = scg.logmeanexp(log_w, plate="particles")  # (one per data point)
            if per_element:
                return -bound
        return -np.sum(bound)
    return model


def _two_plates_exact(phi):
    total = 0.0
    for b in range(2):
        p = 1.0 / (1.0 + np.exp(-phi[b]))
        for zs in itertools.product([0, 1], repeat=K):
            zs = np.array(zs)
            prob = np.prod(np.where(zs == 1, p, 1 - p))
            log_w = TABLES[b, zs] - np.log(np.where(zs == 1, p, 1 - p))
            total += prob * -(np.logaddexp.reduce(log_w) - np.log(K))
    return total


@pytest.mark.parametrize("per_element", [True, False])
def test_a_data_plate_around_the_particles(per_element):
    phi = np.array([0.4, -0.6])
    exact = numeric_grad(_two_plates_exact, phi)
    rows = {}
    for label, est in (("vimco", scg.VIMCO()), ("loo", scg.Score("loo"))):
        gs = scg.grad_samples(scg.expectation(_two_plates(est, per_element), n=40_000,
                                              seed=5))(phi)
        z = (gs.mean - exact) / gs.stderr
        assert np.all(np.abs(z) < 5), (label, per_element, gs.mean, exact, z)
        rows[label] = gs.var
    assert np.all(rows["vimco"] < rows["loo"]), rows


def test_a_data_plate_around_the_particles_under_jit():
    phi = np.array([0.4, -0.6])
    for per_element in (True, False):
        E, Ej = (scg.expectation(_two_plates(scg.VIMCO(), per_element), n=16, seed=1)
                 for _ in range(2))
        step = scg.jit(scg.grad(Ej))
        for _ in range(5):
            np.testing.assert_allclose(step(phi), scg.grad(E)(phi), rtol=1e-12, atol=1e-14)
        assert step.stats["replays"] >= 2, step.explain()
