"""The trace of one model run: its sites and costs, the estimator choices, a graph, and an
explanation of the surrogate objective."""

import warnings

import networkx as nx
import numpy as np

from ..core.tape import Box, new_level, strip
from ..errors import BiasWarning
from .persample import _RECORDER, PerSample
from .sites import _RUNS, cost, family_of

RETURN_COST = "return"


class Trace:
    """Sites, costs and estimator choices of one evaluation of a model with n draws.

    Attributes:
        sites: name -> Site (`.kind`, `.value` of physical shape (n, ...), `.dist`,
            `.estimator`, `.reason`).
        costs: name -> per-draw total of that cost, shape (n,).
        graph: a networkx.DiGraph over parameters, deterministic operations, sample
            sites and costs (node attribute `kind`).
    """

    def __init__(self, n, rng, level, decisions, reasons, record=False, param_names=None):
        self.n = n
        self.rng = rng
        self.level = level
        self.decisions = decisions
        self.reasons = reasons
        self.sites = {}
        self.cost_sites = {}
        self.plates = []
        self._graph = nx.DiGraph() if record else None
        self._param_names = param_names or {}
        self._ops = 0

    # ------------------------------------------------------------ recording
    def check_new_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"site names are strings, got {name!r}")
        if name in self.sites or name in self.cost_sites:
            raise ValueError(f"the site name {name!r} is used twice in the model; "
                             "names must be unique")

    def add_site(self, site):
        self.sites[site.name] = site
        if self._graph is not None:
            self._graph.add_node(site.name, kind=site.kind, dist=repr(site.dist))
            self._link(site.name, list(family_of(site.dist).params.values()))
            site.draw.node = site.name

    def add_cost(self, c):
        self.cost_sites[c.name] = c
        if self._graph is not None:
            self._graph.add_node(c.name, kind="cost")
            self._link(c.name, [c.value])

    def _record_op(self, prim, inputs, args, result):
        self._ops += 1
        name = getattr(prim, "name", None) or getattr(prim, "__name__", "blackbox")
        node = f"{name}#{self._ops}"
        self._graph.add_node(node, kind="deterministic", op=name,
                             jump=getattr(prim, "kind", "") == "jump",
                             blackbox=getattr(prim, "scg_blackbox", False))
        self._link(node, list(args))
        result.node = node

    def _link(self, node, values):
        for v in values:
            if isinstance(v, PerSample) and v.node is not None:
                self._graph.add_edge(v.node, node)
            for p in self._params_of(v):
                self._graph.add_edge(p, node)

    def _params_of(self, v):
        """Names of the differentiated arguments a shared value depends on."""
        if isinstance(v, PerSample):
            v = v.value if v.node is None else None
        if not self._param_names or not isinstance(v, Box):
            return set()
        found, stack, seen = set(), [v], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node in self._param_names:
                found.add(self._param_names[node])
            stack.extend(p for _, p in node.parents)
        for name in found:
            self._graph.add_node(name, kind="param")
        return found

    # ------------------------------------------------------------ results
    @property
    def costs(self):
        """name -> per-draw value of each cost summed over its shape, shape (n,)."""
        out = {}
        for name, c in self.cost_sites.items():
            raw = np.asarray(strip(c.value), dtype=float)
            if isinstance(c.value, PerSample):
                out[name] = raw.reshape(self.n, -1).sum(axis=1)
            else:
                out[name] = np.full(self.n, raw.sum())
        return out

    @property
    def graph(self):
        if self._graph is None:
            raise AttributeError("this trace did not record its graph; use scg.trace(...)")
        return self._graph

    def score_sites(self):
        return [s for s in self.sites.values() if s.kind == "score"]

    def upstream_scores(self, cost):
        return [s for s in self.score_sites() if s.name in cost.deps.up]

    def downstream_costs(self, site):
        return [c for c in self.cost_sites.values() if site.name in c.deps.up]

    # ------------------------------------------------------------ validity
    def rough_sites(self):
        """Pathwise sites some path of which to a cost (or into a score site's parameters)
        crosses a jump or a black box, with the place where it does."""
        where = {}
        for c in self.cost_sites.values():
            for s in c.deps.rough:
                where.setdefault(s, f"cost {c.name!r}")
        for w in self.score_sites():
            for s in w.param_deps.rough:
                where.setdefault(s, f"the parameters of site {w.name!r}")
        return {s: w for s, w in where.items() if s in self.sites and
                self.sites[s].kind == "pathwise"}

    def check_forced(self):
        for name, place in self.rough_sites().items():
            warnings.warn(
                f"site {name!r}: estimator='pathwise' but a path from {name!r} to {place} "
                "crosses a jump (floor, round, sign, a comparison, argmax) or a black box; "
                "the pathwise gradient misses the jump and is biased. Use estimator='auto' "
                "or 'score'", BiasWarning, stacklevel=4)

    # ------------------------------------------------------------ explanation
    def explain(self):
        """A readable account of the surrogate: estimators, their reasons, score terms."""
        lines = [f"Surrogate objective, averaged over n = {self.n} draws:",
                 "  sum over costs c of  box(sum of log p(w) over score sites w upstream of c) * c",
                 "  + sum over score sites w of  box(log p of the score sites before w)"
                 " * (1 - box(log p(w))) * b_w",
                 "  where box(t) = exp(t - stop_gradient(t)) is 1 in value; its derivatives "
                 "give the score terms.", "", "Sample sites:"]
        for s in self.sites.values():
            est = s.kind
            if s.kind == "score":
                b = s.baseline
                est += f", baseline: {b.describe() if b is not None else 'none'}"
            plates = f" in plate {', '.join(p.name for p in s.plates)}" if s.plates else ""
            lines.append(f"  {s.name} ~ {s.dist!r}{plates}: {est}")
            lines.append(f"      because {s.reason}")
            parents = sorted(s.param_deps.smooth)
            if s.kind == "score" and parents:
                lines.append(f"      log p({s.name}) passes pathwise gradients to "
                             f"{', '.join(parents)} through its parameters")
        lines += ["", "Costs:"]
        for c in self.cost_sites.values():
            path = sorted(c.deps.smooth & {s for s in self.sites
                                           if self.sites[s].kind == "pathwise"})
            scores = [s.name for s in self.upstream_scores(c)]
            parts = []
            if path:
                parts.append(f"pathwise gradient through {', '.join(path)}")
            if scores:
                parts.append(f"multiplied by box(log p of {', '.join(scores)})")
            if not parts:
                parts.append("direct gradient only")
            lines.append(f"  {c.name}: " + "; ".join(parts))
        terms = [s for s in self.score_sites()]
        if terms:
            lines += ["", "Score terms of the first derivative (downstream costs only):"]
            for s in terms:
                down = [c.name for c in self.downstream_costs(s)] or ["no cost"]
                b = " - b" if s.baseline is not None else ""
                lines.append(f"  grad log p({s.name}) * ({' + '.join(down)}{b})")
        return "\n".join(lines)

    def __repr__(self):
        return (f"Trace(n={self.n}, sites={list(self.sites)}, "
                f"costs={list(self.cost_sites)})")


def run_model(model, args, kwargs, *, n, rng, decisions, reasons, record=False,
              param_names=None, wrap_args=None, build=None):
    """Run `model` for n draws, re-running with the same randomness until every "auto"
    site's estimator is valid. `build(trace)` runs inside the batching level (the surrogate).

    Returns (trace, build's result).
    """
    state = rng.bit_generator.state
    for _ in range(1000):
        with new_level() as level:
            trace = Trace(n, rng, level, decisions, reasons, record, param_names)
            _RUNS.append(trace)
            saved = _RECORDER[0]
            _RECORDER[0] = trace._record_op if record else None
            try:
                call_args = wrap_args(args, level) if wrap_args else args
                out = model(*call_args, **kwargs)
                if out is not None:
                    cost(RETURN_COST, out)
            finally:
                _RECORDER[0] = saved
                _RUNS.pop()
            invalid = {s: w for s, w in trace.rough_sites().items()
                       if trace.sites[s].reason != "requested"}
            if not invalid:
                trace.check_forced()
                return trace, (build(trace) if build else None)
        # switch the latest such site only: once it is a score site, the sites before it
        # may no longer reach the jump along a path (x -> y -> floor(y) keeps x pathwise)
        order = list(trace.sites)
        s = max(invalid, key=order.index)
        decisions[s] = "score"
        reasons[s] = (f"a path from the draw to {invalid[s]} crosses a jump or a black box, "
                      "so the pathwise gradient would be biased")
        rng.bit_generator.state = state
    raise RuntimeError("estimator choice did not settle")  # pragma: no cover
