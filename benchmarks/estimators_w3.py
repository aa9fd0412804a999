"""Estimators on W3's discrete VAE: variance and time of scg's and Storchastic's estimators.

The model of benchmarks/w3_discrete_vae.py at a size where the latents can be enumerated:
a batch of B binary images (784 pixels, each pixel 1 with probability 0.3), LATENTS Bernoulli
latents, linear encoder and decoder with W3's initialization (weights N(0, 0.01), zero
biases), a plate over the batch. W3's sizes (128 images, 200 latents) and its constants are
module-level there, so the construction is repeated here with the sizes as parameters
(`make_problem`, the same recipe). One change to the cost: the KL term is the analytic
KL(q(z | x) || Bernoulli(1/2)^LATENTS), a separate cost that does not depend on z, instead of
W3's single-draw log q(z) - log p(z) inside the cost; the objective (the negative ELBO summed
over the batch) is the same, and the relaxed (Gumbel-softmax) draws never meet log q. The
estimators act on the reconstruction cost -log p(x | z).

  scg          Score("loo") and GumbelSoftmax(temperature=1.0) with n = N_DRAWS draws per
               image, DisARM() with n = N_PAIRS pairs (the same number of decoder
               evaluations, 2 * N_PAIRS = N_DRAWS), Enumerate() (2^LATENTS states per image)
  storchastic  the same model ported to torch (float64, the same weights and data, the batch
               a storch plate via denote_independent, costs scaled by B because Storchastic
               averages over plates): ScoreFunction(baseline_factory="batch_average", the
               leave-one-out baseline), GumbelSoftmax (temperature 1, annealing off), DisARM,
               Expect
  numpy        the exact gradient by enumeration, written by hand (the reference for the
               bias; it is also timed)

Measured per (estimator, system):
  * time of one gradient: interleaved, each callable repeated for >= 50 ms per repeat,
    median over --repeats; time per draw = that / decoder evaluations per image;
  * variance: --stat-draws independent gradient estimates; the per-coordinate variance of
    one gradient estimate (as configured), summed over the encoder's parameters (enc_W,
    enc_b: the gradient that goes through the estimator) and over all parameters;
  * bias against the exact gradient g: the estimates projected on u = g / |g|; rel. bias =
    mean(est . u) / |g| - 1 and its z = (mean - |g|) / stderr (|z| above about 4: biased),
    once for the encoder's parameters (where the estimators differ) and once for the
    decoder's (pathwise given z: biased only if the draws or their weights are wrong).

Storchastic and torch are optional and not in pyproject.toml:

    pip install torch==2.13.0 storchastic

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/estimators_w3.py [--repeats 5]
          [--stat-draws 200] [--only numpy,storchastic,scg] [--threads 1]
(numpy's BLAS with its default 2 threads on the shared 2-core VM moves the numpy and scg
figures by 2x to 5x between runs; torch runs with --threads, default 1.)
(the scg part needs scg's Enumerate, DisARM and GumbelSoftmax estimators.)
"""

import argparse
import os
import sys
import time

import numpy as np

import timing

# the working tree's scg, installed or not; imported by the scg part only
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

B, PIXELS, LATENTS = 32, 784, 8
N_DRAWS = 4                  # score and Gumbel-softmax: draws per image
N_PAIRS = N_DRAWS // 2       # DisARM: antithetic pairs per image (2 evaluations each)
TEMPERATURE = 1.0
# scg's n for DisARM: the contract says n counts pairs. If scg's n turns out to count
# evaluations, this is the one place to change (to 2 * N_PAIRS).
SCG_DISARM_N = N_PAIRS
SCG_ENUMERATE_N = 1          # the latents enumerated: nothing is drawn
LOG2 = np.log(2.0)

ESTIMATORS = ["enumerate", "score_loo", "gumbel", "disarm"]
EVALS = {"enumerate": 2 ** LATENTS, "score_loo": N_DRAWS, "gumbel": N_DRAWS,
         "disarm": 2 * N_PAIRS}
LABEL = {"enumerate": f"enumerate 2^{LATENTS}", "score_loo": f"score LOO, {N_DRAWS} draws",
         "gumbel": f"Gumbel-softmax T={TEMPERATURE:g}, {N_DRAWS} draws",
         "disarm": f"DisARM, {N_PAIRS} pairs"}
ENCODER = ("enc_W", "enc_b")
DECODER = ("dec_W", "dec_b")


def make_problem(seed=0, b=B, pixels=PIXELS, latents=LATENTS):
    """W3's recipe (w3_discrete_vae.make_problem) with the sizes as arguments."""
    rng = np.random.default_rng(seed)
    data = (rng.random((b, pixels)) < 0.3).astype(float)
    params = {"enc_W": rng.normal(0, 0.01, (pixels, latents)), "enc_b": np.zeros(latents),
              "dec_W": rng.normal(0, 0.01, (latents, pixels)), "dec_b": np.zeros(pixels)}
    return params, data


def softplus(x):
    return np.logaddexp(0.0, x)


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# ---------------------------------------------------------------- numpy: the exact gradient
STATES = ((np.arange(2 ** LATENTS)[:, None] >> np.arange(LATENTS)) & 1).astype(float)


def objective_exact(params, data):
    """The negative ELBO summed over the batch, by enumeration."""
    lq = data @ params["enc_W"] + params["enc_b"]
    logq = STATES @ lq.T - softplus(lq).sum(-1)                       # (S, B)
    ld = STATES @ params["dec_W"] + params["dec_b"]                    # (S, P)
    loglik = ld @ data.T - softplus(ld).sum(-1)[:, None]               # (S, B)
    kl = np.sum(sigmoid(lq) * lq - softplus(lq), -1) + LATENTS * LOG2
    return float(np.sum(np.exp(logq) * -loglik) + kl.sum())


def numpy_exact_gradient(params, data):
    """d/dparams of sum_b [ sum_s q(s | x_b) (-log p(x_b | s)) + KL(q(. | x_b) || 1/2) ]."""
    lq = data @ params["enc_W"] + params["enc_b"]                      # (B, L)
    p = sigmoid(lq)
    q = np.exp(STATES @ lq.T - softplus(lq).sum(-1))                   # (S, B)
    ld = STATES @ params["dec_W"] + params["dec_b"]                    # (S, P)
    cost = softplus(ld).sum(-1)[:, None] - ld @ data.T                 # (S, B): -log p(x|s)
    qc = q * cost
    d_lq = qc.T @ STATES - qc.sum(0)[:, None] * p + p * (1.0 - p) * lq   # score part + KL
    d_ld = q.sum(1)[:, None] * sigmoid(ld) - q @ data                  # (S, P)
    return {"enc_W": data.T @ d_lq, "enc_b": d_lq.sum(0),
            "dec_W": STATES.T @ d_ld, "dec_b": d_ld.sum(0)}


def numpy_runners(params, data):
    return {"enumerate": lambda: numpy_exact_gradient(params, data)}


# ---------------------------------------------------------------- Storchastic
def storch_runners(params, data):
    import torch
    import storch
    from torch.distributions import Bernoulli
    F = torch.nn.functional
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    x_data = torch.tensor(data)

    def runner(method):
        def run():
            for v in p.values():
                v.grad = None
            x = storch.denote_independent(x_data, 0, "data")
            lq = x @ p["enc_W"] + p["enc_b"]
            kl = (torch.sigmoid(lq) * lq - F.softplus(lq)).sum(-1) + LATENTS * LOG2
            storch.add_cost(B * kl, "kl")              # storch averages over the data plate
            z = method(Bernoulli(logits=lq))
            if z.dtype == torch.bool:                   # DisARM draws booleans
                z = z.to(torch.float64)
            ld = z @ p["dec_W"] + p["dec_b"]
            # `ld * x`, not `x * ld`: the product's plates are then (z, data); in the order
            # (data, z) Storchastic's DisARM fails (arm.py indexes the sample plate with
            # (None,) * plate_index instead of (slice(None),) * plate_index)
            loglik = (ld * x - F.softplus(ld)).sum(-1)
            storch.add_cost(-B * loglik, "reconstruction")
            storch.backward()
            return {k: v.grad.detach().numpy().copy() for k, v in p.items()}
        return run

    M = storch.method
    return {
        "enumerate": runner(M.Expect("z")),
        "score_loo": runner(M.ScoreFunction("z", n_samples=N_DRAWS,
                                            baseline_factory="batch_average")),
        "gumbel": runner(M.GumbelSoftmax("z", n_samples=N_DRAWS,
                                         initial_temperature=TEMPERATURE, annealing_rate=0.0)),
        "disarm": runner(M.DisARM("z", n_samples=N_PAIRS)),
    }


# ---------------------------------------------------------------- scg
def scg_runners(params, data):
    import scg

    def runner(estimator, n):
        def model(params, data):
            with scg.plate("data", B, dim=-1):
                lq = data @ params["enc_W"] + params["enc_b"]
                kl = np.sum(scg.sigmoid(lq) * lq - scg.softplus(lq), axis=-1) + LATENTS * LOG2
                scg.cost("kl", kl)
                z = scg.sample("z", scg.Bernoulli(logits=lq).to_event(1), estimator=estimator)
                ld = z @ params["dec_W"] + params["dec_b"]
                scg.cost("reconstruction", -np.sum(data * ld - scg.softplus(ld), axis=-1))
        grad = scg.grad(scg.expectation(model, n=n, seed=3))
        return lambda: {k: np.asarray(v, dtype=float) for k, v in grad(params, data).items()}

    return {
        "enumerate": runner(scg.Enumerate(), SCG_ENUMERATE_N),
        "score_loo": runner(scg.Score(baseline="loo"), N_DRAWS),
        "gumbel": runner(scg.GumbelSoftmax(temperature=TEMPERATURE, hard=False), N_DRAWS),
        "disarm": runner(scg.DisARM(), SCG_DISARM_N),
    }


SYSTEMS = {"numpy": numpy_runners, "storchastic": storch_runners, "scg": scg_runners}


# ---------------------------------------------------------------- timing and statistics
def flat(g, keys=None):
    return np.concatenate([np.ravel(g[k]) for k in (keys or sorted(g))])


def _projection_bias(gs, exact, keys):
    """Relative bias of the estimates projected on the exact gradient (restricted to keys)
    and its z."""
    g = flat(exact, keys)
    norm = np.linalg.norm(g)
    proj = np.array([flat(e, keys) for e in gs]) @ (g / norm)
    if len(gs) == 1:
        return float(proj[0] / norm - 1.0), 0.0
    se = proj.std(ddof=1) / np.sqrt(len(gs))
    return float(proj.mean() / norm - 1.0), float((proj.mean() - norm) / se)


def statistics_of(fn, exact, draws, deterministic=False):
    if deterministic:
        g = fn()
        err = float(np.max(np.abs(flat(g) - flat(exact))) / np.max(np.abs(flat(exact))))
        assert err < 1e-8, f"an exact gradient differs from numpy's by {err:.2g} (relative)"
        return {"var_enc": 0.0, "var_all": 0.0, "bias_enc": _projection_bias([g], exact, ENCODER),
                "bias_dec": _projection_bias([g], exact, DECODER)}
    gs = [fn() for _ in range(draws)]
    enc = np.array([flat(g, ENCODER) for g in gs])
    full = np.array([flat(g) for g in gs])
    return {"var_enc": float(enc.var(0, ddof=1).sum()),
            "var_all": float(full.var(0, ddof=1).sum()),
            "bias_enc": _projection_bias(gs, exact, ENCODER),
            "bias_dec": _projection_bias(gs, exact, DECODER)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stat-draws", type=int, default=200,
                        help="independent gradient estimates for the variance and the bias")
    parser.add_argument("--only", default="numpy,storchastic,scg",
                        help="comma-separated subset of numpy,storchastic,scg")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s!r} in --only (choose from {', '.join(SYSTEMS)})")

    versions = timing.peer_versions(systems, args.threads)
    print(timing.command_line())
    print(f"{versions}; float64; {B} images, {PIXELS} pixels, {LATENTS} latents; time: median "
          f"of {args.repeats} interleaved repeats; variance and bias: {args.stat_draws} "
          f"independent estimates")

    params, data = make_problem()
    exact = numpy_exact_gradient(params, data)
    # the hand-written gradient against central differences of the enumerated objective
    rng = np.random.default_rng(7)
    for k in params:
        idx = tuple(rng.integers(0, s) for s in params[k].shape)
        h = 1e-5
        up = {kk: vv.copy() for kk, vv in params.items()}
        dn = {kk: vv.copy() for kk, vv in params.items()}
        up[k][idx] += h
        dn[k][idx] -= h
        fd = (objective_exact(up, data) - objective_exact(dn, data)) / (2 * h)
        assert abs(fd - exact[k][idx]) <= 1e-5 * max(1.0, abs(fd)), (k, fd, exact[k][idx])
    print(f"exact gradient: |g| = {np.linalg.norm(flat(exact)):.4g}, |g_encoder| = "
          f"{np.linalg.norm(flat(exact, ENCODER)):.4g} (checked against finite differences)")

    fns, stats = {}, {}
    for system in systems:
        for est, fn in SYSTEMS[system](params, data).items():
            fns[system, est] = fn
    for (system, est), fn in fns.items():
        t0 = time.perf_counter()
        stats[system, est] = statistics_of(fn, exact, args.stat_draws,
                                           deterministic=(est == "enumerate"))
        s = stats[system, est]
        print(f"  statistics {system:<12} {est:<10} {time.perf_counter() - t0:6.1f} s, "
              f"rel. bias: encoder {s['bias_enc'][0]:+.3f} (z {s['bias_enc'][1]:.1f}), "
              f"decoder {s['bias_dec'][0]:+.3f} (z {s['bias_dec'][1]:.1f})")
    times = timing.time_interleaved(fns, args.repeats)

    print("\n| estimator | system | decoder evals per image | time per gradient (median ms) "
          "| time per draw (ms) | var, encoder (sum) | var, all parameters (sum) "
          "| rel. bias along g, encoder (z) | rel. bias along g, decoder (z) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for est in ESTIMATORS:
        for system in systems:
            if (system, est) not in fns:
                continue
            t, s = times[system, est], stats[system, est]
            print(f"| {LABEL[est]} | {system} | {EVALS[est]} | {t * 1e3:.2f} "
                  f"| {t * 1e3 / EVALS[est]:.3f} | {s['var_enc']:.4g} | {s['var_all']:.4g} "
                  f"| {s['bias_enc'][0]:+.3f} ({s['bias_enc'][1]:.1f}) "
                  f"| {s['bias_dec'][0]:+.3f} ({s['bias_dec'][1]:.1f}) |")
    return times, stats


if __name__ == "__main__":
    main()
