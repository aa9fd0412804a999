"""The GRPO family on a token bandit: RLOO against GRPO's normalizations, by their bias.

A softmax policy picks one of V tokens for each of P prompts (a plate); each prompt's
group is the G = 8 draws of one expectation call, and its reward is a fixed table. The
exact gradient of the expected cost (minus the reward) is known in closed form. For each
estimator, scg.compare runs many groups (one chunk of G draws per call: the group) and
reports the mean estimate against the exact gradient:

- RLOO (scg.Score("loo")): unbiased.
- GRPO, scale="group": (r - group mean) / (group std + eps). Biased in size and direction:
  each prompt's gradient is divided by its own group's spread, so prompts whose rewards
  vary little get large steps.
- GRPO, scale="batch": one std over all prompts and draws. Biased in size, less in
  direction.
- Dr. GRPO, scale=None: (r - group mean), exactly (G - 1) / G times the gradient: the
  direction is right.

The table gives the relative size of the mean estimate (|mean| / |exact|), its cosine with
the exact gradient, and the largest bias in standard errors.

Run: python examples/grpo_bandit.py     (writes examples/out/grpo_bandit.png)
"""

import warnings

import numpy as np

import scg

import _plots

V, P, G = 6, 16, 8  # tokens, prompts, draws per group


def problem(seed=0):
    """Rewards (P, V) and the policy's logits (P, V)."""
    rng = np.random.default_rng(seed)
    rewards = rng.uniform(0.0, 1.0, size=(P, V))
    rewards[: P // 2] *= 0.1  # (half the prompts have rewards that barely vary)
    logits = rng.normal(0.0, 0.5, size=(P, V))
    return rewards, logits


def model(logits, rewards):
    with scg.plate("prompts", P):
        token = scg.sample("token", scg.Categorical(logits=logits))
        chosen = token[..., None] == np.arange(V)  # (one-hot of the token, per prompt)
        return -np.sum(rewards * chosen, axis=-1)


def exact_gradient(logits, rewards):
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    cost = -rewards
    return p * (cost - np.sum(p * cost, axis=1, keepdims=True))


ESTIMATORS = {
    "RLOO": scg.Score("loo"),
    "GRPO (group std)": scg.Score(scg.baselines.GRPO("group")),
    "GRPO (batch std)": scg.Score(scg.baselines.GRPO("batch")),
    "Dr. GRPO (no std)": scg.Score(scg.baselines.GRPO(None)),
}


def main(groups=4000, out_dir=None, seed=0):
    rewards, logits = problem(seed)
    exact = exact_gradient(logits, rewards)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)  # (knowingly biased: measured here)
        cmp = scg.compare(model, logits, rewards, estimators=ESTIMATORS, n=G * groups,
                          chunk=G, seed=seed, reference=exact)
    out = {}
    print(f"{P} prompts x {V} tokens, groups of {G} draws, {groups} groups per estimator\n")
    print(f"{'estimator':20s} {'|mean| / |exact|':>17s} {'cosine':>8s} {'max |z|':>9s}")
    for label in ESTIMATORS:
        row = cmp[label]
        size = float(np.linalg.norm(row.mean) / np.linalg.norm(exact))
        cosine = float(np.sum(row.mean * exact) /
                       (np.linalg.norm(row.mean) * np.linalg.norm(exact)))
        z = float(np.max(np.abs(row.z)))
        out[label] = {"size": size, "cosine": cosine, "max_z": z,
                      "variance": float(np.sum(row.var))}
        print(f"{label:20s} {size:17.3f} {cosine:8.4f} {z:9.1f}")
    print(f"\nDr. GRPO's size is (G - 1) / G = {(G - 1) / G:.3f} of the gradient; RLOO's 1.")
    plt = _plots.pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        labels = list(ESTIMATORS)
        axes[0].bar(range(len(labels)), [out[k]["size"] for k in labels], color="C0")
        axes[0].axhline(1.0, color="k", lw=0.8)
        axes[0].set_ylabel("|mean estimate| / |exact gradient|")
        axes[1].bar(range(len(labels)), [out[k]["cosine"] for k in labels], color="C1")
        axes[1].set_ylim(min(0.9, min(out[k]["cosine"] for k in labels) - 0.02), 1.005)
        axes[1].set_ylabel("cosine with the exact gradient")
        for ax in axes:
            ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
            ax.set_xlabel("estimator")
        fig.suptitle(f"Token bandit: {P} prompts, groups of {G}")
        _plots.save(fig, "grpo_bandit.png", out_dir)
    return out


if __name__ == "__main__":
    _plots.run(main)
