"""Weak (measure-valued) derivatives: what a family declares for scg.MeasureValued().

The derivative of a density in a parameter theta is written d/dtheta p(x) = c (p+(x) -
p-(x)) with p+ and p- densities and c >= 0 (Pflug 1989; Mohamed, Rosca, Figurnov and Mnih,
JMLR 2020, section 6), so d/dtheta E[f(x)] = c (E+[f] - E-[f]). A family's
`weak_derivative(param)` returns a `WeakDerivative` giving c and draws of x+ and x- (or,
for a choice among a finite support, the support itself: the derivative in each value's
probability is f at that value). The decompositions shared by several families live here.
"""

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..numpy import rules as R


def _same(x):
    return x


@dataclass(frozen=True)
class WeakDerivative:
    """The weak derivative of a family in one parameter.

    Attributes:
        coefficient: `c(params)`, from the plain parameters (a dict of arrays broadcast to
            the draws' shape), elementwise.
        pair: `pair(params, rng, shape, coupled)` -> (x+, x-), arrays of `shape`, drawn with
            common randomness when `coupled`; None for `over_support`.
        formula: `formula(coupled)`, the decomposition in words (for explain()).
        coordinate: `coordinate(param)`: the traced quantity the decomposition
            differentiates, from the traced parameter (the parameter itself; the
            probabilities, through sigmoid or softmax, for logits).
        coordinate_name: how explain() names that quantity.
        over_support: the derivative in the probability of each value of a finite support
            is f at that value: the estimator evaluates the model at every support value
            (a categorical choice; c and pair unused; the coordinate has a last axis of one
            entry per support value).
    """

    coefficient: Callable
    pair: Optional[Callable]
    formula: Callable
    coordinate: Callable = _same
    coordinate_name: Optional[str] = None
    over_support: bool = False


def _one(params):
    return 1.0


# ---------------------------------------------------------------------- location and scale
def normal_loc(transform=None, wrap=""):
    """In loc of loc + scale eps, eps ~ N(0, 1) (then `transform`): c = 1/(scale sqrt(2
    pi)), x+- = loc +- scale R with R Rayleigh."""
    def pair(p, rng, shape, coupled):
        r = np.sqrt(2.0 * rng.standard_exponential(shape))
        r2 = r if coupled else np.sqrt(2.0 * rng.standard_exponential(shape))
        plus, minus = p["loc"] + p["scale"] * r, p["loc"] - p["scale"] * r2
        return (plus, minus) if transform is None else (transform(plus), transform(minus))

    return WeakDerivative(
        lambda p: 1.0 / (p["scale"] * math.sqrt(2.0 * math.pi)), pair,
        lambda coupled: ("c = 1/(scale sqrt(2 pi)), x+- = " + wrap + "loc +- scale R, R "
                         "Rayleigh" + (" (the same R)" if coupled else " (independent R's)")))


def normal_scale(transform=None, wrap=""):
    """In scale of loc + scale eps: c = 1/scale, x+ = loc + scale M with M double-sided
    Maxwell, x- = loc + scale M U (a standard normal; uncoupled: an independent one)."""
    def pair(p, rng, shape, coupled):
        m = np.sqrt(2.0 * rng.standard_gamma(1.5, shape))  # chi with 3 degrees of freedom
        m = np.where(rng.random(shape) < 0.5, -m, m)  # double-sided Maxwell
        eps = m * rng.random(shape) if coupled else rng.standard_normal(shape)
        loc = p.get("loc", 0.0)  # (a folded family has none)
        plus, minus = loc + p["scale"] * m, loc + p["scale"] * eps
        return (plus, minus) if transform is None else (transform(plus), transform(minus))

    return WeakDerivative(
        lambda p: 1.0 / p["scale"], pair,
        lambda coupled: ("c = 1/scale, x+ = " + wrap + "loc + scale M, M double-sided "
                         "Maxwell, x- = " + wrap + ("loc + scale M U, U ~ U(0, 1)" if coupled
                                                    else "loc + scale eps, eps ~ N(0, 1)")))


# ---------------------------------------------------------------------- rates
def gamma_rate(concentration=None):
    """In the rate of Gamma(a, rate) (Exponential: a = 1): c = a / rate, x+ ~ Gamma(a,
    rate), x- ~ Gamma(a + 1, rate) = x+ + Exp(rate) when coupled."""
    def shape_of(p, shape):
        return np.ones(shape) if concentration is None else p[concentration]

    def pair(p, rng, shape, coupled):
        a = shape_of(p, shape)
        g = rng.standard_gamma(a, shape)
        more = g + rng.standard_exponential(shape) if coupled else \
            rng.standard_gamma(a + 1.0, shape)
        return g / p["rate"], more / p["rate"]

    if concentration is None:
        return WeakDerivative(
            lambda p: 1.0 / p["rate"], pair,
            lambda coupled: "c = 1/rate, x+ ~ Exp(rate), x- ~ Gamma(2, rate)" +
            (" = x+ + Exp(rate)" if coupled else ""))
    return WeakDerivative(
        lambda p: p[concentration] / p["rate"], pair,
        lambda coupled: "c = concentration/rate, x+ ~ Gamma(a, rate), x- ~ Gamma(a + 1, "
        "rate)" + (" = x+ + Exp(rate)" if coupled else ""))


def poisson_rate():
    """In the rate of Poisson(rate): c = 1, x+ = X + 1, x- = X."""
    def pair(p, rng, shape, coupled):
        x = rng.poisson(p["rate"], shape).astype(float)
        return x + 1.0, (x if coupled else rng.poisson(p["rate"], shape).astype(float))

    return WeakDerivative(_one, pair, lambda coupled: "c = 1, x+ = X + 1, x- = X" +
                          ("" if coupled else "'") + ", X ~ Poisson(rate)")


# ---------------------------------------------------------------------- discrete
def coin(coordinate=_same, coordinate_name=None):
    """In the probability of a coin: c = 1, x+ = 1, x- = 0."""
    def pair(p, rng, shape, coupled):
        return np.ones(shape), np.zeros(shape)

    return WeakDerivative(_one, pair, lambda coupled: "c = 1, x+ = 1, x- = 0", coordinate,
                          coordinate_name)


def binomial_probs():
    """In probs of Binomial(n, probs): c = n, x+ = 1 + B, x- = B, B ~ Binomial(n - 1,
    probs)."""
    def pair(p, rng, shape, coupled):
        n = p["total_count"].astype(np.int64)
        b = rng.binomial(np.maximum(n - 1, 0), p["probs"], shape).astype(float)
        b2 = b if coupled else rng.binomial(np.maximum(n - 1, 0), p["probs"], shape).astype(float)
        return np.where(n > 0, b + 1.0, 0.0), b2

    return WeakDerivative(lambda p: p["total_count"], pair,
                          lambda coupled: "c = total_count, x+ = 1 + B, x- = B" +
                          ("" if coupled else "'") + ", B ~ Binomial(total_count - 1, probs)")


def geometric_probs():
    """In probs of Geometric(probs) (failures before the first success): c = 1/probs,
    x+ = G, x- = 1 + G + G'."""
    def pair(p, rng, shape, coupled):
        def geometric():
            return (rng.geometric(p["probs"], shape) - 1).astype(float)
        g = geometric()
        return g, 1.0 + (g if coupled else geometric()) + geometric()

    return WeakDerivative(lambda p: 1.0 / p["probs"], pair,
                          lambda coupled: "c = 1/probs, x+ = G, x- = 1 + " +
                          ("G" if coupled else "G''") + " + G', G, G', G'' ~ Geometric(probs) "
                          "(failures)")


def over_support(coordinate=_same, coordinate_name=None):
    """In the probability of each value of a finite support: f at that value (the chain
    rule through a normalization or softmax removes any part common to all values)."""
    return WeakDerivative(_one, None, lambda coupled: "f(k) - f(x) for each value k, x the "
                          "draw (copies at every value)", coordinate, coordinate_name,
                          over_support=True)


def normalized(probs):
    """Probabilities as given, through their normalization (the derivative sees it)."""
    return probs / np.sum(probs, axis=-1, keepdims=True)


def softmax(logits):
    """Probabilities from logits, through the softmax."""
    return R.softmax(logits, axis=-1)
