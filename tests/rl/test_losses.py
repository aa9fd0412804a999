"""Each policy loss, aggregation and KL penalty equals its definition, written here by hand in numpy.

Values are compared with loops over sequences and tokens; gradients with respect to logp with the
derivative of each definition worked out by hand (the ratio's constants held fixed).
"""

import itertools

import numpy as np
import pytest

import scg

KINDS = ("reinforce", "ppo", "gspo", "cispo", "tis")
AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
CLIPS = ((0.2, 0.2), (0.2, 0.28), (0.05, 0.5))


def batch(seed, B=5, T=4, off=0.3):
    rng = np.random.default_rng(seed)
    logp = np.log(rng.uniform(0.05, 0.95, (B, T)))
    logp_old = logp + rng.normal(0.0, off, (B, T))        # ratios on both sides of the clip range
    adv = rng.normal(0.0, 1.0, B)
    mask = np.ones((B, T), bool)
    for b in range(B):
        mask[b, rng.integers(1, T + 1):] = False         # sequences of different lengths
    mask[0] = True
    return logp, logp_old, adv, mask


def weights(mask, agg, norm=None):
    """d aggregate / d loss_mat[b, t], by hand."""
    B, T = mask.shape
    w = np.zeros((B, T))
    for b in range(B):
        n = mask[b].sum()
        for t in range(T):
            if mask[b, t]:
                w[b, t] = {"token-mean": 1.0 / mask.sum(), "seq-mean-token-mean": 1.0 / (B * n),
                           "seq-mean-token-sum": 1.0 / B,
                           "seq-mean-token-sum-norm": 1.0 / (B * (T if norm is None else norm))}[agg]
    return w


def by_hand(logp, logp_old, adv, mask, kind, clip, agg, cap=2.0):
    """(value, d value / d logp) of the definition, token by token."""
    low, high = clip
    B, T = logp.shape
    loss, dloss = np.zeros((B, T)), np.zeros((B, T))
    for b in range(B):
        n = mask[b].sum()
        seq_ratio = np.exp(sum(logp[b, t] - logp_old[b, t] for t in range(T) if mask[b, t]) / n)
        for t in range(T):
            A, r = adv[b], np.exp(logp[b, t] - logp_old[b, t])
            if kind == "reinforce":
                loss[b, t], dloss[b, t] = -A * logp[b, t], -A
            elif kind in ("ppo", "gspo"):
                x = r if kind == "ppo" else seq_ratio
                unclipped, clipped = -A * x, -A * min(max(x, 1 - low), 1 + high)
                loss[b, t] = max(unclipped, clipped)
                dloss[b, t] = -A * x if unclipped >= clipped else 0.0  # (d x / d logp_t = x)
            elif kind == "cispo":
                wgt = min(max(r, 1 - low), 1 + high)
                loss[b, t], dloss[b, t] = -A * wgt * logp[b, t], -A * wgt
            else:
                wgt = min(r, cap)
                loss[b, t], dloss[b, t] = -A * wgt * logp[b, t], -A * wgt
    w = weights(mask, agg)
    return float(np.sum(w * loss)), w * dloss


@pytest.mark.parametrize("kind, agg, clip", list(itertools.product(KINDS, AGGS, CLIPS)))
def test_policy_loss_equals_its_definition(kind, agg, clip):
    for seed in range(3):
        logp, logp_old, adv, mask = batch(seed)
        value, dvalue = by_hand(logp, logp_old, adv, mask, kind, clip, agg)
        f = lambda lp: scg.rl.policy_loss(lp, logp_old, adv, mask, kind, clip, agg)  # noqa: E731
        v, g = scg.value_and_grad(f)(logp)
        assert v == pytest.approx(value, rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(g, dvalue, rtol=1e-12, atol=1e-14)
        # a 0/1 float mask is the boolean mask
        assert scg.rl.policy_loss(logp, logp_old, adv, mask.astype(float), kind, clip, agg) == pytest.approx(v)


@pytest.mark.parametrize("kind", KINDS)
def test_on_policy_every_kind_is_the_score(kind):
    logp, _, adv, mask = batch(7)
    for agg in AGGS:
        g = scg.grad(lambda lp: scg.rl.policy_loss(lp, None, adv, mask, kind, aggregate=agg))(logp)
        np.testing.assert_allclose(g, -adv[:, None] * weights(mask, agg), rtol=1e-12, atol=1e-15)


def test_padding_may_hold_nan_and_per_token_advantages():
    logp, logp_old, adv, mask = batch(3)
    bad = np.where(mask, logp, np.nan)
    per_token = np.broadcast_to(adv[:, None], logp.shape) * 1.0
    for kind in KINDS:
        v1 = scg.rl.policy_loss(bad, logp_old, adv, mask, kind, aggregate="token-mean")
        v2 = scg.rl.policy_loss(logp, logp_old, per_token, mask, kind, aggregate="token-mean")
        assert np.isfinite(v1) and v1 == pytest.approx(v2, rel=1e-13)


def test_tis_cap_and_norm():
    logp, logp_old, adv, mask = batch(4, off=1.0)
    value, _ = by_hand(logp, logp_old, adv, mask, "tis", (0.2, 0.2), "seq-mean-token-sum", cap=1.5)
    assert scg.rl.policy_loss(logp, logp_old, adv, mask, "tis", aggregate="seq-mean-token-sum",
                              cap=1.5) == pytest.approx(value, rel=1e-12)
    a = scg.rl.policy_loss(logp, logp_old, adv, mask, "reinforce", aggregate="seq-mean-token-sum")
    b = scg.rl.policy_loss(logp, logp_old, adv, mask, "reinforce", aggregate="seq-mean-token-sum-norm", norm=16)
    assert b == pytest.approx(a / 16, rel=1e-13)


def test_aggregate_by_hand():
    x = np.array([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])
    m = np.array([[1, 1, 0], [1, 0, 0]], bool)
    assert scg.rl.aggregate(x, m, "token-mean") == pytest.approx(6.0 / 3)
    assert scg.rl.aggregate(x, m, "seq-mean-token-mean") == pytest.approx((2.0 + 2.0) / 2)
    assert scg.rl.aggregate(x, m, "seq-mean-token-sum") == pytest.approx((4.0 + 2.0) / 2)
    assert scg.rl.aggregate(x, m, "seq-mean-token-sum-norm") == pytest.approx((4.0 + 2.0) / 2 / 3)
    assert scg.rl.aggregate(x, m, "seq-mean-token-sum-norm", norm=10) == pytest.approx(0.3)
    # a sequence with no token counts in the means with 0
    empty = np.array([[1, 1, 0], [0, 0, 0]], bool)
    assert scg.rl.aggregate(x, empty, "seq-mean-token-mean") == pytest.approx(1.0)
    # leading axes: one loss per batch
    np.testing.assert_allclose(scg.rl.aggregate(np.stack([x, 2 * x]), m, "token-mean"), [2.0, 4.0])


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("agg", AGGS)
def test_kl_penalty_equals_its_definition(estimator, agg):
    logp, logp_ref, _, mask = batch(11)
    d = logp - logp_ref
    k, dk = {"k1": (d, np.ones_like(d)), "k2": (d ** 2 / 2, d),
             "k3": (np.exp(-d) - 1 + d, 1 - np.exp(-d))}[estimator]
    in_reward = scg.rl.kl_penalty(logp, logp_ref, mask, estimator, "reward")
    np.testing.assert_allclose(in_reward, [sum(k[b, t] for t in range(4) if mask[b, t]) for b in range(5)],
                               rtol=1e-13)
    w = weights(mask, agg)
    f = lambda lp: scg.rl.kl_penalty(lp, logp_ref, mask, estimator, "loss", aggregate=agg)  # noqa: E731
    v, g = scg.value_and_grad(f)(logp)
    assert v == pytest.approx(np.sum(w * k), rel=1e-12)
    np.testing.assert_allclose(g, w * dk, rtol=1e-12, atol=1e-15)
    # in the reward it is a constant: no gradient flows
    g = scg.grad(lambda lp: np.sum(scg.rl.kl_penalty(lp, logp_ref, mask, estimator, "reward")),
                 allow_unused=True)(logp)
    assert np.all(g == 0)


def test_losses_flow_to_parameters_of_an_nn_policy():
    """The losses on log-probabilities computed by scg.nn: gradients reach the parameters, and equal
    the chain rule through d loss / d logp."""
    rng = np.random.default_rng(0)
    B, T, V = 4, 3, 5
    tokens = rng.integers(0, V, (B, T))
    x = rng.normal(size=(B, T, 6))
    params = scg.nn.init_mlp(0, [6, 8, V])
    logp_old, adv, mask = np.log(np.full((B, T), 0.2)), rng.normal(size=B), np.ones((B, T), bool)

    def logp_of(p):
        lp = scg.log_softmax(scg.nn.mlp(p, x, activation=np.tanh), axis=-1)
        return np.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]

    def loss(p):
        return scg.rl.policy_loss(logp_of(p), logp_old, adv, mask, "ppo", aggregate="token-mean")

    g = scg.grad(loss)(params)
    dl = scg.grad(lambda lp: scg.rl.policy_loss(lp, logp_old, adv, mask, "ppo", aggregate="token-mean"))(
        logp_of(params))
    J = scg.jacobian(logp_of)(params)
    for layer, jl in zip(g, J):
        for key in layer:
            np.testing.assert_allclose(layer[key], np.tensordot(dl, jl[key], axes=2), rtol=1e-10, atol=1e-14)
    assert any(np.any(layer["W"] != 0) for layer in g)
