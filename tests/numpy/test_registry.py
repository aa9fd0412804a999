"""The registry covers every dispatched numpy function and every smooth primitive."""

import numpy as np
from hypothesis import HealthCheck, given, settings

from scg.core.tape import Box, Primitive
from scg.numpy import dispatch
from scg.numpy import rules as R
from tests.core.gradcheck import check_grads
from tests.numpy.registry import CASES, INSPECT, JUMPS, REGISTRY


def test_every_dispatched_numpy_function_is_registered():
    dispatched = set(dispatch.UFUNCS) | set(dispatch.FUNCTIONS)
    missing = dispatched - set(REGISTRY) - JUMPS - INSPECT
    assert not missing, (f"dispatched without a gradient test: {sorted(f.__name__ for f in missing)}; "
                         "add a Case to tests/numpy/registry.py (or to JUMPS / INSPECT)")


def test_jumps_and_inspections_are_not_differentiable_entries():
    assert not (JUMPS | INSPECT) & set(REGISTRY)


def test_every_smooth_primitive_is_exercised(monkeypatch):
    """Run every case once (second order) and record which primitives reach the tape."""
    seen = set()
    process = Box.process

    def recording(prim, args, kwargs, level):
        seen.add(prim)
        return process(prim, args, kwargs, level)

    monkeypatch.setattr(Box, "process", staticmethod(recording))
    for _, _, case in CASES:
        if isinstance(case.strategy, list):
            drawn = [case.strategy[k] for k in range(len(case.strategy))]
        else:
            drawn = []

            @settings(max_examples=3, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case.strategy)
            def collect(d):
                drawn.append(d)

            collect()
        for d in drawn:
            d = dict(d)
            args = case.sample(np.random.default_rng(0), d.pop("shapes"))
            check_grads(lambda *xs: case.fn(*xs, **d), args, order=2)
    # (numpy's own reductions take only scg.jit's recorded values, which carry no
    # derivative: tests/jit/test_fresh_run_numpy_operations.py)
    plain_only = {R.numpy_sum, R.numpy_mean, R.numpy_var, R.numpy_std}
    smooth = {p for p in vars(R).values()
              if isinstance(p, Primitive) and p.kind == "smooth" and p not in plain_only}
    missing = smooth - seen
    assert not missing, f"primitives no registry case records: {sorted(p.name for p in missing)}"
