"""One road: what a run does besides computing reaches the handlers of the effect stack
(scg/core/effects.py), never a per-thread variable of its own. These tests hold the stack
to that: per-draw operations, the support tests skipped for a site's own draws, a
kernel's own draws, and the recording of scg.jit."""

import numpy as np

import scg
from scg.core import effects
from scg.core.tape import THREAD
from scg.distributions._util import INSIDE_DRAW, mask_outside, own_draws
from scg.kernels import fused


class Watcher(effects.Handler):
    """A handler that watches per-draw operations and takes no values."""

    takes_values = False
    watches_operations = True

    def __init__(self):
        self.seen = []

    def operation(self, prim, inputs, args, kwargs, result):
        self.seen.append(getattr(prim, "name", prim))


def test_the_stack_keeps_its_innermost_handler_of_each_role():
    outer, inner, values = Watcher(), Watcher(), effects.Handler()
    assert THREAD.ops is None and THREAD.values is None
    effects.push(outer)
    effects.push(values)
    effects.push(inner)
    assert THREAD.ops is inner and THREAD.values is values
    effects.operation("op", (), (), {}, None)
    with effects.operations_unseen():
        assert THREAD.ops is None
        effects.operation("unseen", (), (), {}, None)
    with effects.values_only():  # (a model run of its own: the watcher is hidden too)
        assert THREAD.ops is None and THREAD.handler is values
    assert THREAD.ops is inner and THREAD.handler is inner
    effects.pop(inner)
    assert THREAD.ops is outer
    effects.pop(values)
    effects.pop(outer)
    assert THREAD.ops is None and THREAD.values is None and THREAD.handler is None
    assert inner.seen == ["op"] and outer.seen == []


def test_a_runs_per_draw_operations_reach_its_trace_through_the_stack():
    """The graph of scg.trace is built from the operation messages; the site's own
    sampling and log-density are not among them."""
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        y = np.exp(x) + 1.0
        return y * y

    graph = scg.trace(model, 0.3, n=4).graph
    ops = {d["op"] for _, d in graph.nodes(data=True) if d["kind"] == "deterministic"}
    assert {"exp", "add", "multiply"} <= ops
    assert "normal_log_prob" not in ops and THREAD.ops is None


def test_own_draws_answers_the_support_tests_and_forwards_the_rest():
    class Checks(effects.Handler):
        def __init__(self):
            self.asked = []

        def check(self, predicate, x, where):
            self.asked.append(where)
            return bool(predicate(x))

    outside = np.array([True, False])
    checks = Checks()
    effects.push(checks)
    try:
        masked = mask_outside(outside, np.zeros(2))
        with own_draws():
            kept = mask_outside(outside, np.zeros(2))  # (answered by own_draws: kept as is)
            assert effects.check(lambda x: x > 0, 1.0, "a positive scale")
    finally:
        effects.pop(checks)
    assert masked[1] == -np.inf and np.all(kept == 0.0)
    assert checks.asked == [INSIDE_DRAW, "a positive scale"]


def test_a_kernels_own_draws_are_told_to_the_stack():
    rng = np.random.default_rng(5)
    shape = (fused.PARALLEL_MIN * 2,)
    if not fused.numba_draws(rng):  # pragma: no cover  (numba's draws are numpy's here)
        return
    start = np.random.default_rng(5).standard_normal(shape)
    with fused.positions_of_draws() as taken:
        out = fused.standard_normal(rng, shape)
    assert np.array_equal(out, start) and len(taken) == 1 and taken[0][1] == shape
    again = np.random.default_rng(0)
    fused.restore_position(again, taken[0][0])
    assert np.array_equal(again.standard_normal(shape), start)
    assert THREAD.values is None


def test_a_recorded_value_records_only_while_its_recording_is_on_the_stack():
    kept = []

    def f(x):
        kept.append(x)
        return x * 2.0

    step = scg.jit(f)
    step(np.ones(3))
    assert THREAD.recording is None
    # (a value kept from the recording, used afterwards: computed, not recorded)
    assert np.array_equal(np.asarray(kept[0] + 1.0), np.full(3, 2.0))
