"""Count, mean and sum of squared deviations of per-draw vectors, merged exactly.

The merge of Chan, Golub and LeVeque (1979): two sets of na and nb draws with means ma, mb
and sums of squared deviations Ma, Mb give n = na + nb, mean = ma + (mb - ma) nb / n and
M = Ma + Mb + (mb - ma)^2 na nb / n. It costs O(coordinates), and merging chunks in a
fixed order gives the same numbers however the chunks were scheduled.
"""

import numba
import numpy as np


class Moments:
    """`count` draws of a vector: their `mean` and `m2`, the sum of squared deviations from
    the mean, per coordinate (1-d arrays)."""

    __slots__ = ("count", "mean", "m2")

    def __init__(self, count, mean, m2):
        self.count = int(count)
        self.mean = np.asarray(mean, dtype=float)
        self.m2 = np.asarray(m2, dtype=float)

    @classmethod
    def of(cls, x):
        """The moments of the rows of x, shape (count, coordinates)."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"Moments.of needs an array of shape (count, coordinates) "
                             f"with count >= 1, got shape {x.shape}")
        mean, m2 = _mean_and_m2(x)
        return cls(x.shape[0], mean, m2)

    @classmethod
    def of_columns(cls, columns):
        """The moments of several (count, k_i) blocks side by side, without joining them."""
        parts = [cls.of(c) for c in columns]
        return cls(parts[0].count, np.concatenate([p.mean for p in parts]),
                   np.concatenate([p.m2 for p in parts]))

    def merge(self, other):
        """The moments of both sets of draws together."""
        if self.count == 0:
            return other
        if other.count == 0:
            return self
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        m2 = self.m2 + other.m2 + delta * delta * (self.count * other.count / n)
        return Moments(n, mean, m2)

    @property
    def var(self):
        """The per-draw variance (ddof = 1); NaN with fewer than two draws."""
        if self.count < 2:
            return np.full(self.mean.shape, np.nan)
        return self.m2 / (self.count - 1)

    @property
    def stderr(self):
        return np.sqrt(self.var / self.count)

    def __repr__(self):
        return f"Moments(count={self.count}, mean={self.mean!r}, var={self.var!r})"


@numba.njit(cache=True)
def _mean_and_m2(x):
    """Per column of a (count, k) array, two passes without temporaries: the mean of the
    values shifted by the first one (n equal values give that value exactly, not one off by
    a rounding error, whose spread would then look like a variance), then the sum of
    squared deviations from the mean."""
    n, k = x.shape
    mean = np.zeros(k)
    m2 = np.zeros(k)
    for j in range(k):
        shift = x[0, j]
        s = 0.0
        for i in range(n):
            s += x[i, j] - shift
        mu = shift + s / n
        t = 0.0
        for i in range(n):
            d = x[i, j] - mu
            t += d * d
        mean[j] = mu
        m2[j] = t
    return mean, m2


def merge_all(moments):
    """Merge in the order given (the chunks' order: the result does not depend on the order
    in which they were computed)."""
    out = Moments(0, 0.0, 0.0)
    for m in moments:
        out = out.merge(m)
    return out
