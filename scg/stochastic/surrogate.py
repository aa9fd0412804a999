"""The surrogate objective of a trace: a pure function of it.

It is written in the DiCE form (Foerster et al. 2018): every cost c is
multiplied by box(tau_c), where tau_c sums the log-probabilities of the score
sites upstream of c and box(t) = exp(t - stop_gradient(t)) equals 1. Its
gradient is the surrogate gradient of Schulman et al. (2015): pathwise and
direct terms, plus grad log p(w) times the costs downstream of w only; its
higher derivatives stay unbiased. A baseline b_w enters as (1 - box(log p(w))) * b_w,
zero in value, subtracting grad log p(w) * b_w. When only first derivatives are
taken, the equivalent and cheaper form of Schulman et al. is built instead.

Plates: every per-element quantity is laid out on a canonical grid
(n, *plate axes), one axis per plate (size 1 where absent), so that element
b of a site meets only the costs of element b.
"""

import numpy as np

from ..core.tape import Box, Primitive, defvjp, read_only, strip
from ..estimators.baselines import warn_if_own_draw_counts
from ..numpy import rules as R
from .persample import PerSample


def magic_box(tau):
    """exp(tau - stop_gradient(tau)): 1 in value; its derivatives reproduce score terms."""
    return R.exp(R.subtract(tau, R.stop_gradient(tau)))


def surrogate(trace, baseline_state, checked):
    """The surrogate objective (a scalar, traced where the parameters are) and the
    baseline updates to apply after the call: a list of (site name, baseline, q, state).
    `checked` holds the sites whose baseline was checked not to use its own draw's cost."""
    plates = [p for s in trace.sites.values() for p in s.plates] + \
        [p for c in trace.cost_sites.values() for p in c.plates]
    grid = _Grid(trace.n, plates)
    costs = {c.name: grid.cost(c) for c in trace.cost_sites.values()}
    scores = trace.score_sites()
    log_probs = {s.name: grid.layout(s.log_prob(), s.dist.batch_shape, s.plates,
                                     f"site {s.name!r}") for s in scores}
    values = list(log_probs.values()) + [v for v, _ in costs.values()]
    first_order = len(set().union(*[_levels(v) for v in values])) <= 1
    # per score site: the advantage Q_w - b_w (first order) or the baseline b_w (DiCE)
    weights, updates = {}, []
    for w in scores:
        # costs-to-go per draw and element, as plain numbers: they carry no derivative
        q = sum_all(grid.onto(strip(costs[c.name][0]), costs[c.name][1], w.plates)
                    for c in trace.downstream_costs(w))
        # (a read-only view: a baseline must not change the costs)
        q = np.broadcast_to(np.asarray(q, dtype=float), np.shape(strip(log_probs[w.name])))
        if w.baseline is None:
            weights[w.name] = q if first_order else 0.0
            continue
        state = baseline_state.setdefault(w.name, {})
        weights[w.name] = weight = (w.baseline.advantage(q, state) if first_order
                                    else w.baseline.value(q, state))
        read_only(weight)
        if w.name not in checked:
            checked.add(w.name)
            warn_if_own_draw_counts(w.baseline, q, state, w.name)
        updates.append((w.name, w.baseline, q, state))
    if first_order:
        objective = _first_order(trace, grid, costs, log_probs, weights)
    else:
        objective = _dice(trace, grid, costs, log_probs, weights)
    return objective, updates


def _first_order(trace, grid, costs, log_probs, advantages):
    """Schulman et al.'s surrogate when only first derivatives are taken: the costs, plus
    a zero-valued term per score site whose gradient is grad log p(w) * (Q_w - b_w)."""
    total = sum_all(grid.per_draw(v) for v, _ in costs.values())
    objective = R.mean(total) if np.ndim(strip(total)) else total
    for w in trace.score_sites():
        if trace.downstream_costs(w):  # a site no cost depends on contributes nothing
            objective = R.add(objective, score_term(log_probs[w.name], advantages[w.name],
                                                    1.0 / trace.n))
    return objective


def _dice(trace, grid, costs, log_probs, baselines):
    """The DiCE form, unbiased for derivatives of every order (Foerster et al. 2018), with
    the baselines of Mao et al. (2019) and Farquhar et al. (2019)."""
    total = 0.0
    for c in trace.cost_sites.values():
        value, plates = costs[c.name]
        ups = trace.upstream_scores(c)
        if ups:
            tau = sum_all(grid.onto(log_probs[w.name], w.plates, plates) for w in ups)
            value = R.multiply(magic_box(tau), value)
        total = R.add(total, grid.per_draw(value))
    for w in trace.score_sites():
        if np.all(baselines[w.name] == 0.0):
            continue
        # (1 - box(log p(w))) b_w, weighted as in Loaded DiCE by the box of the score sites
        # upstream of w: zero in value and in expectation at every order, and it also
        # reduces the variance of the cross terms of higher derivatives
        term = R.multiply(R.subtract(1.0, magic_box(log_probs[w.name])), baselines[w.name])
        ups = [u for u in trace.score_sites() if u.name in w.param_deps.up]
        if ups:
            tau = sum_all(grid.onto(log_probs[u.name], u.plates, w.plates) for u in ups)
            term = R.multiply(magic_box(tau), term)
        total = R.add(total, grid.per_draw(term))
    return R.mean(total)


def _levels(x):
    """The trace levels x is boxed at: more than one in all values means derivatives of
    higher order (or mixed ones) are taken, which the DiCE form gets right."""
    levels = set()
    while isinstance(x, Box):
        levels.add(x.level)
        x = x.value
    return levels


score_term = Primitive(
    "score_term", lambda log_prob, weight, scale: 0.0,
    doc="0 in value; its derivative in log_prob is scale * weight (constants): score terms.")


def _score_term_vjp(g, ans, log_prob, weight, scale):
    c = R.multiply(g, scale)
    if type(c) in (float, np.float64) and c == 1.0:
        return weight  # scg.grad_samples seeds n against scale 1/n: no pass over the draws
    return R.multiply(c, weight)


defvjp(score_term, _score_term_vjp)


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
        """Sum a physical (n, *logical) value over its non-plate axes, onto the grid.
        Returns the array; plates absent from the value's shape are dropped."""
        logical_shape = tuple(logical_shape)
        nd = len(logical_shape)
        keep = {}
        for p in plates:
            if nd >= -p.dim and logical_shape[p.dim] == p.size:
                keep[nd + p.dim] = p
            elif nd >= -p.dim and logical_shape[p.dim] != 1:
                raise ValueError(f"{what} has shape {logical_shape}, whose dim {p.dim} does "
                                 f"not match plate {p.name!r} of size {p.size}")
        axes = tuple(1 + i for i in range(nd) if i not in keep)
        if axes:
            phys = R.sum_(phys, axis=axes, keepdims=True)
        shape = [np.shape(strip(phys))[0]] + [1] * len(self.plates)
        for p in keep.values():
            shape[self.axis(p)] = p.size
        return R.reshape(phys, tuple(shape))

    def cost(self, c):
        """A cost on the grid, with the plates it really has."""
        if isinstance(c.value, PerSample):
            phys, shape = c.value.value, c.value.shape
        else:
            shape = R.shape(c.value)
            phys = R.reshape(c.value, (1,) + shape)
        return self.layout(phys, shape, c.plates, f"cost {c.name!r}"), c.plate_split()[0]

    def onto(self, x, from_plates, to_plates):
        """Sum a grid array over the plates that the target does not have."""
        axes = tuple(self.axis(p) for p in from_plates if p not in to_plates)
        return R.sum_(x, axis=axes, keepdims=True) if axes else x

    def per_draw(self, x):
        """Sum over the plate axes: one number per draw."""
        axes = tuple(range(1, 1 + len(self.plates)))
        x = R.sum_(x, axis=axes) if axes else x
        return R.reshape(x, (-1,))
