"""Every estimator on one discrete and one continuous model: variance per unit of time.

Discrete: ten coins b_i ~ Bernoulli(sigmoid(theta_i)) and the coupled cost
f(b) = (w . b - 1.5)^2; the exact gradient comes from enumerating the 2^10 states.
Continuous: the worked example x ~ N(mu, sigma), mu = 2, sigma = 1, f(x) = x^2, whose
exact gradient is (4, 2).

For every estimator that applies, scg.grad_samples gives the per-draw estimates; the
table shows the bias in standard errors against the exact gradient, the per-draw variance
(summed over the coordinates), the evaluations of the model per draw, the time per draw,
and the efficiency 1 / (variance x time per draw): the gradient precision bought per
second. (For antithetic estimators a "draw" is a pair.) The Gumbel-softmax relaxations
are biased by design: their z against the true gradient is large.

Run: python examples/estimator_zoo.py     (writes examples/out/estimator_zoo.png)
"""

import itertools
import time

import numpy as np

import scg

import _plots

THETA = np.linspace(-1.0, 1.0, 10) * 0.8
W = np.linspace(-1.0, 1.5, 10)
STATES = np.array(list(itertools.product([0.0, 1.0], repeat=10)))


def coins(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta).to_event(1), estimator=estimator)
        return (np.sum(W * b) - 1.5) ** 2
    return model


def coins_exact_grad(theta):
    p = 1.0 / (1.0 + np.exp(-theta))
    prob = np.prod(np.where(STATES == 1.0, p, 1.0 - p), axis=1)
    f = (STATES @ W - 1.5) ** 2
    # d/dtheta_i of sum_s prob(s) f(s) = sum_s prob(s) f(s) (s_i - p_i)
    return (prob * f) @ (STATES - p)


def worked(estimator):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], theta[1]), estimator=estimator)
        return x ** 2
    return model


DISCRETE = [
    ("score", scg.Score()),
    ("score, leave-one-out", scg.Score("loo")),
    ("DisARM", scg.DisARM()),
    ("measure-valued", scg.MeasureValued()),
    ("enumerate", scg.Enumerate()),
    ("Gumbel-softmax T=0.5", scg.GumbelSoftmax(0.5)),
    ("straight-through T=0.5", scg.GumbelSoftmax(0.5, hard=True)),
]
CONTINUOUS = [
    ("pathwise", scg.Pathwise()),
    ("pathwise, antithetic", scg.Pathwise(antithetic=True)),
    ("score", scg.Score()),
    ("score, leave-one-out", scg.Score("loo")),
    ("score, loo, antithetic", scg.Score("loo", antithetic=True)),
    ("measure-valued", scg.MeasureValued()),
]


def study(make_model, theta, exact, estimators, n, seed, repeats=3):
    """label -> dict(z, variance, evals, time per draw, efficiency)."""
    rows = {}
    for label, est in estimators:
        # (an exact sum needs no more than 2 draws: its variance is zero)
        E = scg.expectation(make_model(est), n=2 if isinstance(est, scg.Enumerate) else n,
                            seed=seed)
        gs = scg.grad_samples(E)(theta)  # (warm-up: compiles kernels, settles the layout)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            gs = scg.grad_samples(E)(theta)
            times.append(time.perf_counter() - start)
        per_draw = float(np.median(times)) / gs.n
        mean = np.asarray(gs.mean)
        var = float(np.sum(gs.var))
        if var <= 1e-20 * (1.0 + float(np.sum(mean ** 2))):  # rounding only: exact
            var = 0.0
        stderr = np.asarray(gs.stderr)
        exact_sum = stderr <= 1e-10 * (1.0 + np.abs(mean))
        z = (mean - exact) / np.where(exact_sum, np.inf, stderr)
        site = E.last_trace.sites[next(iter(E.last_trace.sites))]
        evals = site.estimator.evaluations(site) * (2 if site.estimator.antithetic else 1)
        rows[label] = dict(z=float(np.max(np.abs(z))), variance=var, evals=evals,
                           biased=site.estimator.biased,
                           time=per_draw,
                           efficiency=1.0 / (var * per_draw) if var > 0 else np.inf)
    return rows


def print_table(title, rows):
    print(f"\n{title}")
    header = (f"{'estimator':<24}{'max |z|':>9}{'variance':>11}{'evals':>7}"
              f"{'us/draw':>9}{'efficiency':>12}")
    print(header)
    print("-" * len(header))
    for label, r in rows.items():
        eff = "exact" if np.isinf(r["efficiency"]) else f"{r['efficiency']:.3g}"
        print(f"{label:<24}{r['z']:>9.1f}{r['variance']:>11.4g}{r['evals']:>7}"
              f"{r['time'] * 1e6:>9.2f}{eff:>12}")


def main(n=20_000, seed=0, out_dir=None):
    discrete = study(coins, THETA, coins_exact_grad(THETA), DISCRETE, n, seed)
    print_table("Ten coins, f = (w . b - 1.5)^2 (exact gradient by enumeration):", discrete)
    continuous = study(worked, np.array([2.0, 1.0]), np.array([4.0, 2.0]), CONTINUOUS,
                       n, seed)
    print_table("Worked example, x ~ N(2, 1), f = x^2 (exact gradient (4, 2)):", continuous)
    plt = _plots.pyplot()
    if plt is not None:
        _plot(plt, {"ten coins": discrete, "worked example": continuous}, out_dir)
    return {"discrete": discrete, "continuous": continuous}


def _plot(plt, studies, out_dir):
    fig, axes = plt.subplots(1, len(studies), figsize=(14, 4.5),
                             gridspec_kw={"wspace": 0.55})
    for ax, (title, rows) in zip(axes, studies.items()):
        finite = {k: r for k, r in rows.items() if np.isfinite(r["efficiency"])}
        labels = [k + (" (biased)" if r["biased"] else "") for k, r in finite.items()]
        ax.barh(labels, [r["efficiency"] for r in finite.values()],
                color=["tab:orange" if r["biased"] else "tab:blue" for r in finite.values()])
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel("efficiency: 1 / (variance x seconds per draw)")
        ax.set_ylabel("estimator")
        ax.set_title(f"{title} (exact sums not shown)" if len(finite) < len(rows) else title)
    fig.suptitle("Gradient estimators: precision per second (higher is better)")
    _plots.save(fig, "estimator_zoo.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
