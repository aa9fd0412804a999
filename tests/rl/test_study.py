"""scg.rl.study against brute force written here: each group enumerated in a Python loop, its loss
written out by hand and differentiated with respect to the parameters, the target by
differentiating E[R] - beta KL summed over the sequences."""

import itertools

import numpy as np
import pytest

import scg

V, L, G = 2, 2, 2
rng = np.random.default_rng(3)
THETA = rng.normal(0.0, 0.8, (L, V + 1, V))
OLD = THETA + rng.normal(0.0, 0.4, THETA.shape)
REF = rng.normal(0.0, 0.8, THETA.shape)
BETA = 0.3


def policy(theta, prefix):
    t = prefix.shape[-1]
    prev = prefix[..., -1] + 1 if t else np.zeros(prefix.shape[:-1], int)
    return scg.log_softmax(theta[t][prev], axis=-1)


def reward(y):
    return 1.0 * (y[..., 0] == 1) + 0.5 * (y[..., -1] == 0) + 0.25 * y.sum(-1)


def seq_token_logp(theta, y):
    """Per-token log-probabilities of one sequence, in a loop."""
    out = []
    for t in range(L):
        prev = y[t - 1] + 1 if t else 0
        lse = np.log(np.sum(np.exp(theta[t][prev])))
        out.append(theta[t][prev][y[t]] - lse)
    return out


def ended(y, eos):
    """(mask, canonical) of one sequence."""
    if eos is None:
        return [True] * L, True
    m, seen = [], False
    for tok in y:
        m.append(not seen)
        seen = seen or tok == eos
    return m, all(mm or tok == eos for mm, tok in zip(m, y))


def val(x):
    return float(scg.stop_gradient(x))


def hand_adv(r, kind, eps=1e-4):
    r = np.array(r)
    if kind == "none":
        return r
    if kind == "rloo":
        return np.array([r[i] - np.mean(np.delete(r, i)) for i in range(len(r))])
    if kind == "dr_grpo":
        return r - r.mean()
    return (r - r.mean()) / (np.sqrt(np.sum((r - r.mean()) ** 2) / (len(r) - 1)) + eps)  # grpo


def hand_group_loss(theta, group, cfg, eos):
    """One group's loss, token by token, from the definitions."""
    low, high = cfg["clip"]
    lps = [seq_token_logp(theta, y) for y in group]
    olds = [[val(v) for v in seq_token_logp(OLD if cfg["off"] else THETA, y)] for y in group]
    refs = [[val(v) for v in seq_token_logp(REF, y)] for y in group]
    masks = [ended(y, eos)[0] for y in group]
    rewards = [float(reward(np.array(y))) for y in group]
    if cfg["kl_where"] == "reward":
        for i in range(G):
            d = [val(lps[i][t]) - refs[i][t] for t in range(L) if masks[i][t]]
            k = {"k1": d, "k2": [x * x / 2 for x in d], "k3": [np.exp(-x) - 1 + x for x in d]}[cfg["kl"]]
            rewards[i] -= BETA * sum(k)
    adv = hand_adv(rewards, cfg["adv"])
    n_tok = sum(sum(m) for m in masks)
    total = 0.0
    for i in range(G):
        n_i = sum(masks[i])
        log_seq = sum(val(lps[i][t]) - olds[i][t] for t in range(L) if masks[i][t]) / n_i
        for t in range(L):
            if not masks[i][t]:
                continue
            lp, A = lps[i][t], adv[i]
            r = np.exp(lp - olds[i][t])
            if cfg["loss"] == "ppo":
                tok = np.maximum(-A * r, -A * np.clip(r, 1 - low, 1 + high))
            elif cfg["loss"] == "gspo":
                s = np.exp(log_seq + lp - scg.stop_gradient(lp))
                tok = np.maximum(-A * s, -A * np.clip(s, 1 - low, 1 + high))
            elif cfg["loss"] == "cispo":
                tok = -A * float(np.clip(val(r), 1 - low, 1 + high)) * lp
            elif cfg["loss"] == "tis":
                tok = -A * min(val(r), 2.0) * lp
            else:
                tok = -A * lp
            if cfg["kl_where"] == "loss":
                d = lp - refs[i][t]
                tok = tok + BETA * {"k1": d, "k2": d * d / 2, "k3": np.exp(-d) - 1 + d}[cfg["kl"]]
            weight = {"token-mean": 1 / n_tok, "seq-mean-token-mean": 1 / (G * n_i),
                      "seq-mean-token-sum": 1 / G, "seq-mean-token-sum-norm": 1 / (G * L)}[cfg["agg"]]
            total = total + weight * tok
    return total


def seq_prob(theta, y, eos):
    m, canonical = ended(y, eos)
    if not canonical:
        return 0.0
    lp = seq_token_logp(theta, y)
    return np.exp(sum(lp[t] for t in range(L) if m[t]))


def exact_target(eos):
    seqs = list(itertools.product(range(V), repeat=L))

    def objective(theta):
        total = 0.0
        for y in seqs:
            if not ended(y, eos)[1]:
                continue
            p = seq_prob(theta, y, eos)
            log_ratio = np.log(p) - np.log(seq_prob(REF, y, eos))
            total = total + p * float(reward(np.array(y))) - BETA * p * log_ratio
        return total
    return scg.grad(objective)(THETA)


CASES = {
    "ppo grpo token-mean clip-higher, off-policy": dict(loss="ppo", adv="grpo", agg="token-mean",
                                                        clip=(0.2, 0.28), off=True, kl=None, kl_where=None),
    "reinforce rloo sum k1 reward": dict(loss="reinforce", adv="rloo", agg="seq-mean-token-sum",
                                         clip=(0.2, 0.2), off=False, kl="k1", kl_where="reward"),
    "gspo dr_grpo seq-mean-token-mean off-policy": dict(loss="gspo", adv="dr_grpo", agg="seq-mean-token-mean",
                                                        clip=(0.1, 0.1), off=True, kl=None, kl_where=None),
    "cispo rloo sum-norm k3 loss off-policy": dict(loss="cispo", adv="rloo", agg="seq-mean-token-sum-norm",
                                                   clip=(0.1, 0.2), off=True, kl="k3", kl_where="loss"),
    "tis none sum k2 loss off-policy": dict(loss="tis", adv="none", agg="seq-mean-token-sum",
                                            clip=(0.2, 0.2), off=True, kl="k2", kl_where="loss"),
    "ppo grpo seq-mean-token-mean k3 reward": dict(loss="ppo", adv="grpo", agg="seq-mean-token-mean",
                                                   clip=(0.2, 0.2), off=False, kl="k3", kl_where="reward"),
}


def to_config(c):
    return scg.rl.Config(loss=c["loss"], advantages=c["adv"], aggregate=c["agg"], kl=c["kl"],
                         kl_where=c["kl_where"], clip=c["clip"])


@pytest.mark.parametrize("eos", [None, 0])
@pytest.mark.parametrize("label", list(CASES))
def test_study_equals_brute_force(label, eos):
    cfg = CASES[label]
    res = scg.rl.study(policy, reward, {label: to_config(cfg)}, params=THETA, ref_params=REF, vocab=V,
                       length=L, group_size=G, beta=BETA, eos=eos, old_params=OLD if cfg["off"] else None)
    exact = exact_target(eos)
    np.testing.assert_allclose(res.exact, exact, rtol=1e-10, atol=1e-13)

    sampler = OLD if cfg["off"] else THETA
    seqs = [y for y in itertools.product(range(V), repeat=L) if ended(y, eos)[1]]
    updates, weights = [], []
    for group in itertools.product(seqs, repeat=G):
        weights.append(np.prod([val(seq_prob(sampler, y, eos)) for y in group]))
        updates.append(-scg.grad(lambda th: hand_group_loss(th, group, cfg, eos))(THETA))
    weights, updates = np.array(weights), np.array(updates)
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    mean = np.tensordot(weights, updates, axes=1)
    row = res[label]
    np.testing.assert_allclose(row.expected, mean, rtol=1e-10, atol=1e-13)
    variance = np.sum(weights * np.sum((updates - mean) ** 2, axis=(1, 2, 3)))
    assert row.variance == pytest.approx(variance, rel=1e-9, abs=1e-14)
    assert row.norm_ratio == pytest.approx(np.linalg.norm(mean) / np.linalg.norm(exact), rel=1e-10)
    assert row.cosine == pytest.approx(np.sum(mean * exact) / np.linalg.norm(mean) / np.linalg.norm(exact),
                                       rel=1e-10)
    assert row.max_error == pytest.approx(np.max(np.abs(mean - exact)), rel=1e-9, abs=1e-14)


def test_table_and_plot(tmp_path):
    res = scg.rl.study(policy, reward, {"rloo": {"advantages": "rloo"}, "grpo": {"advantages": "grpo"}},
                       params=THETA, vocab=V, length=L, group_size=G)
    text = res.table()
    assert "rloo" in text and "grpo" in text and "cosine" in text and "1.0000" in text
    assert list(res) == ["rloo", "grpo"] and len(res) == 2
    pytest.importorskip("matplotlib")
    path = res.plot(tmp_path / "study.png")
    assert path.exists() and path.stat().st_size > 1000


@pytest.mark.parametrize("kwargs, words", [
    (dict(vocab=0), ["vocab", "positive integer"]),
    (dict(group_size=40), ["max_groups", "smaller"]),
    (dict(beta=0.1), ["ref_params"]),
    (dict(eos=5), ["eos", "[0, 2)"]),
])
def test_study_errors(kwargs, words):
    args = dict(params=THETA, vocab=V, length=L, group_size=G) | kwargs
    with pytest.raises(ValueError) as info:
        scg.rl.study(policy, reward, {"a": scg.rl.Config()}, **args)
    for w in words:
        assert w in str(info.value)


def test_study_checks_the_policy_and_reward():
    with pytest.raises(ValueError, match="normalized"):
        scg.rl.study(lambda th, p: policy(th, p) + 0.1, reward, {"a": scg.rl.Config()}, params=THETA,
                     vocab=V, length=L, group_size=G)
    with pytest.raises(ValueError, match="one reward per sequence"):
        scg.rl.study(policy, lambda y: y * 1.0, {"a": scg.rl.Config()}, params=THETA, vocab=V, length=L,
                     group_size=G)
    with pytest.raises(ValueError, match="unknown fields"):
        scg.rl.study(policy, reward, {"a": {"los": "ppo"}}, params=THETA, vocab=V, length=L, group_size=G)
