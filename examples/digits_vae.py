"""The linear VAE of the DisARM paper (Dong, Mnih and Tucker 2020) on scikit-learn's digits.

Data: the 1,797 handwritten digits bundled with scikit-learn (8 x 8 images, no download),
binarized at pixel > 7. Model: 32 binary latents z with a learned Bernoulli prior, a
linear decoder p(x | z) = Bernoulli(logits = z @ V + c) and a linear encoder
q(z | x) = Bernoulli(logits = x @ W + b). A minibatch of 64 images is a `scg.plate`: the
score of image b meets only image b's ELBO, although the decoder is 64 pixels wide, as
wide as the minibatch (scg follows the plate's axis by position, not by size). Trained
with Adam(1e-3) under scg.jit, six estimators of the encoder's gradient:

  leave-one-out   scg.Score("loo"), 2 draws per image (REINFORCE with the other draw's
                  ELBO as baseline: RLOO)
  DisARM          scg.DisARM(), 1 antithetic pair per image (2 evaluations)
  Gumbel (ST)     scg.GumbelSoftmax(1.0, hard=True): straight-through, biased
  REBAR           scg.REBAR(), 3 evaluations per draw, temperature and scale tuned
  RELAX           scg.RELAX(), REBAR with a learned control, tuned
  moving average  scg.Score(MovingAverage()) with 3 draws: REINFORCE at REBAR's evaluations

The script prints the training ELBO per image and the per-draw variance of the encoder's
gradient at the trained parameters, and plots the ELBO against wall time.

Run: python examples/digits_vae.py [--steps 2000] [--out DIR]
     (needs scikit-learn: pip install -e ".[examples]"; writes DIR/digits_vae_training.png,
     examples/out/ by default)
"""

import argparse
import time

import numpy as np

import scg

import _plots

BATCH, LATENT, PIXELS = 64, 32, 64

ESTIMATORS = {
    "leave-one-out": (lambda: scg.Score("loo"), 2),
    "DisARM": (lambda: scg.DisARM(), 1),
    "Gumbel (ST)": (lambda: scg.GumbelSoftmax(1.0, hard=True), 1),
    "REBAR": (lambda: scg.REBAR(temperature=0.5, scale=1.0), 1),
    "RELAX": (lambda: scg.RELAX(), 1),
    "moving average, 3 draws": (lambda: scg.Score(scg.baselines.MovingAverage(0.9)), 3),
}


def load_data():
    """The digits as binary vectors of 64 pixels (pixel > 7 of 0..16), shape (1797, 64)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError("the digits example needs scikit-learn: "
                          "pip install -e '.[examples]'") from e
    return (load_digits().images.reshape(-1, PIXELS) > 7).astype(float)


def init_params(latent=LATENT, seed=0):
    rng = np.random.default_rng(seed)
    return {"enc": {"W": rng.normal(0.0, 0.01, (PIXELS, latent)), "b": np.zeros(latent)},
            "dec": {"W": rng.normal(0.0, 0.01, (latent, PIXELS)), "b": np.zeros(PIXELS)},
            "prior": np.zeros(latent)}


def make_model(estimator):
    """The negative ELBO of each image of a minibatch x (B, 64), for one draw of z."""
    def model(params, x):
        with scg.plate("batch", x.shape[0]):
            logits = x @ params["enc"]["W"] + params["enc"]["b"]
            q = scg.Bernoulli(logits=logits).to_event(1)
            z = scg.sample("z", q, estimator=estimator)                   # (B, latent)
            out = z @ params["dec"]["W"] + params["dec"]["b"]              # (B, 64)
            log_lik = np.sum(x * out - scg.softplus(out), axis=-1)
            prior = params["prior"]
            log_prior = np.sum(z * prior - scg.softplus(prior), axis=-1)
            log_q = np.sum(z * logits - scg.softplus(logits), axis=-1)
            return -(log_lik + log_prior - log_q)
    return model


def elbo(params, data, draws=4, seed=123):
    """The ELBO per image on `data` (nats; higher is better), `draws` draws per image."""
    E = scg.expectation(make_model("score"), n=draws, seed=seed)
    return -E(params, data) / len(data)


def train(label, data, steps, lr=1e-3, seed=0, eval_every=100, latent=LATENT):
    """Train with one estimator: (params, rows of (step, seconds of training, ELBO))."""
    make, n = ESTIMATORS[label]
    E = scg.expectation(make_model(make()), n=n, seed=seed)
    opt = scg.optim.Adam(lr)
    grad = scg.grad(E)
    step = scg.jit(lambda params, state, x: opt.update(grad(params, x), state, params))
    params = init_params(latent, seed)
    state = opt.init(params)
    rng = np.random.default_rng(seed + 1)
    curve, spent = [], 0.0
    for t in scg.progress(range(steps + 1), desc=label):
        if t % eval_every == 0 or t == steps:
            curve.append((t, spent, elbo(params, data)))
        if t == steps:
            break
        x = data[rng.choice(len(data), size=BATCH, replace=False)]
        start = time.perf_counter()
        params, state = step(params, state, x)
        spent += time.perf_counter() - start
    return params, np.array(curve)


def encoder_variance(params, x, label, calls=200, seed=7):
    """The variance of the minibatch's encoder gradient over independent calls, summed
    over the encoder's coordinates (what an optimizer step sees)."""
    make, n = ESTIMATORS[label]
    E = scg.expectation(make_model(make()), n=n, seed=seed)
    grads = [scg.grad(E)(params, x)["enc"] for _ in range(calls)]
    flat = np.array([np.concatenate([g["W"].ravel(), g["b"]]) for g in grads])
    return float(np.sum(np.var(flat, axis=0, ddof=1)))


def main(steps=2000, variance_calls=200, seed=0, out_dir=None, data=None):
    data = load_data() if data is None else data
    print(f"Data: {len(data):,} digits, 8 x 8, binarized at pixel > 7. VAE: {LATENT} binary "
          f"latents, linear encoder and decoder; minibatch {BATCH} in a scg.plate; "
          f"Adam(1e-3), {steps:,} steps under scg.jit.\n")
    curves, trained = {}, {}
    for label in ESTIMATORS:
        trained[label], curves[label] = train(label, data, steps, seed=seed,
                                              eval_every=max(steps // 20, 1))
    x = data[:BATCH]
    shared = trained["leave-one-out"]
    variance = {label: encoder_variance(shared, x, label, variance_calls) for label in ESTIMATORS}
    print(f"{'estimator':<16}{'ELBO at the end':>17}{'us per step':>14}"
          f"{'encoder grad. variance':>25}")
    for label, c in curves.items():
        per_step = 1e6 * c[-1, 1] / max(steps, 1)
        print(f"{label:<16}{c[-1, 2]:>17.2f}{per_step:>14.0f}{variance[label]:>25.4g}")
    print(f"(variance over {variance_calls} calls on one minibatch, at the parameters the "
          "leave-one-out run reached)")
    plt = _plots.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, c in curves.items():
            ax.plot(c[:, 1], c[:, 2], marker=".", label=label)
        ax.set(xlabel="wall time of the training steps (s)", ylabel="ELBO per image (nats)",
               title=f"linear VAE on the digits, {LATENT} binary latents, batch {BATCH}")
        ax.legend()
        _plots.save(fig, "digits_vae_training.png", out_dir)
    return {"curves": curves, "variance": variance}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--out", default=None, help="folder for the plot (examples/out/)")
    args = parser.parse_args()
    main(steps=args.steps, out_dir=args.out)
