"""Multi-sample bounds: `scg.logmeanexp` over the particles of a plate.

An importance-weighted (IWAE) bound draws K particles as a plate and averages their
weights inside the log: log (1/K) sum_k exp(log_w_k). `logmeanexp` computes it stably
over the plate's axis of a per-draw value; the result combines the plate's elements (a
cost of it lies outside the plate). The run keeps each such bound with its log-weights,
so that an estimator built on its structure (`scg.VIMCO`) can find them.
"""

from dataclasses import dataclass

import numpy as np

from ..core import effects
from ..estimators.dreg import normalized_weights
from ..numpy import rules as R
from .persample import PerSample
from .runtime import current_run, send


@dataclass
class Bound:
    """A logmeanexp in a run: its plate, its log-weights (the per-draw value it was given)
    and its result."""

    plate: object
    log_weights: PerSample
    result: object

    def _unit_axes(self):
        """The log-weights' axes of size 1 along no plate (Pyro's layout of a site in an
        outer plate only, log-weights of shape (K, 1)): left out of the plain arrays."""
        shape = self.log_weights.shape
        return tuple(k for k, label in enumerate(self.log_weights.axes)
                     if not label and shape[k] == 1)

    def plain_log_weights(self):
        """The log-weights as a plain array (rows, *other axes, K): the plate's axis last."""
        labels = [label for k, label in enumerate(self.log_weights.axes)
                  if k not in self._unit_axes()]
        axis = next(k for k, label in enumerate(labels) if self.plate in label)
        return effects.opaque(_plate_axis_last, effects.asarray(self.log_weights.value,
                                                                dtype=float), axis + 1,
                              tuple(1 + k for k in self._unit_axes()))

    def other_plates(self):
        """The plates of the log-weights' other axes, in their order (each axis must lie
        along one plate: the data points around the particles, say; an axis of size 1 along
        none is left out)."""
        out = []
        unit = self._unit_axes()
        for k, label in enumerate(self.log_weights.axes):
            if self.plate in label or k in unit:
                continue
            if len(label) != 1:
                raise ValueError(
                    f"scg.logmeanexp(..., plate={self.plate.name!r}): the log-weights have an "
                    "axis that lies along no plate (or along several); a multi-sample "
                    "estimator needs every other axis to be a plate's (sum the others into "
                    "the log-weights)")
            out.append(next(iter(label)))
        return out

    def plain_result(self):
        """The bound's value as a plain array (rows, *other axes)."""
        v = self.result.value if isinstance(self.result, PerSample) else self.result
        v = effects.asarray(v, dtype=float)
        if not isinstance(self.result, PerSample) or not self._unit_axes():
            return v
        # (the result keeps the log-weights' axes but the plate's: the unit ones go too)
        labels = self.result.axes or ((),) * len(self.result.shape)
        unit = tuple(1 + k for k, label in enumerate(labels)
                     if not label and self.result.shape[k] == 1)
        return effects.opaque(_squeezed, v, unit) if unit else v


def _plate_axis_last(w, axis, unit=()):
    if unit:
        w = np.squeeze(w, axis=unit)
    return np.moveaxis(w, axis, -1)


def _squeezed(v, axes):
    return np.squeeze(v, axis=axes)


def logmeanexp(value, plate):
    """log(mean(exp(value))) over the elements of plate `plate`, computed stably.

    Args:
        value: a per-draw value with an axis along the plate (computed inside it).
        plate: the plate's name.

    Returns:
        The value with the plate's axis reduced: it combines the plate's elements.

    Example:
        >>> with scg.plate("particles", K):
        ...     z = scg.sample("z", q, estimator=scg.VIMCO())
        ...     log_w = log_joint(x, z) - q.log_prob(z)
        >>> bound = scg.logmeanexp(log_w, plate="particles")
    """
    run = current_run(f"scg.logmeanexp(..., plate={plate!r})")
    if not isinstance(plate, str):
        raise TypeError(f"scg.logmeanexp: plate is the plate's name (a str), got {plate!r}")
    if not isinstance(value, PerSample) or value.level != run.level:
        raise ValueError(f"scg.logmeanexp(..., plate={plate!r}): the value does not vary "
                         "between draws, so it has no axis along the plate; compute it from "
                         "the plate's sites, inside `with scg.plate(...)`")
    axis = next((k for k, label in enumerate(value.axes)
                 if any(p.name == plate for p in label)), None)
    if axis is None:
        along = sorted({p.name for p in value.plates}) or ["none"]
        raise ValueError(f"scg.logmeanexp(..., plate={plate!r}): the value lies along no axis "
                         f"of plate {plate!r} (its plates: {', '.join(along)}); compute it "
                         "per element, inside the plate, from the plate's sites")
    frame = next(p for p in value.axes[axis] if p.name == plate)
    result = R.subtract(R.logsumexp(value, axis=axis), np.log(frame.size))
    # (a message on the effect stack, as sites and costs are: the run records the bound)
    send(f"scg.logmeanexp(..., plate={plate!r})",
         effects.Message("bound", plate, bound=Bound(frame, value, result)))
    return result


def record_bound(run, msg):
    """Perform a "bound" message in `run`: keep the bound (VIMCO reads it) and hand its
    normalized weights to the DReG sites whose particles it averages."""
    bound = msg.fields["bound"]
    run.bounds.append(bound)
    frame, value = bound.plate, bound.log_weights
    for proposal in run.proposals:
        if frame in proposal.plates and proposal.name in value.deps.up and \
                (frame, proposal.name) not in value.mixed:
            w = bound.plain_log_weights()
            proposal.fill(bound, effects.opaque(normalized_weights, w), bound.other_plates())
