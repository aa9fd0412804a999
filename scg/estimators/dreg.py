"""Doubly reparameterized gradients (Tucker, Lawson, Gu and Maddison 2019): the machinery of
`scg.Pathwise(dreg=True)`.

For K reparameterized particles z_k = path(eps_k, phi) of a proposal q_phi and the bound
L = log (1/K) sum_k w_k, w_k = p(x, z_k) / q_phi(z_k), the plain pathwise gradient in phi
is sum_k w~_k (d log w_k / d z_k dz_k/dphi - d log q_phi(z_k) / dphi), w~ the normalized
weights. Its second part has mean zero and a variance that grows with K; DReG replaces the
whole by sum_k w~_k^2 d log w_k / d z_k dz_k/dphi, unbiased for the same gradient, with a
signal-to-noise ratio that does not fall with K. scg gets there in two steps:

- `q.log_prob(z)` of the site's own proposal at the site's own draw is taken with the
  proposal's parameters held fixed (its derivative flows through z only): `Proposal`;
- the derivative reaching z_k from the bound is multiplied by w~_k (stopped), so that it
  carries w~_k^2: the `scale_gradient` primitive on the draw, whose factor the bound fills
  when `scg.logmeanexp` computes it.

The parameters of the model (of p) keep their plain gradient, sum_k w~_k d log p / dtheta.
"""

import numpy as np

from ..core.tape import Primitive, defvjp, strip
from ..distributions.base import family_of
from ..numpy import rules as R

scale_gradient = Primitive("scale_gradient", lambda x, factor: x)
defvjp(scale_gradient, lambda g, ans, x, factor: R.multiply(g, factor.value), None)


class Factor:
    """The factor `scale_gradient` multiplies a cotangent by: filled by the bound."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = None


class Proposal:
    """A DReG site's proposal: its distribution as the model gave it, the draw, the plate
    of the particles, and what the run found (the log-density at the draw, the bound)."""

    def __init__(self, name, given, batch_ndim, event_ndim, plates):
        self.name = name
        self.family = family_of(given)
        self.params = dict(self.family.params)
        self.batch_ndim = batch_ndim
        self.event_ndim = event_ndim
        self.plates = plates
        self.factor = Factor()
        self.log_prob_seen = False
        self.bound = None

    def matches(self, dist):
        """Is `dist` the site's proposal (the same family and the same parameter objects)?"""
        fam = family_of(dist)
        if type(fam) is not type(self.family):
            return False
        params = fam.params
        return params.keys() == self.params.keys() and all(
            params[k] is v or (type(v) is np.ndarray and type(params[k]) is np.ndarray and
                               np.array_equal(params[k], v)) for k, v in self.params.items())

    def log_prob(self, dist, value, log_prob):
        """As the draw's `law` (PerSample.law): log q with q's parameters held fixed for the
        site's proposal; None (the plain log_prob) for any other distribution."""
        return self.log_prob_held(dist, value, log_prob) if self.matches(dist) else None

    def log_prob_held(self, dist, value, log_prob):
        """log q(value) with q's parameters held fixed (no derivative through them)."""
        self.log_prob_seen = True
        return log_prob_with_params_held(dist, value, log_prob)

    def fill(self, bound, weights, other_plates=()):
        """The bound over the particles' plate reached: w~ (rows, *other plates, K) laid
        out on the draw's physical shape (rows, *batch with each plate at its dim, *event),
        stopped."""
        self.bound = bound
        plates = list(other_plates) + [bound.plate]
        at = [1 + self.batch_ndim + p.dim for p in plates]  # (each axis's place)
        order = sorted(range(len(plates)), key=lambda k: at[k])
        shape = [R.shape(weights)[0]] + [1] * (self.batch_ndim + self.event_ndim)
        for k in plates:
            shape[1 + self.batch_ndim + k.dim] = k.size
        moved = R.transpose(weights, (0,) + tuple(1 + k for k in order))
        self.factor.value = R.reshape(moved, tuple(shape))


def log_prob_with_params_held(dist, value, log_prob):
    """log_prob(dist, value) with the distribution's parameters held fixed: its derivative
    flows through the value only (DReG's proposal, and log q at a site's own draw in an
    ELBO, scg/stochastic/zero_mean.py)."""
    held = {k: (None if v is None else R.stop_gradient(v))
            for k, v in family_of(dist).params.items()}
    return log_prob(dist._rebuild(held), value)


def normalized_weights(w):
    """w~ = softmax of the log-weights over the last axis (rows, K), plain."""
    w = np.asarray(strip(w), dtype=float)
    e = np.exp(w - w.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
