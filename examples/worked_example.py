"""The worked example: x ~ N(mu, sigma) at mu = 2, sigma = 1, f(x) = x^2, dF/dmu = 4, dF/dsigma = 2.

Prints the estimator table (mean, per-draw variance, draws needed for a standard error of
0.1) beside the exact values, and draws histograms of the per-draw estimates of each
estimator: pathwise, score function, score with the baseline b = E[f] = 5, and score with
the best constant b* = 7. All have the same mean; their spreads differ by a factor of ten.

Run: python examples/worked_example.py      (writes examples/out/worked_example_histograms.png)
"""

import numpy as np

import scg
from scg import demo

import _plots

HISTOGRAMS = [  # (label, estimator): the four estimators of the reference lesson
    ("pathwise", "pathwise"),
    ("score", "score"),
    ("score, b = 5", scg.Score(5.0)),
    ("score, b* = 7", scg.Score(7.0)),
]
EXACT_GRAD = {"mu": 4.0, "sigma": 2.0}


def per_draw_estimates(draws, seed):
    """label -> GradSamples of dF/d(mu, sigma), `draws` per-draw estimates each."""
    return {label: scg.grad_samples(scg.expectation(demo.model_with(est), n=draws, seed=seed))(
        demo.THETA) for label, est in HISTOGRAMS}


def main(n=400_000, hist_draws=4000, seed=0, out_dir=None):
    print("Worked example: x ~ N(mu, sigma), mu = 2, sigma = 1, f(x) = x^2; "
          "exact dF/dmu = 4, dF/dsigma = 2.")
    print(f"Each estimator with n = {n:,} draws (scg.grad_samples), exact values by quadrature.\n")
    rows = demo.study(n, seed)
    header = (f"{'estimator':<16}{'param':<7}{'mean':>8}{'stderr':>9}{'variance':>11}"
              f"{'exact var':>11}{'N for se 0.1':>14}")
    print(header)
    print("-" * len(header))
    for label, p, mean, se, var, _, exact_var in rows:
        print(f"{label:<16}{p:<7}{mean:>8.3f}{se:>9.4f}{var:>11.1f}{exact_var:>11.1f}"
              f"{var / 0.01:>14,.0f}")
    print("\n(leave-one-out: its exact variance is the large-n limit, where b -> E[f] = 5)")

    samples = per_draw_estimates(hist_draws, seed)
    print(f"\nHistograms of {hist_draws:,} per-draw estimates of dF/dmu "
          "(mean, standard deviation, 1% and 99% quantiles):")
    for label, gs in samples.items():
        s = gs.samples["mu"]
        lo, hi = np.quantile(s, [0.01, 0.99])
        print(f"  {label:<15} mean {s.mean():6.3f}  sd {s.std(ddof=1):6.3f}  "
              f"1%..99%: {lo:7.2f} .. {hi:6.2f}")

    plt = _plots.pyplot()
    if plt is not None:
        _plot(plt, samples, out_dir)
    return {"rows": rows, "samples": {k: v.samples for k, v in samples.items()}}


def _plot(plt, samples, out_dir):
    params = ("mu", "sigma")
    fig, axes = plt.subplots(len(params), len(samples), figsize=(15, 6.5), sharey="row")
    for r, p in enumerate(params):
        everything = np.concatenate([gs.samples[p] for gs in samples.values()])
        lo, hi = np.quantile(everything, [0.002, 0.998])
        bins = np.linspace(lo, hi, 80)
        for c, (label, gs) in enumerate(samples.items()):
            ax = axes[r, c]
            s = gs.samples[p]
            ax.hist(np.clip(s, lo, hi), bins=bins, color=f"C{c}", alpha=0.8)
            ax.axvline(EXACT_GRAD[p], color="k", lw=1.5, label=f"exact {EXACT_GRAD[p]:g}")
            ax.axvline(s.mean(), color="r", ls="--", lw=1.2, label=f"mean {s.mean():.2f}")
            ax.set_title(f"{label}: dF/d{p}\nvariance {s.var(ddof=1):.1f}")
            ax.set_xlabel(f"per-draw estimate of dF/d{p}")
            ax.set_ylabel("draws per bin")
            ax.legend(fontsize=8, loc="upper right")  # (a fixed place: "best" searches the bars)
    fig.suptitle(f"Per-draw estimates, x ~ N(2, 1), f = x^2 ({len(s):,} draws each; "
                 "tails clipped into the end bins)")
    fig.tight_layout()
    _plots.save(fig, "worked_example_histograms.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
