"""The signal-to-noise ratio of the proposal's gradient against K: pathwise and DReG.

An importance-weighted bound with K reparameterized particles of a Gaussian model:
p(z) = N(0, 1), p(x | z) = N(z, 1) at x = 1.3, q(z) = N(mu, exp(log_s)). Rainforth et al.
(2018) show that the signal-to-noise ratio |E g| / std(g) of the plain pathwise gradient
in the proposal's parameters falls like 1 / sqrt(K) as K grows (the bound gets tighter
and the gradient's signal vanishes faster than its noise); Tucker et al. (2019) show that
doubly reparameterized gradients (`scg.Pathwise(dreg=True)`) do not have that problem:
their SNR grows with K. The model's parameter (the mean of p(x | z), b) keeps a plain
gradient under both, and its SNR grows with K for both.

For each K, the per-draw gradients of n draws (scg.grad_samples) give the SNR per
coordinate.

Run: python examples/dreg_snr.py     (writes examples/out/dreg_snr.png)
"""

import numpy as np

import scg

import _plots

X = 1.3
THETA = np.array([0.4, -0.2, 0.0])  # mu, log_s (the proposal's), b (the model's)
NAMES = ("mu", "log_s", "b")


def iwae(K, estimator):
    def model(theta):
        mu, log_s, b = theta[0], theta[1], theta[2]
        with scg.plate("particles", K):
            q = scg.Normal(mu * np.ones(K), np.exp(log_s) * np.ones(K))
            z = scg.sample("z", q, estimator=estimator)
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + \
                scg.Normal(z + b, 1.0).log_prob(X) - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")
    return model


ESTIMATORS = {"pathwise": lambda: scg.Pathwise(), "DReG": lambda: scg.Pathwise(dreg=True)}


def main(Ks=(1, 2, 4, 8, 16, 32, 64, 128, 256), n=4000, out_dir=None, seed=0):
    snr = {label: np.zeros((len(Ks), 3)) for label in ESTIMATORS}
    for i, K in enumerate(Ks):
        for label, make in ESTIMATORS.items():
            gs = scg.grad_samples(scg.expectation(iwae(K, make()), n=n, seed=seed))(THETA)
            snr[label][i] = np.abs(gs.mean) / np.sqrt(gs.var)
    print(f"signal-to-noise ratio |E g| / std(g) per draw, n = {n} draws per K\n")
    print(f"{'K':>5s} " + " ".join(f"{lab + ' ' + name:>16s}" for lab in ESTIMATORS
                                   for name in NAMES))
    for i, K in enumerate(Ks):
        print(f"{K:5d} " + " ".join(f"{snr[lab][i, j]:16.3f}" for lab in ESTIMATORS
                                    for j in range(3)))
    plt = _plots.pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        for j, ax in enumerate(axes):
            for label, style in zip(ESTIMATORS, ("o-", "s-")):
                ax.loglog(Ks, snr[label][:, j], style, label=label)
            ax.set_xlabel("particles K")
            ax.set_ylabel(f"SNR of the gradient in {NAMES[j]}")
            ax.set_title(("proposal: " if j < 2 else "model: ") + NAMES[j])
            ax.legend()
        fig.suptitle("IWAE bound of a Gaussian model: signal-to-noise ratio against K")
        fig.tight_layout()
        _plots.save(fig, "dreg_snr.png", out_dir)
    return {"K": list(Ks), **{label: snr[label].tolist() for label in ESTIMATORS}}


if __name__ == "__main__":
    _plots.run(main)
