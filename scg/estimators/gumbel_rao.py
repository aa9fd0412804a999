"""Gumbel-Rao (Paulus, Maddison and Krause 2021, "Rao-Blackwellizing the Straight-Through
Gumbel-Softmax Gradient Estimator"): straight-through Gumbel-softmax with its backward pass
averaged over the noise given the draw.

Straight-through Gumbel-softmax (scg.GumbelSoftmax(T, hard=True)) lets the gradient g in
the exact draw b = hard(z), z = a + G, reach the logits a as J(softmax(z / T)) g / T. Its
conditional expectation given b, estimated by k draws z~_1..k of the noise given b (the
relaxation's `conditional`), is

    (1/k) sum_j J(softmax(z~_j / T)) g / T:

the same mean as straight-through Gumbel-softmax (the same bias), and no more variance
(much less where the noise, not the draw, dominates it). The model is evaluated once per
draw; the k relaxations are plain numbers.
"""

import numbers

import numpy as np

from ..core import effects
from .straight_through import StraightThrough, check_temperature
from .terms import relaxed_form


class GumbelRao(StraightThrough):
    """Rao-Blackwellized straight-through Gumbel-softmax for the sites whose family declares
    a concrete relaxation (Bernoulli: logistic noise; OneHotCategorical: Gumbel noise);
    exact discrete values; biased as straight-through Gumbel-softmax, first derivatives
    only.

    Args:
        temperature: T > 0 of the relaxation.
        k: conditional noise draws per draw (k = 1: straight-through Gumbel-softmax's
            distribution of estimates).

    Example:
        >>> scg.sample("z", scg.OneHotCategorical(logits=h),
        ...            estimator=scg.GumbelRao(temperature=0.5, k=10))
    """

    name = "gumbel_rao"

    def __init__(self, temperature=1.0, k=10):
        self.temperature = check_temperature("GumbelRao", temperature)
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"GumbelRao: k must be a positive int, got {k!r}")
        self.k = int(k)

    def jacobian(self, d, relaxation, logits, b):
        plain = relaxation._rebuild({"logits": logits})  # (the conditional on plain logits)
        # the k uniforms of each draw in one call, on a last axis (so that copies of the
        # run share them as any draw), read as (k, rows, ...)
        v = effects.asarray(d.draws(lambda dist, rng, shape: rng.random(
            dist._extended_shape(shape) + (self.k,))))
        return plain.conditional_jacobian(b, np.moveaxis(v, -1, 0), self.temperature)

    def describe(self, site):
        return (f"Gumbel-Rao at temperature {self.temperature:g} with k = {self.k}: exact "
                "discrete values, the straight-through Gumbel-softmax gradient averaged over "
                "the noise given the draw")

    def explain_terms(self, site, trace):
        return [f"biased (as straight-through Gumbel-softmax): {site.name} takes exact "
                "discrete values b and its gradient g reaches the logits a as the mean of "
                f"J(s(z~_j)) g / T over k = {self.k} noise draws z~_j given b, s(z) = "
                f"{relaxed_form(site.dist)} at T = {self.temperature:g}"]

    def __repr__(self):
        return f"GumbelRao(temperature={self.temperature!r}, k={self.k!r})"

