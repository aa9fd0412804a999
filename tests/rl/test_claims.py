"""Each claim of docs/rl.md, asserted on the doc's task (computed here again, exactly)."""

import numpy as np
import pytest

import scg

V, L, G, EOS, BETA = 3, 3, 3, 0, 0.2
C = scg.rl.Config


def policy(theta, prefix):
    t = prefix.shape[-1]
    prev = prefix[..., -1] + 1 if t else np.zeros(prefix.shape[:-1], int)
    return scg.log_softmax(theta[t][prev], axis=-1)


def generated(y):
    is_eos = y == EOS
    return (np.cumsum(is_eos, -1) - is_eos) == 0


def reward(y):
    return 1.0 * np.any((y == 2) & generated(y), -1) + 0.5 * np.any(y == EOS, -1)


THETA, REF = np.random.default_rng(0).normal(0.0, 0.5, (2, L, V + 1, V))
TASK = dict(params=THETA, vocab=V, length=L, group_size=G, eos=EOS)


@pytest.fixture(scope="module")
def advantages():
    return scg.rl.study(policy, reward, {k: C(advantages=k) for k in
                                         ["none", "rloo", "dr_grpo", "grpo", "reinforce++"]}, **TASK)


def test_rloo_with_seq_mean_token_sum_is_unbiased_for_expected_reward(advantages):
    assert advantages["rloo"].norm_ratio == pytest.approx(1, abs=1e-12)
    assert advantages["rloo"].cosine == pytest.approx(1, abs=1e-12)
    assert advantages["rloo"].variance < advantages["none"].variance / 3


def test_dr_grpo_is_the_gradient_scaled_by_g_minus_1_over_g(advantages):
    assert advantages["dr_grpo"].norm_ratio == pytest.approx((G - 1) / G, abs=1e-12)
    assert advantages["dr_grpo"].cosine == pytest.approx(1, abs=1e-12)


def test_grpo_std_scaling_is_biased_in_size_and_direction(advantages):
    assert advantages["grpo"].cosine < 0.999 and abs(advantages["grpo"].norm_ratio - 1) > 0.1
    # the batch of the study is one group: REINFORCE++'s batch whitening is GRPO's
    np.testing.assert_allclose(advantages["reinforce++"].expected, advantages["grpo"].expected, atol=1e-15)


@pytest.fixture(scope="module")
def aggregations():
    aggs = {a: C(aggregate=a) for a in ["seq-mean-token-sum", "seq-mean-token-sum-norm",
                                        "token-mean", "seq-mean-token-mean"]}
    aggs["GRPO"] = C(loss="ppo", advantages="grpo", aggregate="seq-mean-token-mean")
    aggs["Dr. GRPO"] = C(loss="ppo", advantages="dr_grpo", aggregate="seq-mean-token-sum-norm")
    res = scg.rl.study(policy, reward, aggs, **TASK)
    grad_len = scg.rl.study(policy, lambda y: generated(y).sum(-1) * 1.0, {"x": C()}, **TASK).exact

    def dlen(u):
        return np.sum(u * grad_len) / np.linalg.norm(u)
    return res, {k: dlen(res[k].expected) / dlen(res.exact) for k in aggs}


def test_constant_normalization_keeps_the_direction(aggregations):
    res, drift = aggregations
    assert res["seq-mean-token-sum-norm"].norm_ratio == pytest.approx(1 / L, abs=1e-12)
    assert res["seq-mean-token-sum-norm"].cosine == pytest.approx(1, abs=1e-12)
    assert res["Dr. GRPO"].cosine == pytest.approx(1, abs=1e-12) and drift["Dr. GRPO"] == pytest.approx(1)


def test_length_normalization_is_biased_toward_long_answers(aggregations):
    res, drift = aggregations
    assert res["seq-mean-token-mean"].cosine < 0.97 and res["GRPO"].cosine < 0.97
    assert drift["seq-mean-token-mean"] > 1.3 and drift["GRPO"] > 1.3
    assert res["token-mean"].cosine < 0.998 and 1.05 < drift["token-mean"] < 1.1


@pytest.fixture(scope="module")
def kls():
    cfg = {"no KL": C()}
    cfg.update({f"{e} in {w}": C(kl=e, kl_where=w) for e in ["k1", "k2", "k3"] for w in ["reward", "loss"]})
    return scg.rl.study(policy, reward, cfg, ref_params=REF, beta=BETA, **TASK)


def test_k1_in_the_reward_is_unbiased_for_the_kl_regularized_objective(kls):
    assert kls["k1 in reward"].norm_ratio == pytest.approx(1, abs=1e-12)
    assert kls["k1 in reward"].max_error < 1e-15


def test_k1_in_the_loss_has_zero_expected_kl_gradient(kls):
    np.testing.assert_allclose(kls["k1 in loss"].expected, kls["no KL"].expected, rtol=0, atol=1e-15)
    assert kls["no KL"].max_error > 1e-2


@pytest.mark.parametrize("label", ["k2 in reward", "k3 in reward", "k2 in loss", "k3 in loss"])
def test_k2_and_k3_are_biased_for_the_kl_gradient(kls, label):
    assert kls[label].max_error > 3e-3 and kls[label].cosine < 0.9996


def test_one_token_answers_k2_in_loss_is_exact_and_k3_in_loss_follows_the_reverse_kl():
    one = dict(params=THETA[:1], ref_params=REF[:1], vocab=V, length=1, group_size=G, beta=BETA)
    res = scg.rl.study(policy, lambda y: 1.0 * (y[..., 0] == 2),
                       {"k2": C(kl="k2", kl_where="loss"), "k3": C(kl="k3", kl_where="loss")}, **one)
    assert res["k2"].max_error < 1e-15

    def reverse(th):
        lp = policy(th, np.zeros((1, 0), int))[0]
        ref_p = np.exp(policy(REF[:1], np.zeros((1, 0), int))[0])
        return np.exp(lp[2]) - BETA * np.sum(ref_p * (np.log(ref_p) - lp))
    np.testing.assert_allclose(res["k3"].expected, scg.grad(reverse)(THETA[:1]), atol=1e-15)
    assert res["k3"].max_error > 1e-3


def kl_model(th):
    prev, kl, said_2 = 0, 0.0, False
    for t in range(L):
        logp = scg.log_softmax(scg.take(th[t], prev, axis=0), axis=-1)
        y = scg.sample(f"y{t}", scg.Categorical(logits=logp))
        logp_ref = scg.log_softmax(scg.take(REF[t], prev, axis=0), axis=-1)
        kl = kl + scg.take(logp, y) - scg.take(logp_ref, y)
        said_2 = said_2 | (y == 2)
        prev = y + 1
    return BETA * kl - 1.0 * said_2


def test_the_kl_in_a_model_by_scgs_surrogate_is_the_unbiased_kl_gradient():
    exact = scg.rl.study(policy, lambda y: 1.0 * np.any(y == 2, -1), {"k1": C(kl="k1", kl_where="reward")},
                         params=THETA, ref_params=REF, vocab=V, length=L, group_size=2, beta=BETA).exact
    enumerated = -scg.grad(scg.expectation(kl_model, n=1, estimators=scg.Enumerate()))(THETA)
    np.testing.assert_allclose(enumerated, exact, atol=1e-14)
    # sampled tokens (the score function with leave-one-out): unbiased, in standard errors
    gs = scg.grad_samples(scg.expectation(kl_model, n=20_000, seed=0, estimators=scg.Score("loo")))(THETA)
    z = np.abs(-gs.mean - exact) / np.maximum(gs.stderr, 1e-12)
    assert z.max() < 5


def test_off_policy_reuse_and_the_price_of_the_clip():
    exact_dir = scg.rl.study(policy, reward, {"rloo": C()}, **TASK).exact
    off = {"reinforce": C(), "ppo": C(loss="ppo"), "ppo, no clip": C(loss="ppo", clip=(0.999, 1e9)),
           "gspo": C(loss="gspo"), "tis": C(loss="tis")}
    rows = {}
    for s in (0.1, 0.3, 1.0):
        new = THETA + s * exact_dir / np.linalg.norm(exact_dir)
        rows[s] = scg.rl.study(policy, reward, off, params=new, old_params=THETA, vocab=V, length=L,
                               group_size=G, eos=EOS)
    assert all(abs(rows[0.1][k].norm_ratio - 1) < 0.02 and rows[0.1][k].cosine > 0.999 for k in off)
    assert rows[0.3]["ppo"].norm_ratio < 0.5 and rows[1.0]["ppo"].cosine < 0.1 and rows[1.0]["gspo"].cosine < 0.1
    np.testing.assert_allclose(rows[1.0]["ppo, no clip"].expected, rows[1.0]["tis"].expected, atol=1e-15)
    assert 0.98 < rows[1.0]["ppo, no clip"].cosine < 0.99       # token ratios: close, not exact
    assert rows[1.0]["reinforce"].norm_ratio > 1.1 and rows[1.0]["reinforce"].cosine < 0.98
