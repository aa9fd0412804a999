"""scg.compare: several estimators of one gradient, side by side, at any scale.

For each estimator spec, n draws of the per-draw gradient estimate, in chunks (see
`chunks.py`): their mean, per-draw variance and standard error per coordinate, the bias and
z against a reference when there is one, the time and model evaluations per draw, and the
efficiency 1 / (total variance x time per draw): the precision a second of computing buys.
"""

import numpy as np

from ..core import pytree
from ..estimators import as_estimator
from .chunks import (ChunkTask, chunk_sizes, fitting_chunk_size, merge, run_chunk, run_chunks,
                     spawn, structure, warn_no_history)


class Row:
    """One estimator's results. Per coordinate, like the differentiated argument: `mean`,
    `var` (per draw), `stderr`, and with a reference `bias` and `z`. Scalars: `n`,
    `time_per_draw` (seconds), `evals_per_draw`, `efficiency`. `samples`: a few per-draw
    estimates, flattened, shape (k, coordinates) (for histograms)."""

    def __init__(self, label, moments, seconds, evals, rebuild, reference, samples,
                 pairs=False):
        self.label = label
        self.pairs = pairs  # antithetic: a row is a pair of draws (n, var, time, evals)
        self.n = moments.count
        self._flat_mean, self._flat_var = moments.mean, moments.var
        self.mean = rebuild(moments.mean)
        self.var = rebuild(moments.var)
        self.stderr = rebuild(moments.stderr)
        self.time_per_draw = seconds / self.n
        self.evals_per_draw = evals
        total = float(np.sum(moments.var))
        # exact: no spread beyond rounding (an enumeration, a coordinate antithetic pairs
        # cancel); its efficiency is infinite, its z against a reference 0 within rounding
        scale = np.maximum(np.abs(moments.mean), 1.0)
        self._exact = moments.stderr <= 1e-12 * scale
        if np.isnan(total):  # (fewer than two draws or pairs)
            self.efficiency = np.nan
        elif np.all(self._exact):
            self.efficiency = np.inf
        else:
            self.efficiency = 1.0 / (total * self.time_per_draw)
        self.samples = samples
        self.bias = self.z = None
        if reference is not None:
            bias = moments.mean - reference
            se = moments.stderr
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where(self._exact,
                             np.where(np.abs(bias) <= 1e-9 * np.maximum(np.abs(reference), 1.0),
                                      0.0, np.sign(bias) * np.inf),
                             bias / np.where(self._exact, 1.0, se))
            self.bias, self.z = rebuild(bias), rebuild(z)
            self._flat_z = z

    def to_dict(self):
        """Plain Python values (JSON-ready: NaN and infinities become None)."""
        def number(v):
            v = float(v)
            return v if np.isfinite(v) else None

        def plain(x):
            if x is None:
                return None
            return pytree.tree_map(lambda v: number(v) if np.ndim(v) == 0 else
                                   [number(e) for e in np.ravel(v)], x)
        return {"n": self.n, "mean": plain(self.mean), "var": plain(self.var),
                "stderr": plain(self.stderr), "bias": plain(self.bias), "z": plain(self.z),
                "time_per_draw": self.time_per_draw, "evals_per_draw": self.evals_per_draw,
                "efficiency": number(self.efficiency), "exact": bool(np.all(self._exact)),
                "per_pair": self.pairs}

    def __repr__(self):
        return f"Row({self.label!r}, n={self.n}, mean={self.mean!r}, var={self.var!r})"


class Comparison:
    """The rows of a study, by label: `cmp[label]` is a `Row`; `.table()`, `.to_dict()`,
    `.plot(path)`. For an estimator that draws antithetic pairs, a "draw" of its row is a
    pair: its n, variance, time and evaluations are per pair (the table says so)."""

    def __init__(self, rows, n, chunk, reference, names=None):
        self.rows = rows
        self.n = n
        self.chunk = chunk
        self.has_reference = reference is not None
        self.names = names  # the coordinates' names, in the flat order

    def __getitem__(self, label):
        return self.rows[label]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def to_dict(self):
        """{label (as a string): the row's values}, JSON-ready."""
        return {str(label): row.to_dict() for label, row in self.rows.items()}

    def table(self):
        """A Markdown table, one row per estimator (coordinates separated by commas)."""
        def vec(x):
            return ", ".join(f"{v:.4g}" for v in np.ravel(x))

        head = ["estimator", "mean", "stderr"]
        if self.has_reference:
            head += ["bias", "z"]
        head += ["variance per draw", "evals per draw", "µs per draw", "efficiency"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for label, r in self.rows.items():
            name = f"{label} (per pair)" if r.pairs else str(label)
            cells = [name, vec(r._flat_mean), vec(np.sqrt(r._flat_var / r.n))]
            if self.has_reference:
                cells += [vec(_flat(r.bias)), vec(_flat(r.z))]
            eff = "exact" if np.isinf(r.efficiency) else \
                "(fewer than 2 draws)" if np.isnan(r.efficiency) else f"{r.efficiency:.3g}"
            cells += [vec(r._flat_var), str(r.evals_per_draw),
                      f"{r.time_per_draw * 1e6:.3g}", eff]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path, coordinate=0):
        """Write a figure to `path`: histograms of per-draw estimates of one coordinate of
        the gradient (flattened index `coordinate`) per estimator, and the per-draw
        variances (summed over the coordinates) as bars. Needs matplotlib."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5),
                                          gridspec_kw={"wspace": 0.45})
        drawn = [(label, r.samples[:, coordinate]) for label, r in self.rows.items()
                 if r.samples is not None and r.samples.shape[0] > 1]
        if drawn:
            lo, hi = np.quantile(np.concatenate([s for _, s in drawn]), [0.005, 0.995])
            bins = np.linspace(lo, hi, 60) if hi > lo else 30
            for label, s in drawn:
                left.hist(s, bins=bins, histtype="step", density=True, label=str(label))
            if self.has_reference:  # (the exact value: any row's mean minus its bias)
                row = next(iter(self.rows.values()))
                exact = _flat(row.mean)[coordinate] - _flat(row.bias)[coordinate]
                left.axvline(exact, color="k", lw=1.2, label=f"exact {exact:.4g}")
            left.legend(fontsize=8)
        name = self.names[coordinate] if self.names else str(coordinate)
        left.set_xlabel(f"per-draw estimate of the gradient's coordinate {name}")
        left.set_ylabel("density")
        left.set_title("per-draw estimates (0.5 % to 99.5 % quantiles shown)")
        labels, totals = [], []
        for label, r in self.rows.items():
            total = float(np.sum(r._flat_var))
            exact = np.all(r._exact)
            labels.append(f"{label} (exact)" if exact else str(label))
            totals.append(np.nan if exact else total)  # (no bar on a log axis for 0)
        right.barh(labels, totals, color="tab:blue")
        right.set_xscale("log")
        shown = [t for t in totals if np.isfinite(t) and t > 0]
        if shown:  # (whole decades: labels on the decades only, none on minor ticks)
            from matplotlib.ticker import LogLocator, NullFormatter
            lo, hi = np.floor(np.log10(min(shown))), np.ceil(np.log10(max(shown)))
            right.set_xlim(10.0 ** lo, 10.0 ** max(hi, lo + 1))
            right.xaxis.set_major_locator(LogLocator(base=10, numticks=8))
            right.xaxis.set_minor_formatter(NullFormatter())
        right.invert_yaxis()
        right.set_xlabel("per-draw variance, summed over coordinates")
        right.set_title(f"n = {self.n:,} draws per estimator")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path

    def __repr__(self):
        return f"Comparison(n={self.n}, estimators={list(self.rows)})"


def _flat(x):
    return np.concatenate([np.ravel(v) for v in pytree.flatten_leaves(x)[0]])


def compare(model, *args, estimators, n, seed=None, reference=None, argnums=0, chunk=None,
            client=None, keep=2000, allow_unused=False, **kwargs):
    """Compare estimators of the gradient of E[model's costs] with respect to `args`.

    Args:
        model: a model function; `args` (and `kwargs`) are passed to it.
        estimators: {label: spec}; a spec is an estimator for every site ("auto",
            "pathwise", "score", scg.Score(...), scg.MeasureValued(), ...; sites whose
            family it does not serve keep "auto") or a dict {site name: spec}.
        n: draws per estimator.
        seed: an int, a SeedSequence (reusable: the same seeds on every call) or a numpy
            Generator (fresh seeds from it): each estimator's chunks get seeds spawned
            from it.
        reference: the exact gradient (structured like the argument), for bias and z.
        argnums: which arguments to differentiate, as in scg.grad.
        chunk: draws per chunk (memory is that of one chunk); default min(n, 100 000), or
            fewer when the estimators' layouts (draws x copies x values) need more than
            half the memory available (measured on a few draws).
        client: a dask.distributed.Client: the chunks run on its workers, with the same
            results as in this process for the same seed and chunk.
        keep: per-draw estimates kept per estimator, for the plot's histograms.
        allow_unused: zeros for an argument no cost depends on, as in scg.grad.
        Other keyword arguments are passed to the model.

    Each estimator first runs on 4 draws here, so that one that does not apply to the
    model fails at once, naming its label, before any chunk runs. A stateful baseline
    (MovingAverage) has no history in a study: each chunk is one call of a new
    expectation; scg warns when one is compared.
    Returns:
        A `Comparison`: `cmp[label]` (mean, var, stderr, bias, z, time_per_draw,
        evals_per_draw, efficiency), `.table()`, `.to_dict()`, `.plot(path)`.

    Example:
        >>> cmp = scg.compare(model, theta, estimators={"pathwise": "pathwise",
        ...                   "score": scg.Score("loo")}, n=10**6, seed=0, reference=grad)
        >>> print(cmp.table())
    """
    if not callable(model):
        raise TypeError(f"model must be callable, got {type(model).__name__}")
    if not isinstance(estimators, dict) or not estimators:
        raise TypeError("estimators must be a non-empty dict {label: estimator spec}")
    for label, spec in estimators.items():
        for s in (spec.values() if isinstance(spec, dict) else [spec]):
            try:
                as_estimator(s)
            except (TypeError, ValueError) as e:
                raise type(e)(f"estimators[{label!r}]: {e}") from None
    auto = chunk is None
    chunk = min(n, 100_000) if chunk is None else chunk
    sizes = chunk_sizes(n, chunk)
    rebuild = structure(args, argnums)
    flat_reference = None if reference is None else rebuild.flatten(reference)
    probes = _probe(model, args, kwargs, estimators, argnums, allow_unused, sizes, n, chunk)
    if auto:  # (the default chunk: one that fits, for the hungriest estimator)
        for label, probe in probes.items():
            chunk = fitting_chunk_size(
                lambda k, spec=estimators[label]: ChunkTask(
                    model, args, kwargs, k, np.random.SeedSequence(0), spec, argnums,
                    allow_unused, label=label), probe, chunk)
        if chunk % 2 and any(probe.pairs for probe in probes.values()):
            chunk -= 1  # (one estimator's chunk serves them all: even for antithetic pairs)
        sizes = chunk_sizes(n, chunk)
    tasks = []
    for label, label_seed in zip(estimators, spawn(seed, len(estimators))):
        for i, (size, s) in enumerate(zip(sizes, label_seed.spawn(len(sizes)))):
            tasks.append(ChunkTask(model, args, kwargs, size, s, estimators[label], argnums,
                                   allow_unused, keep=keep if i == 0 else 0, label=label,
                                   index=i))
    results = run_chunks(tasks, client, desc="chunks")
    warn_no_history(results, "scg.compare")
    rows = {}
    for label in estimators:
        mine = [r for r in results if r.label == label]
        moments, seconds, evals = merge(mine)
        rows[label] = Row(label, moments, seconds, evals, rebuild, flat_reference,
                          mine[0].kept, mine[0].pairs)
    return Comparison(rows, n, chunk, reference, rebuild.names())


def _probe(model, args, kwargs, estimators, argnums, allow_unused, sizes, n, chunk):
    """Run every estimator on 4 draws, here: one that does not apply fails now, with its
    label; one that draws antithetic pairs needs chunks of an even size; a per-site spec
    must name sites of the model. Returns {label: the probe's ChunkResult}."""
    probes = {}
    for label, spec in estimators.items():
        task = ChunkTask(model, args, kwargs, 4, np.random.SeedSequence(0), spec, argnums,
                         allow_unused, label=label)
        try:
            result = run_chunk(task)
        except Exception as e:
            e.add_note(f"(scg.compare tried estimator {label!r} on 4 draws before the "
                       "study: it does not apply to this model as given)")
            raise
        if isinstance(spec, dict):
            unknown = [k for k in spec if k not in result.sites]
            if unknown:
                raise ValueError(
                    f"estimators[{label!r}] names site(s) {', '.join(map(repr, unknown))}, "
                    f"which the model does not draw; its sites: "
                    f"{', '.join(map(repr, result.sites))}")
        if result.pairs and any(size % 2 for size in sizes):
            raise ValueError(
                f"estimator {label!r} draws antithetic pairs, so every chunk needs an even "
                f"number of draws; n = {n:,} in chunks of {chunk:,} gives chunks of "
                f"{sorted(set(sizes))}: choose an even n and an even chunk")
        probes[label] = result
    return probes
