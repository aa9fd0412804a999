"""Studies of estimators: scg.compare, and per-draw gradients in chunks, in this process or
on a Dask cluster."""

from .compare import Comparison, Row, compare
from .gradients import grad_samples
from .moments import Moments

__all__ = ["Comparison", "Moments", "Row", "compare", "grad_samples"]
