"""The digits VAE of benchmarks/digits_vae.py with Storchastic 0.3.7's estimators beside scg's.

The setting of examples/digits_vae.py: 1,797 digits binarized at pixel > 7, 32 Bernoulli
latents, linear encoder and decoder, a learned Bernoulli prior, minibatch 64, float64, the
per-image negative ELBO as the cost (the objective is its sum over the minibatch). The
model is written once more for Storchastic on torch 2.13 (CPU, one thread): the minibatch
is a Storchastic plate (`storch.denote_independent(x, 0, "data")`), z is drawn by the
method under test from `Bernoulli(probs=clamp_probs(sigmoid(x @ W + b)))` (the
parametrization of Storchastic's own Bernoulli VAE example, which its REBAR and RELAX
tuning assumes), and the cost is registered with
`storch.add_cost(B * neg_elbo, ...)` (Storchastic averages over the data plate; B = the
number of images makes its objective scg's sum) and differentiated by `storch.backward()`.
Storchastic's methods and scg's counterparts (labels of examples/digits_vae.py):

  leave-one-out  ScoreFunction("z", n_samples=2, baseline_factory="batch_average")
                 against scg.Score("loo"), 2 draws per image
  DisARM         DisARM("z", n_samples=1): one antithetic pair, against scg.DisARM()
  REBAR          REBAR("z", n_samples=1) (3 evaluations per draw), its temperature started
                 at scg's 0.5 (Storchastic's default 1.0), temperature and eta tuned by
                 Adam(0.01) on the gradients Storchastic leaves on them after each call
                 (scg.REBAR tunes after each call with Adam(0.01) too)
  RELAX          RELAX("z", n_samples=1, in_dim=latents): Storchastic's default control
                 (Linear(latents, 50), relu, Linear(50, 1)), temperature started at 0.5,
                 temperature, eta and the control tuned as for REBAR; against scg.RELAX()
  unordered set  UnorderedSetEstimator("z", k=2): 2 distinct latent vectors per image by
                 stochastic beam search over the 32 Bernoulli dimensions, with its built-in
                 baseline. scg's UnorderedSet serves Categorical sites only, so the scg
                 column is its leave-one-out estimator at the same 2 evaluations per image.

Measured, for each method, Storchastic beside scg:

1. the variance of the minibatch's encoder gradient over `--calls` independent calls at
   shared parameters (those a leave-one-out run of scg reaches after `--train-steps`
   steps, as in digits_vae.py part 1), summed over the encoder's W and b;
2. the bias against the exact gradient by enumeration at 10 latents and 16 images (the
   parameters and data of digits_vae.py part 2): max |z| over the encoder's coordinates,
   z = (mean of the calls - exact) / standard error, and the mean projected on the exact
   gradient g (relative bias mean . g / |g|^2 - 1, with its z); first a check of the
   port: Storchastic's own enumeration (Expect) must reproduce the exact gradient;
3. the time per training step (gradient and Adam(1e-3) update), Storchastic against
   scg.jit's step (benchmarks/digits_vae.py's scg_stepper), interleaved, median of
   `--repeats` rounds of `--timed-steps` steps.

A method that fails or cannot be configured is reported with the error, not fatal.
`--fix-storchastic` runs the same with Storchastic 0.3.7 patched in this process, to show
where its biases come from (with the patches its estimators are unbiased in this very
port): DisARM's control variate f(b~) enters the surrogate with the wrong sign and its
antithetic draw is weighted like a draw (DisARM.plate_weighting is never installed); the
conditional relaxed sample z~ ~ p(z | b) of REBAR and RELAX computes log p + log(1 + p)
where logit(p) = log p - log(1 - p) belongs (storch.conditional_gumbel_rsample); the
unordered set estimator's leave-one-out ratios, integrals summed on a grid, are replaced
by their closed form at k = 2. `--fixed-controls` measures REBAR and RELAX at a fixed
temperature 0.5 and scale 1 in both libraries (no tuning; scg's RELAX is then REBAR,
Storchastic's keeps its randomly initialized control), which separates the estimators
from their tuning.

    python benchmarks/digits_vae_storchastic.py --calls 200 --train-steps 300
    python benchmarks/digits_vae_storchastic.py --parts 2 --fix-storchastic
    python benchmarks/digits_vae_storchastic.py --parts 2 --calls 2000 --fixed-controls
    python benchmarks/digits_vae_storchastic.py --parts 3 --only DisARM REBAR

Needs scikit-learn, PyTorch and Storchastic (not in pyproject.toml):
    pip install torch==2.13.0 storchastic==0.3.7
(storchastic's own dependencies: pyro-ppl, entmax.)
"""

import argparse
import importlib.metadata
import importlib.util
import pathlib
import statistics
import time
import warnings

import numpy as np

# benchmarks/digits_vae.py under another name: it imports examples/digits_vae.py as
# `digits_vae` itself
_spec = importlib.util.spec_from_file_location(
    "digits_vae_bench", pathlib.Path(__file__).resolve().parent / "digits_vae.py")
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)
D = B.D  # examples/digits_vae.py: load_data, init_params, train, BATCH, LATENT

LABELS = ["leave-one-out", "DisARM", "REBAR", "RELAX", "unordered set"]
SCG_LABEL = {"leave-one-out": "leave-one-out", "DisARM": "DisARM", "REBAR": "REBAR",
             "RELAX": "RELAX", "unordered set": "leave-one-out"}
TUNING_LR = 0.01          # Adam step of REBAR's and RELAX's own parameters (scg's default)
START_TEMPERATURE = 0.5   # scg.REBAR's and scg.RELAX's starting temperature


# ---------------------------------------------------------------- Storchastic
def storch_side(fix=False):
    import torch
    import storch
    from torch.distributions import Bernoulli
    from torch.distributions.utils import clamp_probs
    F = torch.nn.functional
    M = storch.method
    # REBAR and RELAX ask for backward(create_graph=True), which warns on every call
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph")
    if fix:
        _patch_storchastic()

    def methods(latent):
        def rebar():
            m = M.REBAR("z", n_samples=1)
            m.temperature.data.fill_(START_TEMPERATURE)
            return m

        def relax():
            m = M.RELAX("z", n_samples=1, in_dim=latent)
            m.temperature.data.fill_(START_TEMPERATURE)
            return m

        return {"leave-one-out": lambda: M.ScoreFunction(
                    "z", n_samples=2, baseline_factory="batch_average"),
                "DisARM": lambda: M.DisARM("z", n_samples=1),
                "REBAR": rebar,
                "RELAX": relax,
                "unordered set": lambda: M.UnorderedSetEstimator("z", k=2)}

    def surrogate_backward(method, p, x):
        """One call: the minibatch's negative ELBO, summed over the images, through
        storch.backward() (gradients left on p's tensors)."""
        xs = storch.denote_independent(torch.as_tensor(x), 0, "data")
        logits = xs @ p["enc_W"] + p["enc_b"]
        # parametrized by probs, as Storchastic's own Bernoulli VAE example does: REBAR's
        # and RELAX's tuning differentiate the variance of the gradient that reaches
        # `probs` (with Bernoulli(logits=...) the score terms bypass it, and the tuning
        # then drives eta to 0)
        z = method(Bernoulli(probs=clamp_probs(torch.sigmoid(logits))))
        if z.dtype == torch.bool:                          # DisARM draws booleans
            z = z.to(torch.float64)
        # z (or what it gives) first in each product: the plates are then (z, data)
        out = z @ p["dec_W"] + p["dec_b"]
        log_lik = (out * xs - F.softplus(out)).sum(-1)
        log_prior = (z * p["prior"] - F.softplus(p["prior"])).sum(-1)
        log_q = (z * logits - F.softplus(logits)).sum(-1)
        storch.add_cost(x.shape[0] * -(log_lik + log_prior - log_q), "neg_elbo")
        storch.backward()

    class Runner:
        """A method with its own optimizer (REBAR's and RELAX's temperature, eta and
        control: Storchastic leaves their gradients, the user steps them)."""

        def __init__(self, label, params, latent, lr=None, tune=True):
            self.method = methods(latent)[label]()
            self.p = {k: t.detach().clone().requires_grad_(True)
                      for k, t in B.torch_side()["to_torch"](params).items()}
            own = [q for q in self.method.parameters() if q.requires_grad]
            self.tune = torch.optim.Adam(own, lr=TUNING_LR) if own and tune else None
            self.opt = None if lr is None else torch.optim.Adam(list(self.p.values()), lr=lr)

        def _call(self, x):
            for v in self.p.values():
                v.grad = None
            surrogate_backward(self.method, self.p, x)
            if self.tune is not None:
                self.tune.step()

        def enc_grad(self, x):
            self._call(x)
            return np.concatenate([self.p["enc_W"].grad.detach().numpy().ravel(),
                                   self.p["enc_b"].grad.detach().numpy()])

        def step(self, x):
            self._call(x)
            for v in self.p.values():     # (the graph of create_graph=True let go)
                v.grad = v.grad.detach()
            self.opt.step()

        def tuned(self):
            m = self.method
            if not hasattr(m, "temperature"):
                return ""
            eta = m.eta if isinstance(m.eta, float) else m.eta.item()
            return (f"{'tuned to' if self.tune is not None else 'fixed at'} "
                    f"T {m.temperature.item():.3f}, eta {eta:.3f}")

    def expect_grad(params, x):
        """Storchastic's own enumeration (Expect) of the encoder gradient: the port's check."""
        r = Runner("leave-one-out", params, params["prior"].shape[0])
        r.method = M.Expect("z")
        return r.enc_grad(x)

    return {"Runner": Runner, "expect": expect_grad, "seed": torch.manual_seed}


def _patch_storchastic():
    """Fixes to Storchastic 0.3.7, in this process only (for --fix-storchastic)."""
    import torch
    import storch
    from storch.method import arm, relax
    from storch.sampling import unordered_set
    from torch.distributions.utils import clamp_probs
    from storch.util import magic_box

    # DisARM: the sampling method never gets DisARM.plate_weighting (the antithetic draw is
    # weighted like a draw), and f(b~) returned as the control variate enters the surrogate
    # as magic_box(L) * f(b~), whose derivative adds f(b~) d L instead of subtracting it
    init = arm.DisARM.__init__

    def disarm_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.sampling_method.set_mc_weighting_function(self.plate_weighting)

    def disarm_estimator(self, tensor, cost):
        plate = tensor.get_plate(tensor.name)
        index = tensor.get_plate_dim_index(plate.name)
        mult, baseline = self.comp_estimator(tensor, cost, tensor.distribution.logits,
                                             index, plate.n // 2)
        mult = 0.5 * mult.sum(dim=mult.event_dim_indices)
        return mult, (1.0 - magic_box(mult)) * baseline.detach()

    arm.DisARM.__init__ = disarm_init
    arm.DisARM.estimator = disarm_estimator

    # REBAR and RELAX: z~ ~ p(z | b) is logit(p) + logit(v'), not log p + log(1 + p) + ...
    original = storch.conditional_gumbel_rsample

    def conditional(hard_sample, probs, bernoulli, temperature):
        if not bernoulli:
            return original(hard_sample, probs, bernoulli, temperature)
        probs = clamp_probs(probs.expand_as(hard_sample))
        v = clamp_probs(torch.rand(hard_sample.shape, dtype=probs.dtype))
        v_prime = torch.where(hard_sample == 1, v * probs + (1 - probs), v * (1 - probs))
        z = probs.log() - (-probs).log1p() + v_prime.log() - (-v_prime).log1p()
        return (z / temperature).sigmoid()

    storch.conditional_gumbel_rsample = conditional
    relax.conditional_gumbel_rsample = conditional

    # the unordered set estimator: its leave-one-out ratios R(S, s) and R^{D\s}(S, t) are
    # integrals summed on a grid of `num_int_points` points (the second order one misses
    # about 7 % at k = 2 and 1000 points); at k = 2 both have a closed form
    weighting = unordered_set.UnorderedSet.weighting_function

    def closed_form_k2(self, tensor, plate):
        if plate.n != 2:
            return weighting(self, tensor, plate)
        lp = plate.log_probs.detach()._tensor             # (..., 2): the set's log p
        log1m = torch.log1p(-lp.exp())
        w = (-log1m - torch.logsumexp(-log1m, -1, keepdim=True)).exp()
        snd = log1m[..., None, :] - lp[..., :, None]      # [s, t]: log (1 - p_t) / p_s
        snd = torch.where(torch.eye(2, dtype=torch.bool), torch.zeros_like(snd), snd)
        plate.log_snd_leave_one_out = storch.Tensor(snd, [], plate.log_probs.plates)
        return storch.Tensor(w, [], plate.log_probs.plates)

    unordered_set.UnorderedSet.weighting_function = closed_form_k2


# ---------------------------------------------------------------- scg
def scg_grads(label, params, x, calls, tune=True):
    """benchmarks/digits_vae.py's scg_enc_grads; with tune=False REBAR and RELAX at fixed
    temperature 0.5 and scale 1 (RELAX's control then stays 0: it is REBAR)."""
    label = SCG_LABEL[label]
    if tune or label not in ("REBAR", "RELAX"):
        return B.scg_enc_grads(label, params, x, calls)
    import scg
    make = {"REBAR": scg.REBAR, "RELAX": scg.RELAX}[label]
    E = scg.expectation(D.make_model(make(temperature=START_TEMPERATURE, scale=1.0,
                                          learn=False)), n=1, seed=7)
    out = []
    for _ in range(calls):
        g = scg.grad(E)(params, x)["enc"]
        out.append(np.concatenate([g["W"].ravel(), g["b"]]))
    return np.array(out)


# ---------------------------------------------------------------- measurements
def _failure(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:160]


def projection(grads, exact):
    """The mean projected on the exact gradient: relative bias and its z."""
    norm = np.linalg.norm(exact)
    proj = grads @ (exact / norm)
    se = proj.std(ddof=1) / np.sqrt(len(proj))
    return float(proj.mean() / norm - 1.0), float((proj.mean() - norm) / se)


def part_variance(S, labels, shared, x, args, results):
    print(f"1. encoder gradient variance over {args.calls} calls at the parameters of a "
          f"{args.train_steps}-step leave-one-out run (scg), summed over W and b")
    for label in labels:
        sg = scg_grads(label, shared, x, args.calls, tune=not args.fixed_controls)
        vs = B.variance(sg)
        try:
            S["seed"](11)
            r = S["Runner"](label, shared, D.LATENT, tune=not args.fixed_controls)
            tg = np.array([r.enc_grad(x) for _ in range(args.calls)])
            vt = B.variance(tg)
            if not np.isfinite(vt):
                raise FloatingPointError(f"non-finite gradients ({np.sum(~np.isfinite(tg))} "
                                         "coordinates)")
        except Exception as e:  # (a method that cannot run here: reported, not fatal)
            results[label]["fail"].append(f"part 1: {_failure(e)}")
            print(f"   {label:<14} scg {vs:10.4g}   Storchastic failed: {_failure(e)}")
            continue
        results[label]["var"] = (vt, vs)
        tuned = f"   (Storchastic {r.tuned()})" if r.tuned() else ""
        print(f"   {label:<14} scg {vs:10.4g}   Storchastic {vt:10.4g}   "
              f"Storchastic / scg {vt / vs:8.3f}{tuned}")


def part_bias(S, labels, data, args, results):
    rng = np.random.default_rng(3)
    small = D.init_params(latent=10, seed=3)
    for part in ("enc", "dec"):
        small[part]["W"] = rng.normal(0.0, 0.3, small[part]["W"].shape)
    xs = data[:16]
    exact = B.torch_side()["exact"](small, xs)
    print(f"\n2. bias against exact enumeration (10 latents, 16 images, {args.calls} calls): "
          "max |z| over the encoder's coordinates; the mean along the exact gradient g")
    try:
        err = np.max(np.abs(S["expect"](small, xs) - exact)) / np.max(np.abs(exact))
        print(f"   the port's check: Storchastic's Expect (2^10 states per image) against "
              f"the exact gradient: max relative difference {err:.1e}")
    except Exception as e:
        print(f"   the port's check: Storchastic's Expect failed: {_failure(e)}")
    for label in labels:
        sg = scg_grads(label, small, xs, args.calls, tune=not args.fixed_controls)
        zs, (rs, rzs) = B.max_z(sg, exact), projection(sg, exact)
        try:
            S["seed"](5)
            r = S["Runner"](label, small, 10, tune=not args.fixed_controls)
            tg = np.array([r.enc_grad(xs) for _ in range(args.calls)])
            if not np.all(np.isfinite(tg)):
                raise FloatingPointError("non-finite gradients")
        except Exception as e:
            results[label]["fail"].append(f"part 2: {_failure(e)}")
            print(f"   {label:<14} scg max|z| {zs:6.2f}   Storchastic failed: {_failure(e)}")
            continue
        zt, (rt, rzt) = B.max_z(tg, exact), projection(tg, exact)
        results[label]["bias"] = (zt, zs, rt, rzt, rs, rzs)
        tuned = f"   ({r.tuned()})" if r.tuned() else ""
        print(f"   {label:<14} max|z|: scg {zs:6.2f}  Storchastic {zt:6.2f}    along g: scg "
              f"{rs:+.3f} (z {rzs:+.1f})  Storchastic {rt:+.3f} (z {rzt:+.1f}){tuned}")


def part_time(S, labels, shared, data, args, results):
    print(f"\n3. time per training step (gradient + Adam(1e-3), us), median of {args.repeats} "
          f"interleaved rounds of {args.timed_steps} steps")
    batches = [data[np.random.default_rng(i).choice(len(data), D.BATCH, replace=False)]
               for i in range(args.timed_steps)]
    for label in labels:
        try:
            S["seed"](0)
            systems = {"Storchastic": S["Runner"](label, shared, D.LATENT, lr=1e-3).step,
                       "scg.jit": B.scg_stepper(SCG_LABEL[label], shared, jit=True)}
            for step in systems.values():   # warm-up (and scg.jit's recording)
                for b in batches[:5]:
                    step(b)
            times = {k: [] for k in systems}
            for r in range(args.repeats):
                for k in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
                    start = time.perf_counter()
                    for b in batches:
                        systems[k](b)
                    times[k].append((time.perf_counter() - start) / len(batches) * 1e6)
        except Exception as e:
            results[label]["fail"].append(f"part 3: {_failure(e)}")
            print(f"   {label:<14} Storchastic failed: {_failure(e)}")
            continue
        med = {k: statistics.median(v) for k, v in times.items()}
        results[label]["time"] = (med["Storchastic"], med["scg.jit"])
        print(f"   {label:<14} Storchastic {med['Storchastic']:8.0f}   scg.jit "
              f"{med['scg.jit']:7.0f}   Storchastic / scg.jit "
              f"{med['Storchastic'] / med['scg.jit']:6.1f}")


def summary(labels, results):
    print("\n| estimator | scg's | encoder variance, Storchastic / scg | max \\|z\\| vs exact: "
          "Storchastic, scg | relative bias along g: Storchastic, scg | us per step: "
          "Storchastic, scg.jit (ratio) |")
    print("|---|---|---|---|---|---|")
    for label in labels:
        res = results[label]
        missing = {n: "failed" if any(f.startswith(f"part {n}") for f in res["fail"])
                   else "-" for n in "123"}
        var = f"{res['var'][0] / res['var'][1]:.3g}" if "var" in res else missing["1"]
        if "bias" in res:
            zt, zs, rt, rzt, rs, rzs = res["bias"]
            bias = f"{zt:.1f}, {zs:.1f}"
            along = f"{rt:+.3f} (z {rzt:+.1f}), {rs:+.3f} (z {rzs:+.1f})"
        else:
            bias = along = missing["2"]
        if "time" in res:
            t, s = res["time"]
            tm = f"{t:.0f}, {s:.0f} ({t / s:.1f}x)"
        else:
            tm = missing["3"]
        print(f"| {label} | {SCG_LABEL[label]} | {var} | {bias} | {along} | {tm} |")
    for label in labels:
        for f in results[label]["fail"]:
            print(f"   {label} failed in {f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-steps", type=int, default=500,
                        help="steps of the leave-one-out run whose parameters are shared")
    parser.add_argument("--calls", type=int, default=400,
                        help="gradient calls per variance and per bias")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of step timings")
    parser.add_argument("--timed-steps", type=int, default=50)
    parser.add_argument("--parts", default="123",
                        help="which of the measurements 1-3 to run (default all: 123)")
    parser.add_argument("--only", nargs="+", default=None, metavar="LABEL",
                        help=f"only these estimators, of {LABELS}")
    parser.add_argument("--fix-storchastic", action="store_true",
                        help="patch Storchastic 0.3.7's faulty lines first (see above)")
    parser.add_argument("--fixed-controls", action="store_true",
                        help="parts 1 and 2: REBAR and RELAX untuned, temperature 0.5, "
                             "scale (eta) 1, in both libraries")
    args = parser.parse_args()
    labels = LABELS if args.only is None else [k for k in LABELS if k in args.only]
    if not labels:
        parser.error(f"--only: no estimator of {LABELS} named")
    B.torch_side()  # (float64 by default, one thread)
    import torch
    S = storch_side(fix=args.fix_storchastic)
    data = D.load_data()
    print(f"digits VAE: {len(data)} images, {D.LATENT} latents, batch {D.BATCH}; float64; "
          f"torch {torch.__version__} ({torch.get_num_threads()} thread), storchastic "
          f"{importlib.metadata.version('storchastic')}"
          f"{' PATCHED (--fix-storchastic)' if args.fix_storchastic else ''}"
          f"{'; REBAR and RELAX untuned (--fixed-controls)' if args.fixed_controls else ''}\n")
    results = {label: {"fail": []} for label in labels}
    if "1" in args.parts or "3" in args.parts:
        shared, _ = D.train("leave-one-out", data, args.train_steps,
                            eval_every=args.train_steps)
    if "1" in args.parts:
        part_variance(S, labels, shared, data[:D.BATCH], args, results)
    if "2" in args.parts:
        part_bias(S, labels, data, args, results)
    if "3" in args.parts:
        part_time(S, labels, shared, data, args, results)
    summary(labels, results)


if __name__ == "__main__":
    main()
