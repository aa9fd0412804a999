"""Studies: draws per second of a study of the worked example, in-process and on a cluster.

The worked example x ~ N(2, 1), f = x^2, per-draw pathwise AND score-function gradients of
both coordinates (mu, sigma), n draws per estimator in chunks, merged exactly:

  numpy      by hand: per chunk the noise from numpy's Generator seeded by
             SeedSequence(seed).spawn (as scg.compare spawns them), both estimators'
             per-draw gradients written in numpy, each chunk reduced to its count, mean and
             sum of squared deviations, merged with a Chan merge written here (the reference)
  scg        scg.compare(model, theta, estimators={"pathwise": "pathwise", "score": "score"},
             n=n, chunk=chunk, seed=seed), in this process
  cluster    the same with client= a Client of a LocalCluster of --workers worker processes
             (threads_per_worker=1), made once: its start-up time is reported apart

The three use the same seeds and draws, so their means agree to rounding (checked). Draws
per second count each estimator's draws: 2 n per study. BLAS runs on one thread in this
process (OMP_NUM_THREADS etc. default to 1 here, as on Dask's workers). The systems are
interleaved (the order reversed every other repeat), after a warm-up study of 4 chunks
each; medians. The merge's share: scg's merge_all of the study's chunk Moments objects
(twice: one per estimator) timed against the whole in-process study (100 chunks per
estimator at the defaults).

Usage: python benchmarks/studies_bench.py [--n 1e8] [--chunk 1e6] [--repeats 3] [--workers 2]
"""

import argparse
import os
import statistics
import sys
import time

# one BLAS thread in this process, as Dask gives its workers (numpy's `d @ d` of a chunk
# would otherwise use both cores in the hand-written study); set them to override
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import calibrate, per_call  # noqa: E402

MU, SIGMA = 2.0, 1.0
THETA = np.array([MU, SIGMA])
LABELS = ("pathwise", "score")


# ---------------------------------------------------------------- numpy by hand
class Stats:
    """Count, mean and sum of squared deviations per coordinate."""

    def __init__(self, count, mean, m2):
        self.count, self.mean, self.m2 = count, mean, m2

    def merge(self, other):  # Chan, Golub and LeVeque (1979)
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        return Stats(n, self.mean + delta * (other.count / n),
                     self.m2 + other.m2 + delta * delta * (self.count * other.count / n))

    @property
    def var(self):
        return self.m2 / (self.count - 1)


def column_stats(columns):
    means, m2s = [], []
    for g in columns:
        m = g.mean()
        d = g - m
        means.append(m)
        m2s.append(d @ d)
    return Stats(columns[0].shape[0], np.array(means), np.array(m2s))


def hand_chunk(label, size, seed):
    eps = np.random.default_rng(seed).standard_normal(size)
    x = MU + SIGMA * eps
    if label == "pathwise":  # f'(x) dx/dmu, f'(x) dx/dsigma
        g = 2 * x
        return column_stats([g, g * eps])
    f = x * x  # f(x) d log p(x)/dmu, f(x) d log p(x)/dsigma
    return column_stats([f * eps / SIGMA, f * (eps * eps - 1) / SIGMA])


def chunk_sizes(n, chunk):
    from scg.studies.chunks import chunk_sizes as sizes  # (the same split as scg's)
    return sizes(n, chunk)


def numpy_study(n, chunk, seed):
    sizes = chunk_sizes(n, chunk)
    out = {}
    for label, label_seed in zip(LABELS, np.random.SeedSequence(seed).spawn(len(LABELS))):
        total = Stats(0, 0.0, 0.0)
        for size, s in zip(sizes, label_seed.spawn(len(sizes))):
            total = total.merge(hand_chunk(label, size, s))
        out[label] = (total.count, total.mean, total.var)
    return out


# ---------------------------------------------------------------- scg
def model(theta):
    import scg
    x = scg.sample("x", scg.Normal(theta[0], theta[1]))
    return x ** 2


def scg_study(n, chunk, seed, client=None):
    import scg
    cmp = scg.compare(model, THETA, estimators={"pathwise": "pathwise", "score": "score"},
                      n=n, chunk=chunk, seed=seed, client=client)
    return {label: (cmp[label].n, cmp[label].mean, cmp[label].var) for label in LABELS}


def merge_seconds(chunks):
    """Seconds of scg's merge_all of `chunks` Moments objects of 2 coordinates."""
    from scg.studies.moments import Moments, merge_all
    rng = np.random.default_rng(0)
    parts = [Moments.of(rng.standard_normal((1000, 2))) for _ in range(chunks)]
    fn = lambda: merge_all(parts)  # noqa: E731
    number = calibrate(fn, target=0.05)
    return statistics.median(per_call(fn, number) for _ in range(7))


def max_rel(a, b):
    worst = 0.0
    for label in LABELS:
        assert a[label][0] == b[label][0], (label, a[label][0], b[label][0])
        for x, y in zip(a[label][1:], b[label][1:]):
            worst = max(worst, float(np.max(np.abs(x - y) / np.abs(y))))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e8, help="draws per estimator")
    parser.add_argument("--chunk", type=float, default=1e6, help="draws per chunk")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n, chunk = int(args.n), int(args.chunk)

    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    client.wait_for_workers(args.workers)
    startup = time.perf_counter() - t0

    systems = {"numpy": lambda: numpy_study(n, chunk, args.seed),
               "scg": lambda: scg_study(n, chunk, args.seed),
               "cluster": lambda: scg_study(n, chunk, args.seed, client)}
    numpy_study(4 * chunk, chunk, args.seed + 1)  # warm-up: 4 chunks each
    scg_study(4 * chunk, chunk, args.seed + 1)
    scg_study(4 * chunk, chunk, args.seed + 1, client)
    times = {k: [] for k in systems}
    results = {}
    keys = list(systems)
    for r in range(args.repeats):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            t = time.perf_counter()
            results[k] = systems[k]()
            times[k].append(time.perf_counter() - t)
            print(f"  repeat {r + 1}: {k:8s} {times[k][-1]:.2f} s", file=sys.stderr, flush=True)
    client.close()
    cluster.close()

    agree_cluster = max_rel(results["cluster"], results["scg"])
    agree_numpy = max_rel(results["scg"], results["numpy"])
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: 2 * n / med[k] for k in med}
    k_chunks = len(chunk_sizes(n, chunk))
    merge = merge_seconds(k_chunks)
    share = 2 * merge / med["scg"]

    print(f"Command: python benchmarks/studies_bench.py --n {n} --chunk {chunk} "
          f"--repeats {args.repeats} --workers {args.workers} --seed {args.seed}")
    print(f"{len(LABELS)} estimators x n = {n:,} draws, {k_chunks} chunks of {chunk:,} per "
          f"estimator; median of {args.repeats} interleaved repeats; {os.cpu_count()} cores")
    print()
    print("| system | seconds per study | draws per second | / numpy by hand | "
          "/ scg in-process |")
    print("|---|---|---|---|---|")
    names = {"numpy": "numpy by hand (Chan merge here)", "scg": "scg.compare, in-process",
             "cluster": f"scg.compare, {args.workers}-worker LocalCluster"}
    for k in keys:
        print(f"| {names[k]} | {med[k]:.2f} (all: {', '.join(f'{t:.2f}' for t in times[k])})"
              f" | {rate[k] / 1e6:.1f} M | {rate[k] / rate['numpy']:.2f} | "
              f"{rate[k] / rate['scg']:.2f} |")
    print()
    print(f"LocalCluster start-up (excluded above): {startup:.2f} s")
    print(f"merge_all of {k_chunks} chunk Moments: {merge * 1e6:.1f} µs; two (one per "
          f"estimator) {100 * share:.5f} % of the in-process study, "
          f"{100 * 2 * merge / med['cluster']:.5f} % of the cluster's")
    print(f"agreement: cluster vs in-process max relative difference {agree_cluster:.1e}; "
          f"scg vs numpy by hand {agree_numpy:.1e} (the same draws)")
    print()
    s_ratio, c_ratio = rate["scg"] / rate["numpy"], rate["cluster"] / rate["scg"]
    print("| target | measured | met |")
    print("|---|---|---|")
    print(f"| scg.compare in-process >= 0.7x numpy by hand | {s_ratio:.2f}x | "
          f"{'yes' if s_ratio >= 0.7 else 'no'} |")
    print(f"| {args.workers}-worker LocalCluster >= 1.5x scg in-process | {c_ratio:.2f}x | "
          f"{'yes' if c_ratio >= 1.5 else 'no'} |")
    print(f"| merge < 5 % of a study at {k_chunks} chunks | {100 * share:.4f} % | "
          f"{'yes' if share < 0.05 else 'no'} |")


if __name__ == "__main__":
    main()
