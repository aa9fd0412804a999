"""Variance of the score-function ELBO gradient: scg against Pyro's TraceGraph_ELBO, side by
side on a Gaussian mixture with discrete assignments (issue 38, section 1).

Model: N points, C components; z_i ~ Categorical(softmax(theta[:C])),
x_i ~ Normal(theta[C:][z_i], 1). Guide: q(z_i) = Categorical(softmax(phi_i)), per-point
logits phi (N, C). The ELBO E_q[log p(x, z) - log q(z)] is estimated with K particles:
in scg the cost log q(z) - log p(x, z) written in the model (scg.cost in a scg.plate, the
guide's site drawn with scg.Score() or scg.Score(scg.baselines.MovingAverage(0.9))),
averaged over n = K draws of scg.expectation; in Pyro TraceGraph_ELBO(num_particles=K,
vectorize_particles=True), the guide's site with no baseline or with
infer={"baseline": {"use_decaying_avg_baseline": True, "baseline_beta": 0.9}}. Both leave
out the derivative of log q(z) at the draw held (mean zero) and use each point's own
costs only (the plate).

At fixed parameters, the script calls each system's gradient --calls times (after
--warmup calls for the moving averages to settle, the same number for both), checks that
the mean gradient is unbiased against the exact gradient of the ELBO (the ELBO factorizes
over points: a sum over each point's C categories; max |z| over all coordinates), and
reports the total variance (the sum over coordinates of the variance of one call's
gradient) for phi and for theta, with the ratio scg / Pyro and a bootstrap interval.

Run: python benchmarks/elbo_variance_pyro.py [--calls 2000] [--warmup 100] [--points 200]
                                             [--components 3] [--particles 4]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

# (the root normalized: scg.jit's watch compares file names with scg's directory as
# os.path.abspath spells it, and a ".." in the path makes it take scg for user code)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import timing  # noqa: E402

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def problem(N, C, seed=0):
    rng = np.random.default_rng(seed)
    true_locs = np.linspace(-3.0, 3.0, C)
    data = true_locs[rng.integers(C, size=N)] + rng.normal(size=N)
    theta = np.concatenate([rng.normal(0.0, 0.5, size=C), true_locs + rng.normal(0.0, 0.5, C)])
    phi = rng.normal(0.0, 1.0, size=(N, C))
    return data, theta, phi


def _log_softmax(a):
    m = np.max(a, axis=-1, keepdims=True)
    s = a - m
    return s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True))


def exact(data, theta, phi):
    """The exact gradient of the cost -ELBO in theta and phi: for each point, the sum over
    its C categories of q(c) (log p(x_i, c) - log q(c))."""
    C = phi.shape[1]
    logw, locs = _log_softmax(theta[:C]), theta[C:]
    logq = _log_softmax(phi)
    q = np.exp(logq)
    diff = data[:, None] - locs[None, :]
    f = logw[None, :] - 0.5 * diff * diff - LOG_SQRT_2PI - logq    # (N, C)
    # d ELBO / d phi_ij = q_ij (f_ij - sum_c q_ic f_ic) (the derivative of -log q has
    # mean zero); d / d theta through log p only
    g_phi = q * (f - np.sum(q * f, axis=1, keepdims=True))
    g_logits = np.sum(q, axis=0) - data.shape[0] * np.exp(logw)
    g_locs = np.sum(q * diff, axis=0)
    return -np.concatenate([g_logits, g_locs]), -g_phi


# ------------------------------------------------------------------ scg

def scg_gradient(data, C, K, baseline, seed):
    import scg
    N = data.shape[0]
    estimator = (scg.Score() if baseline is None
                 else scg.Score(scg.baselines.MovingAverage(baseline)))

    def model(theta, phi):
        weights, locs = scg.softmax(theta[:C]), theta[C:]
        with scg.plate("data", N):
            q = scg.Categorical(logits=phi)
            z = scg.sample("z", q, estimator=estimator)
            log_p = (scg.Categorical(weights).log_prob(z)
                     + scg.Normal(locs[z], 1.0).log_prob(data))
            scg.cost("neg_elbo", q.log_prob(z) - log_p)

    E = scg.expectation(model, n=K, seed=seed)
    step = scg.jit(scg.grad(E, argnums=(0, 1)))
    return step, model


# ------------------------------------------------------------------ Pyro

def pyro_gradient(data, C, K, baseline, theta0, phi0, seed):
    import pyro
    import pyro.distributions as dist
    import torch
    from pyro.infer import TraceGraph_ELBO
    x = torch.tensor(data)
    N = len(data)
    infer = ({} if baseline is None else
             {"baseline": {"use_decaying_avg_baseline": True, "baseline_beta": baseline}})
    prefix = f"{'none' if baseline is None else baseline}_"  # (own parameters per setting)

    def model():
        theta = pyro.param(prefix + "theta", torch.tensor(theta0))
        weights, locs = torch.softmax(theta[:C], -1), theta[C:]
        with pyro.plate("data", N):
            z = pyro.sample("z", dist.Categorical(weights))
            pyro.sample("x", dist.Normal(locs[z], 1.0), obs=x)

    def guide():
        phi = pyro.param(prefix + "phi", torch.tensor(phi0))
        with pyro.plate("data", N):
            pyro.sample("z", dist.Categorical(logits=phi), infer=infer)

    elbo = TraceGraph_ELBO(num_particles=K, vectorize_particles=True, max_plate_nesting=1)
    torch.manual_seed(seed)
    leaves = {}

    def step():
        elbo.loss_and_grads(model, guide)
        if not leaves:
            for k in ("theta", "phi"):
                leaves[k] = pyro.param(prefix + k).unconstrained()
        out = tuple(leaves[k].grad.numpy().copy() for k in ("theta", "phi"))
        for v in leaves.values():
            v.grad = None
        return out
    return step


# ------------------------------------------------------------------ statistics

def collect(step, calls):
    th, ph = [], []
    for _ in range(calls):
        a, b = step()
        th.append(np.ravel(a))
        ph.append(np.ravel(b))
    return np.array(th), np.array(ph)


def max_z(samples, exact_value):
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    return float(np.max(np.abs(mean - np.ravel(exact_value)) / se))


def total_variance(samples):
    return float(np.sum(np.var(samples, axis=0, ddof=1)))


def ratio_interval(a, b, rng, resamples=400):
    """5 % and 95 % bootstrap quantiles of total_variance(a) / total_variance(b)."""
    r = []
    for _ in range(resamples):
        ia = rng.integers(len(a), size=len(a))
        ib = rng.integers(len(b), size=len(b))
        r.append(total_variance(a[ia]) / total_variance(b[ib]))
    return np.quantile(r, [0.05, 0.95])


def verdict(ratio, interval):
    if ratio <= 1.0:
        return "met"
    return "met within the noise (1 in the interval)" if interval[0] <= 1.0 else "NOT met"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000,
                        help="gradient calls per system and setting (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=100,
                        help="calls before measuring (the moving averages settle)")
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--components", type=int, default=3)
    parser.add_argument("--particles", type=int, default=4)
    parser.add_argument("--decay", type=float, default=0.9)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    import pyro
    import torch
    import scg
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(args.threads)
    pyro.enable_validation(False)
    scg.distributions.set_validation(False)
    warnings.simplefilter("ignore", UserWarning)
    print(timing.command_line())
    print(f"numpy {np.__version__}, torch {torch.__version__}, pyro {pyro.__version__}, "
          f"float64; N = {args.points} points, C = {args.components} components, "
          f"K = {args.particles} particles; {args.calls} calls after {args.warmup} warm-up "
          "calls per system and setting")
    N, C, K = args.points, args.components, args.particles
    data, theta, phi = problem(N, C)
    g_theta, g_phi = exact(data, theta, phi)
    rng = np.random.default_rng(12345)
    for label, baseline in (("no baseline", None), (f"moving average {args.decay:g}",
                                                    args.decay)):
        scg_step, scg_model = scg_gradient(data, C, K, baseline, args.seed)
        pyro_step = pyro_gradient(data, C, K, baseline, theta, phi, args.seed)
        systems = {"scg": lambda: scg_step(theta, phi), "pyro": pyro_step}
        results, seconds = {}, {}
        for k, f in systems.items():
            for _ in range(args.warmup):
                f()
            t0 = time.perf_counter()
            results[k] = collect(f, args.calls)
            seconds[k] = (time.perf_counter() - t0) / args.calls
        replays = scg_step.stats["replays"]
        print(f"\n## {label}  (scg.jit replayed {replays} of {scg_step.stats['calls']} "
              f"calls; seconds per gradient: scg {seconds['scg'] * 1e3:.2f} ms, Pyro "
              f"{seconds['pyro'] * 1e3:.2f} ms)")
        print("| system | max \\|z\\| theta | max \\|z\\| phi | total var theta | "
              "total var phi |")
        print("|---|---|---|---|---|")
        for k, (th, ph) in results.items():
            print(f"| {k} | {max_z(th, g_theta):.2f} | {max_z(ph, g_phi):.2f} | "
                  f"{total_variance(th):.5g} | {total_variance(ph):.5g} |")
        (s_th, s_ph), (p_th, p_ph) = results["scg"], results["pyro"]
        r_th = total_variance(s_th) / total_variance(p_th)
        r_ph = total_variance(s_ph) / total_variance(p_ph)
        i_th = ratio_interval(s_th, p_th, rng)
        i_ph = ratio_interval(s_ph, p_ph, rng)
        print(f"scg / Pyro total variance: phi {r_ph:.3f} [{i_ph[0]:.3f}, {i_ph[1]:.3f}], "
              f"theta {r_th:.3f} [{i_th[0]:.3f}, {i_th[1]:.3f}] (5-95 % bootstrap); "
              f"target phi <= 1: {verdict(r_ph, i_ph)}, theta <= 1: {verdict(r_th, i_th)}")
    print(f"\n(coordinates: theta {2 * C}, phi {N * C}; the max |z| of {N * C} unbiased "
          f"coordinates is about {np.sqrt(2 * np.log(N * C)):.1f})")
    print("\nscg.trace(model, theta, phi, n=K).explain() (moving average):")
    print(scg.trace(scg_model, theta, phi, n=K).explain())


if __name__ == "__main__":
    main()
