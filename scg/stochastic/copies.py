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
such sites are put in different factors. A block of the run is then a tuple of blocks,
one per factor; the run holds only the tuples a cost needs: those whose blocks are the main
run or copies of sites upstream of one common cost (the sites a cost meets multiply, and
sites that meet in no cost add). Ten independent enumerated coins and a pair meeting in one
cost take 1 + 10 + 3 evaluations, not the product 12 x 2 of the factors. The tuples are in
mixed-radix order (the first factor varies slowest; the main run first), and physical row
`b * n + i` is the b-th tuple of draw i: when every tuple is needed (all the sites of
several factors meet in one cost) that is the full product of the factors' blocks. Every
other tuple of the product would carry a weight of 0 in every cost (a copy of a site that
is not upstream of it); the surrogate lays q out on the product, with zeros there.
Upstream of a site every copy has the same values; downstream, sites draw with the same
randomness in every copy.

The layout is a handler of the effect stack, outside the run of the model (`CopyLayout`):
a site asks it for its copies with a "copies" message, and it stops the run when the
layout it was laid out with is not the one the sites ask for (`Replan`); the run then
starts again, with the same randomness, in the new layout. Enumeration is the layout's
second job: once the run has reached every cost, `settle` puts each exact sum in its own
factor.
"""

import functools
import itertools
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
        stale = [k for k in site_names(plan) if k not in self._reached]
        for k in stale:
            del plan[k]
        if stale:
            raise Replan(stale[0])
        names = site_names(plan)
        multiplies = {k for k in names if sites[k].estimator.copies_multiply}
        if len(names) < 2 or not multiplies:
            plan.pop(MEETS, None)  # (one factor: every block of it is needed)
            return
        factor = settle_factors(plan, costs_up, multiplies)
        changed = any(plan[k][1] != factor[k] for k in names)
        for k in names:
            plan[k] = (plan[k][0], factor[k])
        meets = meeting_sets(plan, costs_up)
        changed = changed or plan.get(MEETS, ()) != meets
        plan[MEETS] = meets
        layout = Copies(self.copies.n, plan)  # (checked before the run that would allocate it)
        for k in names:  # (in the order of the sites, for a message that does not vary)
            if k in multiplies:
                sites[k].estimator.check_layout(k, layout)
        if changed:
            raise Replan(names[0])


# The plan's entry (not a site name: those are strings) for the sets of copying sites in
# different factors that meet in a common cost: their copies combine.
MEETS = ("copies", "meet")


def site_names(plan):
    """The copying sites of a plan, in order."""
    return [k for k in plan if type(k) is str]


def meeting_sets(plan, costs_up):
    """The sets of copying sites, in two factors or more, upstream of a common cost (the
    largest ones: a set inside another adds no tuple), as sorted tuples of names."""
    names = site_names(plan)
    sets = set()
    for up in costs_up:
        here = frozenset(k for k in names if k in up)
        if len({plan[k][1] for k in here}) > 1:
            sets.add(here)
    largest = [a for a in sets if not any(a < b for b in sets)]
    order = {k: i for i, k in enumerate(names)}
    sets = [tuple(sorted(a, key=order.get)) for a in largest]
    return tuple(sorted(sets, key=lambda t: [order[k] for k in t]))


def copies_for(name, count):
    """The layout of copies of the run, for site `name`, which needs `count` copies of the
    downstream model (1: none of its own)."""
    return effects.send(effects.Message("copies", name, count=count))


class Copies:
    """The layout of copies. `plan` maps each copying site to (copies, factor)."""

    def __init__(self, n, plan):
        self.n = n
        self.names = site_names(plan)
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
        self.product = math.prod(self.blocks)
        # the sets of sites (in several factors) whose copies combine: a box of tuples each
        meets = [m for m in plan.get(MEETS, ()) if all(k in self._factor for k in m)] \
            if len(self.factors) > 1 else []
        self.meets = meets
        self.count = _count(tuple(self.blocks), self._boxes()) if len(self.factors) > 1 else \
            self.product
        self.rows = n * self.count
        self._index = {}
        self._tuples = None

    def _boxes(self):
        """The sets of tuples the run holds, as per-factor sets of allowed blocks: a box
        for each meeting set, one for each site alone (hashable, for the caches)."""
        boxes = []
        for group in list(self.meets) + [(k,) for k in self.names]:
            allowed = [[0] for _ in self.factors]
            for k in group:
                allowed[self._factor[k]] += list(self._slots[k][1:])
            boxes.append(tuple(frozenset(a) for a in allowed))
        return tuple(dict.fromkeys(boxes))

    @property
    def sparse(self):
        """Does the run hold fewer tuples than the product of the factors' blocks?"""
        return self.count != self.product

    def tuples(self):
        """The tuples of blocks the run holds, shape (count, factors), in mixed-radix
        order (the main run first)."""
        if self._tuples is None:
            if not self.sparse:
                grids = np.meshgrid(*[np.arange(b) for b in self.blocks], indexing="ij")
                got = np.stack([g.ravel() for g in grids], axis=1)
            else:
                got = _held_tuples(tuple(self.blocks), self._boxes())
            got.flags.writeable = False
            self._tuples = got
        return self._tuples

    def positions(self):
        """Where each tuple lies in the product of the factors' blocks (flat), or None
        when the run holds the whole product."""
        if not self.sparse:
            return None
        key = "positions"
        got = self._index.get(key)
        if got is None:
            got = self._index[key] = tuple(int(p) for p in np.ravel_multi_index(
                tuple(self.tuples().T), tuple(self.blocks)))
        return got

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
            if self.sparse:
                got = np.repeat(self.tuples()[:, f], self.n)
                got.flags.writeable = False
            else:
                got = _block(tuple(self.blocks), self.n, f)
            self._index[key] = got
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
        """(rows, *rest) -> (*blocks, n, *rest): on the product of the factors' blocks,
        zeros where the run holds no tuple."""
        return split_rows(x, tuple(self.blocks), self.positions())

    def merge(self, x):
        """(*blocks, n, *rest) -> (rows, *rest): the tuples the run holds."""
        return merge_rows(x, tuple(self.blocks), self.positions())

    def tile(self, x):
        """A per-draw array (n, *rest), the same in every copy: (rows, *rest)."""
        x = effects.asarray(x)
        return np.reshape(np.broadcast_to(x, (self.count,) + x.shape),
                          (self.rows,) + x.shape[1:])

    def describe(self):
        """How many evaluations a draw takes, and why (for explain())."""
        if self.sparse:
            return self._describe_sparse()
        parts = []
        for f, size in zip(self.factors, self.blocks):
            sites = ", ".join(f"{k}: {self.copies_of(k)}" for k in f)
            parts.append(f"{size} ({sites})" if len(f) == 1 else
                         f"{size} = 1 + the extra copies of {sites}")
        return " x ".join(parts) if len(parts) > 1 else parts[0]

    def _describe_sparse(self):
        met = {k for m in self.meets for k in m}
        alone = [k for k in self.names if k not in met]
        parts = ["1"]
        if alone:
            extra = sum(self.copies_of(k) - 1 for k in alone)
            parts.append(f"{extra} (the extra copies of "
                         f"{', '.join(f'{k}: {self.copies_of(k)}' for k in alone)})")
        disjoint = all(not set(a) & set(b) for i, a in enumerate(self.meets)
                       for b in self.meets[i + 1:])
        for m in self.meets:
            by_factor = {}
            for k in m:
                by_factor.setdefault(self._factor[k], []).append(k)
            sizes = [1 + sum(self.copies_of(k) - 1 for k in ks) for ks in by_factor.values()]
            what = " x ".join(f"{size} ({', '.join(f'{k}: {self.copies_of(k)}' for k in ks)})"
                              if len(ks) > 1 else f"{ks[0]}: {size}"
                              for size, ks in zip(sizes, by_factor.values()))
            parts.append(f"{math.prod(sizes) - 1} (the combinations of {what}, which meet in "
                         "a cost, less the main run)")
        text = f"{self.count} = " + " + ".join(parts)
        if not disjoint:
            text += " (a combination that several sets share counted once)"
        return text

    def __repr__(self):
        return (f"Copies(n={self.n}, "
                f"{[{k: self.copies_of(k) for k in f} for f in self.factors]})")


def split_rows(x, blocks, positions):
    """(rows, *rest) -> (*blocks, n, *rest), zeros at the tuples not held (`positions`:
    the flat places of the held ones in the product, or None for all)."""
    rest = np.shape(x)[1:]
    if positions is None:
        return np.reshape(x, blocks + (-1,) + rest)
    held = np.reshape(x, (len(positions), -1) + rest)
    full = np.zeros((math.prod(blocks),) + held.shape[1:], dtype=held.dtype)
    full[list(positions)] = held
    return np.reshape(full, blocks + held.shape[1:])


def merge_rows(x, blocks, positions):
    """(*blocks, n, *rest) -> (rows, *rest): the tuples held, in order."""
    rest = np.shape(x)[len(blocks) + 1:]
    if positions is None:
        return np.reshape(x, (-1,) + rest)
    flat = np.reshape(x, (math.prod(blocks),) + np.shape(x)[len(blocks):])
    return np.reshape(flat[list(positions)], (-1,) + rest)


@functools.lru_cache(maxsize=64)
def _held_tuples(blocks, boxes):
    """The union of the boxes, sorted (mixed-radix order), shape (count, factors)."""
    seen = set()
    for allowed in boxes:
        seen.update(itertools.product(*[sorted(a) for a in allowed]))
    return np.array(sorted(seen), dtype=np.int64).reshape(-1, len(blocks))


@functools.lru_cache(maxsize=256)
def _count(blocks, boxes):
    """The number of tuples in the union of the boxes (per-factor sets of allowed blocks,
    each holding 0): by inclusion and exclusion (the intersection of boxes is the box of
    the blocks they share) for a few boxes that are not nested, by listing them for more
    (up to a million), else an upper bound."""
    boxes = [b for b in boxes if not any(c != b and all(x <= y for x, y in zip(b, c))
                                         for c in boxes)]
    if len(boxes) > 10:
        bound = min(math.prod(blocks), sum(math.prod(len(a) for a in b) for b in boxes))
        return len(_held_tuples(blocks, tuple(boxes))) if bound <= 10 ** 6 else bound
    total = 0
    for r in range(1, len(boxes) + 1):
        for chosen in itertools.combinations(boxes, r):
            shared = [frozenset.intersection(*parts) for parts in zip(*chosen)]
            total += (-1) ** (r + 1) * math.prod(len(a) for a in shared)
    return total


def settle_factors(plan, costs_up, multiplies):
    """The factor of each copying site: sites whose copies are branches share factor 0;
    a site whose copies multiply (an exact sum) goes to the first factor holding no site
    it meets in a common cost (`costs_up`: the sites upstream of each cost)."""
    names = site_names(plan)
    meets = {k: set() for k in names}
    for up in costs_up:
        here = [k for k in names if k in up]
        for a in here:
            meets[a].update(b for b in here if b != a)
    members, factor = {}, {}
    for k in sorted(names, key=lambda k: k in multiplies):  # (branches first, then sums)
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
