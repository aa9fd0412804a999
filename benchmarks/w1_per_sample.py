"""W1: per-sample gradients of the worked example (x ~ N(2, 1), f = x^2), for mu and sigma.

Five systems, measured interleaved in one run, median of --repeat runs:
  scg        scg.grad_samples of a model with the estimator set at the site
  torch      PyTorch eager, float64, one parameter copy per draw, then backward
  numpy      noise drawn with numpy, the per-draw gradients in plain numpy expressions
  reference  noise drawn with numpy, every estimate in one hand-fused numba loop
  ref_nb     the reference with its noise drawn as scg draws it: numba's implementation
             of numpy's Generator (the same numbers, about three times faster)

Peak memory is measured per system in a fresh subprocess, after warm-up calls at 1000
draws and (for larger n) at 2^22 + 1, where scg's kernels for large arrays start (scg's
buffers of that warm-up are then let go, so that the run allocates its own): the
high-water mark of the resident set (VmHWM, reset just before the measured call) minus
the resident set then.

Usage: python benchmarks/w1_per_sample.py [--n 1000000 10000000] [--repeat 5]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
from numba import njit

MU, SIGMA = 2.0, 1.0
ESTIMATORS = ("pathwise", "score", "loo")


# ---------------------------------------------------------------- scg
def scg_runner(estimator, n):
    import scg
    est = {"pathwise": "pathwise", "score": "score", "loo": scg.Score("loo")}[estimator]

    def model(theta):
        x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator=est)
        return x ** 2

    g = scg.grad_samples(scg.expectation(model, n=n, seed=0))
    theta = {"mu": MU, "sigma": SIGMA}

    def run():
        gs = g(theta)
        return gs.samples["mu"], gs.samples["sigma"]
    return run


# ---------------------------------------------------------------- torch
def torch_runner(estimator, n):
    import torch
    from torch.distributions import Normal
    torch.manual_seed(0)

    def run():
        mu = torch.full((n,), MU, dtype=torch.float64, requires_grad=True)
        sigma = torch.full((n,), SIGMA, dtype=torch.float64, requires_grad=True)
        dist = Normal(mu, sigma)
        if estimator == "pathwise":
            (dist.rsample() ** 2).sum().backward()
        else:
            x = dist.sample()
            f = x ** 2
            if estimator == "loo":
                f = f - (f.sum() - f) / (n - 1)
            (f * dist.log_prob(x)).sum().backward()
        return mu.grad, sigma.grad
    return run


# ---------------------------------------------------------------- numpy
def numpy_runner(estimator, n):
    """The per-draw gradients as a user writes them in numpy: whole-array expressions
    (numpy reuses the temporaries of a chained expression in place)."""
    rng = np.random.default_rng(0)

    def run():
        eps = rng.standard_normal(n)
        x = MU + SIGMA * eps
        if estimator == "pathwise":
            # d(x^2)/dmu = 2x, d(x^2)/dsigma = 2x eps along x = mu + sigma eps
            g_mu = 2 * x
            g_sigma = 2 * x * eps
        else:
            # f times the scores of N(mu, sigma): (x - mu) / sigma^2 and
            # ((x - mu)^2 - sigma^2) / sigma^3
            f = x ** 2
            if estimator == "loo":
                f = f - (f.sum() - f) / (n - 1)
            g_mu = f * (x - MU) / SIGMA ** 2
            g_sigma = f * ((x - MU) ** 2 - SIGMA ** 2) / SIGMA ** 3
        return g_mu, g_sigma
    return run


# ---------------------------------------------------------------- reference
@njit(cache=True)
def _fused(eps, mu, sigma, estimator, g_mu, g_sigma):
    n = eps.shape[0]
    mean_f = 0.0
    if estimator == 2:
        for i in range(n):
            x = mu + sigma * eps[i]
            mean_f += x * x
    for i in range(n):
        e = eps[i]
        x = mu + sigma * e
        f = x * x
        if estimator == 0:
            g_mu[i] = 2.0 * x
            g_sigma[i] = 2.0 * x * e
        else:
            if estimator == 2:
                f = f - (mean_f - f) / (n - 1)
            g_mu[i] = f * e / sigma
            g_sigma[i] = f * (e * e - 1.0) / sigma


def reference_runner(estimator, n):
    rng = np.random.default_rng(0)
    code = ESTIMATORS.index(estimator)

    def run():
        eps = rng.standard_normal(n)
        g_mu, g_sigma = np.empty(n), np.empty(n)
        _fused(eps, MU, SIGMA, code, g_mu, g_sigma)
        return g_mu, g_sigma
    return run


@njit(cache=True)
def _standard_normal(rng, out):
    for i in range(out.shape[0]):
        out[i] = rng.standard_normal()


def reference_nb_runner(estimator, n):
    rng = np.random.default_rng(0)
    code = ESTIMATORS.index(estimator)

    def run():
        eps = np.empty(n)
        _standard_normal(rng, eps)  # (numpy's numbers: rng.standard_normal(n))
        g_mu, g_sigma = np.empty(n), np.empty(n)
        _fused(eps, MU, SIGMA, code, g_mu, g_sigma)
        return g_mu, g_sigma
    return run


RUNNERS = {"scg": scg_runner, "torch": torch_runner, "numpy": numpy_runner,
           "reference": reference_runner, "ref_nb": reference_nb_runner}


def available():
    try:
        import torch  # noqa: F401
        return list(RUNNERS)
    except ImportError:
        print("torch is not installed: skipping it (pip install -e '.[bench]')")
        return ["scg", "numpy", "reference", "ref_nb"]


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def peak_memory(system, estimator, n):
    """Run one measurement in a fresh process; return its peak extra memory in bytes."""
    out = subprocess.run([sys.executable, __file__, "--child", system, estimator, str(n)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"]


WARM_LARGE = (1 << 22) + 1  # the size from which scg's passes for large arrays all apply


def child(system, estimator, n):
    RUNNERS[system](estimator, 1000)()          # compile and warm up at a small size,
    if n > WARM_LARGE:                          # and where the large-array kernels start
        RUNNERS[system](estimator, WARM_LARGE)()  # (their one-time loading is not the run's)
        if system == "scg":  # (the warm-up's output buffers go: the run makes its own)
            from scg.kernels import fused
            fused._BUFFERS.clear()
    run = RUNNERS[system](estimator, n)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                            # reset the high-water mark (Linux >= 4.0)
    before = _status_kb("VmRSS")
    result = run()
    peak = (_status_kb("VmHWM") - before) * 1024
    del result
    print(json.dumps({"peak": peak}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    systems = available()
    print(f"numpy {np.__version__}; threads: torch default ({_torch_threads()})")
    print(f"{'n':>10} {'estimator':<10}" + "".join(f"{s + ' s':>12}" for s in systems) +
          f"{'torch/scg':>11}{'numpy/scg':>11}{'scg/ref':>9}{'scg/ref_nb':>11}" +
          "".join(f"{s + ' MB':>12}" for s in systems))
    for n in args.n:
        for est in ESTIMATORS:
            runs = {s: RUNNERS[s](est, n) for s in systems}
            for s in systems:
                runs[s]()                       # warm up
            times = {s: [] for s in systems}
            for _ in range(args.repeat):        # interleaved
                for s in systems:
                    t0 = time.perf_counter()
                    runs[s]()
                    times[s].append(time.perf_counter() - t0)
            med = {s: statistics.median(times[s]) for s in systems}
            mem = {s: peak_memory(s, est, n) / 1e6 for s in systems}
            ratio = med["torch"] / med["scg"] if "torch" in med else float("nan")
            print(f"{n:>10} {est:<10}" + "".join(f"{med[s]:>12.4f}" for s in systems) +
                  f"{ratio:>11.2f}{med['numpy'] / med['scg']:>11.2f}"
                  f"{med['scg'] / med['reference']:>9.2f}"
                  f"{med['scg'] / med['ref_nb']:>11.2f}" +
                  "".join(f"{mem[s]:>12.0f}" for s in systems), flush=True)


def _torch_threads():
    try:
        import torch
        return torch.get_num_threads()
    except ImportError:
        return "absent"


if __name__ == "__main__":
    main()
