"""Three classic mistakes in gradients of expectations, and what scg does about each.

1. The score function where the support moves with the parameter: x ~ Uniform(0, theta),
   f(x) = x. The score -1/theta misses the boundary term: it gives -1/2 instead of +1/2.
2. The pathwise gradient across a jump: x ~ N(mu, 1), f(x) = 1[x > 1]. The derivative of
   the indicator is 0 almost everywhere, so the pathwise estimate is 0 instead of phi(1 - mu).
3. A baseline that includes the draw itself: the mean of the n draws of a group. The
   estimate shrinks by the factor (n - 1) / n.

For each: the exact value, what the mistake gives, scg's warning, and what estimator="auto"
(or the leave-one-out baseline) gives instead.

Run: python examples/pitfalls.py      (writes examples/out/pitfalls.png)
"""

import math
import warnings

import numpy as np

import scg

import _plots


def _run(fn):
    """Call fn() and return (result, the BiasWarning messages it emitted)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", scg.BiasWarning)
        out = fn()
    return out, [str(w.message) for w in caught if issubclass(w.category, scg.BiasWarning)]


def _estimate(model, arg, n, seed, **kw):
    gs = scg.grad_samples(scg.expectation(model, n=n, seed=seed), **kw)(arg)
    return float(gs.mean), float(gs.stderr)


def moving_support(n, seed, theta=2.0):
    def model_with(estimator):
        def model(theta):
            return scg.sample("x", scg.Uniform(0.0, theta), estimator=estimator)
        return model
    (bad, warn) = _run(lambda: _estimate(model_with("score"), theta, n, seed))
    good, _ = _run(lambda: _estimate(model_with("auto"), theta, n, seed))
    kind = scg.trace(model_with("auto"), theta, n=2, seed=seed).sites["x"].kind
    return {"title": f"x ~ Uniform(0, theta), f = x, dF/dtheta at theta = {theta:g}",
            "exact": 0.5, "mistake": ("score function", bad), "auto": (f"auto ({kind})", good),
            "warning": warn}


def threshold(n, seed, mu=0.5):
    def model_with(estimator):
        def model(mu):
            x = scg.sample("x", scg.Normal(mu, 1.0), estimator=estimator)
            return np.where(x > 1.0, 1.0, 0.0)
        return model
    bad, warn = _run(lambda: _estimate(model_with("pathwise"), mu, n, seed, allow_unused=True))
    good, _ = _run(lambda: _estimate(model_with("auto"), mu, n, seed))
    kind = scg.trace(model_with("auto"), mu, n=2, seed=seed).sites["x"].kind
    exact = math.exp(-0.5 * (1.0 - mu) ** 2) / math.sqrt(2 * math.pi)
    return {"title": f"x ~ N(mu, 1), f = 1[x > 1], dF/dmu at mu = {mu:g}",
            "exact": exact, "mistake": ("pathwise", bad), "auto": (f"auto ({kind})", good),
            "warning": warn}


def baseline_with_the_draw(groups, seed, mu=1.0, n=4):
    """n draws per group, `groups` independent groups side by side in a plate."""
    def model_with(baseline):
        def model(mu):
            with scg.plate("groups", groups):
                x = scg.sample("x", scg.Normal(mu * np.ones(groups), 1.0),
                               estimator=scg.Score(baseline))
                scg.cost("f", x ** 2)
        return model

    def per_group(baseline):
        gs = scg.grad_samples(scg.expectation(model_with(baseline), n=n, seed=seed))(mu)
        return float(gs.mean) / groups, float(gs.stderr) / groups
    bad, warn = _run(lambda: per_group("mean"))
    good, _ = _run(lambda: per_group("loo"))
    return {"title": f"x ~ N(mu, 1), f = x^2, dF/dmu at mu = {mu:g}, groups of n = {n}",
            "exact": 2 * mu, "mistake": ("baseline = group mean", bad),
            "auto": ("leave-one-out", good), "warning": warn, "factor": (n - 1) / n}


def main(n=200_000, groups=20_000, seed=0, out_dir=None):
    cases = [moving_support(n, seed), threshold(n, seed), baseline_with_the_draw(groups, seed)]
    results = []
    for i, case in enumerate(cases, 1):
        (bad_label, (bad, bad_se)), (good_label, (good, good_se)) = case["mistake"], case["auto"]
        print(f"{i}. {case['title']}")
        print(f"   exact                   {case['exact']:8.4f}")
        print(f"   {bad_label:<23} {bad:8.4f} +- {bad_se:.4f}   <- the mistake")
        if "factor" in case:
            print(f"   (n - 1)/n * exact       {case['factor'] * case['exact']:8.4f}")
        print(f"   {good_label:<23} {good:8.4f} +- {good_se:.4f}")
        for w in case["warning"]:
            print(f"   scg.BiasWarning: {w}")
        print()
        results.append({"title": case["title"], "exact": case["exact"], "mistake": bad,
                        "mistake_se": bad_se, "fixed": good, "fixed_se": good_se,
                        "warned": bool(case["warning"]), "labels": (bad_label, good_label)})

    plt = _plots.pyplot()
    if plt is not None:
        _plot(plt, results, out_dir)
    return results


def _plot(plt, results, out_dir):
    fig, axes = plt.subplots(1, len(results), figsize=(15, 4))
    for ax, r in zip(axes, results):
        labels = ["exact", r["labels"][0] + "\n(warns)" if r["warned"] else r["labels"][0],
                  r["labels"][1]]
        values = [r["exact"], r["mistake"], r["fixed"]]
        errs = [0.0, 2 * r["mistake_se"], 2 * r["fixed_se"]]
        ax.bar(labels, values, yerr=errs, color=["gray", "C3", "C2"], capsize=4)
        ax.axhline(r["exact"], color="k", ls="--", lw=1)
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_title(r["title"], fontsize=9)
        ax.set(xlabel="estimate", ylabel="gradient (+- 2 standard errors)")
    fig.suptitle("Three classic mistakes: exact gradient, the mistake, scg's choice "
                 "(error bars: 2 standard errors)")
    fig.tight_layout()
    _plots.save(fig, "pitfalls.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
