"""A categorical VAE on scikit-learn's digits: ReinMax, straight-through Gumbel-softmax,
Gumbel-Rao and IndeCateR in scg against the same estimators written by hand in PyTorch
from the papers.

A small version of the MNIST-VAE of the ReinMax paper (Liu et al. 2023): the 1,797 digits
(8 x 8) binarized at 8 of 16; 4 latent variables of 8 categories (one-hot); MLP encoder
64-128-32 and decoder 32-128-64 (relu); a uniform prior, its KL to q in closed form; the
reconstruction term of the ELBO at one draw per image; minibatch 100, Adam(1e-3). The
same initial weights and minibatches on both sides, float64, one PyTorch thread.
IndeCateR (De Smet et al. 2023) sums, for each latent d of each image, over its 8 values
with the other latents at their draw: 1 + 4 x 8 = 33 evaluations of the decoder per
image (torch's version: the decoder's gradient at the draw, and the 32 branches of every
image as one batched forward without gradient). Measured:

1. the variance of the whole gradient over independent calls at fixed parameters (those
   at initialization, and after `--steps` of ST training), summed over the coordinates:
   scg against torch for each estimator (target: within 10 %);
2. the ELBO per image on all the digits (100 draws per image) after `--steps` steps from
   the same start: scg against torch (target: within 0.3 nats), and the ordering the
   papers report (ReinMax above straight-through);
3. the time per training step (gradient and Adam update), scg's step under scg.jit against
   torch's, interleaved, median of `--repeats` rounds (target: scg.jit <= 0.6x torch);
4. IndeCateR against leave-one-out REINFORCE at equal evaluations (scg.Score("loo") with
   n = 33 draws), the ordering De Smet et al. report: the variance of the encoder's
   gradient (where the two differ; the decoder's is pathwise in both, at 1 draw against
   33) and of the whole gradient, at the same two points, in scg.

    python benchmarks/categorical_vae.py                 # the default run (several minutes)
    python benchmarks/categorical_vae.py --steps 3000 --calls 400 --repeats 7
    python benchmarks/categorical_vae.py --time-only     # 3. alone (about two minutes)
    python benchmarks/categorical_vae.py --time-only --only ReinMax,"ST Gumbel-softmax"

Needs scikit-learn and PyTorch (pip install -e ".[bench]"); one BLAS thread.
"""

import argparse
import os
import statistics
import time

# (one thread for numpy's BLAS, as for PyTorch: on a shared 2-core host a second thread
# makes these small matrix products several times slower)
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import scg  # noqa: E402

D, K, PIXELS, HIDDEN, BATCH = 4, 8, 64, 128, 100
TEMPERATURE, GR_K = 1.0, 10

ESTIMATORS = {
    "ReinMax": lambda: scg.ReinMax(TEMPERATURE),
    "ST Gumbel-softmax": lambda: scg.GumbelSoftmax(TEMPERATURE, hard=True),
    "Gumbel-Rao": lambda: scg.GumbelRao(TEMPERATURE, k=GR_K),
    "IndeCateR": lambda: scg.IndeCateR(),
}


def load_data():
    from sklearn.datasets import load_digits
    return (load_digits().images.reshape(-1, PIXELS) >= 8).astype(float)


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    return {"enc": scg.nn.init_mlp(rng, [PIXELS, HIDDEN, D * K]),
            "dec": scg.nn.init_mlp(rng, [D * K, HIDDEN, PIXELS])}


# ---------------------------------------------------------------- scg
def make_model(estimator):
    """The negative ELBO of each image of a minibatch x (B, 64), at one draw of z."""
    def model(params, x):
        B = x.shape[0]
        with scg.plate("batch", B):
            logits = scg.nn.mlp(params["enc"], x).reshape(B, D, K)
            z = scg.sample("z", scg.OneHotCategorical(logits=logits).to_event(1),
                           estimator=estimator)
            out = scg.nn.mlp(params["dec"], z.reshape(B, D * K))
            log_lik = np.sum(x * out - scg.softplus(out), axis=-1)
            log_q = scg.log_softmax(logits, axis=-1)
            kl = np.sum(np.exp(log_q) * (log_q + np.log(K)), axis=(-2, -1))
            return -(log_lik - kl)
    return model


def scg_step(label, seed):
    E = scg.expectation(make_model(ESTIMATORS[label]()), n=1, seed=seed)
    opt = scg.optim.Adam(1e-3)
    grad = scg.grad(E)

    def step(params, state, x):
        g = grad(params, x)
        params, state = opt.update(g, state, params)
        return params, state
    return scg.jit(step), opt, E


# ---------------------------------------------------------------- PyTorch, by hand
def torch_side():
    import torch
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    F = torch.nn.functional

    def mlp(layers, x):
        for i, (W, b) in enumerate(layers):
            x = x @ W + b
            if i < len(layers) - 1:
                x = torch.relu(x)
        return x

    def gumbel(shape, gen):
        u = torch.rand(shape, generator=gen).clamp(1e-300, 1 - 1e-16)
        return -torch.log(-torch.log(u))

    def one_hot_sample(logits, gen):
        return F.one_hot(torch.argmax(logits + gumbel(logits.shape, gen), -1), K).double()

    def straight_through(logits, gen):  # Jang et al. 2017, hard
        y = torch.softmax((logits + gumbel(logits.shape, gen)) / TEMPERATURE, -1)
        hard = F.one_hot(torch.argmax(y, -1), K).double()
        return hard - y.detach() + y

    class ReinMaxFn(torch.autograd.Function):  # Liu et al. 2023, Algorithm 2
        @staticmethod
        def forward(ctx, logits, sample):
            ctx.save_for_backward(logits, sample)
            return sample

        @staticmethod
        def backward(ctx, g):
            logits, sample = ctx.saved_tensors
            pi0 = torch.softmax(logits, -1)
            pi1 = 0.5 * (torch.softmax(logits / TEMPERATURE, -1) + sample)

            def jvp(p):
                return p * g - p * (p * g).sum(-1, keepdim=True)
            return 2.0 * jvp(pi1) - 0.5 * jvp(pi0), None

    def reinmax(logits, gen):
        return ReinMaxFn.apply(logits, one_hot_sample(logits.detach(), gen))

    def gumbel_rao(logits, gen):  # Paulus et al. 2021, eq. 9 and Algorithm 1
        sample = one_hot_sample(logits.detach(), gen)
        with torch.no_grad():
            theta = torch.log_softmax(logits, -1)
            E = -torch.log(torch.rand((GR_K,) + logits.shape, generator=gen)
                           .clamp(1e-300, 1 - 1e-16))
            top = (sample * E).sum(-1, keepdim=True)
            cond = sample * -torch.log(top) + (1 - sample) * -torch.log(
                E * torch.exp(-theta) + top)
            noise = cond - theta
        soft = torch.softmax((logits + noise) / TEMPERATURE, -1).mean(0)
        return sample + soft - soft.detach()

    draw = {"ReinMax": reinmax, "ST Gumbel-softmax": straight_through,
            "Gumbel-Rao": gumbel_rao}

    def negative_log_lik(dec, x, z):
        out = mlp(dec, z)
        return -(x * out - F.softplus(out)).sum(-1)

    # (the D K branches of a draw: row (d, k) keeps the draw's one-hot blocks other than
    # d and puts e_k in block d)
    keep = 1.0 - torch.kron(torch.eye(D), torch.ones(K, K))  # (D K, D K): blocks off d
    put = torch.eye(D * K)

    def indecater(tp, x, logits, gen):  # De Smet et al. 2023, the CatLog-derivative trick
        """The negative ELBO's surrogate: the decoder's gradient at the draw, the
        encoder's by sum_d sum_k grad p_d(k) f(x_-d, k), the D K branches of each image as
        one batched forward of the decoder."""
        B = x.shape[0]
        sample = one_hot_sample(logits.detach(), gen).reshape(B, 1, D * K)
        main = negative_log_lik(tp["dec"], x, sample[:, 0])
        with torch.no_grad():
            branches = sample * keep + put  # (B, D K, D K)
            f = negative_log_lik(tp["dec"], x[:, None, :], branches).reshape(B, D, K)
            p = torch.softmax(logits, -1)
            coef = p * (f - (p * f).sum(-1, keepdim=True))
        return main.sum() + (coef * torch.log_softmax(logits, -1)).sum()

    def to_torch(params):
        return {side: [(torch.tensor(l["W"], requires_grad=True),
                        torch.tensor(l["b"], requires_grad=True)) for l in params[side]]
                for side in ("enc", "dec")}

    def leaves(tp):
        return [t for side in ("enc", "dec") for pair in tp[side] for t in pair]

    def loss(tp, x, label, gen):
        B = x.shape[0]
        logits = mlp(tp["enc"], x).reshape(B, D, K)
        log_q = torch.log_softmax(logits, -1)
        kl = (log_q.exp() * (log_q + np.log(K))).sum((-2, -1)).sum()
        if label == "IndeCateR":
            return indecater(tp, x, logits, gen) + kl
        z = draw[label](logits, gen)
        return negative_log_lik(tp["dec"], x, z.reshape(B, D * K)).sum() + kl

    def trainer(label, params, seed):
        tp = to_torch(params)
        opt = torch.optim.Adam(leaves(tp), lr=1e-3)
        gen = torch.Generator().manual_seed(seed)

        def step(x):
            opt.zero_grad()
            loss(tp, torch.from_numpy(x), label, gen).backward()
            opt.step()
        return tp, step

    def gradient(label, params, x, gen):
        tp = to_torch(params)
        loss(tp, torch.from_numpy(x), label, gen).backward()
        return np.concatenate([t.grad.numpy().ravel() for t in leaves(tp)])

    def back(tp):
        return {side: [{"W": W.detach().numpy().copy(), "b": b.detach().numpy().copy()}
                       for W, b in tp[side]] for side in ("enc", "dec")}
    return torch, trainer, gradient, back


# ---------------------------------------------------------------- measurements
def flat(g):
    return np.concatenate([a.ravel() for side in ("enc", "dec") for l in g[side]
                           for a in (l["W"], l["b"])])


def variance(samples):
    return float(np.sum(np.var(np.array(samples), axis=0, ddof=1)))


def variance_and_error(samples):
    """The variance of one estimate summed over the coordinates, and its standard error
    (from the spread of each call's summed squared deviation)."""
    samples = np.array(samples)
    calls = len(samples)
    per_call = np.sum((samples - samples.mean(axis=0)) ** 2, axis=1) * calls / (calls - 1)
    return float(per_call.mean()), float(per_call.std(ddof=1) / np.sqrt(calls))


def encoder_size(params):
    return sum(l["W"].size + l["b"].size for l in params["enc"])


def indecater_against_loo(points, x, calls):
    """The variance of one gradient estimate of IndeCateR (one draw: 1 + D K evaluations
    per image) and of leave-one-out REINFORCE with as many draws, in scg, at each of
    `points` (name -> parameters): {name: {estimator: {part: (variance, stderr)}}}."""
    evaluations = 1 + D * K
    arms = {"IndeCateR": (scg.IndeCateR(), 1),
            f"Score('loo'), n = {evaluations}": (scg.Score("loo"), evaluations)}
    out = {}
    for where, params in points.items():
        enc = encoder_size(params)
        out[where] = {}
        for label, (estimator, n) in arms.items():
            g = scg.jit(scg.grad(scg.expectation(make_model(estimator), n=n, seed=11)))
            samples = np.array([flat(g(params, x)) for _ in range(calls)])
            out[where][label] = {"encoder": variance_and_error(samples[:, :enc]),
                                 "whole": variance_and_error(samples)}
    return out


def elbo(params, data, draws=100, seed=123):
    """The ELBO per image on `data` (nats; higher is better), by `draws` exact draws."""
    E = scg.expectation(make_model("score"), n=draws, seed=seed)
    return -E(params, data) / len(data)


def step_times(start, batches, trainer, repeats, timed_steps, seed, labels=ESTIMATORS):
    """Seconds per training step of each estimator, scg.jit and torch, in interleaved
    rounds of `timed_steps` steps from `start` (scg's recordings made before)."""
    times = {label: {"scg.jit": [], "torch": []} for label in labels}
    steppers = {}
    for label in labels:
        step, opt, _ = scg_step(label, seed)
        state = [start, opt.init(start)]
        for _ in range(3):  # (the recordings: a step with copies settles them first)
            step(*state, batches[0])
        tp, tstep = trainer(label, start, seed)
        steppers[label] = (step, state, tstep)
    for _ in range(repeats):
        for label, (step, state, tstep) in steppers.items():
            t0 = time.perf_counter()
            for x in batches[:timed_steps]:
                state[:] = step(state[0], state[1], x)
            times[label]["scg.jit"].append((time.perf_counter() - t0) / timed_steps)
            t0 = time.perf_counter()
            for x in batches[:timed_steps]:
                tstep(x)
            times[label]["torch"].append((time.perf_counter() - t0) / timed_steps)
    return times


def main(steps=1500, calls=200, repeats=5, timed_steps=50, seed=0, time_only=False,
         labels=tuple(ESTIMATORS)):
    data = load_data()
    torch, trainer, torch_gradient, back = torch_side()
    order = np.random.default_rng(seed + 1)
    batches = [data[order.choice(len(data), BATCH, replace=False)]
               for _ in range(timed_steps if time_only else steps)]
    start = init_params(seed)
    print(f"{len(data)} digits binarized at 8 of 16; {D} latents x {K} categories; MLP "
          f"{PIXELS}-{HIDDEN}-{D * K} and back; batch {BATCH}; Adam(1e-3); T = {TEMPERATURE}, "
          f"Gumbel-Rao k = {GR_K}; float64\n")
    if time_only:
        times = step_times(start, batches, trainer, repeats, timed_steps, seed, labels)
        print(f"{'estimator':<19}{'us/step jit':>13}{'torch':>8}{'ratio':>7}")
        for label in labels:
            js, tt = (statistics.median(times[label][k]) for k in ("scg.jit", "torch"))
            print(f"{label:<19}{1e6 * js:>13.0f}{1e6 * tt:>8.0f}{js / tt:>7.2f}")
        print(f"\n(time: median of {repeats} interleaved rounds of {timed_steps} steps)")
        return None, times, {}

    # 1. training: ELBO after `steps` steps, same start and minibatches
    trained, result = {}, {}
    for label in labels:
        step, opt, _ = scg_step(label, seed)
        params, state = start, opt.init(start)
        for x in batches:
            params, state = step(params, state, x)
        tp, tstep = trainer(label, start, seed)
        for x in batches:
            tstep(x)
        trained[label] = (params, back(tp))
        result[label] = {"elbo scg": elbo(params, data), "elbo torch": elbo(back(tp), data)}

    # 2. gradient variance at fixed parameters: at the start, and where ST's run arrived
    x = data[:BATCH]
    points = {"init": start}
    if "ST Gumbel-softmax" in trained:
        points["trained"] = trained["ST Gumbel-softmax"][0]
    for where, params in points.items():
        for label in labels:
            E = scg.expectation(make_model(ESTIMATORS[label]()), n=1, seed=7)
            g = scg.jit(scg.grad(E))
            s = variance([flat(g(params, x)) for _ in range(calls)])
            gen = torch.Generator().manual_seed(7)
            t = variance([torch_gradient(label, params, x, gen) for _ in range(calls)])
            result[label][f"var {where}"] = (s, t)

    # 3. time per step, interleaved rounds, medians
    times = step_times(start, batches, trainer, repeats, timed_steps, seed, labels)

    # 4. IndeCateR against leave-one-out REINFORCE at equal evaluations
    against_loo = indecater_against_loo(points, x, calls) if "IndeCateR" in labels else {}

    print(f"{'estimator':<19}{'ELBO scg':>10}{'torch':>9}{'diff':>7}"
          f"{'var(init) scg/torch':>21}{'var(trained) scg/torch':>24}"
          f"{'us/step jit':>13}{'torch':>8}{'ratio':>7}")
    for label, r in result.items():
        js, tt = (statistics.median(times[label][k]) for k in ("scg.jit", "torch"))
        vi, vt = r["var init"], r.get("var trained", (np.nan, 1.0))
        print(f"{label:<19}{r['elbo scg']:>10.2f}{r['elbo torch']:>9.2f}"
              f"{r['elbo scg'] - r['elbo torch']:>7.2f}{vi[0] / vi[1]:>21.3f}"
              f"{vt[0] / vt[1]:>24.3f}{1e6 * js:>13.0f}{1e6 * tt:>8.0f}{js / tt:>7.2f}")
    print(f"\n(variance: of the whole gradient over {calls} calls on one minibatch, summed; "
          f"time: median of {repeats} interleaved rounds of {timed_steps} steps; ELBO: "
          f"{steps} steps, 100 draws per image on all the digits)")
    if "ReinMax" in result and "ST Gumbel-softmax" in result:
        gap = result["ReinMax"]["elbo scg"] - result["ST Gumbel-softmax"]["elbo scg"]
        gap_t = result["ReinMax"]["elbo torch"] - result["ST Gumbel-softmax"]["elbo torch"]
        print(f"ReinMax - ST ELBO: {gap:+.2f} nats in scg, {gap_t:+.2f} in torch")
    for where, arms in against_loo.items():
        print(f"\nvariance of one gradient estimate at equal evaluations ({where}, {calls} "
              "calls, scg; +- its standard error):")
        loo = [a for a in arms if a != "IndeCateR"][0]
        for label, parts in arms.items():
            print(f"  {label:<24}" + "".join(
                f"{part} {v:10.4g} +- {e:8.2g}   " for part, (v, e) in parts.items()))
        print("  IndeCateR / leave-one-out: " + ", ".join(
            f"{part} {arms['IndeCateR'][part][0] / arms[loo][part][0]:.3f}"
            for part in ("encoder", "whole")))
    return result, times, against_loo


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-only", action="store_true",
                    help="only the time per step (3.), without training and variances")
    ap.add_argument("--only", default=",".join(ESTIMATORS),
                    help="the estimators to run, comma-separated (default: all)")
    a = ap.parse_args()
    chosen = tuple(label.strip() for label in a.only.split(","))
    unknown = [label for label in chosen if label not in ESTIMATORS]
    if unknown:
        ap.error(f"--only: unknown estimator(s) {unknown}; choose among {list(ESTIMATORS)}")
    main(a.steps, a.calls, a.repeats, a.timed_steps, a.seed, a.time_only, chosen)
