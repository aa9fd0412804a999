"""The linear VAE of the DisARM paper on scikit-learn's digits: scg against the same
estimators written by hand in PyTorch, at the same parameters and data.

The setting of examples/digits_vae.py: 1,797 digits binarized at pixel > 7, 32 binary
latents, linear encoder and decoder, a learned Bernoulli prior, minibatch 64, Adam(1e-3).
Estimators of the encoder's gradient: leave-one-out with 2 draws per image (RLOO), DisARM
(one antithetic pair), straight-through Gumbel-softmax (temperature 1), REBAR and RELAX
(3 evaluations per draw, tuned after each gradient call by one Adam step down the
gradient of a probe's |g|^2, as scg tunes them), each also written by hand in PyTorch;
REINFORCE with a moving-average baseline at 3 draws, scg only. Measured:

1. the variance of the minibatch's encoder gradient over independent calls, at shared
   parameters (those a leave-one-out run reaches after `--train-steps` steps), summed over
   the encoder's coordinates;
2. the bias against the exact gradient, by enumeration, with 10 latents: max |z| over the
   encoder's coordinates, z = (mean of the calls - exact) / standard error;
3. the time per training step (gradient and Adam update): scg eager, scg under scg.jit
   (the whole step), PyTorch; interleaved, median of `--repeats` rounds;
4. the ELBO per image on the whole data after `--steps` steps of training from the same
   initial parameters with the same minibatches.

    python benchmarks/digits_vae.py                    # the full run (about 10 minutes)
    python benchmarks/digits_vae.py --steps 200 --calls 100 --repeats 3   # a quick look
    python benchmarks/digits_vae.py --parts 3 --only DisARM   # one part, one estimator

Needs scikit-learn and PyTorch (pip install -e ".[bench]"); float64 everywhere, one
thread for PyTorch.
"""

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import digits_vae as D  # noqa: E402

import scg  # noqa: E402

LABELS = list(D.ESTIMATORS)


# ---------------------------------------------------------------- PyTorch, by hand
def torch_side():
    import torch
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    F = torch.nn.functional

    def neg_elbo(p, x, z, logits):
        out = z @ p["dec_W"] + p["dec_b"]
        log_lik = (x * out - F.softplus(out)).sum(-1)
        log_prior = (z * p["prior"] - F.softplus(p["prior"])).sum(-1)
        log_q = (z * logits - F.softplus(logits)).sum(-1)
        return -(log_lik + log_prior - log_q)

    def loo(p, x, gen):
        logits = x @ p["enc_W"] + p["enc_b"]
        probs = torch.sigmoid(logits)
        zs = [(torch.rand(logits.shape, generator=gen) < probs.detach()).double()
              for _ in range(2)]
        fs = [neg_elbo(p, x, z, logits) for z in zs]
        lqs = [(z * logits - F.softplus(logits)).sum(-1) for z in zs]
        total = 0.0
        for i in range(2):
            total = total + fs[i] + lqs[i] * (fs[i] - fs[1 - i]).detach()
        return (total / 2).sum()

    def disarm(p, x, gen):
        logits = x @ p["enc_W"] + p["enc_b"]
        probs = torch.sigmoid(logits).detach()
        u = torch.rand(logits.shape, generator=gen)
        b, bt = (u < probs).double(), (1 - u < probs).double()
        fb, fbt = neg_elbo(p, x, b, logits), neg_elbo(p, x, bt, logits)
        factor = torch.where(b != bt, torch.where(bt == 1, -1.0, 1.0), 0.0) * \
            torch.sigmoid(logits.detach().abs())
        g = 0.5 * (fb - fbt).detach()[:, None] * factor
        return (0.5 * (fb + fbt)).sum() + (logits * g).sum()

    def gumbel(p, x, gen):
        logits = x @ p["enc_W"] + p["enc_b"]
        u = torch.rand(logits.shape, generator=gen).clamp(1e-12, 1 - 1e-12)
        soft = torch.sigmoid(logits + torch.log(u) - torch.log1p(-u))
        z = (soft > 0.5).double() + soft - soft.detach()
        return neg_elbo(p, x, z, logits).sum()

    tiny, below_one = np.finfo(float).tiny, 1.0 - np.finfo(float).epsneg  # (scg's clip)

    def relaxations(logits, gen, log_T, noise=None):
        """scg.REBAR's draw: z = a + log u - log(1 - u), b = 1[z > 0], z~ ~ p(z | b) from a
        second uniform v along a path in a; (b, sigmoid(a) plain, s(z), s(z~), the noise),
        s(z) = sigmoid(z / T). `noise`: (u, v) drawn before (else from gen)."""
        u, v = noise if noise is not None else (
            torch.rand(logits.shape, generator=gen).clamp(tiny, below_one) for _ in range(2))
        probs = torch.sigmoid(logits)
        b = (u > 1 - probs.detach()).double()
        z = logits + torch.log(u) - torch.log1p(-u)
        u_t = b * (1 - probs + v * probs) + (1 - b) * v * (1 - probs)
        z_t = logits + torch.log(u_t) - torch.log1p(-u_t)
        T = torch.exp(log_T)
        return b, probs.detach(), torch.sigmoid(z / T), torch.sigmoid(z_t / T), (u, v)

    def rebar(latent, relax):
        """scg.REBAR(temperature=0.5, scale=1.0), or with `relax` scg.RELAX(): the
        control c(s) = eta f(s) + r(s), r a tanh MLP of an image's relaxed latents (scg's
        default: 16 hidden units, last layer zero, so RELAX starts as REBAR). Returns the
        surrogate and the tuning step, which share the tuned parameters."""
        th = {"log_T": np.log(0.5), "eta": 1.0}  # (T in log space, as scg tunes it)
        if relax:  # (the start of scg's default control: the same seed and init)
            hidden, last = scg.nn.init_mlp(0, [latent, 16, 1], init="glorot")
            th.update(W1=hidden["W"], b1=hidden["b"], W2=0 * last["W"], b2=last["b"])
        th = {k: torch.tensor(v, requires_grad=True) for k, v in th.items()}
        opt = torch.optim.Adam(list(th.values()), lr=0.01)  # (scg.optim.Adam's betas, eps)

        def r(s, th):  # (one number per image)
            if not relax:
                return 0.0
            return (torch.tanh(s @ th["W1"] + th["b1"]) @ th["W2"] + th["b2"])[:, 0]

        def surrogate(p, x, gen):
            c = {k: t.detach() for k, t in th.items()}  # (as they are: tune comes after)
            logits = x @ p["enc_W"] + p["enc_b"]
            b, probs, s, s_t, _ = relaxations(logits, gen, c["log_T"])
            f_b, f_s, f_t = (neg_elbo(p, x, z, logits) for z in (b, s, s_t))
            c_s, c_t = c["eta"] * f_s + r(s, c), c["eta"] * f_t + r(s_t, c)
            # f(b), the score with c(s(z~)) as baseline, and dc(s(z)) - dc(s(z~)) along
            # every path: log q's logits, and the decoder and prior too (scg weights the
            # costs of its copies at s(z) and s(z~) by +eta and -eta)
            score = (f_b - c_t).detach()[:, None] * (b - probs)
            return f_b.sum() + (logits * score).sum() + (c_s - c_t).sum()

        def tune(p, x, gen):
            """scg's probe (stochastic/tuning.py): with fresh noise, at the model's
            parameters of the call, g = the estimate of the gradient in the encoder's
            parameters (what the site's logits depend on), every path the call's estimate
            has, traced in the tuned parameters; one Adam step down d |g|^2 (one draw:
            scg's mean over draws of |g|^2)."""
            q = {k: t.detach().requires_grad_(k.startswith("enc")) for k, t in p.items()}
            logits = x @ q["enc_W"] + q["enc_b"]
            b, probs, s, s_t, noise = relaxations(logits, gen, th["log_T"])
            f_b, f_s, f_t = (neg_elbo(q, x, z, logits) for z in (b, s, s_t))
            # the score's weight f(b) - c(s(z~)): constant in the encoder, traced in the
            # tuned parameters (z~ again from the same noise at the logits' values)
            a = logits.detach()
            _, _, _, s_t0, _ = relaxations(a, gen, th["log_T"], noise)
            plain = {k: t.detach() for k, t in q.items()}
            weight = f_b.detach() - th["eta"] * neg_elbo(plain, x, s_t0, a) - r(s_t0, th)
            control = th["eta"] * (f_s - f_t) + r(s, th) - r(s_t, th)
            total = f_b.sum() + (logits * (weight[:, None] * (b - probs))).sum() + control.sum()
            g = torch.autograd.grad(total, [q["enc_W"], q["enc_b"]], create_graph=True)
            opt.zero_grad()
            sum((gi ** 2).sum() for gi in g).backward(inputs=list(th.values()))
            opt.step()
        return surrogate, tune

    def to_torch(params):
        flat = {"enc_W": params["enc"]["W"], "enc_b": params["enc"]["b"],
                "dec_W": params["dec"]["W"], "dec_b": params["dec"]["b"],
                "prior": params["prior"]}
        return {k: torch.tensor(v, requires_grad=True) for k, v in flat.items()}

    def to_numpy(p):
        v = {k: t.detach().numpy().copy() for k, t in p.items()}
        return {"enc": {"W": v["enc_W"], "b": v["enc_b"]},
                "dec": {"W": v["dec_W"], "b": v["dec_b"]}, "prior": v["prior"]}

    def enc_grad(estimator, p, x, gen):
        surrogate, tune = estimator
        p = {k: t.detach().clone().requires_grad_(True) for k, t in p.items()}
        x = torch.as_tensor(x)
        g = torch.autograd.grad(surrogate(p, x, gen), [p["enc_W"], p["enc_b"]])
        if tune is not None:  # (after each call, as scg.grad(E) tunes E's estimator)
            tune(p, x, gen)
        return np.concatenate([g[0].numpy().ravel(), g[1].numpy()])

    def exact_enc_grad(params, x):
        """The exact encoder gradient of the summed negative ELBO, by enumeration."""
        p = to_torch(params)
        latent = p["prior"].shape[0]
        zs = torch.tensor(np.array(np.meshgrid(*[[0.0, 1.0]] * latent, indexing="ij"))
                          .reshape(latent, -1).T)              # (2^L, L)
        xt = torch.as_tensor(x)
        logits = xt @ p["enc_W"] + p["enc_b"]                  # (B, L)
        log_q = zs @ logits.T - F.softplus(logits).sum(-1)     # (2^L, B)
        total = 0.0
        for k in range(zs.shape[0]):
            f = neg_elbo(p, xt, zs[k].expand_as(logits), logits)
            total = total + (torch.exp(log_q[k]) * f).sum()
        g = torch.autograd.grad(total, [p["enc_W"], p["enc_b"]])
        return np.concatenate([g[0].numpy().ravel(), g[1].numpy()])

    def train_step(estimator, opt, p, x, gen):
        surrogate, tune = estimator
        opt.zero_grad()
        surrogate(p, x, gen).backward()
        if tune is not None:  # (scg tunes at the call's parameters, before the update)
            tune(p, x, gen)
        opt.step()

    def trainer(label, steps, data, seed=0, lr=1e-3):
        p = to_torch(D.init_params(seed=seed))
        estimator = SURROGATES[label](p["prior"].shape[0])
        opt = torch.optim.Adam(list(p.values()), lr=lr)
        gen = torch.Generator().manual_seed(seed)
        rng = np.random.default_rng(seed + 1)
        for _ in range(steps):
            x = torch.as_tensor(data[rng.choice(len(data), size=D.BATCH, replace=False)])
            train_step(estimator, opt, p, x, gen)
        return to_numpy(p)

    def stepper(label, params):
        p = to_torch(params)
        estimator = SURROGATES[label](p["prior"].shape[0])
        opt = torch.optim.Adam(list(p.values()), lr=1e-3)
        gen = torch.Generator().manual_seed(0)
        return lambda x: train_step(estimator, opt, p, torch.as_tensor(x), gen)

    # label -> make(latents): (surrogate, tuning step after each call or None), a fresh
    # estimator (REBAR's and RELAX's at their initial parameters) per expectation of scg's
    SURROGATES = {"leave-one-out": lambda _: (loo, None), "DisARM": lambda _: (disarm, None),
                  "Gumbel (ST)": lambda _: (gumbel, None),
                  "REBAR": lambda latent: rebar(latent, relax=False),
                  "RELAX": lambda latent: rebar(latent, relax=True)}
    return {"to_torch": to_torch, "enc_grad": enc_grad, "exact": exact_enc_grad,
            "trainer": trainer, "stepper": stepper, "surrogates": SURROGATES,
            "generator": lambda s: torch.Generator().manual_seed(s)}


# ---------------------------------------------------------------- scg
def scg_enc_grads(label, params, x, calls, seed=7):
    make, n = D.ESTIMATORS[label]
    E = scg.expectation(D.make_model(make()), n=n, seed=seed)
    out = []
    for _ in range(calls):
        g = scg.grad(E)(params, x)["enc"]
        out.append(np.concatenate([g["W"].ravel(), g["b"]]))
    return np.array(out)


def scg_stepper(label, params, jit):
    make, n = D.ESTIMATORS[label]
    E = scg.expectation(D.make_model(make()), n=n, seed=0)
    opt = scg.optim.Adam(1e-3)
    grad = scg.grad(E)

    def update(params, state, x):
        return opt.update(grad(params, x), state, params)
    update = scg.jit(update) if jit else update
    box = {"params": params, "state": opt.init(params)}

    def step(x):
        box["params"], box["state"] = update(box["params"], box["state"], x)
    return step


def both_enc_grads(T, label, params, x, calls, seed):
    """`calls` encoder gradients of scg's and of PyTorch's estimator at the same point
    (PyTorch's None where none is written by hand here)."""
    if label not in T["surrogates"]:
        return scg_enc_grads(label, params, x, calls), None
    gen = T["generator"](seed)
    pt = T["to_torch"](params)
    # (one estimator for all the calls, as scg's one expectation: tuned between them)
    estimator = T["surrogates"][label](len(params["prior"]))
    tg = np.array([T["enc_grad"](estimator, pt, x, gen) for _ in range(calls)])
    return scg_enc_grads(label, params, x, calls), tg


def variance(grads):
    return float(np.sum(np.var(grads, axis=0, ddof=1)))


def max_z(grads, exact):
    mean = grads.mean(axis=0)
    se = grads.std(axis=0, ddof=1) / np.sqrt(len(grads))
    return float(np.max(np.abs(mean - exact) / np.maximum(se, 1e-300)))


def part_variance(T, labels, shared, x, args):
    print(f"1. encoder gradient variance over {args.calls} calls at the parameters of a "
          f"{args.train_steps}-step leave-one-out run")
    var = {}
    for label in labels:
        sg, tg = both_enc_grads(T, label, shared, x, args.calls, 11)
        var[label] = (variance(sg), None if tg is None else variance(tg))
        if tg is None:
            print(f"   {label:<24} scg {var[label][0]:10.4g}   (no PyTorch version)")
            continue
        print(f"   {label:<24} scg {var[label][0]:10.4g}   torch {var[label][1]:10.4g}   "
              f"scg / torch {var[label][0] / var[label][1]:.3f}")
    if "DisARM" in var and "leave-one-out" in var:
        print(f"   DisARM / leave-one-out: scg {var['DisARM'][0] / var['leave-one-out'][0]:.3f}, "
              f"torch {var['DisARM'][1] / var['leave-one-out'][1]:.3f}")


def part_bias(T, labels, data, args):
    rng = np.random.default_rng(3)
    small = D.init_params(latent=10, seed=3)
    for part in ("enc", "dec"):
        small[part]["W"] = rng.normal(0.0, 0.3, small[part]["W"].shape)
    xs = data[:16]
    exact = T["exact"](small, xs)
    print(f"\n2. bias against exact enumeration (10 latents, 16 images, {args.calls} calls): "
          "max |z| over the encoder's coordinates")
    for label in labels:
        sg, tg = both_enc_grads(T, label, small, xs, args.calls, 5)
        torch_z = "(none)" if tg is None else f"{max_z(tg, exact):7.2f}"
        print(f"   {label:<24} scg {max_z(sg, exact):7.2f}   torch {torch_z}")


def part_time(T, labels, shared, data, args):
    """The systems interleaved (the order reversed every other round), medians."""
    print(f"\n3. time per training step (us), median of {args.repeats} rounds of "
          f"{args.timed_steps} steps")
    batches = [data[np.random.default_rng(i).choice(len(data), D.BATCH, replace=False)]
               for i in range(args.timed_steps)]
    for label in labels:
        systems = {"scg eager": scg_stepper(label, shared, jit=False),
                   "scg.jit": scg_stepper(label, shared, jit=True)}
        if label in T["surrogates"]:
            systems["torch"] = T["stepper"](label, shared)
        for step in systems.values():  # warm-up (and scg.jit's recordings)
            for b in batches[:5]:
                step(b)
        times = {k: [] for k in systems}
        for r in range(args.repeats):
            order = list(systems) if r % 2 == 0 else list(systems)[::-1]
            for k in order:
                start = time.perf_counter()
                for b in batches:
                    systems[k](b)
                times[k].append((time.perf_counter() - start) / len(batches) * 1e6)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = f"   scg.jit / torch {med['scg.jit'] / med['torch']:.2f}" if "torch" in med else ""
        print(f"   {label:<24} " + "   ".join(f"{k} {v:7.0f}" for k, v in med.items()) + ratio)


def part_elbo(T, labels, data, args):
    print(f"\n4. ELBO per image on the whole data after {args.steps} steps (same start, same "
          "minibatches)")
    for label in labels:
        params_scg, _ = D.train(label, data, args.steps, eval_every=args.steps)
        a = D.elbo(params_scg, data, draws=16)
        if label not in T["surrogates"]:
            print(f"   {label:<24} scg {a:8.2f}")
            continue
        params_torch = T["trainer"](label, args.steps, data)
        b = D.elbo(params_torch, data, draws=16)
        print(f"   {label:<24} scg {a:8.2f}   torch {b:8.2f}   difference {a - b:+.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="training steps for the ELBO")
    parser.add_argument("--train-steps", type=int, default=500,
                        help="steps of the leave-one-out run whose parameters are shared")
    parser.add_argument("--calls", type=int, default=400, help="gradient calls per variance")
    parser.add_argument("--repeats", type=int, default=7, help="rounds of step timings")
    parser.add_argument("--timed-steps", type=int, default=200)
    parser.add_argument("--parts", default="1234",
                        help="which of the measurements 1-4 to run (default all: 1234)")
    parser.add_argument("--only", nargs="+", default=None, metavar="LABEL",
                        help="only these estimators (labels as in the table)")
    args = parser.parse_args()
    labels = LABELS if args.only is None else [k for k in LABELS if k in args.only]
    if not labels:
        parser.error(f"--only: no estimator of {LABELS} named")
    T = torch_side()
    data = D.load_data()
    print(f"digits VAE: {len(data)} images, {D.LATENT} latents, batch {D.BATCH}; "
          f"float64; torch 1 thread\n")
    if "1" in args.parts or "3" in args.parts:
        shared, _ = D.train("leave-one-out", data, args.train_steps,
                            eval_every=args.train_steps)
    if "1" in args.parts:
        part_variance(T, labels, shared, data[:D.BATCH], args)
    if "2" in args.parts:
        part_bias(T, labels, data, args)
    if "3" in args.parts:
        part_time(T, labels, shared, data, args)
    if "4" in args.parts:
        part_elbo(T, labels, data, args)


if __name__ == "__main__":
    main()
