"""The cost of one eager per-draw operation: scg against numpy on the same arrays.

A model written for one draw runs every operation on all n draws at once (a `PerSample`:
scg/stochastic/persample.py); each operation pays for its dispatch, the draws' dependencies
(`Deps`), the result's construction and, inside a plate, its labels. Three loops of
operations, each after one draw x ~ Normal(theta, 1) (score function) of n = 8 draws:

  chain     y = sin(y) * 0.5 + x - 0.1; y = y / 1.5, 100 times (500 operations)
  plated    the same with x drawn in a plate of 3 (every result labelled)
  cartpole  examples/cartpole.py's `physics` and `terminated` on a state of 4 per draw
            (25 times, 43 operations each: indexing, stacking, comparisons, arithmetic)

Reported per operation: scg's time (a call of the expectation with the loop, less a call
without it) and numpy's (the same loop on the physical (8, ...) arrays), medians of
`--repeats` interleaved rounds; wall time, or with `--clock cpu` the process's CPU time
(steadier on a shared host). `workload(name)` gives the call that
benchmarks/count_instructions.py counts.

Run: python benchmarks/per_draw_ops.py [--repeats 9] [--clock cpu]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import scg  # noqa: E402  (the working tree's scg, installed or not)
import cartpole as cp  # noqa: E402

N, ROUNDS = 8, 100
PHYSICS_STEPS = 25
OPS = {"chain": 5 * ROUNDS, "plated": 5 * ROUNDS, "cartpole": 43 * PHYSICS_STEPS}


def chain(x):
    y = x
    for _ in range(ROUNDS):
        y = np.sin(y) * 0.5 + x - 0.1
        y = y / 1.5
    return y


def physics(s):
    a = s[..., 0] > 0.0
    for _ in range(PHYSICS_STEPS):
        s = cp.physics(s, a)
        a = cp.terminated(s)
    return s


def _model(kind, loop):
    def model(theta):
        if kind == "plated":
            with scg.plate("p", 3):
                x = scg.sample("x", scg.Normal(theta, 1.0), estimator="score")
        elif kind == "cartpole":
            x = scg.sample("x", scg.Normal(np.full(4, theta), 0.05).to_event(1),
                           estimator="score")
        else:
            x = scg.sample("x", scg.Normal(theta, 1.0), estimator="score")
        return np.sum((physics(x) if kind == "cartpole" else chain(x)) if loop else x)
    return model


def _numpy(kind):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3) if kind == "plated" else (N, 4) if kind == "cartpole" else N)
    return lambda: physics(x) if kind == "cartpole" else chain(x)


def workload(kind):
    """A call of the expectation with `kind`'s loop (for count_instructions.py)."""
    E = scg.expectation(_model(kind, True), n=N, seed=0)
    return lambda: E(0.1)


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCK["wall"]


def per_call(fn, calls):
    t0 = clock()
    for _ in range(calls):
        fn()
    return (clock() - t0) / calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--clock", choices=tuple(CLOCK), default="wall")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCK[args.clock]
    print(f"per-draw operations on n = {N} draws: us per operation ({args.clock} time), "
          f"medians of {args.repeats} interleaved rounds of {args.calls} calls")
    print(f"{'loop':>9}{'ops':>6}{'scg':>9}{'numpy':>9}{'scg / numpy':>13}")
    for kind, ops in OPS.items():
        E = scg.expectation(_model(kind, True), n=N, seed=0)
        E0 = scg.expectation(_model(kind, False), n=N, seed=0)
        plain = _numpy(kind)
        for f in (lambda: E(0.1), lambda: E0(0.1), plain):
            f()
        scg_op, numpy_op = [], []
        for _ in range(args.repeats):
            scg_op.append((per_call(lambda: E(0.1), args.calls)
                           - per_call(lambda: E0(0.1), args.calls)) / ops)
            numpy_op.append(per_call(plain, args.calls) / ops)
        s, p = statistics.median(scg_op), statistics.median(numpy_op)
        print(f"{kind:>9}{ops:>6}{1e6 * s:>9.2f}{1e6 * p:>9.2f}{s / p:>13.1f}")


if __name__ == "__main__":
    main()
