"""CartPole balanced by REINFORCE: episodes that end early, written for one draw with
scg.mask and scg.all.

The dynamics are Gymnasium's CartPole-v1 equations in numpy (gravity 9.8, cart 1.0 kg,
pole 0.1 kg of half-length 0.5, force 10 N, tau 0.02 s, Euler steps); an episode ends when
|x| > 2.4 or |theta| > 12 degrees, and is cut at 200 steps. The start state is a draw of
Uniform(-0.05, 0.05)^4 per episode. The policy is an MLP 4 -> 16 -> 1 (relu) giving the
logit of pushing right; each action is an `scg.sample` of a Bernoulli inside
`with scg.mask(alive):`, with a cost of -1 for each step the episode is alive, and the loop
stops once every episode has ended (`if scg.all(~alive): break`).

One update = 8 episodes (n = 8 draws of the expectation), the score function with the
leave-one-out baseline (each action's score meets only the costs after it, the
reward-to-go), Adam; the update (gradient and Adam) is one function under scg.jit. The
script prints the mean episode length of each update and stops once it reaches 200, and
checks the first update's gradient against the same REINFORCE written by hand in numpy on
the same episodes.

Run: python examples/cartpole.py [--seed 0] [--updates 150] [--lr 0.01] [--out DIR]
     (writes examples/out/cartpole.png)
"""

import time

import numpy as np

import scg

import _plots

# Gymnasium's CartPole-v1
GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_THRESHOLD = 12 * 2 * np.pi / 360
X_THRESHOLD = 2.4
MAX_STEPS = 200
SIZES = [4, 16, 1]
EPISODES = 8  # per update


def physics(s, a):
    """One Euler step of the cart and pole from state s = (x, x_dot, theta, theta_dot)
    (last axis) under action a (1: push right, 0: push left). Plain numpy: the same code
    runs on per-draw values in the model and on arrays by hand."""
    x, x_dot, theta, theta_dot = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    force = FORCE_MAG * (2 * a - 1)
    costheta, sintheta = np.cos(theta), np.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot ** 2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta ** 2 / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return np.stack([x + TAU * x_dot, x_dot + TAU * xacc,
                     theta + TAU * theta_dot, theta_dot + TAU * thetaacc], axis=-1)


def terminated(s):
    return (np.abs(s[..., 0]) > X_THRESHOLD) | (np.abs(s[..., 2]) > THETA_THRESHOLD)


def logit(params, s):
    """The policy: the logit of pushing right."""
    return scg.nn.mlp(params, s)[..., 0]


def cartpole(params):
    """One episode (the model of one draw): its cost is minus its length."""
    s = scg.sample("s0", scg.Uniform(np.full(4, -0.05), np.full(4, 0.05)))
    alive = True
    for t in range(MAX_STEPS):
        with scg.mask(alive):
            a = scg.sample(f"a{t}", scg.Bernoulli(logits=logit(params, s)),
                           estimator=scg.Score("loo"))
            scg.cost(f"r{t}", -1.0)  # reward +1 for each step taken
        s = physics(s, a)
        alive = alive & ~terminated(s)
        if scg.all(~alive):  # every episode has ended
            break


def episodes(E):
    """The start states (n, 4) and actions (n, T) of the expectation's last run."""
    sites = E.last_trace.sites
    T = sum(1 for name in sites if name.startswith("a"))
    return sites["s0"].value, np.stack([sites[f"a{t}"].value for t in range(T)], axis=1)


def reinforce_by_hand(params, starts, actions):
    """The same REINFORCE in numpy on given episodes: the gradient of minus the mean
    length, with each action's score times its advantage: the steps after it, less the
    mean of the other episodes' steps after that time (leave-one-out), backpropagated
    through the MLP by hand. Returns (gradient like params, episode lengths)."""
    n, T = actions.shape
    W1, b1, W2, b2 = params[0]["W"], params[0]["b"], params[1]["W"], params[1]["b"]
    s, alive = starts, np.ones(n, bool)
    states, masks = [], []
    for t in range(T):
        states.append(s)
        masks.append(alive)
        s = physics(s, actions[:, t])
        alive = alive & ~terminated(s)
    S, M = np.stack(states, 1), np.stack(masks, 1).astype(float)      # (n, T, 4), (n, T)
    later = M[:, ::-1].cumsum(1)[:, ::-1] - M          # steps after t (costs downstream)
    q = -later
    adv = (n * q - q.sum(0, keepdims=True)) / (n - 1)
    h_pre = S @ W1 + b1
    h = np.maximum(h_pre, 0.0)
    p = 1.0 / (1.0 + np.exp(-(h @ W2 + b2)[..., 0]))
    dl = M * adv * (actions - p) / n                  # d surrogate / d logit
    dh = dl[..., None] * W2[:, 0] * (h_pre > 0)
    grad = [{"W": np.einsum("ntk,nth->kh", S, dh), "b": dh.sum((0, 1))},
            {"W": np.einsum("nth,nt->h", h, dl)[:, None], "b": np.array([dl.sum()])}]
    return grad, M.sum(1)


def max_difference(g1, g2):
    return max(float(np.max(np.abs(a[k] - b[k]))) for a, b in zip(g1, g2) for k in a)


def train(updates=150, lr=0.01, seed=0, n=EPISODES, verbose=True):
    """REINFORCE with Adam until the mean length of an update's episodes reaches 200."""
    params = scg.nn.init_mlp(seed, SIZES)
    E = scg.expectation(cartpole, n=n, seed=seed)
    value_and_grad = scg.value_and_grad(E)
    opt = scg.optim.Adam(lr)

    @scg.jit
    def update(params, state):
        cost, g = value_and_grad(params)
        params, state = opt.update(g, state, params)
        return cost, params, state

    state = opt.init(params)
    lengths, seconds = [], []
    for k in range(updates):
        t0 = time.perf_counter()
        cost, params, state = update(params, state)
        seconds.append(time.perf_counter() - t0)
        lengths.append(-float(cost))
        if verbose:
            print(f"update {k + 1:4d}: mean episode length {lengths[-1]:6.1f}  "
                  f"({1000 * seconds[-1]:.0f} ms)")
        if lengths[-1] >= MAX_STEPS:
            break
    return params, np.array(lengths), np.array(seconds), update


def check_gradient(seed=0, n=EPISODES):
    """scg's gradient of one update against reinforce_by_hand on the same episodes."""
    params = scg.nn.init_mlp(seed, SIZES)
    E = scg.expectation(cartpole, n=n, seed=seed)
    g = scg.grad(E)(params)
    starts, actions = episodes(E)
    by_hand, lengths = reinforce_by_hand(params, starts, actions)
    return max_difference(g, by_hand), lengths


def main(updates=150, lr=0.01, seed=0, out_dir=None):
    difference, lengths = check_gradient(seed)
    print(f"Gradient of one update (episodes of lengths {lengths.astype(int).tolist()}): "
          f"scg against REINFORCE by hand in numpy, max |difference| = {difference:.1e}\n")
    print(f"Training: {EPISODES} episodes per update, Adam(lr={lr:g}), "
          f"policy MLP {' -> '.join(map(str, SIZES))}")
    params, history, seconds, update = train(updates, lr, seed)
    reached = history[-1] >= MAX_STEPS
    print(f"\nMean length {history[-1]:.1f} after {len(history)} updates "
          f"({'reached 200' if reached else 'did not reach 200'}); "
          f"{1000 * np.median(seconds):.0f} ms per update in the median, "
          f"{seconds.sum():.1f} s in all")
    stats = update.stats
    print(f"scg.jit: {stats['replays']} of {stats['calls']} updates replayed (loops of a "
          f"length recorded before), {stats['eager']} ran afresh (a loop ending at a new "
          f"step), {stats['recordings']} recorded")
    plt = _plots.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(np.arange(1, len(history) + 1), history, marker=".", label="scg, 8 episodes")
        ax.axhline(MAX_STEPS, color="k", ls="--", lw=1, label="200 steps (truncation)")
        ax.set(xlabel="update", ylabel="mean episode length (steps)",
               title=f"CartPole, REINFORCE with a leave-one-out baseline, Adam(lr={lr:g})")
        ax.legend(loc="lower right")
        fig.tight_layout()
        _plots.save(fig, "cartpole.png", out_dir)
    return {"history": history, "seconds": seconds, "gradient_difference": difference,
            "reached": reached, "params": params}


def _arguments():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and episodes")
    parser.add_argument("--updates", type=int, default=150, help="most updates to run")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="folder for the picture (default examples/out/)")
    return parser.parse_args()


if __name__ == "__main__":
    args = _arguments()
    main(updates=args.updates, lr=args.lr, seed=args.seed, out_dir=args.out)
