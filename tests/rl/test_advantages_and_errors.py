"""Advantages against loops over groups; bad input raises an error naming the argument."""

import numpy as np
import pytest

import scg

R = np.array([1.0, 0.0, 0.5, 2.0, 3.0, 3.0, -1.0, 4.0, 0.5])


def loop(r, size, kind, eps=1e-4):
    out = np.zeros_like(r)
    groups = [list(range(k, k + size)) for k in range(0, len(r), size)]
    for g in groups:
        x = r[g]
        for j, i in enumerate(g):
            others = np.delete(x, j)
            out[i] = {"dr_grpo": r[i] - x.mean(), "rloo": r[i] - others.mean(),
                      "grpo": (r[i] - x.mean()) / (np.sqrt(np.sum((x - x.mean()) ** 2) / (len(x) - 1)) + eps),
                      "reinforce++_baseline": r[i] - x.mean()}[kind]
    if kind == "reinforce++_baseline":
        out = (out - out.mean()) / (np.sqrt(np.sum((out - out.mean()) ** 2) / (len(r) - 1)) + eps)
    return out


@pytest.mark.parametrize("kind", ["grpo", "dr_grpo", "rloo", "reinforce++_baseline"])
def test_group_advantages_by_hand(kind):
    np.testing.assert_allclose(scg.rl.advantages(R, 3, kind), loop(R, 3, kind), rtol=1e-13, atol=1e-15)
    # the same groups named by prompt id, in any order
    ids = np.array([7, 7, 7, 2, 2, 2, 5, 5, 5])
    perm = np.random.default_rng(0).permutation(9)
    np.testing.assert_allclose(scg.rl.advantages(R[perm], ids[perm], kind), loop(R, 3, kind)[perm], rtol=1e-13)
    # leading axes: each row is a batch
    np.testing.assert_allclose(scg.rl.advantages(np.stack([R, 2 * R]), 3, kind)[1], loop(2 * R, 3, kind),
                               rtol=1e-13, atol=1e-15)


def test_batch_advantages_by_hand():
    white = (R - R.mean()) / (np.std(R, ddof=1) + 1e-4)
    np.testing.assert_allclose(scg.rl.advantages(R, 3, "reinforce++"), white, rtol=1e-13)
    np.testing.assert_allclose(scg.rl.advantages(R, 3, "none"), R)
    # a group whose rewards are equal gets 0 (its std is 0, eps keeps it finite)
    assert np.all(scg.rl.advantages(np.array([1.0, 1.0, 0.0, 1.0]), 2, "grpo")[:2] == 0)


B, T = 3, 4
LOGP, MASK, ADV = np.log(np.full((B, T), 0.3)), np.ones((B, T), bool), np.ones(B)


@pytest.mark.parametrize("call, error, words", [
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK, "ppo2"), ValueError, ["kind", "'ppo2'", "'gspo'"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK, aggregate="mean"), ValueError, ["aggregate", "'token-mean'"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK[:, :2]), ValueError, ["mask", "shape", "(3, 2)"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK * 2), ValueError, ["mask", "0 and 1", "boolean"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK.astype(str)), TypeError, ["mask", "dtype"]),
    (lambda: scg.rl.policy_loss(LOGP, None, np.ones(4), MASK), ValueError, ["adv", "(4,)", "(3,)"]),
    (lambda: scg.rl.policy_loss(LOGP[0], None, ADV, MASK), ValueError, ["logp", "(batch, tokens)"]),
    (lambda: scg.rl.policy_loss(LOGP, LOGP[:, :2], ADV, MASK), ValueError, ["logp_old", "shape"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK, clip=0.2), ValueError, ["clip", "pair"]),
    (lambda: scg.rl.policy_loss(LOGP, None, ADV, MASK, clip=(1.2, 0.2)), ValueError, ["clip", "low"]),
    (lambda: scg.rl.kl_penalty(LOGP, LOGP, MASK, "k4"), ValueError, ["estimator", "'k4'", "'k3'"]),
    (lambda: scg.rl.kl_penalty(LOGP, LOGP, MASK, "k1", "advantage"), ValueError, ["where", "'reward'"]),
    (lambda: scg.rl.kl_penalty(LOGP, LOGP[:2], MASK), ValueError, ["logp_ref", "shape"]),
    (lambda: scg.rl.advantages(np.ones(6), 3, "gae"), ValueError, ["kind", "'gae'", "'rloo'"]),
    (lambda: scg.rl.advantages(np.ones(6), 4, "rloo"), ValueError, ["groups", "divides"]),
    (lambda: scg.rl.advantages(np.ones(6), np.zeros(5), "rloo"), ValueError, ["groups", "(5,)", "(6,)"]),
    (lambda: scg.rl.advantages(np.ones(6), 1, "rloo"), ValueError, ["at least 2", "rloo"]),
    (lambda: scg.rl.advantages(np.array([1.0, np.nan]), 2, "rloo"), ValueError, ["rewards", "nan"]),
    (lambda: scg.rl.aggregate(LOGP, MASK, "seq-mean-token-sum-norm", norm=0), ValueError, ["norm", "positive"]),
    (lambda: scg.rl.Config(loss="ppo", kl="k1"), ValueError, ["kl_where", "together"]),
    (lambda: scg.rl.Config(advantages="gae"), ValueError, ["advantages", "'gae'"]),
])
def test_bad_input_says_what_to_do(call, error, words):
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_a_traced_mask_is_refused():
    with pytest.raises(TypeError, match="mask must be a plain boolean"):
        scg.grad(lambda lp: scg.rl.policy_loss(lp, None, ADV, lp * 0.0 + 1.0))(LOGP)


def test_scg_rl_is_exported():
    import scg as top
    assert top.rl.policy_loss is scg.rl.policy_loss and "rl" in top.__all__
    for name in top.rl.__all__:
        assert getattr(top.rl, name).__doc__.strip()


def test_docstring_examples_run():
    import doctest
    import sys
    for name in ("losses", "kl", "advantages", "study"):
        module = sys.modules["scg.rl." + name]
        result = doctest.testmod(module, extraglobs={"np": np, "scg": scg}, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, name
