"""Copies of a model run: the downstream of a site evaluated at several of its values.

Some estimators need the part of the model downstream of a site at values other than one
draw: every value of a finite support (enumeration), the positive and negative parts of a
weak derivative, the two halves of an antithetic pair. The run then holds, for each of the
n draws, one copy per combination of those sites' values: physical row
`c * n + i` is copy c of draw i, where c counts the sites' copy indices in mixed radix
(the first site varies slowest). Upstream of such a site every copy has the same values;
downstream, sites draw with the same randomness in every copy (common random numbers).
"""

import functools
import math

import numpy as np

from ..core import replay


class Copies:
    """The layout of copies: `sizes` maps each copying site to its number of copies."""

    def __init__(self, n, sizes):
        self.n = n
        self.names = list(sizes)
        self.sizes = [int(sizes[k]) for k in self.names]
        self.count = math.prod(self.sizes)
        self.rows = n * self.count
        self._index = {}

    def __bool__(self):
        return self.count > 1

    def axis(self, name):
        return self.names.index(name)

    def index(self, name):
        """The copy index of site `name` for every row, shape (rows,)."""
        got = self._index.get(name)
        if got is None:
            got = self._index[name] = _index(tuple(self.sizes), self.n, self.axis(name))
        return got

    def first(self, names):
        """1.0 on the rows whose copy index is 0 for every site in `names`, else 0.0."""
        mask = np.ones(self.rows)
        for name in names:
            mask = mask * (self.index(name) == 0)
        return mask

    def split(self, x):
        """(rows, *rest) -> (*sizes, n, *rest)."""
        return np.reshape(x, tuple(self.sizes) + (self.n,) + np.shape(x)[1:])

    def merge(self, x):
        """(*sizes, n, *rest) -> (rows, *rest)."""
        return np.reshape(x, (self.rows,) + np.shape(x)[len(self.sizes) + 1:])

    def tile(self, x):
        """A per-draw array (n, *rest), the same in every copy: (rows, *rest)."""
        x = replay.asarray(x)
        return np.reshape(np.broadcast_to(x, (self.count,) + x.shape),
                          (self.rows,) + x.shape[1:])

    def group_sum(self, x, names):
        """Sum x (rows, *rest) over the copy axes of `names`, keeping them (size 1) and
        broadcasting back to (rows, *rest): each row gets the total of its group."""
        axes = tuple(self.axis(k) for k in names)
        if not axes:
            return x
        s = self.split(x)
        return self.merge(np.broadcast_to(s.sum(axis=axes, keepdims=True), s.shape))

    def __repr__(self):
        return f"Copies(n={self.n}, {dict(zip(self.names, self.sizes))})"


@functools.lru_cache(maxsize=256)
def _index(sizes, n, k):
    shape = [1] * len(sizes) + [1]
    shape[k] = sizes[k]
    idx = np.arange(sizes[k]).reshape(shape)
    got = np.broadcast_to(idx, sizes + (n,)).reshape(-1)
    got.flags.writeable = False
    return got
