"""RL fine-tuning losses on a toy sequence task: one training step per loss, scg.jit against PyTorch.

64 prompts x 8 completions of 8 tokens over a vocabulary of 16 (token 0 ends a completion),
sampled from an older copy of the policy (as in a second PPO epoch, so the ratios differ
from 1 and the clipping acts). The policy is an `scg.nn` MLP (tanh, 64 hidden units) on the
previous token, the position and a prompt embedding. The reward is verifiable: the number
of times the completion says the prompt's token, capped at 2, over 2. Each configuration
(GRPO, DAPO, Dr. GRPO, GSPO, CISPO, TIS, REINFORCE with RLOO) computes the advantages, the
loss of `scg.rl` and its gradient with respect to the parameters under `scg.jit`; the same
written by hand in PyTorch (float64). The gradients on the same samples must agree to
1e-10; the time per step is the median over interleaved repeats.

Run: python benchmarks/rl_losses.py [--repeats 15] [--threads 1]
"""

import argparse
import os
import sys
import warnings

if __name__ == "__main__":
    # numpy's BLAS on one thread, as torch's (--threads): on a shared 2-core machine OpenBLAS's
    # threads make a (4096, 33) x (33, 64) product up to 20x slower; set the variable to change it
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# (a normalized path: scg.jit recognizes scg's own code by its file's path)
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..")))
sys.path.insert(0, HERE)
import timing  # noqa: E402

P, G, T, V, H, EMB = 64, 8, 8, 16, 64, 8
B = P * G
EOS = 0
BETA = 0.04

# label: (loss kind, advantages, aggregate, clip, KL estimator or None, KL placement)
CONFIGS = {
    "GRPO": ("ppo", "grpo", "seq-mean-token-mean", (0.2, 0.2), "k3", "loss"),
    "DAPO": ("ppo", "grpo", "token-mean", (0.2, 0.28), None, None),
    "Dr. GRPO": ("ppo", "dr_grpo", "seq-mean-token-sum-norm", (0.2, 0.2), None, None),
    "GSPO": ("gspo", "grpo", "seq-mean-token-mean", (3e-4, 4e-4), None, None),
    "CISPO": ("cispo", "grpo", "token-mean", (0.2, 0.28), None, None),
    "TIS": ("tis", "rloo", "token-mean", (0.2, 0.2), None, None),
    "REINFORCE + RLOO, k1 in reward": ("reinforce", "rloo", "seq-mean-token-sum", (0.2, 0.2), "k1", "reward"),
}


def features(tokens, prompt_emb):
    """(B, T, V + 1 + T + EMB): the previous token (0 = start), the position, the prompt."""
    prev = np.concatenate([np.zeros((B, 1), int), tokens[:, :-1] + 1], axis=1)
    x = np.zeros((B, T, V + 1 + T + EMB))
    x[np.arange(B)[:, None], np.arange(T)[None, :], prev] = 1.0
    x[:, np.arange(T), V + 1 + np.arange(T)] = 1.0
    x[:, :, V + 1 + T:] = np.repeat(prompt_emb, G, axis=0)[:, None, :]
    return x


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_policy(params, x):
    h = np.tanh(x @ params[0]["W"] + params[0]["b"])
    return np_log_softmax(h @ params[1]["W"] + params[1]["b"])


def problem(seed=0):
    """Parameters (current, old, reference), and a batch sampled from the old policy."""
    import scg
    rng = np.random.default_rng(seed)
    params = scg.nn.init_mlp(rng, [V + 1 + T + EMB, H, V], init="glorot")
    old = [{k: v + rng.normal(0.0, 0.05, v.shape) for k, v in layer.items()} for layer in params]
    ref = [{k: v + rng.normal(0.0, 0.05, v.shape) for k, v in layer.items()} for layer in params]
    prompt_emb = rng.normal(size=(P, EMB))
    target = np.repeat(rng.integers(1, V, P), G)
    tokens = np.zeros((B, T), int)
    for t in range(T):  # autoregressive sampling from the old policy (the rows of step t only)
        lp = np_policy(old, features(tokens, prompt_emb)[:, t])
        tokens[:, t] = (np.cumsum(np.exp(lp), -1) < rng.uniform(size=(B, 1))).sum(-1).clip(0, V - 1)
    is_eos = tokens == EOS
    mask = (np.cumsum(is_eos, 1) - is_eos) == 0  # (up to and including the first eos)
    reward = np.minimum(((tokens == target[:, None]) & mask).sum(1), 2) / 2.0
    x = features(tokens, prompt_emb)
    take = lambda lp: np.take_along_axis(lp, tokens[..., None], -1)[..., 0]  # noqa: E731
    batch = dict(x=x, tokens=tokens, mask=mask, reward=reward,
                 logp_old=take(np_policy(old, x)), logp_ref=take(np_policy(ref, x)))
    return params, batch


def scg_step(config):
    import scg
    kind, adv_kind, agg, clip, kl, where = config

    def loss(params, x, tokens, mask, reward, logp_old, logp_ref):
        lp = scg.log_softmax(scg.nn.mlp(params, x, activation=np.tanh), axis=-1)
        logp = np.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]
        if where == "reward":
            reward = reward - BETA * scg.rl.kl_penalty(logp, logp_ref, mask, kl, "reward")
        adv = scg.rl.advantages(reward, G, adv_kind)
        out = scg.rl.policy_loss(logp, logp_old, adv, mask, kind, clip, agg)
        if where == "loss":
            out = out + BETA * scg.rl.kl_penalty(logp, logp_ref, mask, kl, "loss", aggregate=agg)
        return out

    step = scg.jit(scg.grad(loss))

    def run(params, b):
        return step(params, b["x"], b["tokens"], b["mask"], b["reward"], b["logp_old"], b["logp_ref"])
    run.jitted = step
    return run


def torch_step(config):
    """The same step written by hand in PyTorch, float64."""
    import torch
    kind, adv_kind, agg, (low, high), kl, where = config
    eps = 1e-4

    def group_stats(r):
        g = r.view(P, G)
        return g.mean(1, keepdim=True), g.std(1, keepdim=True), g

    def advantages(r):
        mean, std, g = group_stats(r)
        if adv_kind == "grpo":
            return ((g - mean) / (std + eps)).reshape(B)
        if adv_kind == "dr_grpo":
            return (g - mean).reshape(B)
        return ((g - mean) * G / (G - 1)).reshape(B)  # rloo

    def kl_value(logp, logp_ref):
        d = logp - logp_ref
        return {"k1": d, "k2": 0.5 * d * d, "k3": torch.exp(-d) - 1 + d}[kl]

    def aggregate(mat, m):
        per_seq = (mat * m).sum(1)
        if agg == "token-mean":
            return per_seq.sum() / m.sum()
        if agg == "seq-mean-token-mean":
            return (per_seq / m.sum(1).clamp(min=1)).mean()
        if agg == "seq-mean-token-sum":
            return per_seq.mean()
        return per_seq.mean() / T

    def step(params, b):
        ps = [{k: torch.tensor(v, requires_grad=True) for k, v in layer.items()} for layer in params]
        x, tokens = torch.from_numpy(b["x"]), torch.from_numpy(b["tokens"])
        m = torch.from_numpy(b["mask"]).double()
        logp_old, logp_ref = torch.from_numpy(b["logp_old"]), torch.from_numpy(b["logp_ref"])
        h = torch.tanh(x @ ps[0]["W"] + ps[0]["b"])
        lp = torch.log_softmax(h @ ps[1]["W"] + ps[1]["b"], -1)
        logp = lp.gather(-1, tokens[..., None])[..., 0]
        reward = torch.from_numpy(b["reward"])
        with torch.no_grad():
            if where == "reward":
                reward = reward - BETA * (kl_value(logp, logp_ref) * m).sum(1)
            A = advantages(reward)[:, None]
        if kind == "reinforce":
            mat = -A * logp
        elif kind in ("ppo", "gspo"):
            if kind == "ppo":
                ratio = torch.exp(logp - logp_old)
            else:
                log_s = ((logp - logp_old) * m).sum(1) / m.sum(1).clamp(min=1)
                ratio = torch.exp(log_s.detach()[:, None] + logp - logp.detach())
            mat = torch.maximum(-A * ratio, -A * torch.clamp(ratio, 1 - low, 1 + high))
        elif kind == "cispo":
            mat = -A * torch.clamp(torch.exp(logp - logp_old), 1 - low, 1 + high).detach() * logp
        else:
            mat = -A * torch.clamp(torch.exp(logp - logp_old), max=2.0).detach() * logp
        loss = aggregate(mat, m)
        if where == "loss":
            loss = loss + BETA * aggregate(kl_value(logp, logp_ref), m)
        loss.backward()
        return [{k: v.grad.numpy() for k, v in layer.items()} for layer in ps]

    return step


def max_difference(a, b):
    return max(float(np.max(np.abs(la[k] - lb[k]))) for la, lb in zip(a, b) for k in la)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads (default 1)")
    parser.add_argument("--only", default=None, help="comma-separated labels of CONFIGS to run")
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    params, batch = problem()
    print(f"{P} prompts x {G} completions of {T} tokens over {V} (mean length "
          f"{batch['mask'].sum(1).mean():.2f}), MLP {V + 1 + T + EMB} -> {H} -> {V}; "
          f"mean reward {batch['reward'].mean():.3f}")
    labels = list(CONFIGS) if args.only is None else args.only.split(",")
    rows = []
    for label in labels:
        s, t = scg_step(CONFIGS[label]), torch_step(CONFIGS[label])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                gs = s(params, batch)
        if not s.jitted.stats["replays"]:
            raise RuntimeError(f"{label}: scg.jit did not replay: {s.jitted.explain()}")
        gt = t(params, batch)
        diff = max_difference(gs, gt)
        scale = max(float(np.max(np.abs(layer[k]))) for layer in gt for k in layer)
        if diff > 1e-10:
            raise AssertionError(f"{label}: scg and torch differ by {diff:.3g} (largest coordinate {scale:.3g})")
        times = timing.time_interleaved({"scg.jit": lambda: s(params, batch),
                                         "torch": lambda: t(params, batch)}, args.repeats)
        rows.append((label, times["scg.jit"], times["torch"], diff, scale))
        print(f"  {label:32s} scg.jit {times['scg.jit'] * 1e3:7.3f} ms  torch {times['torch'] * 1e3:7.3f} ms"
              f"  scg.jit / torch {times['scg.jit'] / times['torch']:.2f}  max |diff| {diff:.1e}"
              f" (largest coordinate {scale:.2g})", flush=True)
    ratios = [r[1] / r[2] for r in rows]
    print(f"scg.jit / torch: median {np.median(ratios):.2f}, range {min(ratios):.2f} to {max(ratios):.2f} "
          f"(median of {args.repeats} interleaved repeats per configuration)")
    print(timing.command_line())
    return rows


if __name__ == "__main__":
    main()
