"""Per-sample scores and path derivatives: scg's numba kernels vs their numpy twins vs torch.

For a Normal(0.3, 1.7), a Gamma(2.5, 1.5), a StudentT(3.5, 0.3, 1.7), a Cauchy(0.3, 1.7),
a HalfNormal(1.7) and a HalfCauchy(1.7), each system draws n samples and computes,
for every draw, the draw itself, the score d log p(x) / d theta and the path derivative
dx / d theta for both parameters:

* kernel: noise from numpy's Generator, the rest in scg's fused numba kernels;
* twin:   the same noise, the rest in plain numpy (the kernels' twins, or the same
          formulas written by hand; the StudentT's Gamma derivative from scg's kernel);
* torch:  torch.distributions with one parameter copy per draw (requires_grad), rsample,
          log_prob, and torch.autograd.grad for the scores and the path derivatives.

Times: one process, one warm-up call per system at full size (so that first-touch page
faults of the VM do not dominate), then the systems interleaved, each figure the median
of the repeats; every system on one thread. Peak memory, measured apart from the
timings: the peak of numpy allocations during one call (tracemalloc; kernel and twin),
and the growth of the resident set's high-water mark (VmHWM, reset through
/proc/self/clear_refs) during one call in a fresh process (all three systems, torch included).

    python benchmarks/distributions_bench.py [--repeats 5] [--sizes 1e6 1e7] [--full]
        [--families normal gamma studentt cauchy halfnormal halfcauchy]

The Gamma numpy twin iterates its series / continued fraction with whole-array
numpy operations; at n = 1e7 it needs minutes and gigabytes, so it runs only
with --full.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOC, SCALE = 0.3, 1.7
CONC, RATE = 2.5, 1.5


# ---------------------------------------------------------------- the systems
def normal_kernel(n, rng):
    from scg.kernels.continuous import normal_score_and_path
    eps = rng.standard_normal(n)
    x, s_loc, s_scale = np.empty(n), np.empty(n), np.empty(n)
    normal_score_and_path(eps, LOC, SCALE, x, s_loc, s_scale)
    return x, (s_loc, s_scale), (np.broadcast_to(1.0, (n,)), eps)


def normal_twin(n, rng):
    from scg.kernels.continuous import normal_score_and_path_twin
    eps = rng.standard_normal(n)
    x, s_loc, s_scale = normal_score_and_path_twin(eps, LOC, SCALE)
    return x, (s_loc, s_scale), (np.broadcast_to(1.0, (n,)), eps)


def gamma_kernel(n, rng):
    from scg.kernels.continuous import gamma_density
    from scg.kernels.implicit import gamma_dxda_kernel
    from scg.kernels.primitives import run
    g = rng.standard_gamma(CONC, n)
    x = g / RATE
    scores = (run(gamma_density, 2, x, CONC, RATE), run(gamma_density, 3, x, CONC, RATE))
    dx_dconc = run(gamma_dxda_kernel, 0, CONC, g)
    dx_dconc /= RATE
    return x, scores, (dx_dconc, x * (-1.0 / RATE))


def gamma_twin(n, rng):
    from scg.kernels.continuous import gamma_density_twin
    from scg.kernels.implicit import gamma_dxda_twin
    g = rng.standard_gamma(CONC, n)
    x = g / RATE
    scores = (gamma_density_twin(2, x, CONC, RATE), gamma_density_twin(3, x, CONC, RATE))
    return x, scores, (gamma_dxda_twin(CONC, g) / RATE, -x / RATE)


def _torch(make, n, params):
    import torch
    leaves = [torch.full((n,), p, dtype=torch.float64, requires_grad=True) for p in params]
    d = make(*leaves)
    x = d.rsample()
    scores = torch.autograd.grad(d.log_prob(x.detach()).sum(), leaves)
    paths = torch.autograd.grad(x.sum(), leaves)
    return x, scores, paths


def normal_torch(n, rng):
    import torch
    return _torch(torch.distributions.Normal, n, (LOC, SCALE))


def gamma_torch(n, rng):
    import torch
    return _torch(torch.distributions.Gamma, n, (CONC, RATE))


# ---------------------------------------------------------------- StudentT, Cauchy, half families
DF = 3.5


def studentt_kernel(n, rng):
    from scg.kernels.heavy_tails import studentt_score_and_path
    z, g = rng.standard_normal(n), rng.standard_gamma(0.5 * DF, n)
    x, scores, paths = np.empty(n), np.empty((3, n)), np.empty((2, n))
    studentt_score_and_path(z, g, DF, LOC, SCALE, x, scores, paths)
    return x, scores, (paths[0], np.broadcast_to(1.0, (n,)), paths[1])


def studentt_twin(n, rng):
    # numpy by hand; the Gamma's implicit derivative has no numpy form of comparable speed
    # (its series), so both systems take it from scg's kernel
    from scipy.special import digamma
    from scg.kernels.implicit import gamma_dxda_kernel
    from scg.kernels.primitives import run
    z, g = rng.standard_normal(n), rng.standard_gamma(0.5 * DF, n)
    t = z * np.sqrt(0.5 * DF / g)
    x = LOC + SCALE * t
    zz = t * t
    q = DF + zz
    s_df = (0.5 * (digamma(0.5 * (DF + 1)) - digamma(0.5 * DF)) - 0.5 / DF
            - 0.5 * np.log1p(zz / DF) + 0.5 * (DF + 1) * zz / (DF * q))
    s_loc = (DF + 1) * t / (SCALE * q)
    s_scale = ((DF + 1) * zz / q - 1.0) / SCALE
    dxda = run(gamma_dxda_kernel, 0, 0.5 * DF, g)
    p_df = SCALE * 0.5 * t * (1.0 / DF - 0.5 * dxda / g)
    return x, (s_df, s_loc, s_scale), (p_df, np.broadcast_to(1.0, (n,)), t)


def studentt_torch(n, rng):
    import torch
    return _torch(torch.distributions.StudentT, n, (DF, LOC, SCALE))


def cauchy_kernel(n, rng):
    from scg.kernels.heavy_tails import cauchy_score_and_path
    eps = rng.standard_cauchy(n)
    x, scores = np.empty(n), np.empty((2, n))
    cauchy_score_and_path(eps, LOC, SCALE, x, scores)
    return x, scores, (np.broadcast_to(1.0, (n,)), eps)


def cauchy_twin(n, rng):
    eps = rng.standard_cauchy(n)
    x = LOC + SCALE * eps
    d = SCALE * (1.0 + eps * eps)
    return x, (2.0 * eps / d, (eps * eps - 1.0) / d), (np.broadcast_to(1.0, (n,)), eps)


def cauchy_torch(n, rng):
    import torch
    return _torch(torch.distributions.Cauchy, n, (LOC, SCALE))


def _half_kernel(cauchy, n, rng):
    from scg.kernels.heavy_tails import half_score_and_path
    eps = np.abs(rng.standard_cauchy(n) if cauchy else rng.standard_normal(n))
    x, score = np.empty(n), np.empty(n)
    half_score_and_path(cauchy, eps, SCALE, x, score)
    return x, (score,), (eps,)


def halfnormal_kernel(n, rng):
    return _half_kernel(False, n, rng)


def halfcauchy_kernel(n, rng):
    return _half_kernel(True, n, rng)


def halfnormal_twin(n, rng):
    eps = np.abs(rng.standard_normal(n))
    return SCALE * eps, ((eps * eps - 1.0) / SCALE,), (eps,)


def halfcauchy_twin(n, rng):
    eps = np.abs(rng.standard_cauchy(n))
    return SCALE * eps, ((eps * eps - 1.0) / (SCALE * (1.0 + eps * eps)),), (eps,)


def halfnormal_torch(n, rng):
    import torch
    return _torch(torch.distributions.HalfNormal, n, (SCALE,))


def halfcauchy_torch(n, rng):
    import torch
    return _torch(torch.distributions.HalfCauchy, n, (SCALE,))


SYSTEMS = {"normal": {"kernel": normal_kernel, "twin": normal_twin, "torch": normal_torch},
           "gamma": {"kernel": gamma_kernel, "twin": gamma_twin, "torch": gamma_torch},
           "studentt": {"kernel": studentt_kernel, "twin": studentt_twin,
                        "torch": studentt_torch},
           "cauchy": {"kernel": cauchy_kernel, "twin": cauchy_twin, "torch": cauchy_torch},
           "halfnormal": {"kernel": halfnormal_kernel, "twin": halfnormal_twin,
                          "torch": halfnormal_torch},
           "halfcauchy": {"kernel": halfcauchy_kernel, "twin": halfcauchy_twin,
                          "torch": halfcauchy_torch}}


# ---------------------------------------------------------------- measurement
def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])


def rss_worker(family, system, n):
    """In a fresh process: growth of the resident high-water mark (VmHWM) during one call."""
    fn = SYSTEMS[family][system]
    if system == "torch":
        _setup_torch()
    fn(1000, np.random.default_rng(1))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                      # reset the high-water mark to the current RSS
    base = _status_kb("VmRSS")
    out = fn(n, np.random.default_rng(0))
    peak = _status_kb("VmHWM") - base
    del out
    print(json.dumps({"peak_mb": peak / 1024}))


def rss_peak(family, system, n):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, __file__, "--worker", family, system, str(n)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])["peak_mb"]


def traced_peak(fn, n):
    """Peak of numpy allocations (tracemalloc) during one call, in MB."""
    tracemalloc.start()
    out = fn(n, np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del out
    return peak / 2 ** 20


def _setup_torch():
    import torch
    torch.set_num_threads(1)          # every system on one thread
    torch.manual_seed(0)


def _skip(family, system, n, full):
    return (family, system) == ("gamma", "twin") and n >= 10 ** 7 and not full


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    ap.add_argument("--worker", nargs=3)
    ap.add_argument("--families", nargs="+", default=None,
                    help=f"a subset of {', '.join(SYSTEMS)} (default: all)")
    ap.add_argument("--full", action="store_true",
                    help="also run the Gamma numpy twin at n >= 1e7 (minutes and gigabytes)")
    args = ap.parse_args()
    if args.worker:
        family, system, n = args.worker
        return rss_worker(family, system, int(n))
    _setup_torch()
    times, mem = {}, {}
    for n in [int(s) for s in args.sizes]:
        for family, systems in SYSTEMS.items():
            if args.families and family not in args.families:
                continue
            run = [s for s in systems if not _skip(family, s, n, args.full)]
            for s in run:                                   # warm up at full size
                systems[s](n, np.random.default_rng(1))
            for rep in range(args.repeats):
                for s in (run if rep % 2 == 0 else run[::-1]):   # interleaved
                    t0 = time.perf_counter()
                    out = systems[s](n, np.random.default_rng(rep))
                    times.setdefault((family, n, s), []).append(time.perf_counter() - t0)
                    del out
            for s in run:
                mem[(family, n, s)] = (traced_peak(systems[s], n) if s != "torch" else None,
                                       rss_peak(family, s, n))
    print(f"{'family':8} {'n':>7} {'system':7} {'median s':>9} {'min s':>7} "
          f"{'numpy peak MB':>13} {'RSS peak MB':>11}")
    for (family, n, s), ts in times.items():
        traced, rss = mem[(family, n, s)]
        traced = "-" if traced is None else f"{traced:.0f}"
        print(f"{family:8} {n:7.0e} {s:7} {np.median(ts):9.3f} {np.min(ts):7.3f} "
              f"{traced:>13} {rss:11.0f}")
    print("\nratios of median times (how many times faster the kernel is)")
    for n in [int(s) for s in args.sizes]:
        for family in SYSTEMS:
            if (family, n, "kernel") not in times:
                continue
            med = {s: np.median(times[(family, n, s)]) for s in SYSTEMS[family]
                   if (family, n, s) in times}
            line = f"{family:8} n={n:.0e}: torch/kernel {med['torch'] / med['kernel']:5.2f}x"
            if "twin" in med:
                line += f"   twin/kernel {med['twin'] / med['kernel']:5.2f}x"
            print(line)


if __name__ == "__main__":
    main()
