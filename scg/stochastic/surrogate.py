"""The surrogate objective of a trace: a pure function of it.

It is written in the DiCE form (Foerster et al. 2018): every cost c is
multiplied by box(tau_c), where tau_c sums the log-probabilities of the score
sites upstream of c and box(t) = exp(t - stop_gradient(t)) equals 1. Its
gradient is the surrogate gradient of Schulman et al. (2015): pathwise and
direct terms, plus grad log p(w) times the costs downstream of w only; its
higher derivatives stay unbiased. When only first derivatives are taken, the
equivalent and cheaper form of Schulman et al. is built instead.

What each site adds is its estimator's business (`scg.estimators.Estimator`):
this module lays the costs out and hands each estimator a `SurrogateContext`.

Plates: every per-element quantity is laid out on a canonical grid
(rows, *plate axes), one axis per plate (size 1 where absent), so that element
b of a site meets only the costs of element b. Copies (`copies.py`): row
c * n + i is copy c of draw i; a cost's rows are weighted by the copying sites'
weights, and each draw's estimate is the sum over its copies.
"""

import numpy as np

from ..core import effects
from ..core.tape import Box, rows_placed, strip
from ..errors import EstimatorError
from ..estimators.baselines import warn_if_own_draw_counts
from ..estimators.enumerate import Enumerate
from ..estimators.terms import magic_box
from ..numpy import rules as R
from ..distributions.base import family_of
from .copies import merge_rows, split_rows
from .persample import PerSample, lift
from .site_states import baseline_of, estimator_of


def surrogate(trace, states):
    """The surrogate objective (a scalar, traced where the parameters are) and the
    baseline updates to apply after the call: a list of (site name, baseline, q, state).
    `states` are the expectation's SiteStates: each site's baseline and estimator state,
    and whether its baseline was checked not to use its own draw's cost."""
    ctx = SurrogateContext(trace, states)
    return ctx.objective(), ctx.updates


def _placed(g, shape, nf, own, slots, context, positions):
    """The rows (rows, *rest) of zeros of `shape` (*blocks, n, *rest) with g, laid out as q
    lays it out (n, *contexts, *own copies, *rest), on its blocks: the contexts' blocks,
    the own copies' slots, block 0 of every other factor (`positions`: the tuples of
    blocks the run holds, see copies.py)."""
    kept = list(context) + ([own] if own is not None else [])
    # g's axes in the order of the blocks, a unit axis for each other factor
    x = np.moveaxis(g, 0, len(kept))  # (*contexts, *own, n, *rest)
    order = sorted(range(len(kept)), key=lambda i: kept[i])
    x = np.transpose(x, order + list(range(len(kept), x.ndim)))
    at = sorted(kept)
    full_shape = tuple(x.shape[at.index(f)] if f in at else 1 for f in range(nf)) + x.shape[
        len(kept):]
    x = np.reshape(x, full_shape)
    full = np.zeros(shape)
    index = [slice(0, 1)] * nf
    for f in context:
        index[f] = slice(None)
    if own is not None:
        index[own] = np.asarray(slots)
    full[tuple(index)] = x
    return merge_rows(full, shape[:nf], positions)


def _require_one_number(term, site):
    """An estimator's term is one number: its part of the surrogate, already averaged
    over the draws (a hand-written estimator's mistake, named before it broadcasts)."""
    per_draw = isinstance(term, PerSample)
    shape = tuple(R.shape(term))
    if not per_draw and shape == ():
        return
    what = f"one value per draw, of shape {shape}" if per_draw else f"of shape {shape}"
    raise EstimatorError(
        f"site {site.name!r}: the term of estimator {site.estimator!r} is {what}; a term is "
        "one number, the site's part of the surrogate already averaged over the n draws "
        "and summed over the site's elements (shape ()). scg.estimators.linear_term("
        "log_prob, weights, 1.0 / ctx.n) builds one; or sum the array and divide by ctx.n")


class SurrogateContext:
    """What an estimator builds its surrogate terms from.

    Attributes: `trace`, `n` (draws), `copies`, `first_order` (only first derivatives are
    taken: the Schulman form; otherwise the DiCE form), `updates` (baseline updates).
    """

    def __init__(self, trace, states):
        self.trace = trace
        self.n = trace.n
        self.copies = trace.copies
        plates = [p for s in trace.sites.values() for p in s.plates] + \
            [p for c in trace.cost_sites.values() for p in c.plates]
        self.grid = _Grid(trace.rows, plates)
        self.costs = {c.name: self.grid.cost(c) for c in trace.cost_sites.values()}
        self._states = states  # (the expectation's SiteStates)
        self._log_probs = {}
        self._tails = {}  # (sums of costs downstream: see _tail_sum)
        self._weights = {}
        self._by_layout = set()  # (the copying sites weighted by the layout alone)
        self.updates = []
        levels = set()
        for v, _ in self.costs.values():
            levels |= _levels(v)
        for s in trace.sites.values():
            if not s.estimator.differentiable:
                for v in s.dist_params():
                    levels |= _levels(v)
        self.first_order = len(levels) <= 1

    # ------------------------------------------------------------ for estimators
    def log_prob(self, site):
        """log p(value | parents) of the site on the grid (rows, *plate axes), traced."""
        got = self._log_probs.get(site.name)
        if got is None:
            got = self.grid.layout(site.log_prob(), site.dist.batch_shape, site.plates,
                                   f"site {site.name!r}")
            self._log_probs[site.name] = got
        return got

    def has_downstream(self, site):
        return bool(self.trace.downstream_costs(site))

    def q(self, site):
        """The costs downstream of the site, plain, per draw and element: shape
        (n, *blocks of the factors with copying sites upstream of it, *its own copies if it
        has copies, *the site's plate axes). Its own copies are the branches of its factor
        (copy 0 the main run); the factors it does not depend on are summed with their
        weights (see copies.py)."""
        copies, grid = self.copies, self.grid
        down = self._summed(site) if copies else ()
        weigh = (lambda c, value, plates: self._weighted(c, value, plates, down, plain=True)) \
            if copies else None
        total = self._tail_sum(site, self.trace.downstream_costs(site), weigh)
        # (the layout of the site's log-probability, without computing it: an estimator
        # whose copies hold values outside the support asks for q too)
        shape = grid.shape_of(self.trace.rows, site.dist.batch_shape, site.plates)
        total = np.broadcast_to(effects.asarray(0.0 if total is None else total, dtype=float),
                                shape)
        if not copies:
            return total
        own, slots, context = self._branches(site)
        return effects.opaque(_grouped, total, tuple(copies.blocks), own, slots, context,
                           tuple(down), copies.positions())

    def _tail_sum(self, site, down, weigh=None):
        """The sum of the costs `down` (plain, each through `weigh(cost, value, plates)`
        if given: the copies' weights for this site), on the site's grid, from the last one
        back. The sites of a loop of T steps have nested lists of costs downstream, each the
        tail of the one before (or after): every partial sum of unweighted costs outside
        plates is kept, under its first cost and its length, so that the whole loop takes
        T additions, not T^2 / 2."""
        n = len(down)
        if not n:
            return None
        tails, costs = self._tails, self.costs
        total, k = None, n
        shared = weigh is None  # (a weighted cost, or one in a plate laid out for this
        # site, is this site's alone)
        for start in (0, 1) if shared else ():  # (this site's list, or all but its first)
            got = tails.get((id(down[start]), n - start)) if start < n else None
            # (costs compare by their names first, which differ: never their values)
            if got is not None and got[1][got[2]:] == down[start:]:
                total, k = got[0], start
                break
        for i in range(k - 1, -1, -1):
            c = down[i]
            value, plates = costs[c.name]
            value = strip(value)
            if weigh is not None:
                value = weigh(c, value, plates)
            if plates:  # (a cost outside every plate is on the grid as it is)
                value = self.grid.onto(value, plates,
                                       _shared(site.plates, c.plates_for(site.name)))
                shared = False
            total = value if total is None else value + total
            if shared:
                tails[(id(c), n - i)] = (total, down, i)
        return total

    def downstream(self, site):
        """The costs downstream of the site, traced, per row and element, on the site's
        batch layout (rows, *batch: its plates' sizes at their dims, 1 elsewhere): for
        an estimator's probe (scg/stochastic/tuning.py), whose site is the only one
        copying the run."""
        grid, total = self.grid, None
        for c in self.trace.downstream_costs(site):
            value, plates = self.costs[c.name]
            value = grid.onto(value, plates, _shared(site.plates, c.plates_for(site.name)))
            total = value if total is None else R.add(total, value)
        shape = grid.shape_of(self.trace.rows, site.dist.batch_shape, site.plates)
        total = R.broadcast_to(0.0 if total is None else total, shape)
        return R.reshape(total, np.shape(self.to_batch(np.empty(shape), site)))

    def spread(self, g, site, traced=False):
        """The inverse of q's layout: a per-draw array of q's shape back on the site's grid
        rows (on the main block of the factors q summed, zero on their other blocks),
        weighted by the factors of the copying sites upstream of the site."""
        copies = self.copies
        if not copies:
            return g
        own, slots, context = self._branches(site)
        shape = tuple(copies.blocks) + (copies.n,) + g.shape[1 + len(context) +
                                                              (own is not None):]
        out = effects.opaque(_placed, g, shape, len(copies.blocks), own, slots, context,
                             copies.positions())
        for f in context:
            ups = [e for e in copies.factors[f] if e in site.param_deps.up]
            for e in ups:
                wide = self._wider(self.weight(e), site.plates)
                if wide:
                    raise EstimatorError(
                        f"site {site.name!r} is outside plate {', '.join(wide)} but depends on "
                        f"site {e!r}, whose copies take its values element by element there: "
                        f"the draws of {site.name!r} would never see other combinations of "
                        f"those elements. Draw {site.name!r} inside the plate (per element), "
                        f"or {e!r} outside it, or use another estimator at {e!r}")
            out = R.multiply(out, self._factor_weight(f, ups, traced))
        return out

    def weight(self, name):
        """The weight of each row's costs for copying site `name`, on the grid: its
        estimator's, or 1 on its copy 0 (the main run) and 0 on the others."""
        got = self._weights.get(name)
        if got is None:
            site = self.trace.sites[name]
            got = site.estimator.weight(site, self)
            if got is None:
                got = self.copies.first([name])
                self._by_layout.add(name)
            if np.ndim(strip(got)) == 1:
                got = R.reshape(got, (-1,) + (1,) * len(self.grid.plates))
            self._weights[name] = got
        return got

    def own_axis(self, site):
        """The axis of q (and of what spread takes) along which a copying site's own
        copies lie."""
        return 1 + len(self._contexts(site))

    def own(self, site, values):
        """Per-draw values of a copying site's own copies, as q lays them out: the slices
        of `values` (of q's shape) at the site's copy indices k = 0, 1, ..."""
        axis = self.own_axis(site)
        return [np.take(values, k, axis=axis) for k in range(values.shape[axis])]

    def _own_factor(self, site):
        return self.copies.factor(site.name) if site.name in self.copies.names else None

    def _branches(self, site):
        """(the site's own factor or None, the blocks of its copies there, its contexts):
        where q takes the site's rows from and spread puts them back."""
        own = self._own_factor(site)
        slots = self.copies.slots(site.name) if own is not None else None
        return own, slots, tuple(self._contexts(site))

    def _contexts(self, site):
        """The factors, other than the site's own, that hold a copying site upstream of it:
        q keeps their blocks."""
        own = self._own_factor(site)
        return [f for f, names in enumerate(self.copies.factors) if f != own and
                any(e in site.param_deps.up for e in names)]

    def _summed(self, site):
        """The factors that q sums over: neither the site's own nor a context."""
        own, context = self._own_factor(site), self._contexts(site)
        return [f for f in range(len(self.copies.factors)) if f != own and f not in context]

    def _factor_weight(self, f, ups, traced=True):
        """The weight of each row for factor f, for a cost (or term) downstream of its
        copying sites `ups`: 1 - sum_e (1 - w_e) on the main block, w_e on e's copies, 0
        on the copies of the factor's other sites (their branches leave the cost as it
        is in the main run). Unbiased whenever each w_e is (weights of each site's copies
        that sum to 1, or an exact sum)."""
        copies = self.copies
        if not ups:
            return np.reshape(copies.main(f), (-1,) + (1,) * len(self.grid.plates))
        weights = [self.weight(e) if traced else strip(self.weight(e)) for e in ups]
        if len(ups) == 1 and len(copies.factors[f]) == 1:
            return weights[0]  # (every row of the factor is a copy of the site)
        shape = (-1,) + (1,) * len(self.grid.plates)
        main = copies.main(f)
        total = None
        for e, w in zip(ups, weights):
            rows = np.reshape(main + (copies.index(e) > 0), shape)
            term = R.multiply(w, rows)
            total = term if total is None else R.add(total, term)
        if len(ups) > 1:
            total = R.subtract(total, np.reshape(main * (len(ups) - 1), shape))
        return total

    def param(self, site, key):
        """The family's parameter `key` of the site, traced, of physical shape
        (rows, *batch_shape, *event part): shared values are broadcast to every row."""
        inner = family_of(site.dist)
        v = inner.params[key]
        c = inner.arg_constraints.get(key)
        event = R.shape(strip(v.value if isinstance(v, PerSample) else v))
        event = tuple(event[len(event) - c.event_dim:]) if c is not None and c.event_dim else ()
        full = (self.trace.rows,) + tuple(inner.batch_shape) + event
        if isinstance(v, PerSample):
            return R.broadcast_to(lift(v, len(full) - 1, v.level), full)
        return R.broadcast_to(v, full)

    def to_batch(self, x, site):
        """A grid array (rows, *plate axes) laid out on the site's batch dims
        (rows, *batch_shape): each plate axis of the site at its dim, size 1 elsewhere."""
        shape = tuple(family_of(site.dist).batch_shape)  # (to_event dims at its right)
        outer = len(site.dist.batch_shape)  # plates count their dims from its right
        target = [1] * len(shape)
        for p in site.plates:
            j = outer + p.dim
            if 0 <= j < outer and shape[j] == p.size:
                target[j] = p.size
        return np.reshape(x, (np.shape(x)[0],) + tuple(target))

    def baseline_state(self, name):
        """The state site `name`'s baseline keeps between calls (a dict)."""
        return baseline_of(self._states, name)

    def estimator_state(self, name):
        """The state site `name`'s estimator keeps between calls (a dict)."""
        return estimator_of(self._states, name)

    def check_baseline(self, name, baseline, q, state):
        """Warn once per site if the baseline uses each draw's own cost."""
        site_state = self._states.of(name)
        if not site_state.checked:
            site_state.checked = True
            site_state.own_cost = warn_if_own_draw_counts(baseline, q, state, name)
        if site_state.own_cost:  # (explain() says so, on every call)
            self.trace.sites[name].biased = True

    def update_baseline(self, name, baseline, q, state):
        self.updates.append((name, baseline, q, state))

    def upstream_tau(self, site):
        """The sum of the DiCE log-probabilities of the sites upstream of `site`, or None."""
        ups = [(u, u.estimator.dice_log_prob(u, self)) for u in self.trace.sites.values()
               if u.name in site.param_deps.up]
        ups = [(u, lp) for u, lp in ups if lp is not None]
        if not ups:
            return None
        # (element b of the site meets element b of an upstream site only where its
        # draw did not combine that site's elements)
        mixed = site.draw.mixed
        return sum_all(self.grid.onto(lp, u.plates, tuple(
            p for p in site.plates if (p, u.name) not in mixed)) for u, lp in ups)

    # ------------------------------------------------------------ the objective
    def objective(self):
        trace = self.trace
        total = None
        for c in trace.cost_sites.values():
            value, plates = self.costs[c.name]
            if not self.first_order:
                ups = [(s, s.estimator.dice_log_prob(s, self)) for s in trace.sites.values()
                       if s.name in c.deps.up]
                ups = [(s, lp) for s, lp in ups if lp is not None]
                if ups:
                    tau = sum_all(self.grid.onto(lp, s.plates, c.plates_for(s.name))
                                  for s, lp in ups)
                    value = R.multiply(magic_box(tau), value)
            rows = self._live_rows(c, value) if self.first_order and self.copies else None
            if rows is not None:  # (its derivative is taken on those rows only)
                value = R.take_rows(value, rows.start, rows.stop)
            value = self._weighted(c, value, plates, rows=rows)
            value = self.grid.per_draw(value)
            if rows is not None:
                value = rows_placed(value, rows.start, rows.stop, (trace.rows,))
            total = value if total is None else R.add(total, value)
        for s in trace.sites.values():
            if not self.first_order:
                term = s.estimator.dice_term(s, self)
                if term is not None:
                    term = self.grid.per_draw(term)
                    total = term if total is None else R.add(total, term)
        if total is None:
            objective = 0.0
        elif self.copies:
            objective = R.multiply(R.sum_(total), 1.0 / self.n)
        else:
            objective = R.mean(total) if np.ndim(strip(total)) else total
        if self.first_order:
            for s in trace.sites.values():
                term = s.estimator.term(s, self)
                if term is not None:
                    _require_one_number(term, s)
                    objective = R.add(objective, term)
        return objective

    def _weighted(self, c, value, plates, factors=None, plain=False, rows=None):
        """A cost on the grid times the weights of the factors `factors` of the layout (all
        of them by default) for the copying sites upstream of it, traced or `plain`; on the
        grid's `rows` only (a slice) if given."""
        copies = self.copies
        if not copies:
            return value
        for f in range(len(copies.factors)) if factors is None else factors:
            ups = [e for e in copies.factors[f] if e in c.deps.up]
            for e in ups:
                wide = self._wider(self.weight(e), c.plates_for(e))
                if wide:
                    raise EstimatorError(_mixed_weights_message(c.name, wide, e,
                                                                self.trace.sites[e].estimator))
            # (a shared cost, of one row, is counted once per draw too)
            w = self._factor_weight(f, ups, traced=not plain)
            value = R.multiply(value, w if rows is None else w[rows])
        return value

    def _live_rows(self, c, value):
        """The rows start:stop (a slice) off which every weight of cost c is zero by the
        layout of the copies alone, when they are at most half the rows, else None. Those
        rows carry c's whole part of the objective: the copies of a site whose estimator
        takes their costs as values only (scg.IndeCateR) weigh zero, and the derivative of
        the model on their rows need not be taken (scg/core/tape.py, `Rows`). Weights an
        estimator computes are not looked into, plain or not: where they are zero depends
        on the values (probabilities that underflow), which scg.jit's recording holds
        without reading them, and a replay must take the derivative on the rows the eager
        call takes it on, to round as it does."""
        n_rows = self.trace.rows
        if R.shape(value)[:1] != (n_rows,):
            return None
        copies, live = self.copies, np.ones(n_rows, dtype=bool)
        for f in range(len(copies.factors)):
            ups = [e for e in copies.factors[f] if e in c.deps.up]
            if any(R.shape(self.weight(e))[:1] != (n_rows,) for e in ups):
                return None  # (a weight shared by the rows: not cut with them)
            live &= self._may_weigh(f, ups)
        at = np.flatnonzero(live)
        if not len(at) or 2 * (at[-1] + 1 - at[0]) > n_rows:
            return None
        return slice(int(at[0]), int(at[-1]) + 1)

    def _may_weigh(self, f, ups):
        """The rows (a mask) on which factor f's weight for a cost downstream of its
        copying sites `ups` (`_factor_weight`) may be nonzero, by the layout alone: the
        main block, and the copies of the sites among `ups` whose estimator computes
        their weights; not the copies of the sites weighted by the layout (`weight`: 0
        off their copy 0), nor those of the factor's other sites."""
        copies = self.copies
        live = copies.main(f) != 0
        for e in ups:
            if e not in self._by_layout:
                live |= copies.index(e) > 0
        return live

    def _wider(self, w, plates):
        """The names of the plates along which a weight varies but that are not `plates`."""
        return [p.name for p in self.grid.plates
                if np.shape(strip(w))[self.grid.axis(p)] > 1 and p not in plates]


def _grouped(total, blocks, own, slots, context, summed, positions):
    """q's layout from the rows of `total` (rows, *rest): the summed factors summed, the
    site's own copies taken from its factor, then (n, *contexts, *own copies, *rest)
    (zeros at the tuples of blocks the run does not hold: see copies.py)."""
    nf = len(blocks)
    s = split_rows(total, blocks, positions)
    if summed:
        s = s.sum(axis=summed, keepdims=True)
    if own is not None:
        s = np.take(s, list(slots), axis=own)
    order = [nf] + list(context) + ([own] if own is not None else [])
    rest = list(range(nf + 1, s.ndim))
    dropped = [f for f in range(nf) if f not in order]
    s = np.transpose(s, order + dropped + rest)
    return np.reshape(s, s.shape[:len(order)] + s.shape[len(order) + len(dropped):])


def _levels(x):
    """The trace levels x is boxed at: more than one in all values means derivatives of
    higher order (or mixed ones) are taken, which the DiCE form gets right."""
    levels = set()
    if isinstance(x, PerSample):
        x = x.value
    while isinstance(x, Box):
        levels.add(x.level)
        x = x.value
    return levels


def _shared(plates, others):
    return tuple(p for p in plates if p in others)


def sum_all(terms):
    terms = list(terms)
    out = terms[0] if terms else 0.0
    for t in terms[1:]:
        out = R.add(out, t)
    return out


class _Grid:
    """Lays out costs and log-probabilities on the canonical (n, *plate axes) grid: one
    axis per plate, so that two plates at the same dim (one after the other) stay apart.
    The axes are ordered by dim, the order in which plates appear in any value's shape."""

    def __init__(self, n, plates):
        self.n = n
        self.plates = sorted(set(plates), key=lambda p: (p.dim, p.name))
        self.index = {p: 1 + i for i, p in enumerate(self.plates)}

    def axis(self, plate):
        return self.index[plate]

    def layout(self, phys, logical_shape, plates, what):
        """Sum a site's physical (n, *logical) value over its non-plate axes, onto the
        grid: each of the site's plates at its dim (`_apply_plates` gave it that size)."""
        logical_shape = tuple(logical_shape)
        nd = len(logical_shape)
        at = {}
        for p in plates:
            if nd >= -p.dim and logical_shape[p.dim] == p.size:
                at[p] = nd + p.dim
            elif nd >= -p.dim and logical_shape[p.dim] != 1:
                raise ValueError(f"{what} has shape {logical_shape}, whose dim {p.dim} does "
                                 f"not match plate {p.name!r} of size {p.size}")
        return self.place(phys, nd, at)

    def shape_of(self, rows, logical_shape, plates):
        """The shape `layout` gives a site's value of `logical_shape` in `plates`."""
        logical_shape = tuple(logical_shape)
        nd = len(logical_shape)
        shape = [rows] + [1] * len(self.plates)
        for p in plates:
            if nd >= -p.dim and logical_shape[p.dim] == p.size:
                shape[self.axis(p)] = p.size
        return tuple(shape)

    def place(self, phys, nd, at):
        """Sum a physical (n, *logical) value of logical rank nd over every axis but the
        plates' (`at`: plate -> logical axis), and lay it out on the grid."""
        keep = {k: p for p, k in at.items()}
        axes = tuple(1 + i for i in range(nd) if i not in keep)
        if axes:
            phys = R.sum_(phys, axis=axes, keepdims=True)
        order = sorted(keep, key=lambda k: self.axis(keep[k]))
        if order != sorted(keep):  # (the value's plates in another order than the grid's)
            rest = [i for i in range(nd) if i not in keep]
            phys = R.transpose(phys, (0,) + tuple(1 + i for i in rest + order))
        shape = [np.shape(strip(phys))[0]] + [1] * len(self.plates)
        for p in at:
            shape[self.axis(p)] = p.size
        return R.reshape(phys, tuple(shape))

    def cost(self, c):
        """A cost on the grid, with the plates along whose axes it lies."""
        if isinstance(c.value, PerSample):
            phys, shape = c.value.value, c.value.shape
        else:
            shape = R.shape(c.value)
            phys = R.reshape(c.value, (1,) + shape)
        return self.place(phys, len(shape), dict(zip(c.plates, c.axes))), c.plates

    def onto(self, x, from_plates, to_plates):
        """Sum a grid array over the plates that the target does not have."""
        axes = tuple(self.axis(p) for p in from_plates if p not in to_plates)
        return R.sum_(x, axis=axes, keepdims=True) if axes else x

    def per_draw(self, x):
        """Sum over the plate axes: one number per draw."""
        axes = tuple(range(1, 1 + len(self.plates)))
        x = R.sum_(x, axis=axes) if axes else x
        return R.reshape(x, (-1,))


def _mixed_weights_message(cost, plates, site, estimator):
    """Why a cost that mixes a plate's elements cannot take the per-element weights of a
    site's copies, and what to do instead (by the site's estimator)."""
    where = (f"cost {cost!r} mixes the elements of plate {', '.join(plates)}, in which site "
             f"{site!r}")
    per_element = "compute the cost per element (inside the plate, without summing over it)"
    if isinstance(estimator, Enumerate):
        return (f"{where} is enumerated element by element; {per_element}, or draw the site "
                "outside the plate to enumerate its joint values")
    return (f"{where} is weighted element by element by {estimator!r}, whose weights need "
            f"a cost per element; {per_element}, or give the site an estimator that does not "
            "weight its values, such as scg.Score('loo')")
