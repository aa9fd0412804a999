"""Antithetic noise: the mirror image of a draw's noise, for draws in pairs.

Pairing draw i with the draw from its mirrored noise (eps and -eps for symmetric noise,
u and 1 - u for uniform noise, and the same through the inverse CDF for other noise)
keeps each draw's distribution and makes the pair's errors cancel for functions that
are close to linear in the noise (the evolution-strategies form of the lesson).
"""

import numpy as np

from ..distributions.base import family_name
from ..errors import EstimatorError


def _exponential(e):
    # E = -log U; the mirror is -log(1 - U) = -log(-expm1(-E))
    return -np.log(-np.expm1(-e))


def _gumbel(g):
    # G = -log(-log U); the mirror uses 1 - U = -expm1(-exp(-G))
    return -np.log(-np.log(-np.expm1(-np.exp(-g))))


_MIRRORS = {
    "Normal": np.negative, "LogNormal": np.negative, "MultivariateNormal": np.negative,
    "Laplace": np.negative, "Uniform": lambda u: 1.0 - u, "Exponential": _exponential,
    "Gumbel": _gumbel,
}


def antithetic_families():
    return sorted(_MIRRORS)


def check_antithetic(name, dist):
    family = family_name(dist)
    if family not in _MIRRORS:
        raise EstimatorError(
            f"site {name!r}: antithetic draws need noise with a known mirror image; "
            f"{family} has none. Families with antithetic draws: "
            f"{', '.join(antithetic_families())}. Drop antithetic=True at this site")


def antithetic_noise(dist, noise, name):
    """The mirror image of `noise` drawn for `dist`."""
    check_antithetic(name, dist)
    return _MIRRORS[family_name(dist)](noise)
