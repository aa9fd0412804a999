"""A variational autoencoder with binary latents, trained with three score-function estimators.

The data: binary 4 x 4 images made by the script (no downloads): each is one of 8
prototype patterns (bars and blocks) with 5% of its pixels flipped. The model: 8 binary
latents z with a uniform prior, a decoder p(x | z) = Bernoulli(logits = MLP(z)) and an
encoder q(z | x) = Bernoulli(logits = x @ W + b). The latents are discrete, so the
encoder's gradient needs the score function. Compared, with the same draws per data point:

  score           plain REINFORCE, no baseline
  moving average  scg.baselines.MovingAverage: per element of the plate (one slot per
                  position in the minibatch), an average of earlier steps
  leave-one-out   the mean of the other draws of the same data point

The minibatch is a `scg.plate`: the score of data point b meets only the cost of data
point b, and baselines are formed per data point. The script prints and plots the
training curves (the negative ELBO on the whole dataset) and the per-draw variance of the
encoder's gradient under each estimator.

Run: python examples/discrete_vae.py      (writes examples/out/discrete_vae_*.png)
"""

import numpy as np

import scg

import _plots

SIDE, LATENT = 4, 8
PIXELS = SIDE * SIDE


def make_data(n_points=256, flip=0.05, seed=0):
    """Binary 4 x 4 images: 8 prototypes (4 bars, 4 blocks), each pixel flipped with prob `flip`."""
    rng = np.random.default_rng(seed)
    protos = []
    for i in range(SIDE):
        img = np.zeros((SIDE, SIDE))
        img[i, :] = 1  # a horizontal bar
        protos.append(img.ravel())
        img = np.zeros((SIDE, SIDE))
        img[:, i] = 1  # a vertical bar
        protos.append(img.ravel())
    protos = np.array(protos)
    labels = rng.integers(len(protos), size=n_points)
    flips = rng.random((n_points, PIXELS)) < flip
    return np.abs(protos[labels] - flips).astype(float), protos


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    return {"enc": scg.nn.init_linear(rng, PIXELS, LATENT, init="glorot"),
            "dec": scg.nn.init_mlp(rng, [LATENT, 32, PIXELS], init="glorot")}


def make_model(estimator):
    """The negative ELBO of a minibatch x of shape (B, 16), for one draw of the latents."""
    def model(params, x):
        with scg.plate("data", x.shape[0]):
            q = scg.Bernoulli(logits=scg.nn.linear(params["enc"], x)).to_event(1)
            z = scg.sample("z", q, estimator=estimator)                    # (B, 8) per draw
            logits = scg.nn.mlp(params["dec"], z, activation=np.tanh)      # (B, 16)
            log_lik = scg.Bernoulli(logits=logits).to_event(1).log_prob(x)
            log_prior = LATENT * np.log(0.5)
            scg.cost("neg_elbo", -(log_lik + log_prior - q.log_prob(z)))
    return model


ESTIMATORS = {
    "score": lambda: "score",
    "moving average": lambda: scg.Score(scg.baselines.MovingAverage(0.9)),
    "leave-one-out": lambda: scg.Score("loo"),
}


def neg_elbo(params, data, draws=32, seed=123):
    """The negative ELBO per data point on `data` (nats), with `draws` draws per point."""
    E = scg.expectation(make_model("score"), n=draws, seed=seed)
    return E(params, data) / len(data)


def encoder_variance(params, x, estimator, draws, seed):
    """Per-draw variance of the encoder's gradient, summed over its coordinates."""
    E = scg.expectation(make_model(estimator), n=draws, seed=seed)
    for _ in range(5):
        scg.grad(E)(params, x)  # lets a moving average settle
    gs = scg.grad_samples(E)(params, x)
    return float(sum(np.sum(v) for v in (gs.var["enc"]["W"], gs.var["enc"]["b"])))


def train(label, data, steps, batch, n, lr, seed, eval_every):
    rng = np.random.default_rng(seed + 1)
    E = scg.expectation(make_model(ESTIMATORS[label]()), n=n, seed=seed)
    grad = scg.grad(E)
    opt = scg.optim.Adam(lr)
    params = init_params(seed)
    state = opt.init(params)
    curve = []
    for t in scg.progress(range(steps + 1), desc=label):
        if t % eval_every == 0:
            curve.append((t, neg_elbo(params, data)))
        if t == steps:
            break
        x = data[rng.choice(len(data), size=batch, replace=False)]
        params, state = opt.update(grad(params, x), state, params)
    return params, np.array(curve)


def main(steps=1500, n_points=256, batch=32, n=4, lr=0.02, variance_draws=2000, seed=0,
         out_dir=None):
    data, protos = make_data(n_points, seed=seed)
    print(f"Data: {n_points} binary 4 x 4 images from {len(protos)} prototypes, 5% pixel noise.")
    print(f"VAE: {LATENT} binary latents, encoder linear, decoder 8 -> 32 -> 16 (tanh); "
          f"Adam(lr={lr:g}), minibatch {batch} in a scg.plate, {n} draws per data point.\n")
    start = init_params(seed)
    print(f"Negative ELBO per data point at the start: {neg_elbo(start, data):.2f} nats "
          f"(16 fair coins: {PIXELS * np.log(2):.2f}).\n")

    eval_every = max(steps // 30, 1)
    curves, trained = {}, {}
    for label in ESTIMATORS:
        trained[label], curves[label] = train(label, data, steps, batch, n, lr, seed, eval_every)
    tail = max(len(next(iter(curves.values()))) // 5, 1)
    print(f"{'estimator':<16}{'neg. ELBO at end':>18}{'mean of last 20%':>18}")
    for label, c in curves.items():
        print(f"{label:<16}{c[-1, 1]:>18.2f}{c[-tail:, 1].mean():>18.2f}")

    # variance of the encoder's gradient, at the start and at the end of the loo run,
    # for one fixed minibatch and `variance_draws` draws per data point
    x = data[:batch]
    points = {"start": start, "trained": trained["leave-one-out"]}
    variance = {(label, where): encoder_variance(p, x, ESTIMATORS[label](), variance_draws, seed)
                for label in ESTIMATORS for where, p in points.items()}
    print(f"\nPer-draw variance of the encoder's gradient (sum over its {PIXELS * LATENT + LATENT} "
          f"coordinates; one minibatch of {batch}, {variance_draws:,} draws):")
    print(f"{'estimator':<16}" + "".join(f"{w:>14}" for w in points))
    for label in ESTIMATORS:
        print(f"{label:<16}" + "".join(f"{variance[label, w]:>14.4g}" for w in points))
    for where in points:
        base = variance["score", where]
        print(f"  {where}: moving average {base / variance['moving average', where]:.1f}x and "
              f"leave-one-out {base / variance['leave-one-out', where]:.1f}x less than plain score")
    print("(Here the moving average was warmed up on this same minibatch. In training each slot "
          "of the plate\n sees a different data point at every step, so its baseline fits less "
          "well: it trains\n between plain score and leave-one-out.)")

    plt = _plots.pyplot()
    if plt is not None:
        _plot(plt, curves, variance, points, trained["leave-one-out"], data, protos, out_dir)
    return {"curves": curves, "variance": variance}


def _plot(plt, curves, variance, points, params, data, protos, out_dir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for label, c in curves.items():
        axes[0].plot(c[:, 0], c[:, 1], label=label)
    axes[0].set(title="training: negative ELBO on the whole dataset", xlabel="step",
                ylabel="nats per image")
    axes[0].legend()
    labels = list(curves)
    width = 0.8 / len(points)
    xs = np.arange(len(labels))
    for i, where in enumerate(points):
        axes[1].bar(xs + i * width, [variance[l, where] for l in labels], width, label=where)
    axes[1].set_xticks(xs + width * (len(points) - 1) / 2, labels)
    axes[1].set(yscale="log", title="per-draw variance of the encoder's gradient",
                xlabel="estimator", ylabel="per-draw variance (sum over the encoder)")
    axes[1].legend()
    fig.tight_layout()
    _plots.save(fig, "discrete_vae_training.png", out_dir)

    # reconstructions: data, then the decoder's mean for one draw of z ~ q(z | x)
    rng = np.random.default_rng(0)
    x = data[:8]
    probs_q = 1 / (1 + np.exp(-scg.nn.linear(params["enc"], x)))
    z = (rng.random(probs_q.shape) < probs_q).astype(float)
    recon = 1 / (1 + np.exp(-scg.nn.mlp(params["dec"], z, activation=np.tanh)))
    fig, axes = plt.subplots(2, 8, figsize=(10, 2.8))
    for j in range(8):
        axes[0, j].imshow(x[j].reshape(SIDE, SIDE), cmap="gray_r", vmin=0, vmax=1)
        axes[1, j].imshow(recon[j].reshape(SIDE, SIDE), cmap="gray_r", vmin=0, vmax=1)
        for ax in axes[:, j]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("data")
    axes[1, 0].set_ylabel("recon.")
    fig.suptitle("leave-one-out run: data and reconstructions (decoder mean, one z ~ q)")
    _plots.save(fig, "discrete_vae_reconstructions.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
