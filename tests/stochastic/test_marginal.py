"""scg.Marginalize(), scg.factor and scg.markov: sites summed out of the likelihood, exactly.

Every value and gradient is checked against the sum written by hand in numpy (enumeration,
the forward algorithm), derivatives against central differences of that sum; sampled sites
beside marginalized ones against quadrature, in standard errors."""

import functools

import numpy as np
import pytest

import scg
from scg.stochastic import marginal

from tests.estimators.exact import numeric_grad, numeric_hessian


def _lse(x, axis=None):
    return np.logaddexp.reduce(x, axis=axis)


def _log_normal(x, loc, scale=1.0):
    return -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _log_softmax(x, axis=-1):
    return x - _lse(x, axis=axis)[..., None] if x.ndim > 1 else x - _lse(x)


# ---------------------------------------------------------------------- a mixture
RNG = np.random.default_rng(3)
DATA = np.concatenate([RNG.normal(-2, 1, 7), RNG.normal(1.5, 0.7, 9)])
K = 3


def mixture(data, theta):
    weights, locs = scg.softmax(theta[:K]), theta[K:2 * K]
    with scg.plate("data", len(data)):
        z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        scg.sample("x", scg.Normal(locs[z], 1.0), obs=data)


def mixture_exact(theta, data=DATA):
    joint = _log_softmax(theta[:K])[:, None] + _log_normal(data[None], theta[K:2 * K, None])
    return -np.sum(_lse(joint, axis=0))


THETA = np.array([0.2, -0.1, 0.3, -2.0, 0.1, 1.4])


def test_a_mixture_is_its_exact_marginal_likelihood_to_second_order():
    E = scg.expectation(functools.partial(mixture, DATA), n=8)
    value, g = scg.value_and_grad(E)(THETA)
    assert value == pytest.approx(mixture_exact(THETA), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(mixture_exact, THETA), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(scg.hessian(E)(THETA), numeric_hessian(mixture_exact, THETA),
                               rtol=1e-5, atol=1e-5)


def test_a_model_with_every_site_marginalized_is_evaluated_once():
    E = scg.expectation(functools.partial(mixture, DATA), n=64)
    scg.grad(E)(THETA)
    scg.grad(E)(THETA)
    assert E.last_trace.n == 1
    g = scg.grad_samples(E)(THETA)
    assert np.all(np.asarray(g.var) < 1e-20)  # (the same gradient in every draw)


def test_sizes_that_coincide_are_not_confused():
    """Three components and three points: a component's dim and the plate's have one size
    (and the plate is opened after a global marginalized site, so the run lays its dims out
    again, left of the plate)."""
    data = np.array([-1.0, 0.3, 2.2])

    def model(theta):
        c = scg.sample("c", scg.Categorical(scg.softmax(theta[:3])),
                       estimator=scg.Marginalize())
        with scg.plate("data", 3):
            scg.sample("x", scg.Normal(theta[3:][c], 1.0), obs=data)

    def exact(theta):
        per = _log_softmax(theta[:3]) + np.sum(_log_normal(data[None], theta[3:, None]), axis=1)
        return -_lse(per)

    theta = np.array([0.1, 0.5, -0.3, -1.0, 0.0, 2.0])
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-8)


def test_two_sites_of_one_element_meet_in_its_likelihood():
    """Per element, a coin and a three-way choice meet in one term: 2 x 3 per element."""
    data = np.array([0.3, -1.2, 2.5, 0.9])

    def model(theta):
        with scg.plate("data", 4):
            b = scg.sample("b", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
            c = scg.sample("c", scg.Categorical(scg.softmax(theta[1:4])),
                           estimator=scg.Marginalize())
            scg.sample("x", scg.Normal(theta[4] * b + theta[5:8][c], 1.0), obs=data)

    def exact(theta):
        lb = np.array([-np.logaddexp(0, theta[0]), theta[0] - np.logaddexp(0, theta[0])])
        lc = _log_softmax(theta[1:4])
        loc = theta[4] * np.arange(2)[:, None] + theta[5:8][None, :]
        joint = lb[:, None, None] + lc[None, :, None] + _log_normal(data, loc[..., None])
        return -np.sum(_lse(joint.reshape(6, -1), axis=0))

    theta = np.array([0.3, 0.1, -0.2, 0.4, 1.1, -1.0, 0.2, 1.5])
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-8)


def test_one_hot_values_and_impossible_combinations():
    """A OneHotCategorical summed out, and observations impossible under some values (their
    log-likelihood is -inf there, which the sum takes as a zero)."""
    table = np.array([[0.5, 0.5, 0.0], [0.1, 0.3, 0.6]])
    obs = np.array([0.0, 2.0, 1.0, 2.0])

    def model(theta):
        with scg.plate("data", 4):
            z = scg.sample("z", scg.OneHotCategorical(logits=theta), estimator=scg.Marginalize())
            scg.sample("x", scg.Categorical(z @ table), obs=obs)

    def exact(theta):
        joint = _log_softmax(theta)[:, None] + np.log(table[:, obs.astype(int)])
        return -np.sum(_lse(joint, axis=0))

    theta = np.array([0.4, -0.3])
    with np.errstate(divide="ignore"):
        want, fd = exact(theta), numeric_grad(exact, theta)
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8)


def test_a_factor_is_a_likelihood_term_and_elsewhere_a_cost():
    def model(theta):
        with scg.plate("data", len(DATA)):
            z = scg.sample("z", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
            scg.factor("x", -0.5 * (DATA - theta[1] * z) ** 2)
        scg.factor("prior", -0.5 * theta[1] ** 2)

    def exact(theta):
        lb = np.array([-np.logaddexp(0, theta[0]), theta[0] - np.logaddexp(0, theta[0])])
        joint = lb[:, None] - 0.5 * (DATA[None] - theta[1] * np.arange(2)[:, None]) ** 2
        return -np.sum(_lse(joint, axis=0)) + 0.5 * theta[1] ** 2

    theta = np.array([0.2, 1.3])
    E = scg.expectation(model, n=1)
    value, g = scg.value_and_grad(E)(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-8)
    assert set(E.last_trace.cost_sites) == {"prior", "marginal"}
    assert "their likelihood terms: x" in E.last_trace.explain()


# ---------------------------------------------------------------------- chains
def hmm_params(theta, k):
    return theta[:k * k].reshape(k, k), theta[k * k:k * k + k], theta[k * k + k:]


def hmm(data, k, theta, history=1):
    a, pi, locs = hmm_params(theta, k)
    trans, init = scg.softmax(a, axis=-1), scg.softmax(pi)
    z = None
    for t in scg.markov(range(len(data)), history=history):
        probs = init if t == 0 else trans[z]
        z = scg.sample(f"z{t}", scg.Categorical(probs), estimator=scg.Marginalize())
        scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])


def forward_algorithm(data, k, theta):
    a, pi, locs = hmm_params(theta, k)
    log_a, emit = _log_softmax(a), _log_normal(data[:, None], locs[None])
    alpha = _log_softmax(pi) + emit[0]
    for t in range(1, len(data)):
        alpha = _lse(alpha[:, None] + log_a, axis=0) + emit[t]
    return -_lse(alpha)


@pytest.mark.parametrize("k, length", [(2, 5), (3, 40)])
def test_a_chain_is_summed_by_the_forward_algorithm(k, length):
    rng = np.random.default_rng(k)
    data = rng.normal(0, 2, length)
    theta = rng.normal(size=k * k + 2 * k)
    exact = functools.partial(forward_algorithm, data, k)
    E = scg.expectation(functools.partial(hmm, data, k), n=1)
    value, g = scg.value_and_grad(E)(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)
    if length <= 5:
        np.testing.assert_allclose(scg.hessian(E)(theta), numeric_hessian(exact, theta),
                                   rtol=1e-5, atol=1e-5)
    # the dims of old steps were reused: two slots for the whole chain
    assert len(E.last_trace.marginal.slots) == 2


def test_chains_in_a_plate_of_sequences():
    """Pyro's pattern: a plate of sequences around a scg.markov loop, each sequence its
    own chain."""
    rng = np.random.default_rng(5)
    k, length, count = 3, 6, 4
    data = rng.normal(0, 2, (length, count))
    theta = rng.normal(size=k * k + 2 * k)

    def model(theta):
        a, pi, locs = hmm_params(theta, k)
        trans, init = scg.softmax(a, axis=-1), scg.softmax(pi)
        with scg.plate("sequences", count):
            z = None
            for t in scg.markov(range(length)):
                z = scg.sample(f"z{t}", scg.Categorical(init if t == 0 else trans[z]),
                               estimator=scg.Marginalize())
                scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])

    def exact(theta):
        return sum(forward_algorithm(data[:, j], k, theta) for j in range(count))

    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)


def test_a_second_order_chain_with_history_two():
    rng = np.random.default_rng(7)
    k, length = 2, 6
    data = rng.normal(0, 1.5, length)

    def model(theta):
        t2 = scg.softmax(theta[:8].reshape(2, 2, 2), axis=-1)
        z = [None, None]
        for t in scg.markov(range(length), history=2):
            probs = np.full(2, 0.5) if t < 2 else t2[z[-2], z[-1]]
            z.append(scg.sample(f"z{t}", scg.Categorical(probs), estimator=scg.Marginalize()))
            scg.sample(f"x{t}", scg.Normal(theta[8:][z[-1]], 1.0), obs=data[t])

    def exact(theta):
        lt = _log_softmax(theta[:8].reshape(2, 2, 2))
        emit = _log_normal(data[:, None], theta[8:][None])
        alpha = np.log(0.25) + emit[0][:, None] + emit[1][None, :]  # (z0, z1)
        for t in range(2, length):
            alpha = _lse(alpha[:, :, None] + lt, axis=0) + emit[t][None, :]
        return -_lse(alpha.ravel())

    theta = rng.normal(size=10)
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)


def test_scg_jit_replays_a_chain_bit_for_bit():
    rng = np.random.default_rng(11)
    data = rng.normal(0, 2, 12)
    E = scg.expectation(functools.partial(hmm, data, 3), n=1)
    step = scg.jit(scg.value_and_grad(E))
    eager = scg.value_and_grad(E)
    for i in range(4):
        theta = rng.normal(size=15)
        v, g = step(theta)
        v0, g0 = eager(theta)
        assert v == v0
        np.testing.assert_array_equal(g, g0)
    assert step.replays >= 1 if hasattr(step, "replays") else "replayed" in step.explain()


# ---------------------------------------------------------------------- beside drawn sites
def test_a_drawn_global_latent_upstream_is_unbiased_against_quadrature():
    """mu ~ Normal(m, 1) drawn pathwise, the assignments summed out given mu: the gradient
    of E_mu[-log p(x | mu)] against Gauss-Hermite quadrature, in standard errors."""
    data = np.array([-1.0, 0.5, 2.0])
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()

    def model(theta):
        mu = scg.sample("mu", scg.Normal(theta[0], 1.0))
        with scg.plate("data", 3):
            z = scg.sample("z", scg.Bernoulli(logits=theta[1]), estimator=scg.Marginalize())
            scg.sample("x", scg.Normal(mu * z, 1.0), obs=data)

    def exact(theta):
        lb = np.array([-np.logaddexp(0, theta[1]), theta[1] - np.logaddexp(0, theta[1])])
        total = 0.0
        for x, w in zip(theta[0] + nodes, weights):
            joint = lb[:, None] + _log_normal(data[None], x * np.arange(2)[:, None])
            total += w * -np.sum(_lse(joint, axis=0))
        return total

    theta = np.array([0.4, -0.3])
    g = scg.grad_samples(scg.expectation(model, n=20_000, seed=1))(theta)
    z = (np.asarray(g.mean) - numeric_grad(exact, theta)) / np.asarray(g.stderr)
    assert np.all(np.abs(z) < 5), z


def test_a_subsampled_plate_stands_for_all_its_elements():
    E = scg.expectation(functools.partial(_subsampled, DATA), n=1, seed=2)
    values = [scg.value_and_grad(E)(THETA)[0] for _ in range(400)]
    se = np.std(values) / np.sqrt(len(values))
    assert abs(np.mean(values) - mixture_exact(THETA)) < 5 * se


def _subsampled(data, theta):
    weights, locs = scg.softmax(theta[:K]), theta[K:2 * K]
    with scg.plate("data", len(data), subsample_size=5) as p:
        z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        scg.sample("x", scg.Normal(locs[z], 1.0), obs=data[p])


# ---------------------------------------------------------------------- refused, clearly
def _raises(model, match, error=scg.EstimatorError, theta=THETA):
    with pytest.raises(error, match=match):
        scg.grad(scg.expectation(model, n=1))(theta)


def test_a_cost_downstream_of_a_marginalized_site_is_refused():
    def model(theta):
        z = scg.sample("z", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
        scg.cost("c", (z - 0.5) ** 2)
    _raises(model, "cost 'c' depends on the marginalized site 'z'")

    def returned(theta):
        z = scg.sample("z", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
        return z * theta[1]
    _raises(returned, "cost 'return' depends on the marginalized site 'z'")


def test_a_drawn_site_downstream_of_a_marginalized_site_is_refused():
    def model(theta):
        z = scg.sample("z", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
        y = scg.sample("y", scg.Normal(z, 1.0))
        return y ** 2
    _raises(model, "site 'y' \\(its parameters\\) depends on the marginalized site 'z'")


def test_a_value_older_than_the_markov_history_is_refused():
    data = np.zeros(5)

    def model(theta):
        zs = []
        for t in scg.markov(range(5)):
            zs.append(scg.sample(f"z{t}", scg.Bernoulli(logits=theta[0]),
                                 estimator=scg.Marginalize()))
            back = zs[-3] if t >= 2 else zs[-1]
            scg.sample(f"x{t}", scg.Normal(back, 1.0), obs=data[t])
    _raises(model, "'x2' depends on the marginalized site 'z0', which "
            "scg.markov\\(history=1\\) let go of")


def test_a_sum_over_a_marginalized_sites_dim_is_refused():
    def model(theta):
        with scg.plate("data", len(DATA)):
            z = scg.sample("z", scg.Bernoulli(logits=theta[0]), estimator=scg.Marginalize())
            scg.factor("x", np.sum(-0.5 * (DATA - theta[1] * z) ** 2))
    _raises(model, "'x' depends on the marginalized site 'z' but has no dim of its values")


def test_a_batch_dim_without_a_plate_is_refused():
    def model(theta):
        scg.sample("z", scg.Categorical(np.full((4, 3), 1 / 3)), estimator=scg.Marginalize())
    _raises(model, "no open plate declares")


def test_a_long_chain_without_markov_asks_for_it():
    def model(theta):
        z = None
        for t in range(40):
            z = scg.sample(f"z{t}", scg.Bernoulli(logits=theta[0] if z is None else theta[1] * z),
                           estimator=scg.Marginalize())
            scg.sample(f"x{t}", scg.Normal(z, 1.0), obs=0.3)
    _raises(model, "scg.markov\\(range\\(T\\)\\)")


def test_a_table_too_large_is_refused_up_front_with_its_layout():
    """Ten sites of 8 values, each pair meeting in a term: the elimination would need a
    table of 8^9 entries."""
    def model(theta):
        zs = [scg.sample(f"z{i}", scg.Categorical(np.full(8, 0.125)),
                         estimator=scg.Marginalize()) for i in range(10)]
        for i in range(10):
            for j in range(i + 1, 10):
                scg.factor(f"f{i}_{j}", -0.01 * (zs[i] - zs[j]) ** 2 * theta[0])
    with pytest.raises(MemoryError, match="summing out the marginalized sites needs a table "
                       "of 1 draws x 8 \\(z0\\) x 8 \\(z1\\)"):
        scg.grad(scg.expectation(model, n=1))(THETA)


def test_marginalize_serves_finite_families_only():
    def model(theta):
        scg.sample("z", scg.Normal(theta[0], 1.0), estimator=scg.Marginalize())
    _raises(model, "scg.Marginalize\\(\\) sums over a finite support, and Normal declares none")


def test_markov_checks_its_history():
    with pytest.raises(ValueError, match="history must be a non-negative int"):
        list(scg.markov(range(3), history=-1))


def test_explain_names_the_sites_summed_out():
    E = scg.expectation(functools.partial(hmm, np.zeros(3), 2), n=1)
    scg.grad(E)(np.zeros(8))
    text = E.last_trace.explain()
    assert "z1 ~ Categorical" in text and "marginalized, summed out of the likelihood over " \
        "its 2 values, step 1 of a scg.markov chain (history 1)" in text
    assert marginal.MARGINAL_COST in E.last_trace.cost_sites


def test_two_chains_stepping_together():
    """Two independent chains in one loop: not one chain (the general elimination)."""
    rng = np.random.default_rng(13)
    length = 5
    a, b = rng.normal(0, 2, length), rng.normal(0, 2, length)

    def model(theta):
        z = w = None
        for t in scg.markov(range(length)):
            tz, tw = scg.softmax(theta[:4].reshape(2, 2), axis=-1), \
                scg.softmax(theta[4:8].reshape(2, 2), axis=-1)
            z = scg.sample(f"z{t}", scg.Categorical(np.full(2, 0.5) if t == 0 else tz[z]),
                           estimator=scg.Marginalize())
            w = scg.sample(f"w{t}", scg.Categorical(np.full(2, 0.5) if t == 0 else tw[w]),
                           estimator=scg.Marginalize())
            scg.sample(f"a{t}", scg.Normal(theta[8:10][z], 1.0), obs=a[t])
            scg.sample(f"b{t}", scg.Normal(theta[10:12][w], 1.0), obs=b[t])

    def exact(theta):
        one = np.concatenate([theta[:4], [0.0, 0.0], theta[8:10]])
        two = np.concatenate([theta[4:8], [0.0, 0.0], theta[10:12]])
        return forward_algorithm(a, 2, one) + forward_algorithm(b, 2, two)

    theta = rng.normal(size=12)
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)


def test_an_event_of_coins_is_refused_with_what_to_do():
    """Bernoulli(...).to_event(1) declares the values of one coin, not of the event: the
    error says so and how to write the model (not a reshape's ValueError)."""
    def model(theta):
        z = scg.sample("z", scg.Bernoulli(logits=theta * np.ones(3)).to_event(1),
                       estimator=scg.Marginalize())
        scg.sample("o", scg.Normal(np.sum(z), 1.0), obs=0.5)

    with pytest.raises(scg.EstimatorError, match=r"site 'z'.*to_event.*2\^3.*scg.plate"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.3)


def test_values_broadcast_into_the_familys_dim_are_refused_with_what_to_do():
    """A chain whose next logits are `theta * z * np.ones(2)`: the previous site's values
    (along their own dim) met the categories' dim. The error names both causes, with the
    index that the model means."""
    def model(theta):
        z = None
        for t in scg.markov(range(3)):
            logits = theta * np.ones(2) if z is None else theta * z * np.ones(2)
            z = scg.sample(f"z{t}", scg.Categorical(logits=logits), estimator=scg.Marginalize())
            scg.sample(f"o{t}", scg.Normal(z * 1.0, 1.0), obs=0.3)

    with pytest.raises(scg.EstimatorError, match=r"'z0'.*np.ones\(K\).*scg.take\(table, z0\)"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.3)
