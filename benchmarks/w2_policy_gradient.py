"""W2: the policy-gradient training loop, scg against the same program in PyTorch, in one run.

The program of examples/policy_gradient.py: a Gaussian policy whose (mu, std) is
softplus(MLP 1 -> 20 -> 30 -> 2 of the constant state 1); the action a ~ Normal(mu, std),
the cost (3 - a)^2; score-function gradient with a moving-average baseline (decay 0.9,
updated after each step, so it never includes the current draws); Adam(lr=1e-3).
One step = forward, gradient, Adam update. Batch B = draws of a per step.

  scg      scg.value_and_grad of an expectation with n = B, then scg.optim.Adam
  scg.jit  the same step (gradient and Adam update) under scg.jit: recorded on its first
           calls, replayed after (the recording time is printed apart)
  torch    eager PyTorch, float64, nn.Sequential, torch.distributions.Normal, sample((B,)),
           surrogate -((r - b) * log_prob).mean(), backward, torch.optim.Adam
  jax.jit  JAX with the whole step jitted (sampling, surrogate, gradient, Adam, baseline);
           its compile time is printed apart (skipped if JAX is not installed)

All in float64. torch runs with torch.set_num_threads(--threads, default 1; scg is
single-threaded). The systems are interleaved (scg, torch, torch, scg, ...) in one
process; each repeat runs `--steps` steps from the same initial weights, and the figure
is the median over `--repeats` of steps per second.

Run:  python benchmarks/w2_policy_gradient.py [--steps 2000] [--repeats 5] [--batch 1 256] [--no-jax]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import scg  # noqa: E402  (the working tree's scg, installed or not)

SIZES = [1, 20, 30, 2]
TARGET, LR, DECAY = 3.0, 1e-3, 0.9


# ---------------------------------------------------------------- scg
def scg_model():
    """The policy's model (a new estimator object, hence a new baseline, per runner)."""
    state_x = np.ones(1)
    est = scg.Score(scg.baselines.MovingAverage(DECAY))

    def model(params):
        mu, std = scg.nn.mlp(params, state_x, final=scg.softplus)
        a = scg.sample("a", scg.Normal(mu, std), estimator=est)
        return (TARGET - a) ** 2
    return model, state_x


def scg_runner(batch, steps, init):
    model, state_x = scg_model()

    def run(seed, steps=steps):
        E = scg.expectation(model, n=batch, seed=seed)
        step = scg.value_and_grad(E)
        opt = scg.optim.Adam(LR)
        params = init
        state = opt.init(params)
        t0 = time.perf_counter()
        for _ in range(steps):
            _, g = step(params)
            params, state = opt.update(g, state, params)
        elapsed = time.perf_counter() - t0
        return elapsed, float(scg.nn.mlp(params, state_x, final=scg.softplus)[0])
    return run


def scg_jit_runner(batch, steps, init):
    """The scg program with the whole step (gradient and Adam) under scg.jit. The first
    calls record it (`record_s`: the time of the calls before the first replay)."""
    model, state_x = scg_model()

    def make(seed):
        vg = scg.value_and_grad(scg.expectation(model, n=batch, seed=seed))
        opt = scg.optim.Adam(LR)

        @scg.jit
        def step(params, state):
            _, g = vg(params)
            return opt.update(g, state, params)
        return step, opt.init(init)

    def run(seed, steps=steps):
        step, state = make(seed)
        params = init
        t0 = time.perf_counter()
        for _ in range(steps):
            params, state = step(params, state)
        elapsed = time.perf_counter() - t0
        if step.stats["replays"] < steps - 3:
            raise RuntimeError(f"scg.jit did not replay: {step.explain()}")
        return elapsed, float(scg.nn.mlp(params, state_x, final=scg.softplus)[0])

    step, state = make(0)
    params = init
    t0 = time.perf_counter()
    while step.stats["replays"] == 0 and step.stats["calls"] < 10:
        params, state = step(params, state)
    run.record_s = time.perf_counter() - t0
    return run


# ---------------------------------------------------------------- torch
def torch_runner(batch, steps, init):
    import torch
    from torch.distributions import Normal

    def run(seed, steps=steps):
        torch.manual_seed(seed)
        layers = []
        for k, layer in enumerate(init):
            lin = torch.nn.Linear(*layer["W"].shape).double()
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(layer["W"].T))
                lin.bias.copy_(torch.from_numpy(layer["b"]))
            layers += [lin, torch.nn.ReLU()] if k < len(init) - 1 else [lin, torch.nn.Softplus()]
        net = torch.nn.Sequential(*layers)
        opt = torch.optim.Adam(net.parameters(), lr=LR)
        x = torch.ones(1, dtype=torch.float64)
        avg, count = 0.0, 0
        t0 = time.perf_counter()
        for _ in range(steps):
            mu, std = net(x)
            dist = Normal(mu, std)
            a = dist.sample((batch,))
            cost = (TARGET - a) ** 2
            b = avg / (1.0 - DECAY ** count) if count else 0.0
            loss = ((cost - b) * dist.log_prob(a)).mean()   # the score-function surrogate
            opt.zero_grad()
            loss.backward()
            opt.step()
            avg = DECAY * avg + (1.0 - DECAY) * cost.mean().item()
            count += 1
        elapsed = time.perf_counter() - t0
        return elapsed, float(net(x)[0].detach())
    return run


# ---------------------------------------------------------------- JAX
def jax_runner(batch, steps, init):
    """The same step in JAX, jitted whole (policy, sampling, surrogate, gradient, Adam and
    the baseline's update); float64. Its compile time is measured apart (`compile_s`)."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x = jnp.ones(1)

    def policy(params):
        h = x
        for k, layer in enumerate(params):
            h = h @ layer["W"] + layer["b"]
            h = jax.nn.relu(h) if k < len(params) - 1 else jax.nn.softplus(h)
        return h[0], h[1]

    def surrogate(params, a, b):
        mu, std = policy(params)
        cost = (TARGET - a) ** 2
        logp = -0.5 * ((a - mu) / std) ** 2 - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi)
        return jnp.mean(jax.lax.stop_gradient(cost - b) * logp), cost

    @jax.jit
    def step(params, opt_state, base, key):
        key, sub = jax.random.split(key)
        mu, std = policy(params)
        a = jax.lax.stop_gradient(mu + std * jax.random.normal(sub, (batch,)))
        avg, count = base
        b = jnp.where(count > 0, avg / (1.0 - DECAY ** count), 0.0)
        (_, cost), g = jax.value_and_grad(surrogate, has_aux=True)(params, a, b)
        t, m, v = opt_state
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        c1, c2 = 1.0 - 0.9 ** t, 1.0 - 0.999 ** t
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - LR * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), params, m, v)
        base = (DECAY * avg + (1.0 - DECAY) * jnp.mean(cost), count + 1)
        return params, (t, m, v), base, key

    def start(seed):
        params = jax.tree_util.tree_map(jnp.asarray, init)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return params, (0, zeros, zeros), (jnp.zeros(()), 0), jax.random.PRNGKey(seed)

    t0 = time.perf_counter()
    out = step(*start(0))
    jax.block_until_ready(out)
    compile_s = time.perf_counter() - t0

    def run(seed, steps=steps):
        state = start(seed)
        state = (state[0], state[1], state[2], state[3])
        t0 = time.perf_counter()
        for _ in range(steps):
            state = step(*state)
        jax.block_until_ready(state)
        elapsed = time.perf_counter() - t0
        return elapsed, float(policy(state[0])[0])
    run.compile_s = compile_s
    return run


_WHAT = {"record_s": "recording", "compile_s": "compiling"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-jax", action="store_true", help="leave JAX out")
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)

    init = scg.nn.init_mlp(0, SIZES)
    print(f"W2 policy-gradient loop: {args.steps} steps, median of {args.repeats} repeats, "
          f"float64, torch {torch.__version__} with {args.threads} thread(s)")
    print(f"{'batch':>6}{'system':>8}{'steps/s':>10}{'min s':>8}{'max s':>8}{'final mu':>10}")
    results = {}
    for batch in args.batch:
        runners = {"scg": scg_runner(batch, args.steps, init),
                   "scg.jit": scg_jit_runner(batch, args.steps, init),
                   "torch": torch_runner(batch, args.steps, init)}
        if not args.no_jax:
            try:
                runners["jax.jit"] = jax_runner(batch, args.steps, init)
            except ImportError:
                print("JAX is not installed: pip install jax (measured without it)")
        for name, run in runners.items():
            for what in ("record_s", "compile_s"):
                if hasattr(run, what):
                    print(f"{batch:>6}{name:>8}  {_WHAT[what]} before the first "
                          f"fast step: {getattr(run, what):.3f} s")
        for run in runners.values():       # warm-up: imports, numba, caches
            run(12345, 50)
        times = {name: [] for name in runners}
        finals = {}
        for r in range(args.repeats):
            order = list(runners) if r % 2 == 0 else list(reversed(runners))
            for name in order:
                elapsed, final_mu = runners[name](r)
                times[name].append(elapsed)
                finals[name] = final_mu
        for name, ts in times.items():
            med = statistics.median(ts)
            results[batch, name] = args.steps / med
            print(f"{batch:>6}{name:>8}{args.steps / med:>10.0f}{min(ts):>8.2f}{max(ts):>8.2f}"
                  f"{finals[name]:>10.3f}")
        for name in runners:
            if name != "torch":
                print(f"{batch:>6}   {name} / torch steps per second: "
                      f"{results[batch, name] / results[batch, 'torch']:.2f}x")
        if "jax.jit" in runners:
            print(f"{batch:>6}   scg.jit / jax.jit steps per second: "
                  f"{results[batch, 'scg.jit'] / results[batch, 'jax.jit']:.2f}x")
    return results


if __name__ == "__main__":
    main()
