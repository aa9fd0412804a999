"""Estimators: 10 Bernoulli sites with a known exact gradient (a separable cost and a coupled one).

The logits theta (10 fixed values) parametrize b_i ~ Bernoulli(sigmoid(theta_i)), independent,
and the objective is E[f(b)] for two costs of b in {0, 1}^10:

  separable  f(b) = sum_i (b_i - t_i)^2           (fixed targets t)
  coupled    f(b) = (sum_i w_i b_i - 1.5)^2       (fixed weights w: every site interacts)

The exact gradient, sum over the 2^10 states s of p(s) f(s) (s - sigmoid(theta)), comes from
a (1024, 10) state matrix in numpy. Each estimator is run by up to three systems:

  numpy        written by hand: full enumeration (vectorized over the 1024 states); DisARM
               with N_PAIRS antithetic pairs (Dong, Mnih, Tucker 2020, arXiv 2006.10680);
               score function with a leave-one-out baseline, N_DRAWS draws; the binary
               Concrete / Gumbel-softmax relaxation at temperature 1, N_DRAWS draws
  storchastic  Storchastic 0.3.7 on torch (CPU, float64): Expect (enumeration), DisARM,
               ScoreFunction(baseline_factory="batch_average", which is leave-one-out),
               GumbelSoftmax (temperature 1, annealing off), REBAR (no learned control
               variate), same model and costs
  scg          scg.Enumerate(), scg.DisARM() with n = N_PAIRS pairs, scg.Score("loo") and
               scg.GumbelSoftmax(temperature=1.0) with n = N_DRAWS, on one site of batch
               shape (10,) (enumerated: the product of the 2^10 states)
  scg.jit      the same gradient functions under scg.jit (recorded on their first calls,
               then replayed)

DisARM for the 10-vector (eq. of the multivariate case in the paper): with one
u ~ U(0, 1)^10 per pair, b = 1[u < sigmoid(theta)], b~ = 1[1 - u < sigmoid(theta)], f is
evaluated at the two full vectors, and
    g_i = 1/2 (f(b) - f(b~)) (-1)^{b~_i} 1[b_i != b~_i] sigmoid(|theta_i|),
averaged over the pairs. The script checks that the hand-written estimators are unbiased.

Measured per (cost, estimator, system):
  * time of one gradient: each callable repeated for >= 20 ms per repeat, all callables
    interleaved (the order reversed every other repeat), median over --repeats;
  * ratio of that time to the hand-written numpy estimator of the same kind;
  * bias: --stat-draws independent gradient estimates; per coordinate
    z = (mean - exact) / stderr, the table gives max |z| over the 10 coordinates (|z| above
    about 4 means biased; the relaxation is biased by design), and the relative bias along
    the exact gradient g, mean . g / |g|^2 - 1;
  * variance: of one gradient estimate (as configured: N_PAIRS pairs, N_DRAWS draws), summed
    over the 10 coordinates, and the per-sample variance = that times the number of
    samples (pairs for DisARM, draws otherwise; 0 for the exact enumeration).

Storchastic and torch are optional and not in pyproject.toml:

    pip install torch==2.13.0 storchastic

Run:  python benchmarks/estimators_bench.py [--repeats 7] [--stat-draws 4000]
          [--only numpy,storchastic,scg,scg.jit] [--threads 1]
(the scg part needs scg's Enumerate, DisARM and GumbelSoftmax estimators.)
"""

import argparse
import os
import sys
import time

import numpy as np

import timing

# the working tree's scg, installed or not; imported by the scg part only, so that
# `--only numpy,storchastic` runs whatever state scg is in
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# ---------------------------------------------------------------- the problem
D = 10
THETA = np.array([-2.0, -1.3, -0.7, -0.3, 0.0, 0.2, 0.5, 0.9, 1.4, 2.1])
TARGETS = np.array([0.1, 0.9, 0.3, 0.6, 0.2, 0.8, 0.4, 0.7, 0.05, 0.65])
WEIGHTS = np.array([0.9, -0.4, 0.6, 0.3, -0.7, 0.5, 0.8, -0.2, 0.4, 0.6])
OFFSET = 1.5

N_PAIRS = 8      # DisARM: antithetic pairs per gradient (2 * N_PAIRS evaluations of f)
N_DRAWS = 8      # score (leave-one-out), Gumbel-softmax, REBAR: draws per gradient
TEMPERATURE = 1.0
# scg's n for DisARM: the contract says n counts pairs. If scg's n turns out to count
# evaluations of f, this is the one place to change (to 2 * N_PAIRS).
SCG_DISARM_N = N_PAIRS
# every site enumerated: nothing is drawn, and after its first call scg evaluates such a
# model once whatever n; n as for the estimators that draw
SCG_ENUMERATE_N = N_DRAWS

STATES = ((np.arange(2 ** D)[:, None] >> np.arange(D)) & 1).astype(float)   # (1024, 10)


def f_separable(b):
    """Works on numpy arrays and scg values, (..., 10) -> (...)."""
    return np.sum((b - TARGETS) ** 2, axis=-1)


def f_coupled(b):
    return (b @ WEIGHTS - OFFSET) ** 2


def df_separable(x):
    """d f / d b at a relaxed x in (0, 1)^10, (..., 10) -> (..., 10): for the relaxation."""
    return 2.0 * (x - TARGETS)


def df_coupled(x):
    return 2.0 * (x @ WEIGHTS - OFFSET)[..., None] * WEIGHTS


COSTS = {"separable": (f_separable, df_separable), "coupled": (f_coupled, df_coupled)}


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# ---------------------------------------------------------------- numpy by hand
def numpy_enumerate(theta, f):
    """Exact gradient of E[f(b)] w.r.t. the logits: sum_s p(s) f(s) (s - sigmoid(theta))."""
    p = sigmoid(theta)
    probs = np.prod(np.where(STATES == 1.0, p, 1.0 - p), axis=1)             # (1024,)
    return (probs * f(STATES)) @ (STATES - p)


def numpy_disarm(theta, f, rng, pairs=N_PAIRS):
    p = sigmoid(theta)
    u = rng.random((pairs, D))
    b = (u < p).astype(float)
    bt = (1.0 - u < p).astype(float)
    w = np.where(bt == 1.0, -1.0, 1.0) * (b != bt) * sigmoid(np.abs(theta))
    return (0.5 * (f(b) - f(bt))) @ w / pairs


def numpy_score_loo(theta, f, rng, n=N_DRAWS):
    p = sigmoid(theta)
    b = (rng.random((n, D)) < p).astype(float)
    fb = f(b)
    baseline = (fb.sum() - fb) / (n - 1)
    return (fb - baseline) @ (b - p) / n


def numpy_gumbel(theta, df, rng, n=N_DRAWS, temperature=TEMPERATURE):
    """Binary Concrete: x = sigmoid((theta + logistic noise) / T), gradient df(x) dx/dtheta."""
    u = rng.random((n, D))
    x = sigmoid((theta + np.log(u) - np.log1p(-u)) / temperature)
    return np.mean(df(x) * x * (1.0 - x) / temperature, axis=0)


def numpy_runners(cost):
    f, df = COSTS[cost]
    rng = np.random.default_rng(1)
    return {
        "enumerate": lambda: numpy_enumerate(THETA, f),
        "disarm": lambda: numpy_disarm(THETA, f, rng),
        "score_loo": lambda: numpy_score_loo(THETA, f, rng),
        "gumbel": lambda: numpy_gumbel(THETA, df, rng),
    }


# ---------------------------------------------------------------- Storchastic
def storch_runners(cost):
    import warnings
    import torch
    import storch
    from torch.distributions import Bernoulli
    # REBAR's backward(create_graph=True) warns on every call
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph")

    theta = torch.tensor(THETA, requires_grad=True)
    targets, weights = torch.tensor(TARGETS), torch.tensor(WEIGHTS)
    if cost == "separable":
        def f(b):
            return ((b - targets) ** 2).sum(-1)
    else:
        def f(b):
            return (b @ weights - OFFSET) ** 2

    def runner(method):
        def run():
            theta.grad = None
            b = method(Bernoulli(logits=theta))
            if b.dtype == torch.bool:                       # DisARM draws booleans
                b = b.to(torch.float64)
            storch.add_cost(f(b), "cost")
            storch.backward()
            return theta.grad.detach().numpy().copy()
        return run

    M = storch.method
    return {
        "enumerate": runner(M.Expect("b")),
        "disarm": runner(M.DisARM("b", n_samples=N_PAIRS)),
        "score_loo": runner(M.ScoreFunction("b", n_samples=N_DRAWS,
                                            baseline_factory="batch_average")),
        "gumbel": runner(M.GumbelSoftmax("b", n_samples=N_DRAWS,
                                         initial_temperature=TEMPERATURE,
                                         annealing_rate=0.0)),
        "rebar": runner(M.REBAR("b", n_samples=N_DRAWS)),
    }


# ---------------------------------------------------------------- scg
def scg_runners(cost, jit=False):
    import scg
    f = COSTS[cost][0]

    def runner(estimator, n):
        def model(theta):
            b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
            return f(b)
        grad = scg.grad(scg.expectation(model, n=n, seed=2))
        if jit:  # (recorded on its first calls, replayed after: warmed up here)
            grad = scg.jit(grad)
            for _ in range(4):
                grad(THETA)
            if not grad.stats["replays"]:
                raise RuntimeError(f"scg.jit did not replay: {grad.explain()}")
        return lambda: np.asarray(grad(THETA), dtype=float)

    return {
        "enumerate": runner(scg.Enumerate(), SCG_ENUMERATE_N),
        "disarm": runner(scg.DisARM(), SCG_DISARM_N),
        "score_loo": runner(scg.Score(baseline="loo"), N_DRAWS),
        "gumbel": runner(scg.GumbelSoftmax(temperature=TEMPERATURE, hard=False), N_DRAWS),
    }


SYSTEMS = {"numpy": numpy_runners, "storchastic": storch_runners, "scg": scg_runners,
           "scg.jit": lambda cost: scg_runners(cost, jit=True)}
ESTIMATORS = ["enumerate", "disarm", "score_loo", "gumbel", "rebar"]
EVALS = {"enumerate": 2 ** D, "disarm": 2 * N_PAIRS, "score_loo": N_DRAWS,
         "gumbel": N_DRAWS, "rebar": 3 * N_DRAWS}
SAMPLES = {"enumerate": 0, "disarm": N_PAIRS, "score_loo": N_DRAWS, "gumbel": N_DRAWS,
           "rebar": N_DRAWS}
LABEL = {"enumerate": "enumerate 2^10", "disarm": f"DisARM, {N_PAIRS} pairs",
         "score_loo": f"score LOO, {N_DRAWS} draws",
         "gumbel": f"Gumbel-softmax T={TEMPERATURE:g}, {N_DRAWS}",
         "rebar": f"REBAR, {N_DRAWS} draws"}


# ---------------------------------------------------------------- timing and statistics
def statistics_of(fn, exact, draws, deterministic=False):
    """max |z| of the mean of `draws` estimates against the exact gradient, the variance of
    one estimate summed over coordinates, and the estimates' mean."""
    if deterministic:
        g = fn()
        err = np.max(np.abs(g - exact))
        return {"max_z": 0.0 if err < 1e-9 else np.inf, "var": 0.0, "mean": g, "err": err}
    gs = np.array([fn() for _ in range(draws)])
    mean = gs.mean(0)
    var = gs.var(0, ddof=1)
    se = np.sqrt(var / draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (mean - exact) / se, np.where(mean == exact, 0.0, np.inf))
    return {"max_z": float(np.max(np.abs(z))), "var": float(var.sum()), "mean": mean,
            "err": float(np.max(np.abs(mean - exact)))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--stat-draws", type=int, default=4000,
                        help="independent gradient estimates for the bias and variance")
    parser.add_argument("--only", default="numpy,storchastic,scg,scg.jit",
                        help="comma-separated subset of numpy,storchastic,scg,scg.jit")
    parser.add_argument("--costs", default="separable,coupled")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s!r} in --only (choose from {', '.join(SYSTEMS)})")
    costs = [c.strip() for c in args.costs.split(",") if c.strip()]

    versions = timing.peer_versions(systems, args.threads)
    print(timing.command_line())
    print(f"{versions}; float64; time: median of {args.repeats} interleaved repeats; "
          f"bias and variance: {args.stat_draws} independent estimates")

    rows = []
    for cost in costs:
        f = COSTS[cost][0]
        exact = numpy_enumerate(THETA, f)
        print(f"\n{cost}: exact gradient {np.array2string(exact, precision=4)}")
        fns, stats = {}, {}
        for system in systems:
            for est, fn in SYSTEMS[system](cost).items():
                fns[system, est] = fn
        for (system, est), fn in fns.items():
            t0 = time.perf_counter()
            stats[system, est] = statistics_of(fn, exact, args.stat_draws,
                                               deterministic=(est == "enumerate"))
            print(f"  statistics {system:<12} {est:<10} {time.perf_counter() - t0:6.1f} s, "
                  f"max |z| {stats[system, est]['max_z']:.1f}")
        if "numpy" in systems:        # the references must be right
            s = stats["numpy", "enumerate"]
            assert s["err"] == 0.0, s
            for est in ("disarm", "score_loo"):
                assert stats["numpy", est]["max_z"] < 5.0, (est, stats["numpy", est])
        times = timing.time_interleaved(fns, args.repeats, target=0.02)
        for est in ESTIMATORS:
            for system in systems:
                if (system, est) not in fns:
                    continue
                ref = times.get(("numpy", est))
                s = stats[system, est]
                rel = float(s["mean"] @ exact / (exact @ exact) - 1.0)
                rows.append((cost, LABEL[est], system, EVALS[est], times[system, est] * 1e6,
                             times[system, est] / ref if ref else None, s["max_z"], rel,
                             s["var"], s["var"] * SAMPLES[est]))

    print("\n| cost | estimator | system | f evals | time per gradient (median us) "
          "| ratio to numpy by hand | max abs z vs exact | rel. bias along g "
          "| var of one estimate (sum) | per-sample var (sum) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cost, label, system, evals, us, ratio, max_z, rel, var, var1 in rows:
        ratio = f"{ratio:.2f}" if ratio is not None else "-"
        print(f"| {cost} | {label} | {system} | {evals} | {us:.1f} | {ratio} | {max_z:.1f} "
              f"| {rel:+.3f} | {var:.3g} | {var1:.3g} |")
    return rows


if __name__ == "__main__":
    main()
