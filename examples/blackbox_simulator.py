"""Tuning a non-differentiable simulator: evolution strategies as a score-function estimator.

The simulator fires a shell with an angle and a speed (in units of 10 m/s), steps its flight in time (with
air drag) until it hits the ground or a wall, and reports where it landed, rounded down
to whole meters. Its cost, the squared miss distance to a target behind the wall, is
piecewise constant in the parameters: every derivative is 0 or undefined.

Evolution strategies smooth it: draw x ~ Normal(theta, sigma) around the parameters and
minimize E[cost(x)]. Its gradient is the score-function estimate
grad log p(x) * (cost(x) - b); scg picks it by itself because the simulator is a
`scg.blackbox`. The script shows:

1. the pathwise gradient through the simulator is zero (scg warns with BiasWarning and,
   with nothing else to go on, raises NoGradientPathError; allow_unused=True gives 0);
2. the ES gradient from scg (leave-one-out baseline) against the classic hand-written ES
   with antithetic pairs, (cost(theta + s e) - cost(theta - s e)) e / (2 s): the same mean,
   and their per-draw variances;
3. Adam on the ES gradient: the shell clears the wall and lands on the target.

Run: python examples/blackbox_simulator.py      (writes examples/out/blackbox_simulator_*.png)
"""

import warnings

import numpy as np

import scg

import _plots

TARGET, WALL_X, WALL_H = 50.0, 25.0, 10.0
SIGMA = np.array([0.05, 0.1])  # search width: angle (radians), speed (10 m/s)
DT, DRAG, G = 0.02, 0.005, 9.81


def simulate(params, return_paths=False):
    """Landing distance (whole meters) of shells fired with rows of (angle, speed / 10 m/s).

    Plain numpy over a leading axis of shots. A shell that reaches the wall below its top
    stops there.
    """
    params = np.atleast_2d(params)
    angle, speed = params[:, 0], 10.0 * params[:, 1]
    x = np.zeros(len(params))
    y = np.zeros(len(params))
    vx, vy = speed * np.cos(angle), speed * np.sin(angle)
    flying = np.ones(len(params), bool)
    paths = [(x.copy(), y.copy())]
    for _ in range(2000):
        v = np.hypot(vx, vy)
        vx = np.where(flying, vx - DT * DRAG * v * vx, 0.0)
        vy = np.where(flying, vy - DT * (G + DRAG * v * vy), 0.0)
        x_new, y_new = x + DT * vx, y + DT * vy
        hit_wall = flying & (x < WALL_X) & (x_new >= WALL_X) & (y_new < WALL_H)
        x_new = np.where(hit_wall, WALL_X, x_new)
        landed = flying & (y_new <= 0)
        x, y = x_new, np.where(landed, 0.0, y_new)
        flying &= ~(hit_wall | landed)
        if return_paths:
            paths.append((x.copy(), y.copy()))
        if not flying.any():
            break
    land = np.floor(x)
    return (land, paths) if return_paths else land


def cost_of(params):
    """The simulator's cost: squared miss distance in units of 10 m."""
    return ((simulate(params) - TARGET) / 10.0) ** 2


simulator_cost = scg.blackbox(cost_of)


def make_model(estimator="auto"):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, SIGMA).to_event(1), estimator=estimator)
        return simulator_cost(x)
    return model


def antithetic_es(theta, pairs, rng):
    """Hand-written ES with antithetic pairs: one gradient estimate per pair."""
    eps = rng.standard_normal((pairs, 2))
    plus, minus = cost_of(theta + SIGMA * eps), cost_of(theta - SIGMA * eps)
    return ((plus - minus) / 2)[:, None] * eps / SIGMA


def main(steps=300, n=64, lr=0.03, variance_draws=20_000, seed=0, out_dir=None):
    theta0 = np.array([0.3, 1.8])
    land0 = simulate(theta0)[0]
    print(f"Start: angle {theta0[0]:.2f} rad, speed {10 * theta0[1]:.1f} m/s -> lands at {land0:.0f} m "
          f"(wall at {WALL_X:.0f} m, {WALL_H:.0f} m high; target {TARGET:.0f} m).\n")

    # 1. the pathwise gradient through the simulator
    print("1. Pathwise through the simulator (estimator='pathwise' forced):")
    E_path = scg.expectation(make_model("pathwise"), n=256, seed=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", scg.BiasWarning)
        try:
            scg.grad(E_path)(theta0)
            error = None
        except scg.NoGradientPathError as e:
            error = e
        g_path = scg.grad(E_path, allow_unused=True)(theta0)
    bias = [w for w in caught if issubclass(w.category, scg.BiasWarning)]
    print(f"   scg.BiasWarning: {bias[0].message}" if bias else "   (no warning)")
    print(f"   then {type(error).__name__} (no cost depends on theta along any path);")
    print(f"   with allow_unused=True the gradient is {g_path}: zero, although moving the aim "
          "moves the shell.\n")

    # 2. ES through scg against antithetic pairs
    E_auto = scg.expectation(make_model(scg.Score("loo")), n=variance_draws, seed=seed)
    gs = scg.grad_samples(E_auto)(theta0)
    plain = scg.grad_samples(scg.expectation(make_model("score"), n=variance_draws,
                                             seed=seed))(theta0)
    anti = antithetic_es(theta0, variance_draws // 2, np.random.default_rng(seed + 1))
    print(f"2. ES gradient at the start ({variance_draws:,} simulator runs each):")
    print(f"   {'estimator':<36}{'d/d angle':>12}{'d/d speed':>12}{'var angle':>12}{'var speed':>12}")
    rows = {
        "scg score, no baseline (per run)": (plain.mean, plain.var, 1),
        "scg score, leave-one-out (per run)": (gs.mean, gs.var, 1),
        "antithetic pairs (per run)": (anti.mean(0), anti.var(0, ddof=1), 2),
    }
    for label, (mean, var, runs) in rows.items():
        # a pair costs two runs: its per-run variance is twice the per-pair variance
        v = var * runs
        print(f"   {label:<36}{mean[0]:>12.2f}{mean[1]:>12.3f}{v[0]:>12.1f}{v[1]:>12.3f}")
    se = np.sqrt(gs.var / gs.n + anti.var(0, ddof=1) / len(anti))
    print(f"   scg (leave-one-out) minus antithetic, in standard errors: "
          f"{np.round(np.abs(gs.mean - anti.mean(0)) / se, 2)}")
    print("   A pair costs two runs. Antithetic pairs cancel the constant and the even part of "
          "the cost,\n   as a baseline does; where the cost is close to linear over the search "
          "width, a pair is\n   worth one run with a good baseline, so per run it has about twice "
          "the variance.\n")
    print("   scg explains its choice (estimator='auto'):")
    t = scg.trace(make_model(), theta0, n=4, seed=seed)
    print(f"   x: {t.sites['x'].kind}, because {t.sites['x'].reason}\n")

    # 3. training
    E = scg.expectation(make_model(), n=n, seed=seed)   # auto: score, leave-one-out
    opt = scg.optim.Adam(lr)
    state = opt.init(theta0)
    theta, history = theta0, []
    for _ in scg.progress(range(steps), desc="ES"):
        value, g = scg.value_and_grad(E)(theta)
        history.append((value, *theta, simulate(theta)[0]))
        theta, state = opt.update(g, state, theta)
    history = np.array(history)
    land = simulate(theta)[0]
    print(f"3. Adam(lr={lr:g}) on the ES gradient, {n} runs per step, {steps} steps:")
    print(f"   angle {theta[0]:.3f} rad, speed {10 * theta[1]:.2f} m/s -> lands at {land:.0f} m "
          f"(target {TARGET:.0f} m); expected cost {history[0, 0]:.2f} -> "
          f"{history[-10:, 0].mean():.3f}")

    plt = _plots.pyplot()
    if plt is not None:
        _plot(plt, theta0, theta, history, out_dir)
    return {"theta": theta, "landing": land, "history": history, "grad_pathwise": g_path,
            "es_scg": gs.mean, "es_antithetic": anti.mean(0), "bias_warning": bool(bias),
            "error": error}


def _plot(plt, theta0, theta, history, out_dir):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for th, label, color in ((theta0, "start", "C0"), (theta, "trained", "C1")):
        _, paths = simulate(th, return_paths=True)
        xs = [p[0][0] for p in paths]
        ys = [p[1][0] for p in paths]
        axes[0].plot(xs, ys, color=color, label=f"{label}: lands at {xs[-1]:.1f} m")
    axes[0].add_patch(plt.Rectangle((WALL_X - 0.5, 0), 1.0, WALL_H, color="gray"))
    axes[0].axvline(TARGET, color="k", ls="--", lw=1, label="target")
    axes[0].set(title="trajectories", xlabel="x (m)", ylabel="height (m)")
    axes[0].legend(loc="upper left", fontsize=8)

    speeds = np.linspace(1.5, 3.0, 801)
    lands = simulate(np.column_stack([np.full_like(speeds, theta0[0]), speeds]))
    axes[1].plot(speeds, ((lands - TARGET) / 10) ** 2, lw=1)
    axes[1].set(title=f"simulator cost against speed (angle {theta0[0]:.2f})\n"
                      "piecewise constant: its derivative is 0 or undefined",
                xlabel="speed (10 m/s)", ylabel="cost")
    axes[2].plot(history[:, 0], label="expected cost (ES estimate)")
    axes[2].plot(((history[:, 3] - TARGET) / 10) ** 2, label="cost at theta", alpha=0.7)
    axes[2].set(title="training with the ES (score-function) gradient", xlabel="step",
                ylabel="cost", yscale="symlog")
    axes[2].legend()
    fig.tight_layout()
    _plots.save(fig, "blackbox_simulator.png", out_dir)


if __name__ == "__main__":
    _plots.run(main)
