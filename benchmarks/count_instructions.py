"""Instructions per call of the scg part of a workload, counted by valgrind's callgrind:
W3 or W4; scg.jit's replays of W2's training step and of ten coins (w2, coins) and W2's
recordings (w2-record); estimators over a finite support (finite, finite-eager); the
per-draw loops of benchmarks/per_draw_ops.py (chain, plated, cartpole-ops); scg.jit's
replays of the categorical VAE's training step (categorical-vae: one step of each
estimator of benchmarks/categorical_vae.py, or those `--only` names, at the initial
parameters on the first minibatch); one eager CartPole update (cartpole: value_and_grad of
examples/cartpole.py's expectation at a fixed policy, without scg.jit); the two
recordings of marginal_pyro.py's HMM under scg.jit (hmm-recording).

Timing noise aside: each tree given runs in a fresh process under
`valgrind --tool=callgrind --instr-atstart=no`; the process builds the workload's scg call
from that tree's benchmarks/w3_discrete_vae.py, w4_hessian.py, w2_policy_gradient.py
(`w2`: a step under scg.jit, batch 256; `w2-record`: a new scg.jit of that step
called twice, its two recordings) or estimators_bench.py (`coins`: ten coins under
scg.jit, the separable and the coupled cost with each estimator, one call of each per
call; `--only disarm` or `--only disarm,score_loo`: those estimators only, by their names in
estimators_bench.scg_runners; `finite` and `finite-eager`: one gradient of each case of
FINITE below, estimators over a finite support, under scg.jit or not, `--only` naming
cases) (PYTHONPATH=<tree>, so `import scg` is that tree's scg),
makes --warmup calls (numba compilation, caches) with instrumentation off, turns it on
with `callgrind_control -i on <pid>`, makes --calls calls, turns it off. The `totals:` Ir
of callgrind's output (its `summary:` line reads 0 when instrumentation starts off),
divided by --calls, is printed. The fixed cost of the two toggles (a subprocess each) is
part of the total: compare --calls K with 2K, or --calls 0, to see it. numpy/BLAS/numba
run on one thread, PYTHONHASHSEED=0, and torch is never imported, so counts repeat to
about one part per million.

With --native, the same calls are timed (time.perf_counter, no valgrind) instead, in fresh
processes alternating over the trees --rounds times; the median per-call time per tree.

The workload hmm-recording is the two recording calls of a fresh
`scg.jit(scg.value_and_grad(E))` of marginal_pyro.py's HMM (K = 8, T = --length, 200 by
default), argument checks off: what a first use of a jitted chain costs before it replays.

Usage (trees are checkouts, e.g. `git worktree add --detach /tmp/tree_old <commit>`):
    python benchmarks/count_instructions.py --workload w3 --trees /tmp/tree_old /tmp/tree_new
    python benchmarks/count_instructions.py --workload w4 --calls 20 --rounds 2 --trees ...
    python benchmarks/count_instructions.py --workload w3 --native --rounds 5 --trees ...
    python benchmarks/count_instructions.py --workload coins --only disarm --calls 10 --trees ...
    python benchmarks/count_instructions.py --workload finite --only arms4 --trees ...
    python benchmarks/count_instructions.py --workload hmm-recording --trees ...
    python benchmarks/count_instructions.py --workload categorical-vae --only IndeCateR --trees ...
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

DEFAULT_CALLS = {"w3": 5, "w4": 20, "w2": 50, "w2-record": 4, "coins": 20, "chain": 5,
                 "plated": 5, "cartpole-ops": 5, "cartpole": 3, "finite": 20, "finite-eager": 5,
                 "hmm-recording": 1, "categorical-vae": 3}
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def build_call(tree, workload, only=None, length=200):
    """The workload's scg call, from the benchmark module of `tree` (`only`: the coins'
    estimators or the finite cases to run, all when None; `length`: the HMM's T)."""
    sys.path[:0] = [tree, os.path.join(tree, "benchmarks"), os.path.join(tree, "examples")]
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
    if workload in ("chain", "plated", "cartpole-ops"):
        import per_draw_ops as w
        return w.workload(workload.split("-")[0])
    if workload == "cartpole":
        sys.path.insert(0, os.path.join(tree, "examples"))  # (examples/cartpole.py, not
        import cartpole as cp                                # the benchmark of that name)
        import scg
        params = scg.nn.init_mlp(0, cp.SIZES)
        E = scg.expectation(cp.cartpole, n=cp.EPISODES, seed=0)
        value_and_grad = scg.value_and_grad(E)
        return lambda: value_and_grad(params)
    if workload == "w3":
        import w3_discrete_vae as w
        return w.scg_runner(*w.make_problem())
    if workload == "w2":
        return _w2_step()
    if workload == "w2-record":
        return _w2_step(record=True)
    if workload == "coins":
        import estimators_bench as w
        calls = []
        for cost in w.COSTS:
            runners = w.scg_runners(cost, jit=True)
            unknown = sorted(set(only or ()) - set(runners))
            if unknown:
                raise SystemExit(f"--only {','.join(unknown)}: {tree}'s estimators_bench has "
                                 f"the runners {', '.join(runners)}")
            calls += [run for name, run in runners.items() if only is None or name in only]
        return lambda: [call() for call in calls]
    if workload in ("finite", "finite-eager"):
        calls = [_finite_case(name, jit=workload == "finite") for name in only or FINITE]
        return lambda: [call() for call in calls]
    if workload == "categorical-vae":
        return _categorical_vae_steps(only)
    import w4_hessian as w
    return w.scg_runner(100_000)


FINITE = ("disarm", "disarm-probs", "arms4", "indecater", "unordered2",
          "categorical-unordered2", "categorical-indecater")


def _finite_case(name, jit):
    """One gradient (n = 8) of a site over a finite support, under scg.jit (replayed after
    warm-up) or not: ten coins (logits, or probs = sigmoid(logits) for disarm-probs; in a
    plate of 10 for unordered2) with the cost sum (b - t)^2, or a Categorical of 4 values
    in a plate of 5 with the cost (x - 1.3)^2. The same models for every tree: only
    scg's public API (the tree's own estimators)."""
    import numpy as np
    import scg
    if name not in FINITE:
        raise SystemExit(f"--only {name}: the finite workload's cases are {', '.join(FINITE)}")
    theta = np.array([-2.0, -1.3, -0.7, -0.3, 0.0, 0.2, 0.5, 0.9, 1.4, 2.1])
    targets = np.array([0.1, 0.9, 0.3, 0.6, 0.2, 0.8, 0.4, 0.7, 0.05, 0.65])
    estimator = {"disarm": lambda: scg.DisARM(), "disarm-probs": lambda: scg.DisARM(),
                 "arms4": lambda: scg.ARMS(4), "indecater": lambda: scg.IndeCateR(),
                 "unordered2": lambda: scg.UnorderedSet(2),
                 "categorical-unordered2": lambda: scg.UnorderedSet(2),
                 "categorical-indecater": lambda: scg.IndeCateR()}[name]()  # (as it has them)

    def coins(th):
        d = scg.Bernoulli(probs=scg.sigmoid(th)) if name == "disarm-probs" else \
            scg.Bernoulli(logits=th)
        if name == "unordered2":  # (a set per element of a plate)
            with scg.plate("coins", 10):
                return (scg.sample("b", d, estimator=estimator) - targets) ** 2
        return np.sum((scg.sample("b", d.to_event(1), estimator=estimator) - targets) ** 2)

    def categorical(th):
        with scg.plate("points", 5):
            return (scg.sample("x", scg.Categorical(logits=th), estimator=estimator) - 1.3) ** 2

    if name.startswith("categorical"):
        model, theta = categorical, np.linspace(-1.0, 1.0, 20).reshape(5, 4)
    else:
        model = coins
    grad = scg.grad(scg.expectation(model, n=8, seed=2))
    if jit:
        grad = scg.jit(grad)
        for _ in range(4):
            grad(theta)
        if not grad.stats["replays"]:
            raise SystemExit(f"{name}: scg.jit did not replay: {grad.explain()}")
    return lambda: grad(theta)


def _categorical_vae_steps(only):
    """One training step (gradient and Adam update) of each estimator of
    benchmarks/categorical_vae.py under scg.jit, replayed, at the initial parameters on the
    first minibatch (the parameters are not updated between calls)."""
    import categorical_vae as w
    labels = only or tuple(w.ESTIMATORS)
    unknown = sorted(set(labels) - set(w.ESTIMATORS))
    if unknown:
        raise SystemExit(f"--only {','.join(unknown)}: categorical_vae's estimators are "
                         f"{', '.join(w.ESTIMATORS)}")
    x = w.load_data()[:w.BATCH]
    start = w.init_params(0)
    steps = []
    for label in labels:
        step, opt, _ = w.scg_step(label, 0)
        state = (start, opt.init(start))
        for _ in range(4):  # (a step with copies records three times: they settle first)
            step(*state, x)
        if not step.stats["replays"]:
            raise SystemExit(f"{label}: scg.jit did not replay: {step.explain()}")
        steps.append((step, state))
    return lambda: [step(*state, x) for step, state in steps]


def _w2_step(record=False):
    """One training step of W2 (gradient and Adam) under scg.jit, replayed after warm-up;
    with `record`, a call is a new scg.jit of the step called twice: its two recordings."""
    import scg
    import w2_policy_gradient as w
    model, _ = w.scg_model()
    vg = scg.value_and_grad(scg.expectation(model, n=256, seed=0))
    opt = scg.optim.Adam(w.LR)

    def step(params, state):
        _, g = vg(params)
        return opt.update(g, state, params)

    params = scg.nn.init_mlp(0, w.SIZES)
    carry = [params, opt.init(params)]
    jitted = [scg.jit(step)]

    def call():
        if record:
            jitted[0] = scg.jit(step)
            jitted[0](*carry)
        carry[0], carry[1] = jitted[0](carry[0], carry[1])
    return call


def inner(args):
    call = build_call(args.tree, args.workload, args.only, args.length)
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
        (["--native"] if args.native else []) + \
        (["--only", ",".join(args.only)] if args.only else [])
    if args.native:
        out = _run(child, env)
        return float(re.search(r"SECONDS (\S+)", out.stdout).group(1)) / args.calls
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(args.out_dir or tmp, f"callgrind.{args.workload}."
                                f"{os.path.basename(tree)}.{os.getpid()}.{time.time_ns()}")
        _run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
              f"--callgrind-out-file={out_file}"] + child, env)
        with open(out_file) as f:
            total = int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))
    return total / max(args.calls, 1)


def _run(command, env):
    """The child's completed process; its own error output when it fails."""
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the child failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=tuple(DEFAULT_CALLS), required=True)
    p.add_argument("--length", type=int, default=200, help="the HMM's T (hmm-recording)")
    p.add_argument("--calls", type=int, default=None)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--trees", nargs="+", default=[])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--native", action="store_true", help="time without valgrind")
    p.add_argument("--out-dir", help="keep callgrind's output files there")
    p.add_argument("--only", type=lambda s: [x for x in s.split(",") if x],
                   help="coins, finite, finite-eager, categorical-vae: these "
                        "estimators or cases only "
                        "(comma-separated names)")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.calls is None:
        args.calls = DEFAULT_CALLS[args.workload]
    if args.only and args.workload not in ("coins", "finite", "finite-eager",
                                           "categorical-vae"):
        p.error("--only selects the estimators of the coins and categorical-vae workloads "
                "or the finite cases")
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
