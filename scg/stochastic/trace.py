"""The trace of one model run: its sites and costs, the estimator choices, a graph, and an
explanation of the surrogate objective."""

import warnings

import networkx as nx
import numpy as np

from ..core import effects, random_state
from ..core.reach import generators_reachable
from ..core.tape import Box, new_level, strip
from ..errors import BiasWarning, RandomnessWarning, TracingError
from .persample import PerSample
from .plates import label_op
from ..estimators import auto
from ..estimators.base import INVALID
from .copies import Copies, CopyLayout, Replan
from .marginal import MARGINAL_COST, open_chain
from .memory import check_layout
from .multisample import record_bound
from ..numpy import rules as R
from .sites import (EstimatorChoice, add_cost, carries_gradient, close_plate, cost, draw_site,
                    family_of, innermost_run, open_plate, refuse_lazy)

RETURN_COST = "return"
PROBE_DRAWS = 4  # the draws of the runs that lay out copies (even: antithetic pairs)


class Trace(effects.Handler):
    """Sites, costs and estimator choices of one evaluation of a model with n draws.

    While the model runs, the trace is the handler of the effect stack that performs its
    `scg.sample`, `scg.cost` and `scg.plate` messages (scg/stochastic/sites.py).

    Attributes:
        sites: name -> Site (`.kind`, `.value` of physical shape (rows, ...): n rows, times
            the copies when an estimator evaluates copies of the run; `.dist`,
            `.estimator`, `.reason`).
        costs: name -> per-draw total of that cost, shape (n,).
        graph: a networkx.DiGraph over parameters, deterministic operations, sample
            sites and costs (node attribute `kind`).
    """

    takes_values = False  # (the numeric messages pass it, to a recording outside)
    watches_operations = True  # (per-draw operations: plates' axes, the graph)
    is_run = True

    def __init__(self, n, rng, level, decisions, reasons, record=False, param_names=None,
                 copies=None, estimators=None, states=None):
        self.n = n
        self.states = states  # the expectation's SiteStates (None for scg.trace)
        self.estimators = estimators  # the caller's choice over the model's (EstimatorChoice)
        self.rng = effects.generator(rng)  # (under scg.jit: every draw is recorded)
        # under scg.jit: how many calls ran this run's program (the recorded one included)
        self.runs_of_program = [0] if effects.sees_operations() else None
        self.level = level
        self.decisions = decisions
        self.reasons = reasons
        # the layout of copies the run has (copies.py; the CopyLayout outside the trace)
        self.copies = Copies(n, {}) if copies is None else copies
        self.rows = self.copies.rows
        self.sites = {}
        self.cost_sites = {}
        self.aux = None  # what the model returned beside its cost (has_aux=True)
        self.bounds = []  # the run's scg.logmeanexp bounds (multisample.py)
        self.proposals = []  # the DReG sites' proposals, filled by the bounds (dreg.py)
        self.plates = ()  # the plates open now, outermost first
        self.plate_depth = 0  # the deepest plate dim open so far in the run
        # the sites summed out of the likelihood (scg.Marginalize(): marginal.py), their
        # factors' names, and the caller's plan of the run's layout, which it keeps
        self.marginal = None
        self.factor_names = set()
        self.plan = None
        self.plated = False  # has a plate been open in this run
        self.subsampled = False  # has a plate drawn a minibatch (its indices are random)
        # the sites Python's control flow branched on (one draw): every later cost depends
        # on them
        self.control = frozenset()
        self.bytes_estimate = 0  # (see memory.check_fits)
        self.bytes_budget = None
        self._graph = nx.DiGraph() if record else None
        self._param_names = param_names or {}
        self._ops = 0
        self._downstream = None  # (the costs, their count, site name -> its costs)

    # ------------------------------------------------------------ recording
    def check_new_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"site names are strings, got {name!r}")
        if name in self.sites or name in self.cost_sites or name in self.factor_names or \
                (self.marginal is not None and name in self.marginal.sites):
            raise ValueError(f"the site name {name!r} is used twice in the model; "
                             "names must be unique")

    def process(self, msg):
        """Perform the model's messages: a sample site, a cost, a plate opened or closed."""
        perform = _PERFORMERS.get(msg.kind)
        if perform is not None:
            msg.value = perform(self, msg)
            msg.done = True

    def carries_gradient(self, v):
        return carries_gradient(v, self)

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

    def enter_plates(self, plates):
        """Make `plates` the open plates: sites drawn now have their elements along the
        plates' dims. Once a plate has been open, every result's axes are followed (also
        outside the block: a value computed from a plate's elements after it keeps them
        apart unless an operation combines them; see `scg.stochastic.plates`)."""
        self.plates = plates
        self.plated = self.plated or bool(plates)
        if plates:
            self.plate_depth = max(self.plate_depth, max(-p.dim for p in plates))
            if self.marginal is not None:
                self.marginal.see_plates(plates)

    def follows_operations(self):
        """Does the run label the per-draw operations' results (a plate has been open) or
        make them nodes of its graph?"""
        return self.plated or self._graph is not None

    def operation(self, prim, inputs, args, kwargs, result):
        """A per-draw operation of the model ran (effects.operation): once a plate has been
        open, its result's axes are labelled; with a graph, it is a node."""
        if self.plated:
            label_op(prim, args, kwargs, inputs, self.level, result, self.sites)
        if self._graph is not None:
            self._record_op(prim, inputs, args, result)

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
        """name -> per-draw value of each cost summed over its shape, shape (n,) (with
        copies of the run, each draw's copies combined with their weights)."""
        out = {}
        if self.copies:
            from .site_states import SiteStates
            from .surrogate import SurrogateContext  # (the weights of the copies)
            ctx = SurrogateContext(self, SiteStates())
            for name, c in self.cost_sites.items():
                value, plates = ctx.costs[name]
                value = strip(ctx.grid.per_draw(strip(ctx._weighted(c, strip(value), plates))))
                value = np.broadcast_to(value, (self.rows,))
                out[name] = value.reshape(self.copies.count, self.n).sum(axis=0)
            return out
        for name, c in self.cost_sites.items():
            raw = effects.asarray(c.value, dtype=float)
            if isinstance(c.value, PerSample):
                out[name] = np.sum(np.reshape(raw, (self.n, -1)), axis=1)
            else:
                out[name] = np.sum(raw) * np.ones(self.n)
        return out

    @property
    def graph(self):
        if self._graph is None:
            raise AttributeError("this trace did not record its graph; use scg.trace(...)")
        return self._graph

    def downstream_costs(self, site):
        """The costs that depend on the site, in the order they were given (a tuple)."""
        index = self._downstream
        costs = self.cost_sites
        if index is None or index[0] is not costs or index[1] != len(costs):
            # (one pass over the costs for every site: a loop of T steps asks for the
            # costs downstream of each of its T sites)
            by_site = {}
            for c in costs.values():
                for s in c.deps.up:
                    by_site.setdefault(s, []).append(c)
            by_site = {s: tuple(down) for s, down in by_site.items()}
            index = self._downstream = (costs, len(costs), by_site)
        return index[2].get(site.name, ())

    # ------------------------------------------------------------ validity
    def rough_sites(self):
        """Pathwise sites some path of which to a cost (or into a score site's parameters)
        crosses a jump or a black box, with the place where it does."""
        sites = self.sites
        scored = [w for w in sites.values() if not w.estimator.differentiable]
        # (the pathwise sites among all the rough ones first, by set unions: the costs of
        # a loop of T steps each depend on the steps before, T^2 / 2 names in all)
        rough = frozenset().union(*[c.deps.rough for c in self.cost_sites.values()],
                                  *[w.param_deps.rough for w in scored])
        pathwise = {s for s in rough if s in sites and sites[s].estimator.differentiable}
        where = {}
        if not pathwise:  # (the usual case: no place to name)
            return where
        places = [(c.deps.rough, f"cost {c.name!r}") for c in self.cost_sites.values()]
        places += [(w.param_deps.rough, f"the parameters of site {w.name!r}") for w in scored]
        for rough, place in places:
            if not pathwise.isdisjoint(rough):
                for s in rough:
                    if s in pathwise:
                        where.setdefault(s, place)
        return where

    def check_forced(self):
        for name, place in self.rough_sites().items():
            est = self.sites[name].estimator
            self.sites[name].biased = True  # (explain() says so too)
            warnings.warn(
                f"site {name!r}: estimator={est!r} differentiates along the draw, but a "
                f"path from {name!r} to {place} crosses a jump (floor, round, sign, a "
                "comparison, argmax) or a black box; the gradient misses the jump and is "
                "biased. Use estimator='auto' or 'score'", BiasWarning, stacklevel=4)

    # ------------------------------------------------------------ explanation
    def _bias_word(self, s):
        """'biased', 'unbiased', or, for a baseline of the user's not yet checked by a
        gradient call, unbiased on the condition that check tests."""
        est = s.estimator
        if est.biased or s.biased:
            return "biased"
        baseline = getattr(est, "baseline", None)
        if baseline is None or type(baseline).__dict__.get("checked", False):
            return "unbiased"
        states = self.states
        if states is not None and s.name in states and states.of(s.name).checked:
            return "unbiased"  # (a gradient call checked it: it does not use its own cost)
        return ("unbiased if its baseline does not use each draw's own cost (a gradient "
                "call checks that, and warns with BiasWarning if it does)")

    def explain(self):
        """A readable account of the surrogate: estimators, their reasons, their terms."""
        lines = [f"Surrogate objective, averaged over n = {self.n} draws:",
                 "  sum over costs c of  box(sum of log p(w) over score sites w upstream of c) * c",
                 "  + sum over score sites w of  box(log p of the score sites before w)"
                 " * (1 - box(log p(w))) * b_w",
                 "  where box(t) = exp(t - stop_gradient(t)) is 1 in value; its derivatives "
                 "give the score terms.", "", "Sample sites:"]
        rough = self.rough_sites()
        for s in self.sites.values():
            est = s.estimator
            lines.append(f"  {s.name} ~ {s.dist!r}{_in_plates(s.plates)}: {est.describe(s)}")
            lines.append(f"      because {s.reason}")
            evaluations = est.evaluations(s)
            terms = est.explain_terms(s, self)
            invalid = any(line.startswith(INVALID) for line in terms)
            lines.append(f"      {'not valid here' if invalid else self._bias_word(s)}; "
                         f"{evaluations} evaluation{'s' if evaluations != 1 else ''} of the "
                         "model downstream per draw")
            lines += [f"      {line}" for line in terms]
            if s.name in rough:
                lines.append(f"      biased: a path from {s.name!r} to {rough[s.name]} crosses a "
                             "jump or a black box, which the derivative along the draw misses")
            if not s.own_draws and not _scg_class(type(est).draw):
                lines.append(f"      its values are {type(est).__name__}.draw's own (not the "
                             "ones d.sample(), d.noise_path() or d.path(d.noise()) gave, and "
                             f"{type(est).__name__} does not promise own_draws): log_prob "
                             "tests their support; if they are the law's draws, set "
                             f"own_draws = True (and draws_from_law) on {type(est).__name__}")
        if self.marginal is not None:
            lines += ["", "Marginalized sites:"] + self.marginal.explain()
        if self.copies:
            lines += ["", f"The run holds {self.copies.count} evaluations of each draw: "
                      f"{self.copies.describe()}. Each copying site's copies are branches "
                      "of the run downstream of it, the other sites at their main values "
                      "and with shared randomness; the copies of an exact sum multiply with "
                      "those of the copying sites it meets in a cost."]
        lines += ["", "Costs:"]
        has_plates = any(s.plates for s in self.sites.values()) or \
            any(c.plates for c in self.cost_sites.values())
        for c in self.cost_sites.values():
            path = sorted(c.deps.smooth & {s for s in self.sites
                                           if self.sites[s].estimator.differentiable})
            factors = [s.estimator.cost_factor(s) for s in self.sites.values()
                       if s.name in c.deps.up]
            factors = [f for f in factors if f]
            parts = []
            if path:
                parts.append(f"pathwise gradient through {', '.join(path)}")
            if factors:
                parts.append(f"multiplied by {' * '.join(factors)}")
            if c.name == MARGINAL_COST and self.marginal is not None:
                parts.append("-log p(likelihood terms) with the marginalized sites summed "
                             "out exactly")
            if not parts:
                parts.append("direct gradient only")
            kept, mixed = c.plate_split()
            where = _in_plates(kept) or (" (outside every plate)" if has_plates else "")
            for p, names in mixed.items():
                where += (f"; it mixes the elements of plate {p.name} (for the score of "
                          f"{', '.join(names)}), so each element's score there meets all of it")
            lines.append(f"  {c.name}{where}: " + "; ".join(parts))
        if self.runs_of_program is not None:
            replays = self.runs_of_program[0] - 1
            lines += ["", f"Recorded by scg.jit: {replays} later call{'s' if replays != 1 else ''}"
                      " replayed this run's program (the same estimators and terms, new draws); "
                      "the values kept in this trace are those of the recorded call."]
        return "\n".join(lines)

    def __repr__(self):
        return (f"Trace(n={self.n}, sites={list(self.sites)}, "
                f"costs={list(self.cost_sites)})")


_PERFORMERS = {"sample": draw_site, "cost": add_cost, "plate": open_plate,
               "plate_exit": close_plate, "markov": open_chain, "bound": record_bound}


def _split_aux(model, out, trace):
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"the model {getattr(model, '__name__', model)!r} of an expectation "
                        "made with has_aux=True must return (cost, aux), a pair; it returned "
                        f"{type(out).__name__}")
    trace.aux = out[1]
    return out[0]


def _scg_class(fn):
    """Is fn scg's own code (not a user's estimator)?"""
    return str(getattr(fn, "__module__", "")).startswith("scg.")


def _in_plates(plates):
    return f" in plate {', '.join(p.name for p in plates)}" if plates else ""


def run_model(model, args, kwargs, *, n, rng, decisions, reasons, record=False,
              param_names=None, wrap_args=None, build=None, plan=None, estimators=None,
              has_aux=False, generators=None, states=None):
    """Run `model` for n draws, re-running with the same randomness until every "auto"
    site's estimator is valid and the copies that estimators need are laid out (`plan`,
    kept by the caller across calls). `build(trace)` runs inside the batching level (the
    surrogate).

    Returns (trace, build's result).
    """
    if innermost_run() is not None:
        raise TracingError(
            "an expectation (or scg.trace) was evaluated inside the model of another one: "
            "scg does not nest Monte Carlo estimates. Put the inner random choices in the "
            "one model (several scg.sample sites, or a scg.plate of them) and return the "
            "inner average as a cost. (scg.grad of a plain function is fine inside a model.)")
    state = random_state.save_position(rng)
    plan = {} if plan is None else plan
    # the model's own generators (closures, arguments): a draw from one is shared by all
    # n draws; the expectation's generator is not among them
    if generators is None:
        generators = generators_reachable((model, args, kwargs))
    own = [g for g in generators if g is not rng]
    before = [random_state.save_position(g) for g in own]
    probing = False  # (laying out copies: runs of a few draws, see below)
    for _ in range(1000):
        # While the copies of the run are being laid out (a site asked for copies the layout
        # did not have), the model runs with a few draws: the layout does not depend on n,
        # and a layout that cannot be (above an enumeration's budget, or beyond memory) is
        # refused before a run with every draw allocates it.
        size = min(n, PROBE_DRAWS) if probing else n
        settling = False
        with new_level() as level:
            layout = CopyLayout(size, plan)
            trace = Trace(size, rng, level, decisions, reasons, record, param_names,
                          layout.copies, estimators, states)
            trace.plan = plan
            effects.push(layout)
            effects.push(trace)
            if estimators is not None:
                effects.push(EstimatorChoice(estimators))
            numpy_state = random_state.global_random_position()
            try:
                call_args = wrap_args(args, level, trace.rows) if wrap_args else args
                out = model(*call_args, **kwargs)
                if has_aux:
                    out = _split_aux(model, out, trace)
                elif isinstance(out, (tuple, list, dict)):
                    raise TypeError(
                        f"the model {getattr(model, '__name__', model)!r} returned a "
                        f"{type(out).__name__}: a model returns its cost (a number or an "
                        "array per draw), or None. To return other values beside it, make "
                        "the expectation with has_aux=True and return (cost, aux)")
                refuse_lazy(f"the return value of the model {getattr(model, '__name__', model)!r}"
                            f" (its cost {RETURN_COST!r})", out)
                if out is not None:
                    cost(RETURN_COST, out)
                if trace.marginal is not None:  # (the sites summed out: one cost)
                    cost(MARGINAL_COST, R.negative(trace.marginal.finish()))
                for site in trace.sites.values():
                    site.check_unchanged()
                settling = True  # (the layout's own errors hold at any n: raised)
                layout.settle(trace.sites, [c.deps.up for c in trace.cost_sites.values()])
            except Replan:
                probing = n > PROBE_DRAWS
                if settling:  # (every site reached, its copies in their factors: with n
                    # draws, refused before a run allocates it)
                    check_layout(n, Copies(n, plan), trace.sites)
                _rewind(rng, state)
                continue
            except Exception:
                if not probing or settling:
                    raise
                # (an error with a few draws: the run with every draw says what it is)
                probing = False
                _rewind(rng, state)
                continue
            finally:
                _close(layout)
            if probing:  # laid out: check that the layout fits with n draws, then run them
                probing = False
                check_layout(n, Copies(n, plan), trace.sites)
                _rewind(rng, state)
                continue
            if random_state.global_random_position() != numpy_state:
                _warn_numpy_random(model)
            moved = [g for g, b in zip(own, before) if random_state.save_position(g) != b]
            if moved:
                if any(g is random_state.PYTHON_RANDOM for g in moved):
                    _warn_python_random(model)
                else:
                    _warn_own_generator(model)
                before = [random_state.save_position(g) for g in own]  # (warned once)
            invalid = {s: w for s, w in trace.rough_sites().items()
                       if trace.sites[s].reason != "requested"}
            if not invalid:
                trace.check_forced()
                if trace.runs_of_program is not None:
                    effects.after(_count, effects.State(trace.runs_of_program, own=True))
                return trace, (build(trace) if build else None)
        # switch the latest such site only: once it is a score site, the sites before it
        # may no longer reach the jump along a path (x -> y -> floor(y) keeps x pathwise)
        order = list(trace.sites)
        s = max(invalid, key=order.index)
        decisions[s], reasons[s] = auto.after_a_jump(n, invalid[s])
        _rewind(rng, state)
    raise RuntimeError("estimator choice did not settle")  # pragma: no cover


def _close(layout):
    """Take the run's handlers off the stack: the layout of copies, the trace and the
    estimator choice inside it, and any plate the model left open (an error raised inside
    one)."""
    for h in list(effects.handlers()):
        effects.pop(h)
        if h is layout:
            return
    raise RuntimeError("the run of a model was not on the effect stack")  # pragma: no cover


def _rewind(rng, position):
    """Run the model again with the same randomness (a program recorded while it did so
    holds the draws of both runs: it must not be repeated)."""
    random_state.restore_position(rng, position)
    effects.unrepeatable("the model ran twice in the call, with the same randomness, while "
                         "its estimators or copies were being settled")


def _count(counter):
    counter[0] += 1


def _warn_own_generator(model):
    warnings.warn(
        f"the model {getattr(model, '__name__', model)!r} drew random numbers from a numpy "
        "Generator or a random.Random of its own (rng.normal(), rng.random(), ...): such a "
        "number is drawn once and shared by all n draws, so the estimate and its standard "
        "error are wrong. "
        "Randomness in a model comes only from scg.sample('name', dist), for example "
        "scg.sample('noise', scg.Normal(0.0, 1.0)) instead of rng.normal()",
        RandomnessWarning, stacklevel=4)


def _warn_python_random(model):
    warnings.warn(
        f"the model {getattr(model, '__name__', model)!r} drew random numbers from Python's "
        "random module (random.random, random.gauss, ...): such a number is drawn once and "
        "shared by all n draws, so the estimate and its standard error are wrong (unless "
        "another thread drew from that generator meanwhile). Randomness in a model comes "
        "only from scg.sample('name', dist); use, for example, scg.sample('u', "
        "scg.Uniform(0.0, 1.0)) instead of random.random()",
        RandomnessWarning, stacklevel=4)


def _warn_numpy_random(model):
    warnings.warn(
        f"the model {getattr(model, '__name__', model)!r} drew random numbers from numpy's "
        "global generator (np.random.normal, np.random.rand, ...): such a number is drawn "
        "once and shared by all n draws, so the estimate and its standard error are wrong "
        "(unless another thread drew from that generator meanwhile). "
        "Randomness in a model comes only from scg.sample('name', dist); use, for example, "
        "scg.sample('noise', scg.Normal(0.0, 1.0)) instead of np.random.normal()",
        RandomnessWarning, stacklevel=4)
