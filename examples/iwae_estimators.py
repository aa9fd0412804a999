"""Estimators of an IWAE bound's gradient on a small discrete model: variance and time.

K = 3 particles, each two coins z_k ~ Bernoulli(sigmoid(phi)), log-weights
log p(x, z_k) - log q(z_k) from a fixed table, and the bound
log (1/K) sum_k exp(log_w_k), enumerated exactly over the 4^3 particle assignments.

Two ways to write the particles:
- as a plate, the bound `scg.logmeanexp(log_w, plate="particles")`: the score function,
  leave-one-out, VIMCO (its control variate is the bound's own structure) and DisARM;
- as K separate sites and the bound written with np.logaddexp: the estimators that
  evaluate the model at other values of a site, measure-valued derivatives and exact
  enumeration, need that (in a plate their copies would replace every particle at once).

scg.compare gives, for each, the bias in standard errors against the exact gradient, the
per-draw variance (summed over phi's coordinates), the model evaluations per draw and the
time per draw.

Run: python examples/iwae_estimators.py     (writes examples/out/iwae_estimators.png)
"""

import itertools

import numpy as np

import scg

import _plots

K = 3
LOG_JOINT = np.array([[-1.2, 0.4], [-0.3, -2.0]])  # log p(x, z) for z in {0, 1}^2
PHI = np.array([0.4, -0.7])
PAIRS = np.array(list(itertools.product([0.0, 1.0], repeat=2)))


def _log_joint(z):
    a, b = z[..., 0], z[..., 1]
    return (LOG_JOINT[0, 0] * (1 - a) * (1 - b) + LOG_JOINT[0, 1] * (1 - a) * b
            + LOG_JOINT[1, 0] * a * (1 - b) + LOG_JOINT[1, 1] * a * b)


def in_a_plate(phi, estimator="auto"):
    with scg.plate("particles", K):
        q = scg.Bernoulli(logits=np.broadcast_to(phi, (K, 2))).to_event(1)
        z = scg.sample("z", q, estimator=estimator)
        log_w = _log_joint(z) - q.log_prob(z)
    return -scg.logmeanexp(log_w, plate="particles")


def as_sites(phi, estimator="auto"):
    log_w = []
    for k in range(K):
        q = scg.Bernoulli(logits=phi).to_event(1)
        z = scg.sample(f"z{k}", q, estimator=estimator)
        log_w.append(_log_joint(z) - q.log_prob(z))
    total = log_w[0]
    for w in log_w[1:]:
        total = np.logaddexp(total, w)
    return -(total - np.log(K))


def exact_bound(phi):
    log_q = np.sum(PAIRS * phi - np.logaddexp(0.0, phi), axis=-1)
    log_w = LOG_JOINT[PAIRS[:, 0].astype(int), PAIRS[:, 1].astype(int)] - log_q
    total = 0.0
    for ks in itertools.product(range(4), repeat=K):
        ks = list(ks)
        total += np.exp(np.sum(log_q[ks])) * -(np.logaddexp.reduce(log_w[ks]) - np.log(K))
    return total


def exact_gradient(phi, h=1e-6):
    return np.array([(exact_bound(phi + h * e) - exact_bound(phi - h * e)) / (2 * h)
                     for e in np.eye(len(phi))])


STUDIES = [
    ("plate: score", in_a_plate, scg.Score()),
    ("plate: leave-one-out", in_a_plate, scg.Score("loo")),
    ("plate: VIMCO", in_a_plate, scg.VIMCO()),
    ("plate: DisARM", in_a_plate, scg.DisARM()),
    ("sites: leave-one-out", as_sites, scg.Score("loo")),
    ("sites: DisARM", as_sites, scg.DisARM()),
    ("sites: measure-valued", as_sites, scg.MeasureValued()),
    ("sites: enumerate", as_sites, scg.Enumerate()),
]


def main(n=20_000, out_dir=None, seed=0):
    exact = exact_gradient(PHI)
    out = {}
    print(f"IWAE bound, K = {K} particles of two coins; exact gradient {exact.round(5)}\n")
    print(f"{'estimator':24s} {'max |z|':>8s} {'variance':>10s} {'evals':>6s} "
          f"{'us / draw':>10s}")
    for label, model, est in STUDIES:
        exact_sum = isinstance(est, scg.Enumerate)  # (no variance: fewer draws show it)
        cmp = scg.compare(model, PHI, estimators={label: est},
                          n=min(n, 2_000) if exact_sum else n, seed=seed, reference=exact)
        row = cmp[label]
        z = float(np.max(np.abs(np.nan_to_num(row.z))))
        var = float(np.sum(row.var))
        out[label] = {"z": z, "variance": var, "evals": row.evals_per_draw,
                      "time": row.time_per_draw, "mean": np.asarray(row.mean).tolist()}
        print(f"{label:24s} {z:8.2f} {var:10.4f} {row.evals_per_draw:6d} "
              f"{row.time_per_draw * 1e6:10.2f}")
    plt = _plots.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for label in out:
            if out[label]["variance"] > 0:
                ax.loglog(out[label]["time"] * 1e6, out[label]["variance"], "o")
                ax.annotate(label, (out[label]["time"] * 1e6, out[label]["variance"]),
                            fontsize=8, xytext=(4, 3), textcoords="offset points")
        ax.set_xlabel("time per draw (microseconds)")
        ax.set_ylabel("gradient variance per draw")
        ax.set_title("IWAE bound (K = 3): variance against time (enumeration: exact)")
        _plots.save(fig, "iwae_estimators.png", out_dir)
    return out


if __name__ == "__main__":
    _plots.run(main)
