"""Core autodiff benchmark: scg's tape against PyTorch eager on the CPU, in the same run.

Measures
  * the gradient of a small MLP (1 -> 20 -> 30 -> 2, relu then softplus) with respect to
    all of its parameters, at batch 1 and batch 256;
  * the same gradient under scg.jit (recorded on its first calls, then replayed);
  * the per-operation overhead of the tape on tiny arrays (a chain of elementwise ops on
    a 3-vector, forward and backward, divided by the number of ops).

scg and torch are measured interleaved (scg, torch, scg, torch, ...) and each figure is
the median over the repeats; the ratio is scg / torch (below 1: scg is faster).

Run:  python benchmarks/core_bench.py [--repeats 15] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

from timing import calibrate, per_call

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import scg  # noqa: E402  (the working tree's scg, installed or not)

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None


SIZES = [(1, 20), (20, 30), (30, 2)]
N_CHAIN = 50  # operations in the per-operation overhead chain


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    params = {}
    for k, (i, o) in enumerate(SIZES):
        params[f"W{k}"] = rng.normal(0.0, 1.0 / np.sqrt(i), size=(i, o))
        params[f"b{k}"] = rng.normal(0.0, 0.1, size=(o,))
    return params


# ---------------------------------------------------------------- scg
def scg_loss(params, x, y):
    h = scg.relu(x @ params["W0"] + params["b0"])
    h = scg.softplus(h @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return np.sum((out - y) ** 2) / x.shape[0]


scg_grad = scg.grad(scg_loss)


def numpy_grad(params, x, y):
    """The same gradient written out by hand in numpy: the floor for any tape over numpy."""
    z0 = x @ params["W0"] + params["b0"]
    h0 = np.maximum(z0, 0.0)
    z1 = h0 @ params["W1"] + params["b1"]
    h1 = np.maximum(z1, 0.0) + np.log1p(np.exp(-np.abs(z1)))
    d = h1 @ params["W2"] + params["b2"] - y
    gd = d * (2.0 / x.shape[0])
    gz1 = (gd @ params["W2"].T) / (1.0 + np.exp(-z1))
    gz0 = (gz1 @ params["W1"].T) * (z0 > 0)
    return {"W0": x.T @ gz0, "b0": gz0.sum(0), "W1": h0.T @ gz1, "b1": gz1.sum(0),
            "W2": h1.T @ gd, "b2": gd.sum(0)}


def scg_chain(x):
    for _ in range(N_CHAIN // 5):
        x = np.sin(x) * 1.01 + 0.5
        x = np.tanh(x) - 0.1
    return np.sum(x)


scg_chain_grad = scg.grad(scg_chain)


# ---------------------------------------------------------------- torch
def torch_loss(params, x, y):
    tf = torch.nn.functional
    h = torch.relu(x @ params["W0"] + params["b0"])
    h = tf.softplus(h @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return torch.sum((out - y) ** 2) / x.shape[0]


def torch_grad(params, x, y):
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = torch_loss(leaves, x, y)
    grads = torch.autograd.grad(loss, list(leaves.values()))
    return dict(zip(leaves, grads))


def torch_chain_grad(x):
    x0 = x.detach().requires_grad_(True)
    x = x0
    for _ in range(N_CHAIN // 5):
        x = torch.sin(x) * 1.01 + 0.5
        x = torch.tanh(x) - 0.1
    (g,) = torch.autograd.grad(torch.sum(x), [x0])
    return g


# ---------------------------------------------------------------- timing
def compare(name, f_scg, f_torch, repeats, scale=1.0, unit="us", f_ref=None):
    """Print median times of scg and torch and their ratio; with f_ref, also the median of
    a hand-written numpy reference and its ratio to torch (in brackets)."""
    fns = [f_scg, f_torch] + ([f_ref] if f_ref else [])
    for f in fns:
        f()  # warm up
    numbers = [calibrate(f) for f in fns]
    times = [[] for _ in fns]
    for _ in range(repeats):  # interleaved, so drifts in machine load hit all alike
        for f, n, ts in zip(fns, numbers, times):
            ts.append(per_call(f, n))
    s, t, *r = [statistics.median(ts) * 1e6 / scale for ts in times]
    line = f"{name:<34} {s:10.2f} {unit}  {t:10.2f} {unit}  {s / t:8.2f}"
    if r:
        line += f"   [numpy by hand {r[0]:.2f} {unit}, {r[0] / t:.2f}]"
    print(line)
    return s, t


def check_same(params, x, y):
    g_scg = scg_grad(params, x, y)
    g_np = numpy_grad(params, x, y)
    tp = {k: torch.tensor(v) for k, v in params.items()}
    g_t = torch_grad(tp, torch.tensor(x), torch.tensor(y))
    for k in params:
        np.testing.assert_allclose(g_scg[k], g_t[k].numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g_np[k], g_t[k].numpy(), rtol=1e-9, atol=1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads (default: torch's own default)")
    opts = ap.parse_args()
    if torch is None:
        print("PyTorch is not installed: the side-by-side benchmark is skipped "
              "(pip install -e '.[bench]').")
        return
    if opts.threads:
        torch.set_num_threads(opts.threads)
    print(f"numpy {np.__version__}, torch {torch.__version__}, "
          f"torch threads {torch.get_num_threads()}, float64, median of {opts.repeats}")
    print(f"{'':<34} {'scg':>13}  {'torch':>13}  {'scg/torch':>8}")
    params = init_params()
    tparams = {k: torch.tensor(v) for k, v in params.items()}
    rng = np.random.default_rng(1)
    for batch in (1, 256):
        x = rng.normal(size=(batch, 1))
        y = rng.normal(size=(batch, 2))
        check_same(params, x, y)
        tx, ty = torch.tensor(x), torch.tensor(y)
        compare(f"MLP gradient, batch {batch}",
                lambda: scg_grad(params, x, y), lambda: torch_grad(tparams, tx, ty),
                opts.repeats, f_ref=lambda: numpy_grad(params, x, y))
        jitted = scg.jit(scg_grad)
        t0 = time.perf_counter()
        while not jitted.stats["replays"]:
            jitted(params, x, y)
        record = time.perf_counter() - t0
        for k, g in jitted(params, x, y).items():
            np.testing.assert_allclose(g, numpy_grad(params, x, y)[k], rtol=1e-9, atol=1e-12)
        compare("  the same under scg.jit", lambda: jitted(params, x, y),
                lambda: torch_grad(tparams, tx, ty), opts.repeats,
                f_ref=lambda: numpy_grad(params, x, y))
        print(f"{'':<34} (recording before the first replay: {record * 1e3:.1f} ms)")
    v = rng.normal(size=3)
    tv = torch.tensor(v)
    np.testing.assert_allclose(scg_chain_grad(v), torch_chain_grad(tv).numpy(), rtol=1e-9)
    compare(f"per op, fwd+bwd, {N_CHAIN} ops on (3,)",
            lambda: scg_chain_grad(v), lambda: torch_chain_grad(tv), opts.repeats,
            scale=N_CHAIN)


if __name__ == "__main__":
    main()
