"""W3: one gradient of a discrete VAE's negative ELBO.

A batch of 128 binary images (784 pixels), 200 Bernoulli latents, linear encoder and
decoder, 4 draws per data point, the score function with a leave-one-out baseline formed
per data point (a plate over the batch). scg against the same estimator written by hand in
PyTorch (float64 both), measured interleaved in one run, median of --repeat runs. The two
gradients are checked to agree when fed the same draws.

Usage: python benchmarks/w3_discrete_vae.py [--repeat 9]
"""

import argparse
import statistics
import time

import numpy as np

import scg

B, PIXELS, LATENTS, DRAWS = 128, 784, 200, 4
LOG_HALF = np.log(0.5)


def make_problem(seed=0):
    rng = np.random.default_rng(seed)
    data = (rng.random((B, PIXELS)) < 0.3).astype(float)
    params = {"enc_W": rng.normal(0, 0.01, (PIXELS, LATENTS)), "enc_b": np.zeros(LATENTS),
              "dec_W": rng.normal(0, 0.01, (LATENTS, PIXELS)), "dec_b": np.zeros(PIXELS)}
    return params, data


def bernoulli_logpdf(x, logits):
    """log p(x | logits) for x in {0, 1}: x * l - softplus(l)."""
    return x * logits - scg.softplus(logits)


def model(params, data):
    with scg.plate("data", B, dim=-1):
        q = scg.Bernoulli(logits=data @ params["enc_W"] + params["enc_b"]).to_event(1)
        z = scg.sample("z", q, estimator=scg.Score("loo"))
        logits = z @ params["dec_W"] + params["dec_b"]
        log_lik = np.sum(bernoulli_logpdf(data, logits), axis=-1)
        log_prior = LATENTS * LOG_HALF
        scg.cost("neg_elbo", -(log_lik + log_prior - q.log_prob(z)))


def scg_runner(params, data):
    grad = scg.grad(scg.expectation(model, n=DRAWS, seed=0))
    return lambda: grad(params, data)


def torch_gradient(params, data, z=None, generator=None):
    import torch
    F = torch.nn.functional
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    x = torch.tensor(data)
    logits_q = x @ p["enc_W"] + p["enc_b"]
    if z is None:
        with torch.no_grad():
            z = torch.bernoulli(torch.sigmoid(logits_q).expand(DRAWS, B, LATENTS),
                                generator=generator)
    log_q = (z * logits_q - F.softplus(logits_q)).sum(-1)                  # (draws, B)
    logits = z @ p["dec_W"] + p["dec_b"]
    log_lik = (x * logits - F.softplus(logits)).sum(-1)
    # (log q without its parameters' derivative, of mean zero: as scg and Pyro leave it out)
    f = -(log_lik + LATENTS * LOG_HALF - log_q.detach())                    # per draw, point
    baseline = (f.sum(0) - f) / (DRAWS - 1)
    surrogate = (f + log_q * (f - baseline).detach()).mean(0).sum()
    surrogate.backward()
    return {k: v.grad.numpy() for k, v in p.items()}


def torch_runner(params, data):
    import torch
    generator = torch.Generator().manual_seed(0)
    return lambda: torch_gradient(params, data, generator=generator)


def check_agreement(params, data):
    """scg and the hand-written estimator give the same gradient for the same draws."""
    import torch
    E = scg.expectation(model, n=DRAWS, seed=1)
    g = scg.grad(E)(params, data)
    z = torch.tensor(np.asarray(E.last_trace.sites["z"].value))
    ref = torch_gradient(params, data, z=z)
    worst = max(np.max(np.abs(g[k] - ref[k])) / (np.max(np.abs(ref[k])) + 1e-300) for k in g)
    print(f"same draws: max relative difference between scg and torch gradients {worst:.1e}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    params, data = make_problem()
    runners = {"scg": scg_runner(params, data)}
    try:
        runners["torch"] = torch_runner(params, data)
        check_agreement(params, data)
    except ImportError:
        print("torch is not installed: measuring scg only (pip install -e '.[bench]')")
    times = {k: [] for k in runners}
    for run in runners.values():
        run()                                   # warm up
    for _ in range(args.repeat):                # interleaved
        for k, run in runners.items():
            t0 = time.perf_counter()
            run()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"batch {B}, {PIXELS} pixels, {LATENTS} latents, {DRAWS} draws per point, "
          f"{args.repeat} repeats (median)")
    for k, t in med.items():
        print(f"  {k:<6} {t * 1e3:8.1f} ms per gradient")
    if "torch" in med:
        print(f"  torch / scg time: {med['torch'] / med['scg']:.2f}")


if __name__ == "__main__":
    main()
