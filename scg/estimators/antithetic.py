"""Antithetic noise: the mirror image of a draw's noise, for draws in pairs.

Pairing draw i with the draw from its mirrored noise (eps and -eps for symmetric noise,
u and 1 - u for uniform noise, and the same through the inverse CDF for other noise)
keeps each draw's distribution and makes the pair's errors cancel for functions that
are close to linear in the noise (the evolution-strategies form of the lesson). Each
family declares its mirror (`Distribution.antithetic_noise`); this module asks for it.
"""

from .. import distributions
from ..distributions.base import Distribution, Independent, declares, family_name, family_of
from ..errors import EstimatorError


def antithetic_families():
    """The names of scg's families that declare antithetic noise."""
    classes = [getattr(distributions, k) for k in distributions.__all__]
    return sorted(c.__name__ for c in classes if isinstance(c, type) and
                  issubclass(c, Distribution) and c is not Independent and
                  c.antithetic_noise is not Distribution.antithetic_noise)


def check_antithetic(name, dist):
    if not declares(dist, "antithetic_noise"):
        raise EstimatorError(
            f"site {name!r}: antithetic draws need noise with a known mirror image; "
            f"{family_name(dist)} declares none (a family declares it with an "
            f"antithetic_noise(noise) method). Families with antithetic draws: "
            f"{', '.join(antithetic_families())}. Drop antithetic=True at this site")


def antithetic_noise(dist, noise, name):
    """The mirror image of `noise` drawn for `dist`."""
    check_antithetic(name, dist)
    return family_of(dist).antithetic_noise(noise)
