"""A study's draws in chunks: each chunk its own expectation with its own seed, run in this
process or on a Dask cluster, its statistics merged in chunk order.

Memory is that of one chunk, whatever the number of draws; the seeds come from
`numpy.random.SeedSequence(seed).spawn`, so a chunk's draws depend only on the seed and its
place, not on where or when it ran. A chunk is a `ChunkTask`, a plain picklable record, and
`run_chunk` a top-level function: Dask ships both to its workers (with cloudpickle for the
model), and a chunk that a lost worker had is run again and counted once.
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..core import pytree
from ..progress import progress
from ..stochastic.expectation import Expectation, grad_samples
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


@dataclass
class ChunkResult:
    """What a chunk sends back: the moments of its per-draw gradients (flattened), the
    seconds its gradients took, the model evaluations per draw, a few per-draw estimates."""

    moments: Moments
    seconds: float
    evals_per_draw: int
    kept: np.ndarray = field(default=None, repr=False)
    label: object = None


def run_chunk(task):
    """Run one chunk: the per-draw gradients of `task.n` draws, reduced to their moments."""
    E = Expectation(task.model, n=task.n, seed=np.random.default_rng(task.seed),
                    estimators=task.estimators)
    E.warn_lost_history = False  # (each chunk starts its baselines' history anew)
    start = time.perf_counter()
    gs = grad_samples(E, task.argnums, allow_unused=task.allow_unused)(*task.args,
                                                                       **task.kwargs)
    seconds = time.perf_counter() - start
    leaves = [np.reshape(leaf, (gs.n, -1)) for leaf in pytree.flatten_leaves(gs.samples)[0]]
    moments = Moments.of_columns(leaves)
    kept = np.concatenate([leaf[:task.keep] for leaf in leaves], axis=1) if task.keep else None
    trace = E.last_trace
    pairs = any(s.estimator.antithetic for s in trace.sites.values())
    evals = trace.copies.count * (2 if pairs else 1)
    return ChunkResult(moments, seconds, evals, kept, task.label)


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


def merge(results):
    """The merged moments of chunk results (in the order given), the seconds they took,
    and their evaluations per draw."""
    results = list(results)
    return (merge_all(r.moments for r in results), sum(r.seconds for r in results),
            results[0].evals_per_draw)


def structure(args, argnums):
    """A function rebuilding flat per-coordinate vectors into the structure of the
    differentiated arguments (like scg.grad's result)."""
    single = isinstance(argnums, (int, np.integer))
    nums = (int(argnums),) if single else tuple(argnums)
    parts = []
    for i in nums:
        leaves, treedef = pytree.flatten_leaves(args[i])
        parts.append((treedef, [np.shape(leaf) for leaf in leaves]))

    def rebuild(flat):
        flat = np.asarray(flat, dtype=float)
        out, k = [], 0
        for treedef, shapes in parts:
            leaves = []
            for shape in shapes:
                size = math.prod(shape)
                leaves.append(np.array(flat[k:k + size].reshape(shape)))
                k += size
            out.append(leaves[0] if treedef is None else pytree.unflatten(treedef, leaves))
        return out[0] if single else tuple(out)

    return rebuild


def spawn(seed, count):
    """`count` independent seeds from `seed` (an int, a SeedSequence, or None). A
    SeedSequence is not changed: the same one gives the same seeds again."""
    if isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key,
                                      pool_size=seed.pool_size)
    else:
        seed = np.random.SeedSequence(seed)
    return seed.spawn(count)
