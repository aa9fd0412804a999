"""GRPO on a token bandit: one gradient of 64 groups of 8 draws, scg.jit against PyTorch.

A softmax policy over V tokens for each of 64 prompts (a plate); each prompt's group is
the 8 draws of one call; the advantage is GRPO's (r - group mean) / (group std + eps).
The same estimator written by hand in PyTorch: sample the tokens, gather the rewards,
normalize per group, and backpropagate the score term. Both give the same gradient in
distribution (checked here: their means over many calls agree within standard errors).

Run: python benchmarks/grpo_bandit.py [--repeats 15] [--threads 1]
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import timing  # noqa: E402

P, V, G = 64, 16, 8
EPS = 1e-4


def problem():
    rng = np.random.default_rng(0)
    return rng.uniform(size=(P, V)), rng.normal(0.0, 0.5, size=(P, V))


def scg_step(rewards, scale="group"):
    import scg

    def model(logits):
        with scg.plate("prompts", P):
            token = scg.sample("token", scg.Categorical(logits=logits),
                               estimator=scg.Score(scg.baselines.GRPO(scale, eps=EPS)))
            return -np.sum(rewards * (token[..., None] == np.arange(V)), axis=-1)

    E = scg.expectation(model, n=G, seed=1)
    return scg.jit(scg.grad(E))


def torch_step(rewards):
    import torch
    r = torch.tensor(rewards)
    gen = torch.Generator().manual_seed(1)

    def step(logits_np):
        logits = torch.tensor(logits_np, requires_grad=True)
        dist = torch.distributions.Categorical(logits=logits)
        with torch.no_grad():
            u = torch.rand((G, P, V), generator=gen, dtype=torch.float64)
            token = torch.argmax(logits.detach() - torch.log(-torch.log(u)), dim=-1)  # Gumbel-max
            reward = torch.gather(r.expand(G, P, V), 2, token[..., None])[..., 0]
            cost = -reward
            adv = (cost - cost.mean(0, keepdim=True)) / (cost.std(0, keepdim=True) + EPS)
        loss = (adv * dist.log_prob(token)).mean(0).sum()
        loss.backward()
        return logits.grad.numpy()
    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--check-calls", type=int, default=400)
    args = parser.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    rewards, logits = problem()
    scg_grad, torch_grad = scg_step(rewards), torch_step(rewards)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(8):
            scg_grad(logits)
        if not scg_grad.stats["replays"]:
            raise RuntimeError(f"scg.jit did not replay: {scg_grad.explain()}")
        a = np.array([scg_grad(logits) for _ in range(args.check_calls)])
        b = np.array([torch_grad(logits) for _ in range(args.check_calls)])
    stderr = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    z = np.abs(a.mean(0) - b.mean(0)) / np.maximum(stderr, 1e-12)
    print(f"means agree: max |z| over {z.size} coordinates = {z.max():.2f} "
          f"({args.check_calls} calls each)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = timing.time_interleaved({"scg.jit": lambda: scg_grad(logits),
                                         "torch": lambda: torch_grad(logits)}, args.repeats)
    print(f"{P} groups of {G} draws over {V} tokens, per gradient (median of "
          f"{args.repeats} interleaved repeats):")
    print(f"  scg.jit {times['scg.jit'] * 1e6:8.1f} us")
    print(f"  torch   {times['torch'] * 1e6:8.1f} us")
    print(f"  scg.jit / torch = {times['scg.jit'] / times['torch']:.2f}")
    print(timing.command_line())


if __name__ == "__main__":
    main()
