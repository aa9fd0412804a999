"""MixtureSameFamily(mixing, component): a Categorical choice among K components of one family."""

import numpy as np

from ..numpy import rules as R
from ._util import full
from .base import Distribution, family_name
from .categorical import Categorical
from .composite import part_constraints, part_params, plain_draw, rebuilt_part


class MixtureSameFamily(Distribution):
    """p(x) = sum_k w_k p_k(x): weights from `mixing`, components along the rightmost batch
    dim of `component`.

    log_prob is the log of the mixture density (no choice of component is observed). It
    has no sampling path (the choice of component jumps): "auto" gives it the score
    function of that density. To get a pathwise gradient through the components, sample
    the choice as its own site, `k = scg.sample("k", mixing)`, then the component
    `scg.sample("x", Normal(loc[k], scale[k]))`: the choice gets a score (or Enumerate)
    and the component its path (docs/distributions.md).

    Args:
        mixing: a scg.Categorical with batch_shape B and K categories.
        component: a scg distribution with batch_shape B + (K,) (any event_shape).

    Example:
        >>> mix = scg.MixtureSameFamily(scg.Categorical(probs=np.array([0.3, 0.7])),
        ...                             scg.Normal(np.array([-1.0, 2.0]), np.array([0.5, 1.0])))
        >>> mix.mean   # 1.1
    """

    has_rsample = False

    def __init__(self, mixing, component, validate_args=None):
        if not isinstance(mixing, Categorical):
            raise TypeError(f"MixtureSameFamily: mixing must be a scg.Categorical (the "
                            f"weights of the components), got {type(mixing).__name__}")
        if not isinstance(component, Distribution):
            raise TypeError(f"MixtureSameFamily: component must be a scg distribution whose "
                            f"rightmost batch dim indexes the components, got "
                            f"{type(component).__name__}")
        k = mixing.num_categories
        shape = tuple(component.batch_shape)
        try:
            batch = np.broadcast_shapes(tuple(mixing.batch_shape), shape[:-1])
        except ValueError:
            batch = None
        if not shape or shape[-1] != k or batch is None:
            raise ValueError(
                f"MixtureSameFamily: component has batch_shape {shape}, but the mixing "
                f"Categorical (batch_shape {tuple(mixing.batch_shape)}, {k} categories) needs "
                f"{tuple(mixing.batch_shape) + (k,)}: the components along the rightmost "
                "batch dim; expand one of them (d.expand(...)) to match")
        if batch != tuple(mixing.batch_shape):
            mixing = mixing.expand(batch)
        if batch != shape[:-1]:
            component = component.expand(batch + (k,))
        self.mixing, self.component = mixing, component
        params = {**part_params("mixing_", mixing), **part_params("component_", component)}
        super().__init__(params, mixing.batch_shape, component.event_shape, validate_args=False)
        self._checked = getattr(mixing, "_checked", False) and \
            getattr(component, "_checked", False)

    @property
    def arg_constraints(self):
        rank = len(self.batch_shape)
        return {**part_constraints("mixing_", self.mixing, rank),
                **part_constraints("component_", self.component, rank)}

    @property
    def support(self):
        return self.component.support

    def _rebuild(self, params):
        out = MixtureSameFamily(rebuilt_part("mixing_", self.mixing, params),
                                rebuilt_part("component_", self.component, params))
        out._checked = self._checked
        return out

    def expand(self, batch_shape):
        """Both parts broadcast to `batch_shape` (the components keep their own dim)."""
        batch_shape = tuple(batch_shape)
        if batch_shape == self.batch_shape:
            return self
        k = self.mixing.num_categories
        return MixtureSameFamily(self.mixing.expand(batch_shape),
                                 self.component.expand(batch_shape + (k,)))

    def _weights_along_events(self, w):
        """(batch..., K) weights with unit axes for the event dims."""
        for _ in self.event_shape:
            w = np.expand_dims(w, -1)
        return w

    def _sample(self, rng, shape):
        shape = tuple(shape)
        draws = plain_draw(self.component, rng, shape)          # (*shape, *B, K, *event)
        choice = self.mixing._sample(rng, shape).astype(np.int64)  # (*shape, *B)
        axis = -1 - len(self.event_shape)
        index = choice.reshape(choice.shape + (1,) * (1 + len(self.event_shape)))
        index = np.broadcast_to(index, draws.shape[:axis % draws.ndim] + (1,)
                                + tuple(self.event_shape))
        return np.take_along_axis(draws, index, axis=axis).squeeze(axis)

    def log_prob(self, value):
        x = np.expand_dims(value, -1 - len(self.event_shape))  # one copy per component
        return R.logsumexp(self.mixing._log_probs() + self.component.log_prob(x), axis=-1)

    def cdf(self, value):
        """sum_k w_k cdf_k(value), where the components have a cdf."""
        x = np.expand_dims(value, -1 - len(self.event_shape))
        return np.sum(self.mixing._probs() * self.component.cdf(x), axis=-1)

    @property
    def mean(self):
        w = self._weights_along_events(self.mixing._probs())
        axis = -1 - len(self.event_shape)
        return full(np.sum(w * self.component.mean, axis=axis), self.batch_shape + self.event_shape)

    @property
    def variance(self):
        # the law of total variance: E[var_k] + var of the component means
        w = self._weights_along_events(self.mixing._probs())
        axis = -1 - len(self.event_shape)
        m = self.component.mean
        mean = np.sum(w * m, axis=axis)
        second = np.sum(w * (self.component.variance + m ** 2), axis=axis)
        return full(second - mean ** 2, self.batch_shape + self.event_shape)

    def __repr__(self):
        return (f"MixtureSameFamily({family_name(self.mixing)}(K={self.mixing.num_categories}), "
                f"{self.component!r})")
