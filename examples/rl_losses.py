"""RL fine-tuning losses side by side: GRPO, DAPO, Dr. GRPO and RLOO train a small policy.

A toy language model (an `scg.nn` MLP on the previous token, the position and the prompt)
answers each of P prompts with up to T tokens over a vocabulary of V; token 0 ends an answer.
The reward is verifiable: 1 if the answer says the prompt's token (one of tokens 1..V-1)
and is short (ended within 3 tokens, the end token included), else 0. Each step samples G answers per prompt from the current policy, then takes two
gradient steps on them (PPO-style reuse: the second is off-policy, the ratio and its clip
act), with the losses of `scg.rl` and Adam. The recipes:

- GRPO: PPO loss, GRPO advantages (group std), seq-mean-token-mean, k3 KL in the loss;
- DAPO: PPO loss with clip-higher (0.2, 0.28), GRPO advantages, token-mean;
- Dr. GRPO: PPO loss, group-mean advantages, seq-mean-token-sum-norm;
- RLOO: REINFORCE loss (no ratio), leave-one-out advantages, seq-mean-token-sum.

It prints the mean reward and answer length per recipe as training goes, and plots them.
docs/rl.md measures the bias of each choice exactly.

Run: python examples/rl_losses.py [--steps 150] [--out DIR]
"""

import argparse

import numpy as np

import scg

import _plots

RECIPES = {
    "GRPO": dict(kind="ppo", adv="grpo", agg="seq-mean-token-mean", clip=(0.2, 0.2), kl="k3"),
    "DAPO": dict(kind="ppo", adv="grpo", agg="token-mean", clip=(0.2, 0.28), kl=None),
    "Dr. GRPO": dict(kind="ppo", adv="dr_grpo", agg="seq-mean-token-sum-norm", clip=(0.2, 0.2), kl=None),
    "RLOO": dict(kind="reinforce", adv="rloo", agg="seq-mean-token-sum", clip=(0.2, 0.2), kl=None),
}
BETA = 0.04


class Task:
    """Prompts, features and the reward of the toy task."""

    def __init__(self, prompts, length, vocab, seed):
        self.P, self.T, self.V = prompts, length, vocab
        rng = np.random.default_rng(seed)
        self.target = rng.integers(1, vocab, prompts)      # the token each prompt asks for
        self.width = (vocab + 1) + length + (vocab - 1)

    def features(self, tokens, prompt):
        """(rows, T, width): previous token (0 = start), position, the prompt's token."""
        n = len(tokens)
        prev = np.concatenate([np.zeros((n, 1), int), tokens[:, :-1] + 1], axis=1)
        x = np.zeros((n, self.T, self.width))
        x[np.arange(n)[:, None], np.arange(self.T), prev] = 1.0
        x[:, np.arange(self.T), self.V + 1 + np.arange(self.T)] = 1.0
        x[np.arange(n), :, self.V + 1 + self.T + self.target[prompt] - 1] = 1.0
        return x

    def sample(self, params, group, rng):
        """G answers per prompt from the policy: tokens, mask, prompt of each row."""
        prompt = np.repeat(np.arange(self.P), group)
        tokens = np.zeros((len(prompt), self.T), int)
        for t in range(self.T):  # (the rows of step t only depend on the tokens before t)
            logits = scg.nn.mlp(params, self.features(tokens, prompt)[:, t], activation=np.tanh)
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            tokens[:, t] = (np.cumsum(p, -1) < rng.uniform(size=(len(p), 1))).sum(-1).clip(0, self.V - 1)
        is_eos = tokens == 0
        mask = (np.cumsum(is_eos, 1) - is_eos) == 0
        return tokens, mask, prompt

    def reward(self, tokens, mask, prompt):
        says = np.any((tokens == self.target[prompt][:, None]) & mask, axis=1)
        return 1.0 * (says & (mask.sum(1) <= 3))


def make_step(recipe, group):
    """scg.jit of the gradient of the recipe's loss."""
    r = RECIPES[recipe]

    def loss(params, x, tokens, mask, adv, logp_old, logp_ref):
        lp = scg.log_softmax(scg.nn.mlp(params, x, activation=np.tanh), axis=-1)
        logp = np.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]
        out = scg.rl.policy_loss(logp, logp_old, adv, mask, r["kind"], r["clip"], r["agg"])
        if r["kl"] is not None:
            out = out + BETA * scg.rl.kl_penalty(logp, logp_ref, mask, r["kl"], "loss", aggregate=r["agg"])
        return out

    return scg.jit(scg.grad(loss))


def token_logp(params, x, tokens):
    logits = scg.nn.mlp(params, x, activation=np.tanh)
    lp = logits - logits.max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    return np.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]


def train(recipe, task, steps, group, lr, seed):
    rng = np.random.default_rng(seed)
    params = scg.nn.init_mlp(seed, [task.width, 32, task.V], init="glorot")
    ref = params
    step = make_step(recipe, group)
    opt = scg.optim.Adam(lr)
    state = opt.init(params)
    curve = []
    for _ in range(steps):
        tokens, mask, prompt = task.sample(params, group, rng)
        rewards = task.reward(tokens, mask, prompt)
        curve.append((rewards.mean(), mask.sum(1).mean()))
        x = task.features(tokens, prompt)
        adv = scg.rl.advantages(rewards, group, RECIPES[recipe]["adv"])
        logp_old, logp_ref = token_logp(params, x, tokens), token_logp(ref, x, tokens)
        for _ in range(2):  # (the second update reuses the samples: off-policy)
            g = step(params, x, tokens, mask, adv, logp_old, logp_ref)
            params, state = opt.update(g, state, params)
    return np.array(curve)


def main(steps=150, prompts=16, group=8, length=6, vocab=8, lr=0.02, seed=0, out_dir=None, recipes=None):
    task = Task(prompts, length, vocab, seed)
    curves = {}
    print(f"{prompts} prompts x {group} answers of up to {length} tokens over {vocab}; reward 1 if a short answer "
          f"(<= 3 tokens) says the prompt's token; 2 updates per batch, Adam(lr={lr}), {steps} steps")
    print(f"{'recipe':10s} {'reward: first 10%':>18s} {'last 10%':>9s} {'length: first':>14s} {'last':>6s}")
    k = max(1, steps // 10)
    for recipe in recipes or RECIPES:
        c = curves[recipe] = train(recipe, task, steps, group, lr, seed)
        print(f"{recipe:10s} {c[:k, 0].mean():18.3f} {c[-k:, 0].mean():9.3f} {c[:k, 1].mean():14.2f} "
              f"{c[-k:, 1].mean():6.2f}")
    plt = _plots.pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for recipe, c in curves.items():
            axes[0].plot(c[:, 0], label=recipe)
            axes[1].plot(c[:, 1], label=recipe)
        axes[0].set_ylabel("mean reward of the batch")
        axes[1].set_ylabel("mean answer length (tokens)")
        for ax in axes:
            ax.set_xlabel("training step")
        axes[0].legend()
        fig.suptitle("RL fine-tuning losses on a verifiable reward")
        _plots.save(fig, "rl_losses.png", out_dir)
    return curves


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8, help="answers per prompt")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, metavar="DIR", help="folder for the picture (default examples/out/)")
    a = parser.parse_args()
    main(steps=a.steps, prompts=a.prompts, group=a.group, lr=a.lr, seed=a.seed, out_dir=a.out)
