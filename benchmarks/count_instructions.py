"""Instructions per call of the scg part of W3 or W4, or of the recording of the HMM of
marginal_pyro.py under scg.jit, counted by valgrind's callgrind.

Timing noise aside: each tree given runs in a fresh process under
`valgrind --tool=callgrind --instr-atstart=no`; the process builds the workload's scg call
from that tree's benchmarks/w3_discrete_vae.py or w4_hessian.py (PYTHONPATH=<tree>, so
`import scg` is that tree's scg), makes --warmup calls (numba compilation, caches) with
instrumentation off, turns it on with `callgrind_control -i on <pid>`, makes --calls calls,
turns it off. The `totals:` Ir of callgrind's output (its `summary:` line reads 0 when
instrumentation starts off), divided by --calls, is printed. The fixed cost of the two
toggles (a subprocess each) is part of the total: compare --calls K with 2K, or --calls 0,
to see it. numpy/BLAS/numba run on one thread, PYTHONHASHSEED=0, and
torch is never imported, so counts repeat to about one part per million.

With --native, the same calls are timed (time.perf_counter, no valgrind) instead, in fresh
processes alternating over the trees --rounds times; the median per-call time per tree.

The workload hmm-recording is the two recording calls of a fresh
`scg.jit(scg.value_and_grad(E))` of marginal_pyro.py's HMM (K = 8, T = --length, 200 by
default), argument checks off: what a first use of a jitted chain costs before it replays.

Usage (trees are checkouts, e.g. `git worktree add --detach /tmp/tree_old <commit>`):
    python benchmarks/count_instructions.py --workload w3 --trees /tmp/tree_old /tmp/tree_new
    python benchmarks/count_instructions.py --workload w4 --calls 20 --rounds 2 --trees ...
    python benchmarks/count_instructions.py --workload w3 --native --rounds 5 --trees ...
    python benchmarks/count_instructions.py --workload hmm-recording --trees ...
Not a test and not imported by the test suite.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_CALLS = {"w3": 5, "w4": 20, "hmm-recording": 1}
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def build_call(tree, workload, length=200):
    """The workload's scg call, from the benchmark module of `tree`."""
    sys.path[:0] = [tree, os.path.join(tree, "benchmarks")]
    if workload == "hmm-recording":
        import marginal_pyro as m
        import scg
        scg.distributions.set_validation(False)
        data, params = m.hmm_problem(length, 8)
        E = m.scg_hmm(data, 8)

        def record():
            step = scg.jit(scg.value_and_grad(E))
            step(params)
            step(params)
            assert not step.stats["replays"] and step.stats["recordings"] == 2
        return record
    if workload == "w3":
        import w3_discrete_vae as w
        return w.scg_runner(*w.make_problem())
    import w4_hessian as w
    return w.scg_runner(100_000)


def inner(args):
    call = build_call(args.tree, args.workload, args.length)
    assert os.path.dirname(sys.modules["scg"].__file__).startswith(args.tree)
    for _ in range(args.warmup):
        call()
    def instrument(state):                      # the pid under valgrind is valgrind's
        if not args.native:
            subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
    instrument("on")
    t0 = time.perf_counter()
    for _ in range(args.calls):
        call()
    elapsed = time.perf_counter() - t0
    instrument("off")
    assert "torch" not in sys.modules
    print(f"SECONDS {elapsed}")


def run_child(tree, args):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), PYTHONHASHSEED="0",
               **{k: "1" for k in THREADS})
    child = [sys.executable, os.path.abspath(__file__), "--inner", "--tree",
             os.path.abspath(tree), "--workload", args.workload, "--calls", str(args.calls),
             "--warmup", str(args.warmup), "--length", str(args.length)] + \
        (["--native"] if args.native else [])
    if args.native:
        out = subprocess.run(child, env=env, check=True, capture_output=True, text=True)
        return float(re.search(r"SECONDS (\S+)", out.stdout).group(1)) / args.calls
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(args.out_dir or tmp, f"callgrind.{args.workload}."
                                f"{os.path.basename(tree)}.{os.getpid()}.{time.time_ns()}")
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        f"--callgrind-out-file={out_file}"] + child,
                       env=env, check=True, capture_output=True)
        with open(out_file) as f:
            total = int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))
    return total / max(args.calls, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("w3", "w4", "hmm-recording"), required=True)
    p.add_argument("--length", type=int, default=200, help="the HMM's T (hmm-recording)")
    p.add_argument("--calls", type=int, default=None)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--trees", nargs="+", default=[])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--native", action="store_true", help="time without valgrind")
    p.add_argument("--out-dir", help="keep callgrind's output files there")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.calls is None:
        args.calls = DEFAULT_CALLS[args.workload]
    if args.inner:
        return inner(args)
    results = {tree: [] for tree in args.trees}
    unit = "us per call (wall)" if args.native else "instructions per call"
    for r in range(args.rounds):
        for tree in args.trees:
            value = run_child(tree, args)
            results[tree].append(value)
            shown = f"{value * 1e6:12.1f}" if args.native else f"{value:16,.0f}"
            print(f"round {r + 1} {tree}: {shown} {unit}", flush=True)
    medians = {tree: statistics.median(v) for tree, v in results.items()}
    for tree, m in medians.items():
        print(f"median {tree}: {m * 1e6 if args.native else m:,.1f} {unit}")
    if len(medians) == 2:
        a, b = medians.values()
        print(f"ratio {args.trees[1]} / {args.trees[0]}: {b / a:.4f}")


if __name__ == "__main__":
    main()
