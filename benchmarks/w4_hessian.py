"""W4: the 10 x 10 Hessian of E[(sum(x) - 3)^2] over x_i ~ Bernoulli(sigmoid(theta_i)).

n = 100 000 draws. scg.hessian of the expectation (its DiCE surrogate) against the DiCE
objective written by hand in PyTorch (float64, double backward, one row per backward
pass), measured interleaved in one run, median of --repeat runs; both errors against the
exact Hessian (enumeration of the 2^10 outcomes).

Usage: python benchmarks/w4_hessian.py [--n 100000] [--repeat 7] [--threads 1]
"""

import argparse
import itertools
import statistics
import time

import numpy as np

import scg

D = 10
THETA = np.linspace(-1.0, 1.0, D)


def cost(x):
    return (np.sum(x, axis=-1) - 3.0) ** 2


def model(theta):
    x = scg.sample("x", scg.Bernoulli(logits=theta).to_event(1), estimator="score")
    return cost(x)


def exact_hessian():
    configs = np.array(list(itertools.product([0.0, 1.0], repeat=D)))
    f = cost(configs)

    def expectation(theta):
        logp = configs * -scg.softplus(-theta) + (1 - configs) * -scg.softplus(theta)
        return np.sum(np.exp(np.sum(logp, axis=-1)) * f)
    return scg.hessian(expectation)(THETA)


def scg_runner(n):
    hess = scg.hessian(scg.expectation(model, n=n, seed=0))
    return lambda: hess(THETA)


def torch_runner(n):
    import torch
    torch.manual_seed(0)

    def run():
        theta = torch.tensor(THETA, requires_grad=True)
        with torch.no_grad():
            x = torch.bernoulli(torch.sigmoid(theta).expand(n, D))
        logp = (x * torch.nn.functional.logsigmoid(theta) +
                (1 - x) * torch.nn.functional.logsigmoid(-theta)).sum(-1)
        f = (x.sum(-1) - 3.0) ** 2
        objective = (torch.exp(logp - logp.detach()) * f).mean()
        (g,) = torch.autograd.grad(objective, theta, create_graph=True)
        rows = [torch.autograd.grad(g[i], theta, retain_graph=True)[0] for i in range(D)]
        return torch.stack(rows).numpy()
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads (default: torch's own choice)")
    args = parser.parse_args()
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    exact = exact_hessian()
    runners = {"scg": scg_runner(args.n)}
    try:
        runners["torch"] = torch_runner(args.n)
    except ImportError:
        print("torch is not installed: measuring scg only (pip install -e '.[bench]')")
    times = {k: [] for k in runners}
    errors = {k: [] for k in runners}
    for k in runners:
        runners[k]()                            # warm up
    for _ in range(args.repeat):                # interleaved
        for k, run in runners.items():
            t0 = time.perf_counter()
            H = run()
            times[k].append(time.perf_counter() - t0)
            errors[k].append(np.max(np.abs(H - exact)))
    print(f"n = {args.n:,}, {args.repeat} repeats, median time and median max |H - exact|")
    for k in runners:
        print(f"  {k:<6} {statistics.median(times[k]):8.3f} s   "
              f"error {statistics.median(errors[k]):.4f}")
    if "torch" in runners:
        ratio = statistics.median(times["torch"]) / statistics.median(times["scg"])
        print(f"  torch / scg time: {ratio:.2f}")


if __name__ == "__main__":
    main()
