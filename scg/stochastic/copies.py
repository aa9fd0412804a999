"""Copies of a model run: the downstream of a site evaluated at several of its values.

Some estimators need the part of the model downstream of a site at values other than one
draw: every value of a finite support (enumeration), the positive and negative parts of a
weak derivative, the antithetic half of a DisARM pair. Such a site's copies are
*branches* of the run: copy k of site s is the model evaluated with s at its k-th value,
the other copying sites at their main values (copy 0), and the same randomness downstream
(common random numbers). Sites whose copies are branches share one *factor* of the
layout: block 0 of a factor is the main run, then each site's copies 1, 2, ... in turn, so
T sites of c copies cost 1 + T (c - 1) evaluations, not c^T.

An exact sum over a site's values (`Estimator.copies_multiply`, scg.Enumerate()) needs the
copies of every copying site it meets in a common cost evaluated at each of its values:
such sites are put in different factors, and the factors multiply. Physical row
`b * n + i` is block b of draw i, where b counts the factors' blocks in mixed radix (the
first factor varies slowest). Upstream of a site every copy has the same values;
downstream, sites draw with the same randomness in every copy.

The layout is a handler of the effect stack, outside the run of the model (`CopyLayout`):
a site asks it for its copies with a "copies" message, and it stops the run when the
layout it was laid out with is not the one the sites ask for (`Replan`); the run then
starts again, with the same randomness, in the new layout. Enumeration is the layout's
second job: once the run has reached every cost, `settle` puts each exact sum in its own
factor.
"""

import functools
import math

import numpy as np

from ..core import effects


class Replan(Exception):
    """A site needs another layout of copies than the run has: run it again."""


class CopyLayout(effects.Handler):
    """The handler that lays out the copies of one run of a model with n draws.

    `plan` maps each copying site to (copies, factor); the caller keeps it across calls, so
    that a run laid out right the first time is never repeated. `copies` is the layout the
    run has (a `Copies`)."""

    takes_values = False

    def __init__(self, n, plan):
        self.plan = plan
        self.copies = Copies(n, plan)
        self._reached = set()

    def process(self, msg):
        if msg.kind == "copies":
            self._check(msg.name, msg.fields["count"])
            msg.value = self.copies
            msg.done = True

    def _check(self, name, count):
        """Note that site `name` needs `count` copies of the downstream model; if the run
        was laid out otherwise, stop it: it runs again with the copies."""
        if count != 1 or name in self.plan:
            self._reached.add(name)
            now = self.plan.get(name)
            if now is None or now[0] != count:
                if count == 1:
                    del self.plan[name]
                else:
                    self.plan[name] = (count, 0 if now is None else now[1])
                raise Replan(name)

    def settle(self, sites, costs_up):
        """At the end of the run: forget a copying site the run did not reach, and lay the
        copies of a site that sums over its values (scg.Enumerate()) in another factor than
        those of every copying site it meets in a common cost (`costs_up`: the sites
        upstream of each cost). If the run was laid out otherwise, stop it (`Replan`)."""
        plan = self.plan
        stale = [k for k in plan if k not in self._reached]
        for k in stale:
            del plan[k]
        if stale:
            raise Replan(stale[0])
        if len(plan) < 2:
            return
        multiplies = {k for k in plan if sites[k].estimator.copies_multiply}
        if not multiplies:
            return
        factor = settle_factors(plan, costs_up, multiplies)
        changed = any(plan[k][1] != factor[k] for k in plan)
        for k in plan:
            plan[k] = (plan[k][0], factor[k])
        layout = Copies(self.copies.n, plan)  # (checked before the run that would allocate it)
        for k in plan:  # (in the order of the sites, for a message that does not vary)
            if k in multiplies:
                sites[k].estimator.check_layout(k, layout)
        if changed:
            raise Replan(next(iter(plan)))


def copies_for(name, count):
    """The layout of copies of the run, for site `name`, which needs `count` copies of the
    downstream model (1: none of its own)."""
    return effects.send(effects.Message("copies", name, count=count))


class Copies:
    """The layout of copies. `plan` maps each copying site to (copies, factor)."""

    def __init__(self, n, plan):
        self.n = n
        self.names = list(plan)
        groups = sorted({plan[k][1] for k in self.names})
        self.factors = [[k for k in self.names if plan[k][1] == g] for g in groups]
        self._factor = {k: i for i, f in enumerate(self.factors) for k in f}
        self._slots = {}
        self.blocks = []  # each factor's number of blocks
        for f in self.factors:
            at = 1
            for k in f:
                c = int(plan[k][0])
                self._slots[k] = (0,) + tuple(range(at, at + c - 1))
                at += c - 1
            self.blocks.append(at)
        self.count = math.prod(self.blocks)
        self.rows = n * self.count
        self._index = {}

    def __bool__(self):
        return self.count > 1

    def copies_of(self, name):
        return len(self._slots[name])

    def factor(self, name):
        """The factor of the layout that site `name` is a branch of."""
        return self._factor[name]

    def slots(self, name):
        """The blocks of its factor that hold copies 0, 1, ... of site `name`."""
        return self._slots[name]

    def block(self, f):
        """The block of factor f for every row, shape (rows,)."""
        key = ("block", f)
        got = self._index.get(key)
        if got is None:
            got = self._index[key] = _block(tuple(self.blocks), self.n, f)
        return got

    def index(self, name):
        """The copy index of site `name` for every row, shape (rows,)."""
        got = self._index.get(name)
        if got is None:
            got = self._index[name] = _copy_index(self._slots[name], self.blocks[
                self._factor[name]], self.block(self._factor[name]))
        return got

    def first(self, names):
        """1.0 on the rows whose copy index is 0 for every site in `names`, else 0.0."""
        mask = np.ones(self.rows)
        for name in names:
            mask = mask * (self.index(name) == 0)
        return mask

    def main(self, f):
        """1.0 on the rows of block 0 (the main run) of factor f, else 0.0."""
        return (self.block(f) == 0).astype(float)

    def split(self, x):
        """(rows, *rest) -> (*blocks, n, *rest)."""
        return np.reshape(x, tuple(self.blocks) + (self.n,) + np.shape(x)[1:])

    def merge(self, x):
        """(*blocks, n, *rest) -> (rows, *rest)."""
        return np.reshape(x, (self.rows,) + np.shape(x)[len(self.blocks) + 1:])

    def tile(self, x):
        """A per-draw array (n, *rest), the same in every copy: (rows, *rest)."""
        x = effects.asarray(x)
        return np.reshape(np.broadcast_to(x, (self.count,) + x.shape),
                          (self.rows,) + x.shape[1:])

    def describe(self):
        """How many evaluations a draw takes, and why (for explain())."""
        parts = []
        for f, size in zip(self.factors, self.blocks):
            sites = ", ".join(f"{k}: {self.copies_of(k)}" for k in f)
            parts.append(f"{size} ({sites})" if len(f) == 1 else
                         f"{size} = 1 + the extra copies of {sites}")
        return " x ".join(parts) if len(parts) > 1 else parts[0]

    def __repr__(self):
        return (f"Copies(n={self.n}, "
                f"{[{k: self.copies_of(k) for k in f} for f in self.factors]})")


def settle_factors(plan, costs_up, multiplies):
    """The factor of each copying site: sites whose copies are branches share factor 0;
    a site whose copies multiply (an exact sum) goes to the first factor holding no site
    it meets in a common cost (`costs_up`: the sites upstream of each cost)."""
    meets = {k: set() for k in plan}
    for up in costs_up:
        here = [k for k in plan if k in up]
        for a in here:
            meets[a].update(b for b in here if b != a)
    members, factor = {}, {}
    for k in sorted(plan, key=lambda k: k in multiplies):  # (branches first, then sums)
        g = 0
        if k in multiplies:
            while any(m in meets[k] for m in members.get(g, ())):
                g += 1
        factor[k] = g
        members.setdefault(g, []).append(k)
    return factor


@functools.lru_cache(maxsize=256)
def _block(blocks, n, f):
    shape = [1] * len(blocks) + [1]
    shape[f] = blocks[f]
    idx = np.arange(blocks[f]).reshape(shape)
    got = np.broadcast_to(idx, blocks + (n,)).reshape(-1)
    got.flags.writeable = False
    return got


def _copy_index(slots, size, block):
    table = np.zeros(size, dtype=np.int64)
    table[list(slots)] = np.arange(len(slots))
    got = table[block]
    got.flags.writeable = False
    return got
