"""Plates by position: a plate's axis is followed through every operation, never guessed
from its size. A minibatch of B images through a layer B wide stays per image."""

import functools

import numpy as np
import pytest

import scg

H = 3  # features of each element's latent


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _layers(B, P):
    rng = np.random.default_rng(B * 100 + P)
    return rng.normal(size=(H, P)), rng.normal(size=B)


# Per-element costs written the ways users write them; z has shape (B, H), W (H, P).
COSTS = {
    "matmul": lambda z, W: np.sum(z @ W, -1),
    "matmul by ones": lambda z, W: np.sum(z @ np.ones_like(W), -1),
    "einsum": lambda z, W: np.einsum("bh,hp->b", z, W),
    "einsum kept": lambda z, W: np.sum(np.einsum("bh,hp->bp", z, W), axis=1),
    "dot": lambda z, W: np.sum(np.dot(z, W), axis=-1),
    "transposed matmul": lambda z, W: np.sum((W.T @ z.T).T, -1),
    "broadcast and sum": lambda z, W: np.sum(z[:, :, None] * W[None], axis=(1, 2)),
    "squared layer": lambda z, W: np.sum(np.tanh(z @ W) ** 2, axis=-1),
}


def _model(B, P, cost, estimator):
    W, scale = _layers(B, P)

    def model(theta):
        with scg.plate("batch", B):
            z = scg.sample("z", scg.Bernoulli(logits=theta[:, None] * np.ones(H)).to_event(1),
                           estimator=estimator)
            return cost(z, W) * scale
    return model


@pytest.mark.parametrize("name", list(COSTS))
@pytest.mark.parametrize("B,P", [(64, 64), (10, 10), (8, 8), (64, 65), (32, 64)])
def test_a_per_element_cost_stays_in_the_plate_whatever_the_sizes(name, B, P):
    model = _model(B, P, COSTS[name], "score")
    trace = scg.trace(model, np.zeros(B), n=2, seed=0)
    assert trace.cost_sites["return"].plates == (scg.stochastic.sites.Plate("batch", B, -1),)
    assert "return in plate batch" in trace.explain()


def _exact_per_element(B, P, cost, theta):
    """Exact mean and per-draw variance of the per-element score estimator of d/dtheta_b:
    sum_h (z_bh - p_b) * c_b(z_b), enumerating element b's 2^H values; and the variance of
    the estimator that pairs every score with the total cost, by the same enumeration
    (the total is a sum of independent per-element costs)."""
    W, scale = _layers(B, P)
    values = np.array(np.meshgrid(*[[0.0, 1.0]] * H, indexing="ij")).reshape(H, -1).T
    p = _sig(theta)

    def element(b):  # (the probability, cost and score of each value of element b)
        prob = np.prod(np.where(values == 1, p[b], 1 - p[b]), axis=1)
        z = np.zeros((len(values), B, H))
        z[:, b] = values
        c = np.array([cost(zz, W)[b] for zz in z]) * scale[b]
        return prob, c, np.sum(values - p[b], axis=1)

    parts = [element(b) for b in range(B)]
    mean = np.array([np.sum(prob * s * c) for prob, c, s in parts])
    second = np.array([np.sum(prob * (s * c) ** 2) for prob, c, s in parts])
    cost_mean = [np.sum(prob * c) for prob, c, _ in parts]
    cost_var = [np.sum(prob * c ** 2) - m ** 2 for (prob, c, _), m in zip(parts, cost_mean)]
    # total cost T = c_b + R_b, R_b independent of z_b: E[(s c_b + s R_b)^2] =
    # E[s^2 c_b^2] + 2 E[s^2 c_b] E[R_b] + E[s^2] E[R_b^2]
    total_var = []
    for b, (prob, c, s) in enumerate(parts):
        others = [k for k in range(B) if k != b]
        r_mean = sum(cost_mean[k] for k in others)
        r_second = sum(cost_var[k] for k in others) + r_mean ** 2
        e2 = np.sum(prob * (s * c) ** 2) + 2 * np.sum(prob * s ** 2 * c) * r_mean + \
            np.sum(prob * s ** 2) * r_second
        total_var.append(e2 - mean[b] ** 2)
    return mean, second - mean ** 2, np.array(total_var)


@pytest.mark.parametrize("name", ["matmul", "einsum", "transposed matmul"])
def test_the_per_draw_variance_is_the_per_element_one_when_the_layer_is_as_wide(name):
    B = P = 8
    theta = np.linspace(-1.0, 1.0, B)
    cost = COSTS[name]
    mean, var, total_var = _exact_per_element(B, P, cost, theta)
    assert np.all(total_var > 3 * var)  # (what pairing with the total would cost)
    n = 200_000
    gs = scg.grad_samples(scg.expectation(_model(B, P, cost, "score"), n=n, seed=3))(theta)
    z = (gs.mean - mean) / gs.stderr
    assert np.all(np.abs(z) < 5), z
    # the sample variance's standard error, from the fourth moment of the draws
    d = gs.samples - gs.samples.mean(axis=0)
    se_var = np.sqrt(np.mean(d ** 4, axis=0) / n)
    assert np.all(np.abs(gs.var - var) < 5 * se_var), (gs.var, var)


def test_a_vae_whose_decoder_is_as_wide_as_the_minibatch_keeps_each_image_apart():
    # the linear VAE of the DisARM paper at a small size: B images of P pixels, P = B
    B = P = 16
    rng = np.random.default_rng(0)
    x = (rng.random((B, P)) < 0.5).astype(float)
    enc, dec = rng.normal(size=(P, H)) * 0.1, rng.normal(size=(H, P)) * 0.1

    def elbo(params, x):
        with scg.plate("batch", B):
            logits = x @ params["enc"]
            z = scg.sample("z", scg.Bernoulli(logits=logits).to_event(1),
                           estimator=scg.Score("loo"))
            out = z @ params["dec"]
            log_lik = np.sum(x * out - scg.softplus(out), axis=-1)
            log_q = np.sum(z * logits - scg.softplus(logits), axis=-1)
            log_prior = -H * np.log(2.0)
            return -(log_lik + log_prior - log_q)

    trace = scg.trace(elbo, {"enc": enc, "dec": dec}, x, n=2, seed=0)
    assert "return in plate batch" in trace.explain()
    assert "mixes" not in trace.explain()


def test_mixing_through_the_plate_axis_is_seen_whatever_the_sizes():
    B = 8
    W = np.ones((H, B))

    def model(theta):
        with scg.plate("batch", B):
            z = scg.sample("z", scg.Bernoulli(logits=theta[:, None] * np.ones(H)).to_event(1),
                           estimator="score")
            y = z @ W  # (B, B): axis 0 the plate, axis 1 the layer
            return np.sum(y, axis=0)  # sums the images: one number per unit of the layer
    trace = scg.trace(model, np.zeros(B), n=2, seed=0)
    assert trace.cost_sites["return"].plates == ()
    assert "mixes the elements of plate batch (for the score of z)" in trace.explain()


def test_a_site_drawn_from_a_mixed_value_keeps_its_own_elements_apart():
    # u's logits combine z's elements; u's own draws are still independent per element,
    # so u's score meets element b's cost only, while z's meets all of it
    B = 4
    w = np.array([0.5, -1.0, 2.0, 1.5])
    plate = scg.stochastic.sites.Plate("p", B, -1)

    def model(th):
        with scg.plate("p", B):
            z = scg.sample("z", scg.Bernoulli(logits=th[0] * np.ones(B)), estimator="score")
            u = scg.sample("u", scg.Bernoulli(logits=th[1] + np.mean(z) * np.ones(B)),
                           estimator="score")
            return (u - w) ** 2
    c = scg.trace(model, np.zeros(2), n=2, seed=0).cost_sites["return"]
    assert c.plates_for("u") == (plate,)
    assert c.plates_for("z") == ()

    def exact(th):  # E[sum_b (u_b - w_b)^2] by enumerating z
        p = _sig(th[0])
        total = 0.0
        for bits in range(2 ** B):
            z = np.array([(bits >> b) & 1 for b in range(B)], dtype=float)
            q = _sig(th[1] + np.mean(z))
            total += np.prod(np.where(z == 1, p, 1 - p)) * np.sum(
                q * (1 - w) ** 2 + (1 - q) * w ** 2)
        return total

    th = np.array([0.3, -0.2])
    numeric = np.array([(exact(th + e) - exact(th - e)) / 2e-6 for e in np.eye(2) * 1e-6])
    gs = scg.grad_samples(scg.expectation(model, n=200_000, seed=1))(th)
    z = (gs.mean - numeric) / gs.stderr
    assert np.all(np.abs(z) < 5), z


def test_partial_and_closures_see_the_same_axes():
    B = P = 8
    W, scale = _layers(B, P)

    def model(theta, W, scale):
        with scg.plate("batch", B):
            z = scg.sample("z", scg.Bernoulli(logits=theta[:, None] * np.ones(H)).to_event(1),
                           estimator="score")
            return np.sum(z @ W, -1) * scale
    part = functools.partial(model, W=W, scale=scale)
    ref = scg.grad_samples(scg.expectation(_model(B, P, COSTS["matmul"], "score"), n=64,
                                           seed=0))(np.zeros(B))
    got = scg.grad_samples(scg.expectation(part, n=64, seed=0))(np.zeros(B))
    np.testing.assert_allclose(got.samples, ref.samples, rtol=1e-12, atol=1e-12)


# An operation that combines a plate's elements in one argument while another argument
# brings the plate back onto an axis of the result: the result mixes the plate.
F3 = np.array([1.5, -0.5, 2.0])
W3 = np.array([[0.5, -1.0, 2.0], [1.0, 0.3, -0.7], [-1.2, 0.8, 0.4]])
K3 = np.array([2, 0, 1])
COMBINING = {
    "einsum over the other copy": lambda z: np.einsum("i,j->i", z, z) * F3,
    "matmul back onto itself": lambda z: (z[:, None] * W3) @ z,
    "dot back onto itself": lambda z: np.dot(z[:, None] * W3, z),
    "indexed by a permutation": lambda z: F3 * z[K3] * z,
    "take by a permutation": lambda z: F3 * scg.take(z, K3, axis=0) * z,
    "take_along_axis": lambda z: F3 * np.take_along_axis(z, K3, 0) * z,
}


@pytest.mark.parametrize("name", list(COMBINING))
def test_combining_a_plate_while_another_argument_keeps_it_mixes(name):
    cost = COMBINING[name]
    plate = scg.stochastic.sites.Plate("p", 3, -1)

    def model(theta, estimator="score"):
        with scg.plate("p", 3):
            z = scg.sample("z", scg.Bernoulli(logits=theta), estimator=estimator)
            return cost(z)

    theta = np.array([0.4, -0.7, 1.1])
    c = scg.trace(model, theta, n=2, seed=0).cost_sites["return"]
    assert c.plates_for("z") == () and plate in {p for p, _ in c.mixed}
    with pytest.raises(scg.EstimatorError, match="mixes the elements of plate p"):
        scg.grad(scg.expectation(functools.partial(model, estimator=scg.Enumerate()),
                                 n=2))(theta)

    def exact(th):
        p = _sig(th)
        total = 0.0
        for bits in range(8):
            z = np.array([(bits >> b) & 1 for b in range(3)], dtype=float)
            total += np.prod(np.where(z == 1, p, 1 - p)) * np.sum(cost(z))
        return total
    numeric = np.array([(exact(theta + e) - exact(theta - e)) / 2e-6 for e in np.eye(3) * 1e-6])
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=2))(theta)
    z = (gs.mean - numeric) / gs.stderr
    assert np.all(np.abs(z) < 5), z
