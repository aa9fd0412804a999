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
"""

import functools
import math

import numpy as np

from ..core import effects


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
