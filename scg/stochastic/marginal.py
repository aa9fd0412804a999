"""Sites summed out of the model's likelihood: scg.Marginalize(), scg.factor, scg.markov.

A marginalized site is never drawn. Its value is its whole support, laid along a dimension
of its own to the left of the plates' dims (Pyro's parallel enumeration): with the plates
nested `nesting` deep, the site in *slot* s has its values along dim -(nesting + 1 + s).
The model then computes every value's log-likelihood at once, by plain broadcasting, and
the log-likelihood terms downstream of marginalized sites (`obs=` sites, `scg.factor`) are
kept as *factors* instead of costs: each a log-potential over the marginalized sites it
depends on and the plates it lies in. At the end of the run the factors are summed out by
variable elimination (`contract`): the sites local to the deepest plates first, each plate
element alone (N x K work), then the plate's elements multiplied (their logs added), out to
the plates around them; inside one set of plates the sites go in the order they were
drawn, so a chain costs T x K^2 (the forward algorithm). The model's cost gains
-log sum_z p(z) prod(factors), a cost named "marginal" that depends on no marginalized site.

`for t in scg.markov(range(T)):` declares that the sites of step t depend on those of the
last `history` steps only: the slot of a site older than that is given to a new site, so a
chain of any length needs `history + 1` slots (numpy arrays have at most 64 dims). A value
that still depends on a released site is refused, as is any cost other than a likelihood
term that depends on a marginalized site: the contraction could not be right.
"""

import functools
import math

import numpy as np

from ..core import effects
from ..distributions.base import family_name, family_of
from ..errors import EstimatorError
from ..estimators.enumerate import support_of
from ..kernels.chain import chain_log_partition
from ..numpy import rules as R
from .copies import Replan
from .persample import Deps, PerSample
from .reuse import Reuse
from .runtime import current_run, send as _send

# the plan's entry (kept across calls, see copies.py) for the plates' nesting: the dims of
# marginalized sites go to the left of it
NESTING = ("marginal", "nesting")
MAX_SLOTS = 32  # (numpy's 64 dims, with room for the plates' and the model's own)
MARGINAL_COST = "marginal"
MAX_ELEMENTS = 2 ** 27  # the largest table the elimination may build (1 GiB of float64)


class MarginalSite:
    """A site summed out: its support size, slot, plates and place in a markov chain."""

    __slots__ = ("name", "size", "slot", "plates", "chain", "order", "dist")

    def __init__(self, name, size, slot, plates, chain, order, dist):
        self.name, self.size, self.slot, self.plates = name, size, slot, plates
        self.chain, self.order, self.dist = chain, order, dist


class Chain:
    """One `scg.markov` loop: its history and the step it is at."""

    __slots__ = ("history", "step", "open")

    def __init__(self, history):
        self.history, self.step, self.open = history, -1, True


class Factor:
    """A log-potential: `value` of shape (sizes of `names`) + (the plates' dims), over the
    marginalized sites `names` (in the order of the value's axes) and the plates `plates`.

    Given as `raw` with a `layout` (that shape), the value is `raw` reshaped to it when
    first asked for: a chain stacks the raw values of its steps and reshapes the stack
    once (`_steps`), not each step's."""

    __slots__ = ("raw", "layout", "names", "plates", "term", "_value")

    def __init__(self, value, names, plates, term=None, layout=None):
        self.raw, self.layout = value, layout
        self._value = value if layout is None else None
        self.names, self.plates = names, plates
        self.term = term  # the likelihood term's name (None for a table built by the sum)

    @property
    def value(self):
        if self._value is None:
            self._value = np.reshape(self.raw, self.layout)
        return self._value


class Marginal:
    """The marginalized sites of one run and their factors (the run's `marginal`)."""

    def __init__(self, run, plan):
        self.run = run
        self.plan = plan
        self.nesting = max(plan.get(NESTING, 0), run.plate_depth)
        self.sites = {}
        self.slots = []  # slot -> the MarginalSite in it, or None
        self.factors = []
        self.chains = []  # the open scg.markov loops, outermost first
        self.chain_at = {}  # id of a loop's Chain -> the Chain (also once closed)
        # the per-draw operations on the sites' values, computed once (reuse.py); the
        # values themselves, one array per slot and support
        self.reuse = Reuse()
        self._values = {}
        self._tables = {}  # a family's state and a slot -> its own factor's physical value

    # ------------------------------------------------------------ sites
    def depends(self, value):
        """The marginalized sites `value` depends on (a frozenset of names)."""
        if isinstance(value, PerSample) and value.level == self.run.level:
            return frozenset(value.deps.up) & self.sites.keys()
        return frozenset()

    def draw(self, name, dist, plates, given=None):
        """The value of a marginalized site: its support along its own dim. `given` is the
        distribution as the model gave it, before the plates broadcast its parameters: its
        log-probability table is the same for every element (broadcast once, as a factor)."""
        self.see_plates(plates)
        inner = family_of(dist)
        support = support_of(name, dist, "scg.Marginalize()")
        size = support.shape[0]
        event = tuple(dist.event_shape)
        if tuple(support.shape[1:]) != event:  # (.to_event of a family with a support per
            # element: the joint values of the event are not declared)
            elements = math.prod(event) // max(math.prod(support.shape[1:]), 1)
            raise EstimatorError(
                f"site {name!r}: scg.Marginalize() sums over the values of the site's event, "
                f"of shape {event}, but {family_name(dist)} declares the values of one "
                f"element (shape {tuple(support.shape[1:])}, {size} of them): its event joins "
                f"{elements} elements (.to_event), whose {size}^{elements} joint values it "
                "does not sum out. Draw the elements inside a scg.plate without .to_event "
                "(each summed out on its own, if the likelihood is per element), or use a "
                "family whose values are the events (OneHotCategorical, Categorical)")
        parents = frozenset().union(*[self.depends(v) for v in inner.params.values()])
        self._check_batch(name, tuple(dist.batch_shape), plates, parents)
        slot = self._free_slot(name)
        chain = self.chains[-1] if self.chains else None
        site = MarginalSite(name, size, slot, tuple(plates),
                            (chain, chain.step) if chain else None, len(self.sites), dist)
        self.sites[name] = site
        if slot == len(self.slots):
            self.slots.append(site)
        else:
            self.slots[slot] = site
        value = PerSample(self._laid_out(support, slot, event), self.run.level,
                          Deps(frozenset({name})))
        # its own log-probability is a factor: p(z | its parents)
        self.add(name, self._own_log_prob(name, given if given is not None else dist, value,
                                          slot), plates)
        return value

    def _own_log_prob(self, name, given, value, slot):
        """log_prob(value) of the site's distribution as the model gave it, at each of its
        values (along the slot's dim), from the family's log_prob_of_support(): the same
        numbers, dependencies and derivatives, without comparing each value with the
        others. (A batch that reaches the slot's dim: log_prob itself.)"""
        batch = tuple(given.batch_shape)
        room = self.nesting + slot  # (the dims right of the slot's: a batch reaches them)
        at = len(batch) - room - 1  # (the slot's dim in the batch, if it reaches it)
        if at >= 0 and batch[at] != 1:
            return given.log_prob(value)
        # (the same family with the same parameters in the same slot: the table it gave;
        # its parents' values depend on marginalized sites only, so this one depends on
        # them and on the site: reuse.py)
        # (not while the run labels plates' axes or draws its graph: a kept table has
        # neither its labels nor its node)
        run = self.run
        key, parents = self.reuse.state_key(given, run.level) \
            if not run.follows_operations() else (None, None)
        if key is not None:
            key = (key, slot)
            kept = self._tables.get(key)
            if kept is not None:
                return PerSample(kept, self.run.level, Deps(frozenset({name}).union(*parents)))
        out = self._table_of(name, given, batch, room, at)
        deps = out.deps
        if key is not None and deps.up == frozenset({name}).union(*parents) and \
                not (deps.smooth or deps.rough or out.held or out.bent):
            self._tables[key] = out.value  # (what a later step's deps are made of, below)
        return out

    def _table_of(self, name, given, batch, room, at):
        """The family's log_prob_of_support() laid out as log_prob(value) gives it, a
        per-draw value that depends on the site and its parents."""
        table = given.log_prob_of_support()  # (S,) + batch
        size = tuple(R.shape(table))[0]
        if at < 0:  # (the values left of the batch)
            shape = (size,) + (1,) * (room - len(batch)) + batch
            if tuple(R.shape(table)) != shape:
                table = np.reshape(table, shape)
        else:  # (the values in place of the batch's 1 at the slot's dim)
            table = np.reshape(table, (size,) + batch[:at] + batch[at + 1:])
            table = np.transpose(table, tuple(range(1, at + 1)) + (0,) +
                                 tuple(range(at + 1, len(batch))))
            shape = batch[:at] + (size,) + batch[at + 1:]
        level = self.run.level
        if type(table) is PerSample and table.level == level:  # (parents summed out too)
            deps = table.deps
            out = PerSample(table.value, level, Deps(deps.up | {name}, deps.smooth,
                                                     deps.rough), axes=table.axes,
                            mixed=table.mixed)
            out.held, out.bent = table.held, table.bent
            return out
        physical = R.reshape(table, (1,) + shape)
        if self.run.rows != 1:
            physical = R.broadcast_to(physical, (self.run.rows,) + shape)
        return PerSample(physical, level, Deps(frozenset({name})))

    def _laid_out(self, support, slot, event):
        """The physical value of a site with this support in this slot: the support along
        the slot's dim, the same array for every site there (so that what the model
        computes from it is computed once: reuse.py)."""
        key = (slot, support.dtype.str, support.shape, support.tobytes())
        physical = self._values.get(key)
        if physical is None:
            size = support.shape[0]
            # (a copy: the support may be the family's own array, which the results kept
            # of operations on this value must not make read-only, nor see change)
            shaped = np.array(support).reshape((size,) + (1,) * (self.nesting + slot) + event)
            physical = np.broadcast_to(shaped, (self.run.rows,) + shaped.shape)
            self._values[key] = physical
            self.reuse.keep_value(physical)
        return physical

    def _check_batch(self, name, batch, plates, parents):
        at = {p.dim: p for p in plates}
        for k, size in enumerate(batch):
            d = k - len(batch)
            if size == 1:
                continue
            if d >= -self.nesting:
                if d in at:
                    continue
                raise EstimatorError(
                    f"site {name!r}: scg.Marginalize() sums each element of a plate alone, and "
                    f"its batch shape {batch} has size {size} at dim {d}, which no open plate "
                    f"declares; open a scg.plate of size {size} at dim {d} around the site (or "
                    "make it one OneHotCategorical over the joint values)")
            s = self._slot_of(d)
            holder = self.slots[s] if s < len(self.slots) else None
            if holder is None or holder.name not in parents:
                raise EstimatorError(
                    f"site {name!r}: scg.Marginalize() sums each element of a plate alone, and "
                    f"its batch shape {batch} has size {size} at dim {d}, which no open plate "
                    "declares (nor is it the dim of a marginalized site its parameters depend "
                    f"on); open a scg.plate of size {size} at dim {d} around the site (or make "
                    "it one OneHotCategorical over the joint values)")

    def _slot_of(self, d):
        return -d - self.nesting - 1

    def _free_slot(self, name):
        for s, held in enumerate(self.slots):
            if held is None or self._released(held):
                return s
        if len(self.slots) >= MAX_SLOTS:
            raise EstimatorError(
                f"site {name!r}: the model marginalizes more than {MAX_SLOTS} sites that are "
                "alive at once, each with a dim of its own. If they form a chain (each step "
                "depends on the last), write the loop as `for t in scg.markov(range(T)):` so "
                "the dims of old steps are reused")
        return len(self.slots)

    def _released(self, site):
        """Has scg.markov let go of this site (older than its loop's history)?"""
        if site.chain is None:
            return False
        chain, step = site.chain
        return chain.step - step > chain.history

    def see_plates(self, plates):
        """A plate deeper than the dims were laid out for: run the model again with the
        marginalized sites' dims left of it (a value of theirs may already have met the
        plate's elements along its dim)."""
        deepest = max((-p.dim for p in plates), default=0)
        if deepest > self.nesting:
            self.plan[NESTING] = deepest
            raise Replan(next(iter(self.sites), "a plate"))

    # ------------------------------------------------------------ factors
    def add(self, name, log_value, plates):
        """Keep a log-likelihood term (of the marginalized sites it depends on) as a factor.
        `plates` are the plates open where it was given."""
        self.see_plates(plates)
        names = self.depends(log_value)
        for u in sorted(names, key=lambda k: self.sites[k].order):
            if self._released(self.sites[u]):
                chain = self.sites[u].chain[0]
                raise EstimatorError(
                    f"{_what(name)} depends on the marginalized site {u!r}, which "
                    f"scg.markov(history={chain.history}) let go of (its dim now holds a "
                    f"later step's site): the step that uses it is more than {chain.history} "
                    "steps later. Pass a larger history= to scg.markov")
            missing = [p.name for p in self.sites[u].plates if p not in plates]
            if missing:
                raise EstimatorError(
                    f"{_what(name)} depends on the marginalized site {u!r}, which has an "
                    f"element per element of plate {missing[0]!r}, but is given outside "
                    "that plate; give it inside the plate (per element)")
        shape = tuple(R.shape(log_value))
        # (the term as it was given: the model may change its object in place later, and
        # the factor may keep the value unreshaped until the sum: Factor)
        value = log_value.alias() if type(log_value) is PerSample else log_value
        open_at = {p.dim: p for p in plates}
        kept_plates = set()
        for u in names:
            kept_plates.update(self.sites[u].plates)
        # (the value's dims aligned on the right with the sites' and plates' dims: the
        # value itself is reshaped once, at the end)
        ndim = max(len(shape), self.nesting + len(self.slots))
        pad = ndim - len(shape)
        shape = (1,) * pad + shape
        here = []  # the marginalized sites along the value's dims, by slot
        for k, size in enumerate(shape):
            d = k - ndim
            if d >= -self.nesting:
                if size == 1:
                    continue
                p = open_at.get(d)
                if p is None or p.size != size:
                    # (independent terms along a dim no plate declares: their sum)
                    value = np.sum(value, axis=k - pad, keepdims=True)
                    continue
                kept_plates.add(p)
                continue
            holder = self.slots[self._slot_of(d)] if self._slot_of(d) < len(self.slots) \
                else None
            if size == 1:
                continue
            if holder is None or holder.name not in names or holder.size != size:
                raise EstimatorError(
                    f"{_what(name)} has size {size} at dim {d}, left of the plates' dims "
                    f"(-1 to -{self.nesting}), where the values of marginalized sites lie, "
                    "but it does not depend on the site there" + (
                        f" ({holder.name!r})" if holder is not None else "") +
                    ": declare that dimension with scg.plate, or sum it in the term")
            here.append(holder)
        lost = sorted(names - {s.name for s in here})
        lost = [u for u in lost if self.sites[u].size > 1]
        if lost:
            u = self.sites[lost[0]]
            raise EstimatorError(
                f"{_what(name)} depends on the marginalized site {u.name!r} but has no dim of "
                f"its values (dim {-(self.nesting + 1 + u.slot)}, of size {u.size}); its shape "
                f"is {tuple(R.shape(log_value))}. Either a sum or another reduction over all "
                "axes combined the values of the site (reduce only the plates' dims you mean, "
                "axis=-1, ..., or leave the term per element inside its scg.plate), or the "
                "values met a dim of the family's own there, as `z * np.ones(K)` does: index "
                f"a table by the values (scg.take(table, {u.name}) or table[{u.name}]) or "
                "give them a dim of their own (z[..., None])")
        # to the factor's layout: the sites' dims as they lie (the others left of the plates'
        # dims have size 1 and go), then the plates' dims
        plate_shape = ((1,) * pad + tuple(R.shape(value)))[ndim - self.nesting:]
        layout = tuple(s.size for s in here) + plate_shape
        target = tuple(s.size for s in here) + tuple(
            _plate_size(open_at.get(d), kept_plates) for d in range(-self.nesting, 0))
        # a term given inside a plate it does not vary along stands once for the plate
        scale = math.prod(p.scale for p in plates if p not in kept_plates)
        names = tuple(s.name for s in here)
        if tuple(R.shape(value)) != layout:
            if target == layout and scale == 1.0:  # (reshaped when asked for: Factor)
                self.factors.append(Factor(value, names, frozenset(kept_plates), name,
                                           layout=layout))
                return
            value = np.reshape(value, layout)
        if tuple(R.shape(value)) != target:
            value = np.broadcast_to(value, target)
        if scale != 1.0:
            value = np.multiply(value, scale)
        self.factors.append(Factor(value, names, frozenset(kept_plates), name))

    def explain(self):
        """Lines for Trace.explain(): the sites summed out and the terms they weigh."""
        lines = []
        terms = [f.term for f in self.factors if f.term not in self.sites]
        for site in self.sites.values():
            where = f" in plate {', '.join(p.name for p in site.plates)}" if site.plates else ""
            chain = (f", step {site.chain[1]} of a scg.markov chain (history "
                     f"{site.chain[0].history})") if site.chain else ""
            lines.append(f"  {site.name} ~ {site.dist!r}{where}: marginalized, summed out of "
                         f"the likelihood over its {site.size} values{chain}; no draw, no "
                         "variance")
        lines.append(f"  their likelihood terms: {', '.join(terms) or 'none'} (kept out of "
                     f"the costs; the cost {MARGINAL_COST!r} is -log of their sum over the "
                     "marginalized sites' values, exactly)")
        return lines

    # ------------------------------------------------------------ the end of the run
    def finish(self):
        """The run's log-likelihood with the marginalized sites summed out (a PerSample or
        a plain scalar per draw); MemoryError, before any work, if a table it needs is
        too large."""
        _plan_elimination(self.factors, self.sites, self.run.rows)
        log_z = contract(self.factors, self.sites)
        # (the model's operations are over: what they shared need not outlive the run)
        self.reuse.clear()
        self._tables.clear()
        self._values.clear()
        if isinstance(log_z, PerSample):
            deps = log_z.deps
            keep = frozenset(self.sites)
            log_z = PerSample(log_z.value, log_z.level,
                              Deps(deps.up - keep, deps.smooth - keep, deps.rough - keep))
        return log_z


def _plate_size(p, kept):
    return p.size if p is not None and p in kept else 1


def _what(name):
    return f"the likelihood term {name!r}"


# ---------------------------------------------------------------------- contraction
def _order(sites, names):
    return sorted(names, key=lambda k: sites[k].order)


def _plan_elimination(factors, sites, rows):
    """Raise MemoryError, before any work, if the elimination would build a table above
    MAX_ELEMENTS (rows x the sites' sizes x the plates' sizes)."""
    pool = [(frozenset(f.names), f.plates) for f in factors]
    for plates, local, groups in _schedule(pool, sites):
        for names in groups:
            size = rows * math.prod(sites[k].size for k in names) * \
                math.prod(p.size for p in plates)
            if size > MAX_ELEMENTS:
                layout = " x ".join([f"{rows} draws"] + [
                    f"{sites[k].size} ({k})" for k in _order(sites, names)] + [
                    f"{p.size} ({p.name})" for p in sorted(plates, key=lambda p: p.dim)])
                raise MemoryError(
                    f"summing out the marginalized sites needs a table of {layout} = "
                    f"{size:,} entries at once (over {MAX_ELEMENTS:,}): these sites meet in "
                    "common likelihood terms. Declare independent elements with scg.plate, "
                    "a chain with scg.markov, or draw some of the sites instead (scg.Score(), "
                    "scg.Enumerate())")


def _schedule(pool, sites):
    """Simulate the elimination on the factors' (names, plates): yield, per set of plates
    processed, (plates, the sites summed there, the name sets of the tables built)."""
    pool = list(pool)
    while True:
        deepest = max((len(p) for _, p in pool), default=0)
        at = [f for f in pool if len(f[1]) == deepest]
        plates = at[0][1] if at else frozenset()
        group = [f for f in pool if f[1] == plates]
        rest = [f for f in pool if f[1] != plates]
        local = _order(sites, {k for names, _ in group for k in names
                               if frozenset(sites[k].plates) == plates})
        built = []
        names_left = [names for names, _ in group]
        if _chain_layout([names for names, _ in group], local, sites) is not None:
            # (the forward algorithm: the tables of the pairs of neighbours, one by one)
            built = [frozenset(local[i:i + 2]) for i in range(len(local))]
            names_left = [x for x in names_left if not x] + [frozenset()]
            local = []
        for v in local:
            touched = [x for x in names_left if v in x]
            union = frozenset().union(*touched)
            built.append(union)
            names_left = [x for x in names_left if v not in x] + [union - {v}]
        yield plates, local, built
        if not plates:
            return
        for names in names_left:
            target = frozenset().union(*[frozenset(sites[k].plates) for k in names]) \
                if names else frozenset()
            rest.append((names, target))
        pool = rest


def contract(factors, sites):
    """log sum over the marginalized sites of exp(sum of the factors), summed over the
    plates: each set of plates from the deepest out, its own sites eliminated in the order
    they were drawn, then its elements' logs added (times a subsampled plate's scale)."""
    pool = list(factors)
    total = 0.0
    while pool:
        deepest = max(len(f.plates) for f in pool)
        plates = next(f.plates for f in pool if len(f.plates) == deepest)
        group = [f for f in pool if f.plates == plates]
        pool = [f for f in pool if f.plates != plates]
        local = _order(sites, {k for f in group for k in f.names
                               if frozenset(sites[k].plates) == plates})
        chain = _as_chain(group, local, sites)
        if chain is not None:  # (the forward algorithm in one primitive)
            group, local = chain, []
        for v in local:
            touched = [f for f in group if v in f.names]
            group = [f for f in group if v not in f.names]
            group.append(_eliminate(touched, v, sites, plates))
        for f in group:
            target = frozenset().union(*[frozenset(sites[k].plates) for k in f.names]) \
                if f.names else frozenset()
            value = f.value
            for p in sorted(plates - target, key=lambda p: p.dim):
                value = np.sum(value, axis=p.dim, keepdims=True)  # (the plates' dims are last)
                if p.scale != 1.0:
                    value = np.multiply(value, p.scale)
            if not f.names and not target:
                total = np.add(total, np.sum(value))
            else:
                pool.append(Factor(value, f.names, target))
    return total


def _as_chain(group, local, sites):
    """If the sites `local` form a chain in the factors `group` (each factor over one site
    or two consecutive ones, every site of one size), the factors with the chain summed out
    by the forward algorithm (`chain_log_partition`); else None."""
    layout = _chain_layout([f.names for f in group], local, sites)
    if layout is None:
        return None
    # (the factors sorted out first, added only once the chain is known: no operation is
    # spent on a structure the general elimination then takes)
    places, flipped = layout
    unary, pairs, rest = [[] for _ in local], [[] for _ in local[1:]], []
    for f, place in zip(group, places):
        if place is None:
            rest.append(f)
        else:
            (unary if place[0] == "unary" else pairs)[place[1]].append(f)
    k = sites[local[0]].size
    plate_shape = _layout(pairs[0][0])[2:]
    zero = np.zeros((k,) + plate_shape)
    u = _steps([_summed(v) if v else zero for v in unary], [False] * len(unary),
               (k,) + plate_shape)
    p = _steps([_summed(v) for v in pairs], flipped, (k, k) + plate_shape)
    lead = len(plate_shape)
    u = np.transpose(u, tuple(range(2, 2 + lead)) + (0, 1))
    p = np.transpose(p, tuple(range(3, 3 + lead)) + (0, 1, 2))
    plates = group[0].plates
    return rest + [Factor(chain_log_partition(u, p), (), plates)]


def _chain_layout(names_of, local, sites):
    """Where the factors over the sites `names_of` (each in the order of its axes) lie in a
    chain of the sites `local`: per factor None (over no site), ("unary", i) or ("pair", i)
    (between sites i and i + 1), and per pair whether its axes are (later site, earlier
    site); None when they are no chain (a factor over other sites or non-neighbours, a pair
    without a factor, sites of other sizes, fewer than three sites)."""
    if len(local) < 3 or len({sites[k].size for k in local}) != 1:
        return None
    at = {k: i for i, k in enumerate(local)}
    places, flipped = [], [None] * (len(local) - 1)
    for names in names_of:
        where = [at.get(k) for k in names]
        if not names:
            places.append(None)
        elif len(where) == 1 and where[0] is not None:
            places.append(("unary", where[0]))
        elif len(where) == 2 and None not in where and abs(where[1] - where[0]) == 1:
            i = min(where)
            if flipped[i] is not None and flipped[i] != (where[0] > where[1]):
                return None  # (two terms of a pair in both orders: the general elimination)
            flipped[i] = where[0] > where[1]
            places.append(("pair", i))
        else:
            return None
    if None in flipped:  # (two chains, or none: the general elimination)
        return None
    return places, flipped


def _layout(f):
    return f.layout if f.layout is not None else tuple(R.shape(f.raw))


def _summed(factors):
    """The sum of a chain position's factors: the raw value of a single one (its layout
    comes with the stack), else the sum of their values."""
    if len(factors) == 1:
        return factors[0].raw
    return functools.reduce(np.add, [f.value for f in factors])


def _steps(tables, flipped, shape):
    """The chain's tables, each of `shape` up to axes of size 1, stacked along a first axis
    in that shape, table i with its first two axes swapped where flipped[i]. A table that
    several steps share (the same value: a transition computed once, reuse.py) is stacked
    once and taken for each of its steps by one index, and the tables of one shape are
    reshaped together, so the operations, and those of the backward pass, grow with the
    chain's length by its distinct tables only."""
    distinct, index, at = [], [], {}
    for table, flip in zip(tables, flipped):
        key = (id(table.value if isinstance(table, PerSample) else table), flip)
        j = at.get(key)
        if j is None:
            j = at[key] = len(distinct)
            distinct.append((table, flip))
        index.append(j)
    kinds = {}  # the distinct tables by the shape they have
    for j, (table, _) in enumerate(distinct):
        kinds.setdefault(tuple(R.shape(table)), []).append(j)
    parts, order = [], []
    for raw, members in kinds.items():
        part = np.stack([distinct[j][0] for j in members], axis=0)
        if raw != shape:
            part = np.reshape(part, (len(members),) + shape)
        parts.append(part)
        order += members
    out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    flips = [distinct[j][1] for j in order]
    if any(flips):  # (one swap of the stack, not one per table)
        mask = np.array(flips).reshape((len(order),) + (1,) * (len(R.shape(out)) - 1))
        out = np.where(mask, np.swapaxes(out, 1, 2), out)
    row = {j: i for i, j in enumerate(order)}
    index = [row[j] for j in index]
    if index != list(range(len(order))):
        out = out[np.array(index)]
    return out


def _eliminate(factors, v, sites, plates):
    """Sum site v out of the factors that depend on it: the log of the sum over its values
    of the exponential of their sum."""
    names = tuple(_order(sites, set().union(*[f.names for f in factors])))
    total = None
    for f in factors:
        value = _aligned(f, names)
        total = value if total is None else np.add(total, value)
    k = names.index(v)
    out = R.logsumexp(total, axis=k)
    return Factor(out, names[:k] + names[k + 1:], plates)


def _aligned(f, names):
    """The factor's value with its sites' axes in the order of `names`, and an axis of size
    1 for each site of `names` it lacks."""
    if f.names == names:
        return f.value
    value = f.value
    mine = [k for k in names if k in f.names]
    if mine != list(f.names):
        lead = len(f.names)
        perm = [f.names.index(k) for k in mine]
        value = np.transpose(value, tuple(perm) + tuple(range(lead, len(R.shape(value)))))
    shape = tuple(R.shape(value))
    plate_shape = shape[len(mine):]
    sizes = dict(zip(mine, shape))
    return np.reshape(value, tuple(sizes.get(k, 1) for k in names) + plate_shape)


# ---------------------------------------------------------------------- the model's API
def markov(iterable, history=1):
    """Iterate over `iterable` as the steps of a chain of marginalized sites.

    The sites drawn at step t may depend on those of the `history` steps before it only,
    as Pyro's `pyro.markov`: scg then reuses the dims of older steps' sites, so a chain of
    any length is summed by the forward algorithm (T x K^(history + 1) work). A value that
    depends on a site older than that is refused with an error, never summed wrongly.

    Args:
        iterable: the steps (a range, a list, ...).
        history: how many earlier steps a step's sites may depend on (1: a Markov chain).
    Returns:
        A generator over the items of `iterable`.

    Example:
        >>> z = 0
        >>> for t in scg.markov(range(len(data))):
        ...     z = scg.sample(f"z{t}", scg.Categorical(trans[z]), estimator=scg.Marginalize())
        ...     scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])
    """
    if isinstance(history, bool) or not isinstance(history, (int, np.integer)) or history < 0:
        raise ValueError(f"scg.markov: history must be a non-negative int (how many earlier "
                         f"steps a step depends on), got {history!r}")
    chain = Chain(int(history))
    _send("scg.markov(...)", effects.Message("markov", None, chain=chain, step=None))
    try:
        for step, item in enumerate(iterable):
            chain.step = step
            yield item
    finally:
        chain.open = False
        effects.send(effects.Message("markov", None, chain=chain, step="close"))


def factor(name, log_value):
    """Add a log-likelihood term to the model: its cost is -log_value, summed over its shape.

    Downstream of sites summed out with scg.Marginalize(), a factor is a term of the
    log-likelihood that the sum runs over (as Pyro's `pyro.factor`); elsewhere it is the
    cost -log_value.

    Args:
        name: unique within the model.
        log_value: a log-density or log-potential (per element inside a scg.plate).

    Example:
        >>> scg.factor("prior", -0.5 * theta ** 2)
    """
    if effects.innermost() is None:
        current_run(f"scg.factor({name!r}, ...)")  # (raises: outside a model)
    _send(f"scg.factor({name!r}, ...)",
          effects.Message("cost", name, value=np.negative(log_value), likelihood=log_value))


def open_chain(run, msg):
    """Perform a "markov" message: a scg.markov loop starts (or ends) in `run`."""
    chain = msg.fields["chain"]
    m = marginal_of(run)
    if msg.fields["step"] == "close":
        if m.chains and m.chains[-1] is chain:
            m.chains.pop()
        return None
    m.chains.append(chain)
    return None


def marginal_of(run):
    """The run's Marginal (made on first use)."""
    m = getattr(run, "marginal", None)
    if m is None:
        m = run.marginal = Marginal(run, run.plan if run.plan is not None else {})
    return m


def refuse_downstream(run, what, deps_up):
    """Raise if a drawn site's parameters or a cost depend on a marginalized site."""
    m = getattr(run, "marginal", None)
    if m is None:
        return
    bad = sorted(frozenset(deps_up) & m.sites.keys(), key=lambda k: m.sites[k].order)
    if bad:
        raise EstimatorError(
            f"{what} depends on the marginalized site {bad[0]!r}: downstream of a site summed "
            "out with scg.Marginalize(), only log-likelihood terms may depend on it (obs= "
            "sites, scg.factor), whose sum scg computes exactly. Marginalize the site "
            "downstream too, or draw the upstream site (scg.Enumerate(), scg.Score())")


__all__ = ["factor", "markov"]
