"""TransformedDistribution(base, transforms): the law of transforms(x) for x ~ base."""

import numpy as np

from ..core import effects
from ..numpy import rules as R
from . import constraints
from ._util import full, mask_outside, outside_to
from .base import Distribution
from .composite import part_constraints, part_params, plain_draw, rebuilt_part
from .transforms import AffineTransform, Transform


class TransformedDistribution(Distribution):
    """The distribution of y = t_k(...t_1(x)) for x ~ base, by the change of variables.

    log_prob(y) = base.log_prob(x) - sum_i log|det J_i| at the inverse images; -inf where y
    (or an intermediate inverse) is outside a transform's codomain. A draw goes through
    the base's path when it has one (has_rsample follows the base), so pathwise gradients
    flow through the base and the transforms, the transforms' own parameters included.
    A transform of vectors (event_dim 1, StickBreakingTransform) needs a base whose
    event_shape has that many dims (use `base.to_event(1)`).

    Args:
        base: a scg distribution.
        transforms: a Transform or a list of them, applied in order.

    Example:
        >>> d = scg.TransformedDistribution(scg.Normal(0.0, 1.0), [scg.transforms.ExpTransform()])
        >>> d.log_prob(1.0)   # = scg.LogNormal(0.0, 1.0).log_prob(1.0)
    """

    def __init__(self, base, transforms, validate_args=None):
        if not isinstance(base, Distribution):
            raise TypeError(f"TransformedDistribution: base must be a scg distribution, got "
                            f"{type(base).__name__}")
        transforms = [transforms] if isinstance(transforms, Transform) else list(transforms)
        for t in transforms:
            if not isinstance(t, Transform):
                raise TypeError(f"TransformedDistribution: every transform must be one of "
                                f"scg.transforms, got {type(t).__name__}")
        base, shape = _broadcast_base(base, transforms)
        self.base, self.transforms = base, transforms
        batch_rank = len(base.batch_shape)
        params = part_params("base_", base)
        for i, t in enumerate(transforms):
            params.update({f"t{i}_{k}": v for k, v in t.params.items()})
        super().__init__(params, shape[:batch_rank], shape[batch_rank:], validate_args=False)
        self._checked = getattr(base, "_checked", False)

    @property
    def arg_constraints(self):
        out = part_constraints("base_", self.base, len(self.batch_shape))
        event = len(self.event_shape)
        for i, t in enumerate(self.transforms):
            for k in t.params:
                out[f"t{i}_{k}"] = constraints.Constraint("real", constraints._finite,
                                                          event_dim=event)
        return out

    @property
    def has_rsample(self):
        return self.base.has_rsample

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base.support

    def _rebuild(self, params):
        base = rebuilt_part("base_", self.base, params)
        transforms = [t.rebuild({k: params[f"t{i}_{k}"] for k in t.params})
                      for i, t in enumerate(self.transforms)]
        out = TransformedDistribution(base, transforms)
        out._checked = self._checked
        return out

    def expand(self, batch_shape):
        """The same transforms of the base broadcast to `batch_shape`."""
        batch_shape = tuple(batch_shape)
        if batch_shape == self.batch_shape:
            return self
        event = self.event_shape
        transforms = [t.rebuild({k: np.broadcast_to(v, batch_shape + event)
                                 for k, v in t.params.items()}) for t in self.transforms]
        return TransformedDistribution(self.base.expand(batch_shape), transforms)

    # ------------------------------------------------------------ draws
    def _forward(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def noise(self, rng, shape=()):
        return self.base.noise(rng, shape)

    def path(self, noise):
        return self._forward(self.base.path(noise))

    def path_caveat(self, draws):
        return self.base.path_caveat(draws)

    def _sample(self, rng, shape):
        return effects.asarray(self._forward(plain_draw(self.base, rng, shape)))

    # ------------------------------------------------------------ densities
    def log_prob(self, value):
        event = len(self.event_shape)
        y, inside, correction = value, None, 0.0
        for t in reversed(self.transforms):
            ok = t.inside(y)                            # y's shape without t's event dims
            ok_events = np.all(ok, axis=tuple(range(-(event - t.event_dim), 0))) \
                if event > t.event_dim else ok
            inside = ok_events if inside is None else np.logical_and(inside, ok_events)
            ok_full = ok
            for _ in range(t.event_dim):
                ok_full = np.expand_dims(ok_full, -1)
            y = outside_to(ok_full, y, t.safe_point(R.shape(y)))
            x = t.inv(y)
            ladj = t.log_abs_det_jacobian(x, y)
            if event > t.event_dim:
                ladj = np.sum(ladj, axis=tuple(range(-(event - t.event_dim), 0)))
            correction = correction + ladj
            y = x
        lp = self.base.log_prob(y) - correction
        return lp if inside is None else mask_outside(inside, lp)

    def _monotone_sign(self):
        sign = 1
        for t in self.transforms:
            if t.event_dim or not t.sign:
                raise NotImplementedError(
                    f"TransformedDistribution: cdf and icdf need elementwise transforms of "
                    f"known direction; {t!r} is not (a vector transform, or a scale whose sign "
                    "is traced or mixed)")
            sign *= t.sign
        return sign

    def cdf(self, value):
        """P(Y <= value) through the base's cdf, for elementwise monotone transforms (values in
        the support)."""
        sign = self._monotone_sign()
        x = value
        for t in reversed(self.transforms):
            x = t.inv(x)
        c = self.base.cdf(x)
        return c if sign > 0 else 1.0 - c

    def icdf(self, u):
        """The quantile through the base's icdf, for elementwise monotone transforms."""
        sign = self._monotone_sign()
        return self._forward(self.base.icdf(u if sign > 0 else 1.0 - u))

    # ------------------------------------------------------------ moments
    def _affine_only(self, what):
        if not all(isinstance(t, AffineTransform) for t in self.transforms):
            raise NotImplementedError(
                f"TransformedDistribution: no closed-form {what} through "
                f"{', '.join(map(repr, self.transforms))}; only affine transforms keep one. "
                "Estimate it from draws (d.sample(rng, (n,)).mean(0)) instead")

    @property
    def mean(self):
        self._affine_only("mean")
        m = self.base.mean
        for t in self.transforms:
            m = t(m)
        return full(m, self.batch_shape + self.event_shape)

    @property
    def variance(self):
        self._affine_only("variance")
        v = self.base.variance
        for t in self.transforms:
            v = v * t.scale ** 2
        return full(v, self.batch_shape + self.event_shape)

    def __repr__(self):
        return (f"TransformedDistribution({self.base!r}, "
                f"[{', '.join(map(repr, self.transforms))}])")



def _shapes(base, transforms):
    """The shape of y = transforms(x) for x of the base's shape (ValueError naming why not)."""
    event_rank = len(base.event_shape)
    shape = tuple(base.batch_shape) + tuple(base.event_shape)
    for t in transforms:
        if t.event_dim > event_rank:
            raise ValueError(
                f"TransformedDistribution: {t!r} acts on events of {t.event_dim} "
                f"dimension(s), but the base {base!r} has event_shape "
                f"{tuple(base.event_shape)}; make its rightmost batch dims event dims "
                f"with base.to_event({t.event_dim - event_rank})")
        try:
            new = tuple(t.forward_shape(shape))
        except ValueError:
            raise ValueError(f"TransformedDistribution: the parameters of {t!r} do not "
                             f"broadcast against the base's shape {shape}") from None
        if new[len(new) - event_rank:][:-1] != shape[len(shape) - event_rank:][:-1]:
            raise ValueError(f"TransformedDistribution: {t!r} changes the event shape "
                             f"{shape[len(shape) - event_rank:]} of the base beyond its last "
                             "axis; give its parameters the base's event shape")
        shape = new
    return shape


def _broadcast_base(base, transforms):
    """(base, shape of y): a base expanded to the batch shape that the transforms'
    parameters broadcast to (a parameter with more batch dims than the base)."""
    shape = _shapes(base, transforms)
    batch = shape[:len(shape) - len(base.event_shape)]
    if batch != tuple(base.batch_shape):
        base = base.expand(batch)
        shape = _shapes(base, transforms)
    return base, shape
