"""Where the time of one RL fine-tuning step goes, in scg.jit's replay and in PyTorch.

The step of benchmarks/rl_losses.py (one configuration, GRPO by default). scg.jit: the
replayed program is run with a clock read between its lines (medians over repeats), each
line put in a group by the function it calls: BLAS products, elementwise passes, row
passes (log-softmax and its cotangent), gathers and scatters, reductions, and the rest
(small operations on (512,)-sized advantages, guards, the gradient's finishing step).
A line is counted as a large pass when it writes or reads an array of at least 4096 x 16
entries. torch: its profiler's self times per operator, grouped the same way. Both on one
thread; the minor page faults per step are counted for each (getrusage).

Also timed, interleaved, medians: the bare BLAS products of the step (numpy and torch)
and torch's and numpy's tanh of the (4096, 64) activations: what no rewrite of the step
removes.

Run: python benchmarks/rl_step_profile.py [--config GRPO] [--repeats 30]
"""

import argparse
import os
import re
import resource
import sys
import time
import warnings

if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..")))
sys.path.insert(0, HERE)
import rl_losses as R  # noqa: E402
import timing  # noqa: E402

LARGE = 4096 * 16

GROUPS = {  # function name -> group
    "_matmul": "BLAS products", "_matmul_a": "BLAS products", "_matmul_b": "BLAS products",
    "dot": "BLAS products", "mm": "BLAS products", "addmm": "BLAS products",
    "_log_softmax": "log-softmax and its cotangent",
    "_log_softmax_vjp": "log-softmax and its cotangent",
    "_log_softmax_backward_data": "log-softmax and its cotangent",
    "tanh": "tanh and its cotangent", "_tanh_vjp": "tanh and its cotangent",
    "tanh_backward": "tanh and its cotangent",
    "<lambda>": "gathers and scatters", "_put_along_axis_add": "gathers and scatters",
    "_getitem_x": "gathers and scatters", "gather": "gathers and scatters",
    "scatter_add_": "gathers and scatters",
    "_sum": "reductions", "_mean": "reductions", "sum": "reductions", "mean": "reductions",
}


def _minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _program(jitted):
    """The replayed program of a jitted function, its source and its namespace."""
    entry = next(e for e in jitted._entries.values() if e.program is not None)
    program = entry.program
    if program.__closure__:  # (a program with buffers, behind its one-at-a-time guard)
        cells = dict(zip(program.__code__.co_freevars,
                         (c.cell_contents for c in program.__closure__)))
        program = cells["program"]
    return entry.source, program.__globals__


def profile_scg(label, params, batch, repeats):
    """Median time per line of the replay, grouped; the large passes; page faults."""
    step = R.scg_step(R.CONFIGS[label])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            step(params, batch)
    source, namespace = _program(step.jitted)
    lines = source.splitlines()
    body = [line.strip() for line in lines[1:] if not line.strip().startswith("return")]
    timed = [lines[0], "    _t = _clock()"]
    for k, line in enumerate(body):
        timed.append("    " + line)
        target = re.match(r"^(v\d+) = ", line)
        shape = f"; _shapes[{k}] = getattr({target.group(1)}, 'shape', ())" if target else ""
        timed.append(f"    _times[{k}] += _clock() - _t{shape}; _t = _clock()")
    timed.append(lines[-1])
    space = dict(namespace)
    times, shapes = [0.0] * len(body), [()] * len(body)
    space.update(_clock=time.perf_counter, _times=times, _shapes=shapes)
    exec("\n".join(timed), space)
    run = space[lines[0].split()[1].split("(")[0]]
    leaves = _leaves(params, batch)
    per_line, totals = [], []
    for _ in range(repeats):
        times[:] = [0.0] * len(body)
        t0 = time.perf_counter()
        run(*leaves)
        totals.append(time.perf_counter() - t0)
        per_line.append(list(times))
    per_line = np.median(np.array(per_line), axis=0)
    faults = _minor_faults()
    for _ in range(10):
        step(params, batch)
    faults = (_minor_faults() - faults) / 10
    groups, large = {}, {}
    size = {}  # value -> entries (the inputs' from their arrays, the rest as computed)
    for name, leaf in zip(re.findall(r"v\d+", lines[0]), _leaves(params, batch)):
        size[name] = leaf.size
    for k, line in enumerate(body):
        target = re.match(r"^(v\d+) = ", line)
        if target:
            size[target.group(1)] = int(np.prod(shapes[k]))
        m = re.search(r"= (c\d+)\(", line)
        name = getattr(namespace[m.group(1)], "__name__", "?") if m else ""
        group = GROUPS.get(name, "elementwise passes" if _is_elementwise(namespace, m) else
                           "other operations")
        groups[group] = groups.get(group, 0.0) + per_line[k]
        # (a pass over a large array: one that writes or reads one; the gradient's
        # finishing step and guards only look at their values)
        touched = max((size.get(v, 0) for v in re.findall(r"v\d+", line)), default=0)
        if touched >= LARGE and name != "_finish_recorded" and not line.startswith(("if ", "del ")):
            large[group] = large.get(group, 0) + 1
    return (float(np.median(totals)), groups, large, faults,
            sum(not line.startswith("del ") for line in body))


def _is_elementwise(namespace, m):
    return m is not None and (isinstance(namespace[m.group(1)], np.ufunc) or
                              namespace[m.group(1)] in (np.where, np.clip))


def _leaves(params, batch):
    return [params[0]["W"], params[0]["b"], params[1]["W"], params[1]["b"], batch["x"],
            batch["tokens"], batch["mask"], batch["reward"], batch["logp_old"],
            batch["logp_ref"]]


TORCH_ELEMENTWISE = {"add", "add_", "mul", "mul_", "sub", "sub_", "rsub", "div", "div_",
                     "exp", "neg", "where", "clamp", "clamp_min", "maximum", "minimum",
                     "masked_fill_", "fill_", "copy_", "zero_", "pow", "sqrt", "ge", "le",
                     "eq", "gt", "lt", "ne", "sign", "abs"}


def profile_torch(label, params, batch, repeats):
    """torch's profiler: self CPU time per operator, grouped, per step; page faults."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    step = R.torch_step(R.CONFIGS[label])
    for _ in range(3):
        step(params, batch)
    faults = _minor_faults()
    t0 = time.perf_counter()
    for _ in range(10):
        step(params, batch)
    total = (time.perf_counter() - t0) / 10
    faults = (_minor_faults() - faults) / 10
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(repeats):
            step(params, batch)
    groups, large = {}, {}
    for event in prof.events():  # (large passes: operators with a large input)
        name = event.name.split("::")[-1]
        if not event.name.startswith("aten::") or name in _TORCH_WRAPPERS:
            continue
        if any(int(np.prod(shape)) >= LARGE for shape in event.input_shapes if shape):
            group = GROUPS.get(name, "elementwise passes" if name in TORCH_ELEMENTWISE else
                               "other operations")
            large[group] = large.get(group, 0) + 1 / repeats
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # (times: without the shapes)
        for _ in range(repeats):
            step(params, batch)
    for event in prof.key_averages():
        name = event.key.split("::")[-1]
        if event.key.startswith("autograd::") or name in _TORCH_WRAPPERS:
            continue  # (wrappers: their time is their operators')
        group = GROUPS.get(name, "elementwise passes" if name in TORCH_ELEMENTWISE else
                           "other operations")
        groups[group] = groups.get(group, 0.0) + event.self_cpu_time_total * 1e-6 / repeats
    del torch
    return total, groups, large, faults


# operators that call others (their time and passes are those of what they call)
_TORCH_WRAPPERS = {"matmul", "linear", "to", "_to_copy", "view", "reshape", "expand",
                   "unsqueeze", "squeeze", "select", "slice", "t", "transpose", "numpy",
                   "detach", "alias", "as_strided", "empty", "empty_like", "empty_strided",
                   "zeros", "zeros_like", "ones_like", "clone", "contiguous"}


def bare_parts(params, batch, repeats):
    """The step's five BLAS products and the tanh of the activations, numpy and torch."""
    import torch
    x = batch["x"].reshape(-1, batch["x"].shape[-1])
    W1, W2 = params[0]["W"], params[1]["W"]
    h = np.tanh(x @ W1)
    g2 = np.random.default_rng(0).normal(size=(x.shape[0], W2.shape[1]))
    g1 = h.copy()
    tx, tW1, tW2, th, tg2, tg1 = (torch.from_numpy(a) for a in (x, W1, W2, h, g2, g1))

    def numpy_blas():
        x @ W1
        h @ W2
        g2 @ W2.T
        h.T @ g2
        x.T @ g1

    def torch_blas():
        tx @ tW1
        th @ tW2
        tg2 @ tW2.T
        th.T @ tg2
        tx.T @ tg1

    z = x @ W1
    tz = torch.from_numpy(z)
    return timing.time_interleaved({"numpy BLAS": numpy_blas, "torch BLAS": torch_blas,
                                    "numpy tanh": lambda: np.tanh(z),
                                    "torch tanh": lambda: torch.tanh(tz)}, repeats)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="GRPO")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    params, batch = R.problem()
    total, groups, large, faults, n_lines = profile_scg(args.config, params, batch, args.repeats)
    t_total, t_groups, t_large, t_faults = profile_torch(args.config, params, batch,
                                                         args.repeats)
    print(f"{args.config}: scg.jit replay {total * 1e3:.3f} ms ({n_lines} lines, "
          f"{faults:.0f} minor page faults per step); torch {t_total * 1e3:.3f} ms "
          f"({t_faults:.0f} faults per step)")
    print(f"  {'group':32s} {'scg.jit ms':>10s} {'large passes':>12s} {'torch ms':>9s}"
          f" {'large passes':>12s}")
    for group in sorted(set(groups) | set(t_groups), key=lambda g: -groups.get(g, 0.0)):
        print(f"  {group:32s} {groups.get(group, 0.0) * 1e3:10.3f} {large.get(group, 0):12d}"
              f" {t_groups.get(group, 0.0) * 1e3:9.3f} {t_large.get(group, 0):12.0f}")
    print(f"  {'total':32s} {sum(groups.values()) * 1e3:10.3f} {sum(large.values()):12d}"
          f" {sum(t_groups.values()) * 1e3:9.3f} {sum(t_large.values()):12.0f}")
    parts = bare_parts(params, batch, args.repeats)
    print("  bare parts, interleaved medians: " + ", ".join(
        f"{k} {v * 1e3:.3f} ms" for k, v in parts.items()))
    print(timing.command_line())


if __name__ == "__main__":
    main()
