"""The unordered set estimator against leave-one-out at equal evaluations.

A choice among 10 values, c ~ Categorical(logits), cost (v_c - 0.3)^2, at three entropies
of the policy (the logits scaled). scg.UnorderedSet(k) evaluates the model at k distinct
values per draw; scg.Score("loo") with n = k draws evaluates it k times too. The figure
is the variance of one estimate (one set, or the mean of k draws), summed over the
logits, for k = 2, 4, 8.

Run: python examples/unordered_set_study.py   (writes examples/out/unordered_set_study.png)
"""

import numpy as np

import scg

import _plots

K = 10


def problem(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=K), rng.normal(size=K)


def make_model(values):
    def model(logits):
        c = scg.sample("c", scg.Categorical(logits=logits))
        return (scg.take(values, c) - 0.3) ** 2
    return model


def variances(model, logits, k, estimates, seed):
    """(unordered set, leave-one-out with n = k): the variance of one estimate."""
    E = scg.expectation(model, n=estimates, seed=seed, estimators={"c": scg.UnorderedSet(k)})
    unordered = float(np.sum(scg.grad_samples(E)(logits).var))
    E = scg.expectation(model, n=k, seed=seed + 1, estimators={"c": scg.Score("loo")})
    grads = np.array([scg.grad(E)(logits) for _ in range(estimates // 5)])
    loo = float(np.sum(np.var(grads, axis=0, ddof=1)))
    return unordered, loo


def main(ks=(2, 4, 8), scales=(0.5, 2.0, 4.0), estimates=10_000, out_dir=None, seed=0):
    values, direction = problem(seed)
    model = make_model(values)
    out = {}
    print(f"a choice among {K} values; variance of one estimate at k evaluations\n")
    print(f"{'entropy':>8s} {'k':>3s} {'unordered set':>14s} {'leave-one-out':>14s} {'ratio':>7s}")
    for scale in scales:
        logits = scale * direction
        p = np.exp(logits - logits.max())
        p /= p.sum()
        entropy = float(-np.sum(p * np.log(p)))
        rows = []
        for k in ks:
            us, loo = variances(model, logits, k, estimates, seed)
            rows.append((k, us, loo))
            print(f"{entropy:8.2f} {k:3d} {us:14.4g} {loo:14.4g} {us / loo:7.3f}")
        out[round(entropy, 2)] = rows
    plt = _plots.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, (entropy, rows) in enumerate(out.items()):
            r = np.array(rows)
            ax.plot(r[:, 0], r[:, 1], "o-", color=f"C{i}",
                    label=f"unordered set, entropy {entropy:.2f}")
            ax.plot(r[:, 0], r[:, 2], "s--", color=f"C{i}",
                    label=f"leave-one-out (n = k), entropy {entropy:.2f}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(list(ks), [str(k) for k in ks])
        ax.set_xlabel("model evaluations per estimate (k)")
        ax.set_ylabel("variance of the gradient estimate (summed over logits)")
        ax.legend(fontsize=7)
        ax.set_title(f"A choice among {K} values")
        _plots.save(fig, "unordered_set_study.png", out_dir)
    return out


if __name__ == "__main__":
    _plots.run(main)
