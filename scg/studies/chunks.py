"""A study's draws in chunks: each chunk its own expectation with its own seed, run in this
process or on a Dask cluster, its statistics merged in chunk order.

Memory is that of one chunk, whatever the number of draws; the seeds come from
`numpy.random.SeedSequence(seed).spawn`, so a chunk's draws depend only on the seed and its
place, not on where or when it ran. A chunk is a `ChunkTask`, a plain picklable record, and
`run_chunk` a top-level function: Dask ships both to its workers (with cloudpickle for the
model), and a chunk that a lost worker had is run again and counted once.
"""

import copy
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..core import pytree
from ..core.progress import progress
from ..stochastic.expectation import Expectation, grad_samples
from ..stochastic.memory import available_bytes, bytes_per_draw, fitting_chunk
from .moments import Moments, merge_all


@dataclass
class ChunkTask:
    """One chunk of a study: `n` draws of the model's gradient with the seed `seed`."""

    model: object
    args: tuple
    kwargs: dict
    n: int
    seed: np.random.SeedSequence
    estimators: object = None
    argnums: object = 0
    allow_unused: bool = False
    keep: int = 0  # per-draw estimates to return (for histograms)
    label: object = None
    index: int = 0  # (for messages: this chunk's place in the study)
    states: object = None  # the expectation's SiteStates to start from (a copy)


@dataclass
class ChunkResult:
    """What a chunk sends back: the moments of its per-draw gradients (flattened), the
    seconds its gradients took, the model evaluations per draw, a few per-draw estimates."""

    moments: Moments
    seconds: float
    evals_per_draw: int
    kept: np.ndarray = field(default=None, repr=False)
    label: object = None
    pairs: bool = False  # a site drew antithetic pairs
    no_history: tuple = ()  # sites whose stateful baseline started without history
    sites: tuple = ()  # the names of the model's sample sites
    bytes_per_draw: float = 0.0  # the layout's estimate (see stochastic/memory.py)


def run_chunk(task):
    """Run one chunk: the per-draw gradients of `task.n` draws, reduced to their moments.
    An error says which estimator and which chunk it came from."""
    E = Expectation(task.model, n=task.n, seed=np.random.default_rng(task.seed),
                    estimators=task.estimators)
    E.warn_lost_history = False  # (the study says so itself, see no_history)
    if task.states is not None:
        E.states = copy.deepcopy(task.states)
    start = time.perf_counter()
    try:
        gs = grad_samples(E, task.argnums, allow_unused=task.allow_unused)(*task.args,
                                                                           **task.kwargs)
    except Exception as e:
        where = f" of estimator {task.label!r}" if task.label is not None else ""
        e.add_note(f"(in chunk {task.index}{where} of the study: {task.n} draws)")
        raise
    seconds = time.perf_counter() - start
    leaves = [np.reshape(leaf, (gs.n, -1)) for leaf in pytree.flatten_leaves(gs.samples)[0]]
    moments = Moments.of_columns(leaves)
    kept = np.concatenate([leaf[:task.keep] for leaf in leaves], axis=1) if task.keep else None
    trace = E.last_trace
    pairs = any(s.estimator.antithetic for s in trace.sites.values())
    evals = trace.copies.count * (2 if pairs else 1)
    start_state = task.states.baselines() if task.states is not None else {}
    no_history = tuple(s.name for s in trace.sites.values() if s.baseline is not None and
                       s.baseline.stateful and not start_state.get(s.name))
    return ChunkResult(moments, seconds, evals, kept, task.label, pairs, no_history,
                       tuple(trace.sites), trace.bytes_estimate / task.n)


# The estimate of a layout's memory counts the arrays of its sites; what a model computes
# besides may take up to about this many times more (measured: 2 to 3 for chains of
# copying sites): above it, the chunk's memory is measured.
ESTIMATE_MARGIN = 4


def fitting_chunk_size(task_of, probe, wanted):
    """Draws per chunk, at most `wanted`, that fit: `wanted` when the layout's estimate
    from `probe` (a ChunkResult of a few draws) with its margin takes at most half the
    memory available, else what fits by the memory of a run measured at two small n
    (`task_of(n)` gives the task; `fitting_chunk`). Even when the model draws antithetic
    pairs."""
    available = available_bytes()
    if available is None or probe.bytes_per_draw * ESTIMATE_MARGIN * wanted <= available / 2:
        return wanted
    per_draw = bytes_per_draw(lambda n: run_chunk(task_of(n)))  # (even sizes: 64, 320)
    return fitting_chunk(per_draw, wanted, even=probe.pairs)


def chunk_sizes(n, chunk):
    """The sizes of the chunks of n draws: `chunk` each, the last one the rest."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an int >= 2 (the number of draws), got {n!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 2:
        raise ValueError(f"chunk must be an int >= 2 (draws per chunk), got {chunk!r}")
    k = math.ceil(n / chunk)
    sizes = [int(chunk)] * (k - 1) + [int(n - chunk * (k - 1))]
    if sizes[-1] < 2 and k > 1:  # (a chunk of one draw has no variance: join it)
        sizes = sizes[:-2] + [sizes[-2] + sizes[-1]]
    return sizes


def run_chunks(tasks, client=None, desc="draws"):
    """The results of `tasks`, in their order: in this process, or on the workers of a
    dask.distributed Client (`client.map`, impure tasks). A progress bar (tqdm) counts the
    chunks when stderr is a terminal."""
    tasks = list(tasks)
    if client is None:
        return [run_chunk(t) for t in progress(tasks, desc=desc, total=len(tasks))]
    from distributed import as_completed

    futures = client.map(run_chunk, tasks, pure=False)
    place = {f.key: i for i, f in enumerate(futures)}
    results = [None] * len(futures)
    for f in progress(as_completed(futures), desc=desc, total=len(futures)):
        results[place[f.key]] = f.result()
        f.release()  # (a worker lost later need not compute it again)
    del futures
    return results


def warn_no_history(results, what):
    """Warn once if stateful baselines started without history in the chunks: each chunk is
    one call of a new expectation, so a moving average there is no baseline at all."""
    sites = sorted({s for r in results for s in r.no_history})
    labels = list(dict.fromkeys(r.label for r in results if r.no_history))
    if sites:
        which = f" (estimators {', '.join(map(repr, labels))})" if labels != [None] else ""
        warnings.warn(
            f"{what}: the stateful baseline of site {', '.join(map(repr, sites))}{which} had "
            "no history: each chunk is one call of a new expectation, so a moving average "
            "there subtracts nothing and the row measures the score function without a "
            "baseline. Call scg.grad_samples(E, chunk=...) on an expectation whose baseline "
            "has been warmed up by earlier calls (its state is carried into every chunk), "
            "or study a baseline that needs no history (scg.Score('loo'))", UserWarning,
            stacklevel=3)


def merge(results):
    """The merged moments of chunk results (in the order given), the seconds they took,
    and their evaluations per draw."""
    results = list(results)
    return (merge_all(r.moments for r in results), sum(r.seconds for r in results),
            results[0].evals_per_draw)


def structure(args, argnums):
    """A function rebuilding flat per-coordinate vectors into the structure of the
    differentiated arguments (like scg.grad's result). Its attributes: `paths`, the
    coordinates' names, and `flatten(tree)`, a tree of that structure (a reference
    gradient) as a flat vector, matched leaf by leaf by name."""
    single = isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool)
    nums = (int(argnums),) if single else tuple(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"argnums={argnums!r} but the model gets {len(args)} positional "
                             f"argument(s) here")
    parts = []
    for i in nums:
        leaves, treedef, paths = pytree.flatten(args[i])
        parts.append((treedef, [np.shape(leaf) for leaf in leaves], paths))

    def rebuild(flat):
        flat = np.asarray(flat, dtype=float)
        out, k = [], 0
        for treedef, shapes, _ in parts:
            leaves = []
            for shape in shapes:
                size = math.prod(shape)
                leaves.append(np.array(flat[k:k + size].reshape(shape)))
                k += size
            out.append(leaves[0] if treedef is None else pytree.unflatten(treedef, leaves))
        return out[0] if single else tuple(out)

    def flatten(tree):
        trees = [tree] if single else list(tree) if isinstance(tree, (tuple, list)) else None
        if trees is None or len(trees) != len(parts):
            raise ValueError(f"reference must have the structure of the gradient: "
                             f"{'one tree' if single else f'a tuple of {len(parts)} trees'}")
        flat = []
        for t, (_, shapes, paths) in zip(trees, parts):
            leaves, _, ref_paths = pytree.flatten(t)
            by_path = dict(zip(ref_paths, leaves))
            missing = [p or "(the argument)" for p in paths if p not in by_path]
            if missing or len(by_path) != len(paths):
                raise ValueError(f"reference must have the structure of the argument: its "
                                 f"leaves are {list(ref_paths)}, the argument's "
                                 f"{list(paths)}")
            for p, shape in zip(paths, shapes):
                leaf = np.asarray(by_path[p], dtype=float)
                if leaf.size != math.prod(shape):
                    raise ValueError(f"reference{p} has {leaf.size} entries, the argument's "
                                     f"leaf {math.prod(shape)}")
                flat.append(np.ravel(leaf))
        return np.concatenate(flat) if flat else np.zeros(0)

    def names():
        out = []
        for i, (_, shapes, paths) in zip(nums, parts):
            for p, shape in zip(paths, shapes):
                size = math.prod(shape)
                base = f"{p}" if single else f"[{i}]{p}"
                out += [base + (f"[{j}]" if size > 1 else "") for j in range(size)] if \
                    len(shape) <= 1 else [f"{base}{list(np.unravel_index(j, shape))}"
                                          for j in range(size)]
        return out

    rebuild.flatten = flatten
    rebuild.names = names
    return rebuild


def spawn(seed, count):
    """`count` independent seeds from `seed` (an int, a SeedSequence, or None). A
    SeedSequence is not changed: the same one gives the same seeds again."""
    if isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key,
                                      pool_size=seed.pool_size)
    elif isinstance(seed, np.random.Generator):  # (fresh seeds from it on every call)
        seed = np.random.SeedSequence(int(seed.integers(2 ** 63)))
    else:
        seed = np.random.SeedSequence(seed)
    return seed.spawn(count)
