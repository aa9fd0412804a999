"""IndeCateR (De Smet, Sansone and Zuidberg Dos Martires 2023, "Differentiable Sampling of
Categorical Distributions Using the CatLog-Derivative Trick"): for each element of a site
with a finite support, the exact sum over its values with the other elements held at
their draw."""

from dataclasses import dataclass

import numpy as np

from ..core import effects
from .base import Estimator
from .element_copies import (assembled_stacked, elements, placed, require_per_element,
                             spread_copies)
from .enumerate import support_of
from .finite import log_probs_at_rows, plain_log_probs
from .terms import linear_term

WHO = "scg.IndeCateR()"


class IndeCateR(Estimator):
    """For each element d of the site (each of D independent categorical latents), the
    exact sum over its S values with the other elements at their draw:

        grad E[f] ~= sum_d sum_k grad p_d(k) f(x_1, ..., x_{d-1}, k, x_{d+1}, ..., x_D),

    x a draw of the site and f the sum of the costs downstream. Each term's expectation
    over x_{-d} is the exact derivative in element d's parameters (the elements are
    independent), so the estimate is unbiased, and its variance is that of the others'
    draw only. The downstream model is evaluated at every (d, k) along copies of the run
    (same upstream values, shared randomness downstream): 1 + D S evaluations per draw
    (the draw itself and D x S branches). Written as sum_k p_d(k) (f(k) - fbar_d)
    grad log p_d(k), fbar_d = sum_k p_d(k) f(k) (the same number: sum_k grad p_d(k) = 0).

    It serves every family that declares `enumerate_support` (Categorical,
    OneHotCategorical, Bernoulli, Binomial, a user's own), the probabilities of the values
    from the family's own `log_prob`. Plates: the elements of a plate take each value
    together (D counts the elements outside the plates), so every cost downstream must be
    per element of the plate; a cost that mixes them raises EstimatorError. First
    derivatives only.

    Example:
        >>> scg.sample("c", scg.Categorical(logits=z), estimator=scg.IndeCateR())
    """

    name = "indecater"
    own_draws = True  # (the copies hold points of the support)

    # ------------------------------------------------------------ validity and drawing
    def check(self, name, dist):
        support_of(name, dist, WHO)

    def copies(self, name, dist, plates):
        return _layout(name, dist, plates).count

    def draw(self, d):
        lay = _layout(d.name, d.dist, d.run.plates)
        d.aux["layout"] = lay
        plain_log_probs(d, WHO)  # (the support holds all the probability, checked)
        base = effects.asarray(d.sample(), dtype=float)
        idx = d.copies.index(d.name)
        rows = [np.flatnonzero(idx == c) for c in range(lay.count)]
        places = tuple(((rows[copy],) + index, lay.support[k]) for index, k, copy in lay.slots)
        return effects.opaque(placed, base, places)

    # ------------------------------------------------------------ surrogate
    def term(self, site, ctx):
        lay = site.aux.get("layout")
        if lay is None or not ctx.has_downstream(site):
            return None
        require_per_element(site, lay.shared, ctx, WHO, "sets every element to each value "
                            "at once (one copy per value for the whole plate)",
                            "use scg.Score('loo')")
        rows, size = ctx.trace.rows, len(lay.support)
        places = tuple((slice(None),) + index + (k,) for index, k, _ in lay.slots)
        values = spread_copies(site, ctx, lay.shared, tuple(c for _, _, c in lay.slots))
        f = effects.opaque(assembled_stacked, (rows,) + lay.shape + (size,), places, values)
        # (the coefficients are zero off the rows of the site's main copy: the score
        # terms are taken there only)
        main = np.flatnonzero(ctx.copies.index(site.name) == 0)
        log_p = log_probs_at_rows(site, ctx, main)  # (S, main rows, *batch)
        coef = effects.opaque(_coefficients, effects.asarray(log_p, dtype=float), f, main)
        return linear_term(log_p, coef, 1.0 / ctx.n)

    def dice_log_prob(self, site, ctx):
        self.unsupported_order(site)

    def evaluations(self, site):
        lay = site.aux.get("layout")
        return lay.count if lay is not None else \
            self.copies(site.name, site.dist, site.plates)

    # ------------------------------------------------------------ explanation
    def describe(self, site):
        return ("IndeCateR: for each element, the exact sum over its values with the other "
                "elements at their draw (the CatLog-derivative trick)")

    def cost_factor(self, site):
        return f"1 on the main copy of {site.name} (its other copies enter its terms only)"

    def explain_terms(self, site, trace):
        lay = site.aux.get("layout")
        down = " + ".join(c.name for c in trace.downstream_costs(site)) or "no cost"
        lines = [f"sum over elements d and values k of grad p_d(k) f({site.name}_-d, k), "
                 f"f = {down}"]
        if lay is not None:
            lines.append(f"{len(lay.slots) // max(len(lay.support), 1)} element(s) x "
                         f"{len(lay.support)} values + the draw = {lay.count} evaluations "
                         "per draw")
        return lines


# ---------------------------------------------------------------------- the copies
@dataclass(frozen=True)
class _Layout:
    """Copy 0 is the draw; slot (index, k, copy) sets the elements `index` (ints along the
    dims outside the plates, slices along the plates) to the k-th value in `copy`."""

    support: np.ndarray  # (S, *event)
    shape: tuple  # the family's batch shape
    shared: tuple  # the plates whose elements take each value together, by dim
    slots: tuple
    count: int


def _layout(name, dist, plates):
    support = support_of(name, dist, WHO)
    shape, shared, each = elements(dist, plates)
    slots = tuple((index, k, 1 + j * len(support) + k)
                  for j, index in enumerate(each) for k in range(len(support)))
    return _Layout(support, shape, shared, slots, 1 + len(slots))


def _coefficients(log_p, f, main):
    """p_d(k) (f_d(k) - sum_j p_d(j) f_d(j)) per value k, main row and element, shape
    (S, main rows, *batch): the weight of grad log p_d(k). log_p (S, main rows, *batch),
    f (rows, *batch, S) the costs of each element's branches."""
    p = np.exp(log_p)
    f = np.moveaxis(f[main], -1, 0)
    return p * (f - np.sum(p * f, axis=0))
