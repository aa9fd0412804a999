"""Enumeration: the exact sum over a finite support, in parallel along the copies of a run."""

import functools
import math

import numpy as np

from ..distributions.base import declares, family_name, family_of
from ..errors import EstimatorError
from ..numpy import rules as R
from .base import Estimator
from .terms import require_open_probs


class Enumerate(Estimator):
    """Sum over every value of the site, weighting the costs downstream by its probability.

    The site adds no variance. Its values are laid out along the copies of the run: the
    model downstream is evaluated once per value (with the same upstream values and shared
    randomness downstream), and each copy's costs are weighted by p(value | parents), a
    traced weight whose derivative gives the site's share of the gradient, to any order.
    Inside a plate the elements are enumerated element by element (a plate of 24 Bernoulli
    sites is 24 sums of 2, as the costs of element b depend on element b only); the other
    dimensions of a site combine as the product of their supports, and so do enumerated
    sites that meet in a common cost (the exact sum needs every combination); independent
    enumerated sites add their copies.

    Args:
        max_combinations: the most copies of the run (the product of the supports of all
            values enumerated jointly) this site may need; more raises EstimatorError.

    Example:
        >>> scg.sample("a", scg.Bernoulli(logits=z), estimator=scg.Enumerate())
    """

    name = "enumerate"
    own_draws = True
    copies_multiply = True  # (the exact sum: sites it meets are evaluated at each value)

    def __init__(self, max_combinations=100_000):
        if isinstance(max_combinations, bool) or not isinstance(max_combinations, int) or \
                max_combinations < 1:
            raise ValueError(f"Enumerate: max_combinations must be a positive int, got "
                             f"{max_combinations!r}")
        self.max_combinations = max_combinations

    # ------------------------------------------------------------ the support
    def check(self, name, dist):
        support_of(name, dist, "scg.Enumerate()")
        require_open_probs(name, dist, "scg.Enumerate()")

    def _layout(self, name, dist, plates):
        """(support size S, the inner batch shape, the dims enumerated per element)."""
        inner = family_of(dist)
        shape = tuple(inner.batch_shape)
        outer = len(dist.batch_shape)
        per_element = set()
        for p in plates:
            d = outer + p.dim  # the plate's dim, counted in the outer batch shape
            if 0 <= d < len(shape) and shape[d] == p.size and p.size > 1:
                per_element.add(d)
        return len(support_of(name, dist, "scg.Enumerate()")), shape, per_element

    def copies(self, name, dist, plates):
        size, shape, per_element = self._layout(name, dist, plates)
        joint = math.prod(s for d, s in enumerate(shape) if d not in per_element)
        count = size ** joint if joint * math.log2(max(size, 2)) < 63 else math.inf
        if count > self.max_combinations:
            raise EstimatorError(
                f"site {name!r}: enumerating it jointly takes {size}^{joint} copies of the "
                f"run, above max_combinations={self.max_combinations:,}. Declare the "
                "independent dimensions with scg.plate (each element is then enumerated "
                "alone), raise scg.Enumerate(max_combinations=...), or use another estimator")
        return int(count)

    def draw(self, d):
        size, shape, per_element = self._layout(d.name, d.dist, d.run.plates)
        joint_shape = tuple(1 if i in per_element else s for i, s in enumerate(shape))
        count = self.copies(d.name, d.dist, d.run.plates)
        values = _values(_key(support_of(d.name, d.dist, "scg.Enumerate()")), joint_shape,
                         shape, count)
        if count == 1:  # a support of one value: no copies of the run
            return np.broadcast_to(values[0], (d.rows,) + values.shape[1:])
        return values[d.copies.index(d.name)]

    def check_layout(self, name, copies):
        """Raise EstimatorError if the run's layout of copies is above the budget."""
        if copies.count > self.max_combinations:
            raise EstimatorError(
                f"site {name!r}: the enumerated sites together take {copies.count:,} copies "
                f"of the run ({copies.describe()}), above max_combinations="
                f"{self.max_combinations:,}; enumerate fewer sites, declare plates, or raise "
                "max_combinations")

    # ------------------------------------------------------------ surrogate
    def weight(self, site, ctx):
        return R.exp(ctx.log_prob(site))

    # ------------------------------------------------------------ explanation
    def describe(self, site):
        size = len(support_of(site.name, site.dist, "scg.Enumerate()"))
        return (f"enumerate: the exact sum over its {size} values per variable, weighted by "
                "their probabilities (no variance from this site)")

    def cost_factor(self, site):
        return f"p({site.name}), summed over its values"

    def explain_terms(self, site, trace):
        down = [c.name for c in trace.downstream_costs(site)] or ["no cost"]
        return [f"sum over the values v of {site.name}: grad [p({site.name} = v) * "
                f"({' + '.join(down)})(v)]"]

    def __repr__(self):
        return ("Enumerate()" if self.max_combinations == 100_000 else
                f"Enumerate(max_combinations={self.max_combinations})")


def support_of(name, dist, who):
    """The values of the site's finite support, shape (S,) + event_shape, as its family
    declares them (`enumerate_support`); EstimatorError naming the site if it declares
    none, or cannot give one for this batch."""
    if not declares(dist, "enumerate_support"):
        raise EstimatorError(
            f"site {name!r}: {who} sums over a finite support, and {family_name(dist)} "
            "declares none (a family declares one with an enumerate_support(expand=True) "
            "method, as Bernoulli, Binomial, Categorical, OneHotCategorical and Multinomial "
            "do). Use 'auto', scg.Score() or, with a sampling path, scg.Pathwise()")
    try:
        return np.asarray(family_of(dist).enumerate_support(expand=False), dtype=float)
    except ValueError as e:
        raise EstimatorError(f"site {name!r}: {who} needs the support of "
                             f"{family_name(dist)}: {e}") from None


def _key(support):
    """A support as a hashable key of `_values`' cache."""
    return support.shape, support.tobytes()


@functools.lru_cache(maxsize=64)
def _values(key, joint_shape, shape, count):
    """The site's value in each of its copies, shape (count, *shape, *event): in copy k the
    support's values at the digits of k in base S, one per jointly enumerated variable, the
    same for every element of a plate."""
    support = np.frombuffer(key[1]).reshape(key[0])
    size = support.shape[0]
    digits = np.array(np.unravel_index(np.arange(count), (size,) * math.prod(joint_shape)))
    table = np.broadcast_to(digits.T.reshape((count,) + joint_shape), (count,) + shape)
    values = support[table]
    values.flags.writeable = False
    return values
