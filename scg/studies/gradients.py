"""scg.grad_samples, also in chunks: bounded memory for any n, on a Dask cluster or not."""

import numpy as np

from ..stochastic.expectation import Expectation, GradSamples
from ..stochastic.expectation import grad_samples as grad_samples_in_memory
from .chunks import (ChunkTask, chunk_sizes, fitting_chunk_size, merge, run_chunk, run_chunks,
                     spawn, structure, warn_no_history)


def grad_samples(E, argnums=0, *, allow_unused=False, chunk=None, client=None):
    """Per-draw gradient estimates of an expectation.

    Without `chunk` and `client`, one vectorized pass over the n draws: `.samples` holds
    every draw's estimate. With `chunk` (draws per chunk) or `client` (a
    dask.distributed.Client), the n draws run in chunks with seeds spawned from the
    expectation's generator, and only their statistics are kept and merged exactly:
    `.samples` is None, `.mean`, `.var`, `.stderr`, `.n` are as for all n draws, and memory
    is that of one chunk. `chunk="auto"` (the default with a client) takes min(n, 100 000)
    draws per chunk, or fewer when the layout (draws x copies x values) needs more than half
    the memory available (measured on a few draws).

    Returns:
        A function returning a `GradSamples`.

    Example:
        >>> gs = scg.grad_samples(E)(2.0)
        >>> gs.mean, gs.var, gs.stderr
        >>> big = scg.grad_samples(scg.expectation(model, n=10**8), chunk=10**6)(2.0)
    """
    if chunk is None and client is None:
        return grad_samples_in_memory(E, argnums, allow_unused=allow_unused)
    if not isinstance(E, Expectation):
        raise TypeError("scg.grad_samples takes an expectation made by scg.expectation")

    def chunked(*args, **kwargs):
        size = min(E.n, 100_000) if chunk in (None, "auto") else chunk
        if chunk in (None, "auto"):  # (one that fits: the layout measured on a few draws)
            def task_of(k):
                return ChunkTask(E.model, args, kwargs, k, np.random.SeedSequence(0),
                                 E.estimators, argnums, allow_unused,
                                 states=E.states)
            size = fitting_chunk_size(task_of, run_chunk(task_of(4)), size)
        sizes = chunk_sizes(E.n, size)
        # fresh draws on every call, as for an expectation in memory: the chunks' seeds
        # come from a number drawn from the expectation's generator
        seeds = spawn(int(E.rng.integers(2 ** 63)), len(sizes))
        # (a baseline's history in the expectation is carried into every chunk)
        tasks = [ChunkTask(E.model, args, kwargs, size, s, E.estimators, argnums,
                           allow_unused, index=i, states=E.states)
                 for i, (size, s) in enumerate(zip(sizes, seeds))]
        results = run_chunks(tasks, client, desc="chunks")
        warn_no_history(results, "scg.grad_samples in chunks")
        moments, _, _ = merge(results)
        rebuild = structure(args, argnums)
        return GradSamples(None, moments.count, mean=rebuild(moments.mean),
                           var=rebuild(moments.var))

    return chunked


__all__ = ["grad_samples"]
