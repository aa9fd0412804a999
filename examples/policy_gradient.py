"""A Gaussian policy learns to act near 3: the policy-gradient program of the classic question
"how does the gradient pass through random samples?", written with scg.

The policy is a 1 -> 20 -> 30 -> 2 MLP (relu between layers, softplus on the output) that
maps a constant state to the mean and standard deviation of a Normal; the action a is
drawn from it and the reward is -(3 - a)^2. Trained with Adam and a moving-average
baseline, one draw per step, as in the question. The script shows:

1. the learning curve: the policy's mean goes to 3 and its standard deviation shrinks;
2. what scg says when the parameters are cut off before the distribution (the question's
   `.detach()`; here `scg.stop_gradient`): a `scg.NoGradientPathError` that explains it;
3. the pathwise alternative, valid because the reward is differentiable in a: its training
   curve, and the per-draw gradient variance of both estimators side by side.

Run: python examples/policy_gradient.py      (writes examples/out/policy_gradient_*.png)
"""

import numpy as np

import scg

import _plots

TARGET = 3.0
STATE = np.ones(1)  # the question's x = [1.0]


def make_model(estimator):
    """The model for one draw: cost (3 - a)^2, i.e. the negated reward."""
    def model(params):
        mu, std = scg.nn.mlp(params, STATE, final=scg.softplus)
        a = scg.sample("a", scg.Normal(mu, std), estimator=estimator)
        return (TARGET - a) ** 2
    return model


def detached_model(params):
    """The question's mistake: the policy's output is cut off before the distribution."""
    mu, std = scg.stop_gradient(scg.nn.mlp(params, STATE, final=scg.softplus))
    a = scg.sample("a", scg.Normal(mu, std), estimator="score")
    return (TARGET - a) ** 2


def policy(params):
    mu, std = scg.nn.mlp(params, STATE, final=scg.softplus)
    return float(mu), float(std)


def train(estimator, params, steps, n, lr, seed, desc):
    """Adam on the expectation; returns the final parameters and per-step history."""
    E = scg.expectation(make_model(estimator), n=n, seed=seed)
    step = scg.value_and_grad(E)
    opt = scg.optim.Adam(lr)
    state = opt.init(params)
    history = np.empty((steps, 3))  # cost estimate, policy mean, policy std (before the step)
    for t in scg.progress(range(steps), desc=desc):
        cost, g = step(params)
        history[t] = (cost, *policy(params))
        params, state = opt.update(g, state, params)
    return params, history


def total_variance(gs):
    """Sum over every parameter coordinate of the per-draw gradient variance."""
    return float(sum(np.sum(v) for v in scg.core.pytree.flatten(gs.var)[0]))


def variance_table(points, draws, seed):
    """Per-draw gradient variance of each estimator at each point (name -> params)."""
    estimators = {
        "score, no baseline": lambda: "score",
        "score, moving average": lambda: scg.Score(scg.baselines.MovingAverage(0.9)),
        "score, leave-one-out": lambda: scg.Score("loo"),
        "pathwise": lambda: "pathwise",
    }
    table = {}
    for where, params in points.items():
        for label, make in estimators.items():
            E = scg.expectation(make_model(make()), n=draws, seed=seed)
            for _ in range(5):
                scg.grad(E)(params)  # lets a moving average settle (the others keep no state)
            table[label, where] = total_variance(scg.grad_samples(E)(params))
    return estimators, table


def main(steps=2000, n=1, lr=1e-3, variance_draws=20_000, seed=0, out_dir=None):
    init = scg.nn.init_mlp(seed, [1, 20, 30, 2])
    mu0, std0 = policy(init)
    print("Policy: Normal(mu, std) with (mu, std) = softplus(MLP 1 -> 20 -> 30 -> 2 of x = 1); "
          "reward -(3 - a)^2.")
    print(f"At the start: mu = {mu0:.3f}, std = {std0:.3f}.\n")

    # 1. the question's program: score function, moving-average baseline, Adam, batch n
    score_est = scg.Score(scg.baselines.MovingAverage(decay=0.9))
    trained, hist_score = train(score_est, init, steps, n, lr, seed, "score function")
    mu, std = policy(trained)
    print(f"1. Score function + moving-average baseline, Adam(lr={lr:g}), {n} draw(s) per step, "
          f"{steps} steps:")
    print(f"   mu = {mu:.3f}, std = {std:.3f}; mean cost over the last 10% of steps "
          f"{hist_score[-max(steps // 10, 1):, 0].mean():.4f} (the minimum is std^2 -> 0)\n")

    # 2. the .detach() mistake
    print("2. The parameters cut off before the distribution (scg.stop_gradient, the .detach() "
          "of PyTorch):")
    try:
        scg.grad(scg.expectation(detached_model, n=4, seed=seed))(init)
        detach_error = None
        print("   no error?!")
    except scg.NoGradientPathError as e:
        detach_error = str(e)
        print(f"   scg.NoGradientPathError: {detach_error}\n")

    # 3. the pathwise alternative: the reward is differentiable in a
    _, hist_path = train("pathwise", init, steps, n, lr, seed, "pathwise")
    points = {"start": init, "after training": trained}
    estimators, table = variance_table(points, variance_draws, seed)
    print("3. The reward is differentiable in a, so a = mu + std * eps gives a pathwise "
          "estimator (what estimator=\"auto\" picks).")
    for name, hist in (("score function", hist_score), ("pathwise", hist_path)):
        reach = np.flatnonzero(np.abs(hist[:, 1] - TARGET) < 0.1)
        when = f"step {reach[0]}" if reach.size else "not within the run"
        print(f"   {name:<15} |mu - 3| < 0.1 first at {when}; final mu = {hist[-1, 1]:.3f}")
    n_params = sum(p.size for p in scg.core.pytree.flatten(init)[0])
    print(f"\n   Per-draw gradient variance, summed over all {n_params} parameters "
          f"({variance_draws:,} draws):")
    print(f"   {'estimator':<24}" + "".join(f"{w:>18}" for w in points))
    for label in estimators:
        print(f"   {label:<24}" + "".join(f"{table[label, w]:>18.4g}" for w in points))
    ratios = {w: table["score, no baseline", w] / table["pathwise", w] for w in points}
    print("   score (no baseline) / pathwise: "
          + ", ".join(f"{r:,.0f}x {w}" for w, r in ratios.items()))

    plt = _plots.pyplot()
    if plt is not None:
        _plot_training(plt, hist_score, hist_path, n, out_dir)
        _plot_variance(plt, estimators, table, points, out_dir)
    return {"mu": mu, "std": std, "history_score": hist_score, "history_pathwise": hist_path,
            "detach_error": detach_error, "variance": table}


def _smooth(y, k):
    k = max(1, min(k, len(y)))
    return np.convolve(y, np.ones(k) / k, mode="valid")


def _plot_training(plt, hist_score, hist_path, n, out_dir):
    steps = np.arange(len(hist_score))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for hist, label, color in ((hist_score, "score + moving average", "C0"),
                               (hist_path, "pathwise", "C1")):
        axes[0].plot(steps, hist[:, 1], color=color, label=label)
        axes[1].plot(steps, hist[:, 2], color=color, label=label)
        k = max(len(hist) // 40, 1)
        axes[2].plot(steps[k - 1:], _smooth(hist[:, 0], k), color=color, label=label)
    axes[0].axhline(TARGET, color="k", ls="--", lw=1, label="target 3")
    axes[0].set(title="policy mean mu", xlabel="step", ylabel="mu")
    axes[1].set(title="policy std", xlabel="step", ylabel="std", yscale="log")
    axes[2].set(title=f"cost (3 - a)^2, {n} draw(s)/step, running mean", xlabel="step",
                ylabel="cost", yscale="log")
    for ax in axes:
        ax.legend()
    fig.suptitle("Gaussian policy from a 1-20-30-2 MLP, Adam: learning to act near 3")
    fig.tight_layout()
    _plots.save(fig, "policy_gradient_training.png", out_dir)


def _plot_variance(plt, estimators, table, points, out_dir):
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(estimators)
    x = np.arange(len(points))
    for i, label in enumerate(estimators):
        ax.bar(x + i * width, [table[label, w] for w in points], width, label=label)
    ax.set_xticks(x + width * (len(estimators) - 1) / 2, list(points))
    ax.set(yscale="log", ylabel="per-draw gradient variance (sum over parameters)",
           xlabel="policy parameters where the variance is measured",
           title="Gradient variance of the estimators")
    ax.legend()
    fig.tight_layout()
    _plots.save(fig, "policy_gradient_variance.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
