"""REINFORCE, leave-one-out, REBAR and RELAX on the toy of the REBAR and RELAX papers.

One coin b ~ Bernoulli(sigmoid(theta)) and the cost f(b) = (b - 0.45)^2: the gradient is
small (p (1 - p) 0.1) beside the cost (about 0.25), so a score-function estimate without
a baseline is noisy. theta is trained with Adam on each estimator's estimate; at every
step the per-draw variance of the estimate (scg.grad_samples) is recorded, and for REBAR
and RELAX the temperature they tune themselves. REBAR's control variate is the relaxed
cost, eta f(sigmoid(z / T)); RELAX adds a learned network of the relaxed value.

Run: python examples/relaxed_control_variates.py   (writes examples/out/relaxed_control_variates.png)
"""

import numpy as np

import scg

import _plots

TARGET = 0.45


def model(theta):
    b = scg.sample("b", scg.Bernoulli(logits=theta))
    return (b - TARGET) ** 2


def estimators():
    return {
        "REINFORCE (no baseline)": scg.Score(),
        "leave-one-out": scg.Score("loo"),
        # REBAR's best here is far from where it starts (T in the hundreds, scale near 100,
        # where eta f(1/2) is a baseline near E[f]): Adam moves a parameter by about lr a
        # step, so its tuning takes lr = 1. RELAX's network learns the baseline itself.
        "REBAR (tuned)": scg.REBAR(temperature=0.5, scale=1.0, lr=1.0),
        "RELAX (tuned)": scg.RELAX(temperature=0.5, scale=1.0, lr=0.01),
    }


def train(estimator, steps, n, seed):
    """Adam on theta from 0; per step: theta, the estimate's per-draw variance, and the
    temperature the estimator uses (NaN if it has none)."""
    E = scg.expectation(model, n=n, seed=seed, estimators={"b": estimator})
    opt = scg.optim.Adam(0.01)
    theta = np.array(0.0)
    state = opt.init(theta)
    out = np.empty((steps, 3))
    for t in range(steps):
        gs = scg.grad_samples(E)(theta)
        tuned = E.states["b"].estimator.get("params", {}) if "b" in E.states else {}
        T = np.exp(tuned["log_temperature"]) if "log_temperature" in tuned else np.nan
        out[t] = theta, float(gs.var), T
        theta, state = opt.update(gs.mean, state, theta)
    return out


def main(steps=2000, n=32, out_dir=None, seed=0):
    curves, table = {}, {}
    print(f"toy f(b) = (b - {TARGET})^2, Adam on the logit, {steps} steps of n = {n} draws\n")
    print(f"{'estimator':26s} {'evals/draw':>10s} {'log10 var (last 20%)':>21s} "
          f"{'x evals':>8s} {'final T':>8s}")
    for label, estimator in estimators().items():
        c = train(estimator, steps, n, seed)
        evals = 3 if isinstance(estimator, scg.REBAR) else 1  # (RELAX is a REBAR)
        tail = c[int(0.8 * steps):, 1]
        log_var = float(np.log10(np.mean(tail)))
        table[label] = {"log10_var": log_var, "evals": evals,
                        "log10_var_per_eval": float(np.log10(np.mean(tail) * evals)),
                        "temperature": float(c[-1, 2]), "theta": float(c[-1, 0])}
        curves[label] = c
        T = "" if np.isnan(c[-1, 2]) else f"{c[-1, 2]:.3g}"
        print(f"{label:26s} {evals:10d} {log_var:21.2f} "
              f"{table[label]['log10_var_per_eval']:8.2f} {T:>8s}")
    print("\n'x evals': the variance times the evaluations per draw (variance at equal cost)")
    plt = _plots.pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        window = max(1, steps // 50)
        kernel = np.ones(window) / window
        for label, c in curves.items():
            smooth = np.convolve(c[:, 1], kernel, mode="valid")
            axes[0].plot(np.log10(smooth), label=label)
            if not np.isnan(c[0, 2]):
                axes[1].plot(c[:, 2], label=label)
        axes[0].set_xlabel("training step")
        axes[0].set_ylabel("log10 variance of the gradient estimate (per draw)")
        axes[0].legend(fontsize=8)
        axes[1].set_xlabel("training step")
        axes[1].set_yscale("log")   # (REBAR's climbs to thousands, RELAX's stays near 1)
        axes[1].set_ylabel("temperature T tuned by the estimator (log scale)")
        axes[1].legend(fontsize=8)
        fig.suptitle(f"f(b) = (b - {TARGET})^2: variance over training, n = {n} draws per step")
        _plots.save(fig, "relaxed_control_variates.png", out_dir)
    return {"curves": curves, "table": table}


if __name__ == "__main__":
    _plots.run(main)
