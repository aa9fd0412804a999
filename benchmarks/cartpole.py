"""CartPole REINFORCE: scg (examples/cartpole.py, under scg.jit) against the same REINFORCE
written by hand in PyTorch.

Both: Gymnasium's CartPole-v1 equations in numpy (examples/cartpole.py `physics`), the
start state uniform in [-0.05, 0.05]^4 per episode, 8 episodes per update run side by side
until every one has ended (or 200 steps), the policy MLP 4 -> 16 -> 1 (relu) from the same
initial weights, the logit of pushing right, the score function of each action times its
advantage (the steps after it less the leave-one-out mean over the other 7 episodes),
Adam(lr), float64.

  scg.jit        examples/cartpole.py: the update (value_and_grad of the expectation with
                 n = 8, Adam) under scg.jit, the loop ended by `if scg.all(~alive): break`
  scg.jit fixed  the same model without the break: every update runs 200 steps, the ended
                 episodes masked (a loop of one length, which scg.jit replays)
  torch          eager PyTorch: nn.Sequential, torch.distributions.Bernoulli per step,
                 log-probabilities kept with the graph, the loop ended when every episode
                 has, surrogate, backward, torch.optim.Adam

Reported, for `--seeds` seeds (the weights and the episodes' randomness), the runs of each
system interleaved (scg.jit, torch, scg.jit fixed, then the reverse order for the next
seed): (a) the updates to reach a mean length of 200 (capped at --updates), (b) the time
per update over the whole run, the early short episodes included, and per step of the
loop (one step of the 8 episodes side by side); medians over the seeds. Then (c) the time
of one update at a fixed policy (the initial one: short episodes; a trained one: about 200
steps; Adam with lr 1e-12, so that the policy stays), systems alternating, median of
--repeats. Before these, (d): the gradients of scg, torch and numpy on the same episodes
(scg's; torch and numpy fed its start states and actions) agree to 1e-10.

Run:  python benchmarks/cartpole.py [--seeds 5] [--updates 150] [--repeats 15] [--lr 0.01]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import scg  # noqa: E402  (the working tree's scg, installed or not)
import cartpole as cp  # noqa: E402

N = cp.EPISODES


# ---------------------------------------------------------------- scg
def cartpole_fixed(params):
    """examples/cartpole.py's model without the break: always 200 steps, masked."""
    s = scg.sample("s0", scg.Uniform(np.full(4, -0.05), np.full(4, 0.05)))
    alive = True
    for t in range(cp.MAX_STEPS):
        with scg.mask(alive):
            a = scg.sample(f"a{t}", scg.Bernoulli(logits=cp.logit(params, s)),
                           estimator=scg.Score("loo"))
            scg.cost(f"r{t}", -1.0)
        s = cp.physics(s, a)
        alive = alive & ~cp.terminated(s)


class ScgRunner:
    def __init__(self, model, params, lr, seed):
        self.E = scg.expectation(model, n=N, seed=seed)
        vg = scg.value_and_grad(self.E)
        self.opt = opt = scg.optim.Adam(lr)

        @scg.jit
        def update(params, state):
            cost, g = vg(params)
            params, state = opt.update(g, state, params)
            return cost, params, state
        self.update = update
        self.params, self.state = params, opt.init(params)

    def step(self):
        cost, self.params, self.state = self.update(self.params, self.state)
        return -float(cost)


# ---------------------------------------------------------------- torch
def torch_net(params):
    import torch
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 1)).double()
    with torch.no_grad():
        for lin, layer in zip((net[0], net[2]), params):
            lin.weight.copy_(torch.from_numpy(layer["W"].T))
            lin.bias.copy_(torch.from_numpy(layer["b"]))
    return net


def torch_surrogate(logps, masks):
    """REINFORCE's surrogate from the log-probabilities (T tensors of (n,)) and the alive
    masks before each step: advantage = steps after t, less the other episodes' mean."""
    import torch
    M = np.stack(masks)                                   # (T, n)
    q = -(M[::-1].cumsum(0)[::-1] - M)
    adv = (N * q - q.sum(1, keepdims=True)) / (N - 1)
    return (torch.stack(logps) * torch.from_numpy(M * adv)).sum() / N, M


class TorchRunner:
    def __init__(self, params, lr, seed):
        import torch
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.net = torch_net(params)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=lr)

    def step(self):
        import torch
        s = self.rng.uniform(-0.05, 0.05, (N, 4))
        alive = np.ones(N, bool)
        logps, masks = [], []
        for _ in range(cp.MAX_STEPS):
            dist = torch.distributions.Bernoulli(logits=self.net(torch.from_numpy(s))[:, 0])
            a = dist.sample()
            logps.append(dist.log_prob(a))
            masks.append(alive.astype(float))
            s = cp.physics(s, a.numpy())
            alive = alive & ~cp.terminated(s)
            if not alive.any():
                break
        self.last_masks = masks
        loss, M = torch_surrogate(logps, masks)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(M.sum(0).mean())


def torch_gradient(params, starts, actions):
    """torch's gradient of the surrogate on given episodes (scg's actions fed in)."""
    import torch
    net = torch_net(params)
    s, alive = starts, np.ones(N, bool)
    logps, masks = [], []
    for t in range(actions.shape[1]):
        dist = torch.distributions.Bernoulli(logits=net(torch.from_numpy(np.array(s)))[:, 0])
        logps.append(dist.log_prob(torch.from_numpy(actions[:, t].astype(float))))
        masks.append(alive.astype(float))
        s = cp.physics(s, actions[:, t])
        alive = alive & ~cp.terminated(s)
    loss, _ = torch_surrogate(logps, masks)
    loss.backward()
    return [{"W": net[i].weight.grad.numpy().T, "b": net[i].bias.grad.numpy()} for i in (0, 2)]


# ---------------------------------------------------------------- runs
def make(name, params, lr, seed):
    if name == "scg.jit":
        return ScgRunner(cp.cartpole, params, lr, seed)
    if name == "scg.jit fixed":
        return ScgRunner(cartpole_fixed, params, lr, seed)
    return TorchRunner(params, lr, seed)


def train(name, seed, lr, cap):
    """Updates until the mean length reaches 200: (updates, seconds, loop steps)."""
    runner = make(name, scg.nn.init_mlp(seed, cp.SIZES), lr, seed)
    t0 = time.perf_counter()
    steps = 0
    for k in range(cap):
        length = runner.step()
        steps += _loop_steps(runner, name)
        if length >= cp.MAX_STEPS:
            break
    return k + 1, time.perf_counter() - t0, steps, length


def _loop_steps(runner, name):
    """Steps the update's loop ran (the longest episode; 200 for the fixed loop)."""
    if name == "scg.jit fixed":
        return cp.MAX_STEPS
    if name == "scg.jit":
        trace = runner.E.last_trace
        return sum(1 for s in trace.sites if s.startswith("a")) if trace is not None else 0
    return len(runner.last_masks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=150, help="cap of updates per run")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--systems", nargs="+", default=["scg.jit", "torch", "scg.jit fixed"])
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    print(f"CartPole REINFORCE, {N} episodes per update, Adam(lr={args.lr:g}), MLP "
          f"{' -> '.join(map(str, cp.SIZES))}, float64, torch {torch.__version__} with "
          f"{args.threads} thread(s)")

    # (d) the gradients on the same episodes
    worst = 0.0
    for seed in range(3):
        params = scg.nn.init_mlp(seed, cp.SIZES)
        E = scg.expectation(cp.cartpole, n=N, seed=seed)
        g = scg.grad(E)(params)
        starts, actions = cp.episodes(E)
        worst = max(worst, cp.max_difference(g, torch_gradient(params, starts, actions)),
                    cp.max_difference(g, cp.reinforce_by_hand(params, starts, actions)[0]))
    print(f"(d) gradient on the same episodes, 3 seeds: max |scg - torch|, |scg - numpy| = "
          f"{worst:.1e}")
    assert worst < 1e-10

    # (a), (b): whole runs to 200
    systems = args.systems
    runs = {name: [] for name in systems}
    print(f"\n(a), (b) runs to a mean length of 200 (cap {args.updates} updates)")
    print(f"{'seed':>5}{'system':>15}{'updates':>9}{'ms/update':>11}{'us/loop step':>15}")
    for seed in range(args.seeds):
        order = systems if seed % 2 == 0 else list(reversed(systems))
        for name in order:
            updates, seconds, steps, last = train(name, seed, args.lr, args.updates)
            per_steps = 1e6 * seconds / steps if steps else float("nan")
            runs[name].append((updates, seconds / updates, per_steps, last))
            print(f"{seed:>5}{name:>15}{updates:>9}{1000 * seconds / updates:>11.1f}"
                  f"{per_steps:>15.1f}" + ("" if last >= cp.MAX_STEPS else "  (cap)"))
    print("medians:")
    med = {}
    for name in systems:
        u = statistics.median(r[0] for r in runs[name])
        t = statistics.median(r[1] for r in runs[name])
        med[name] = t
        print(f"{'':>5}{name:>15}{u:>9.1f}{1000 * t:>11.1f}"
              f"{statistics.median(r[2] for r in runs[name]):>15.1f}")
    if "torch" in med:
        for name in systems:
            if name != "torch":
                print(f"   {name} / torch time per update (medians): "
                      f"{med[name] / med['torch']:.2f}")

    # (c) one update at a fixed policy
    trained = ScgRunner(cp.cartpole, scg.nn.init_mlp(0, cp.SIZES), args.lr, 0)
    for _ in range(args.updates):
        if trained.step() >= cp.MAX_STEPS:
            break
    policies = {"initial": scg.nn.init_mlp(0, cp.SIZES), "trained": trained.params}
    print(f"\n(c) one update at a fixed policy (lr 1e-12: the policy stays), median of "
          f"{args.repeats}, systems alternating")
    print(f"{'policy':>9}{'system':>15}{'ms/update':>11}{'mean length':>13}")
    for where, params in policies.items():
        runners = {name: make(name, params, 1e-12, 1) for name in systems}
        for r in runners.values():     # warm-up, and scg.jit's recordings
            for _ in range(6):
                r.step()
        times = {name: [] for name in systems}
        lengths = {name: [] for name in systems}
        for k in range(args.repeats):
            for name in (systems if k % 2 == 0 else list(reversed(systems))):
                t0 = time.perf_counter()
                lengths[name].append(runners[name].step())
                times[name].append(time.perf_counter() - t0)
        for name in systems:
            print(f"{where:>9}{name:>15}{1000 * statistics.median(times[name]):>11.1f}"
                  f"{np.mean(lengths[name]):>13.1f}")
        if "torch" in times:
            for name in systems:
                if name != "torch":
                    ratio = statistics.median(times[name]) / statistics.median(times["torch"])
                    print(f"{'':>9}   {name} / torch: {ratio:.2f}")
    return runs


if __name__ == "__main__":
    main()
