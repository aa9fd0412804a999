"""scg.jit never replays stale values read from objects of other libraries and kinds.

A submodule's attribute (`pkg.sub.X`), `getattr(mod, "X")`, `os.environ`, a
`collections.deque`, an `array.array`, a masked array, an `np.memmap`, a torch tensor
changed in place: after the change the jitted call gives the eager result. Minibatches
passed as slices of an `np.memmap` are arrays like any other (replayed, with each slice's
numbers). An object whose contents scg.jit cannot read makes the call run afresh, and
`explain()` names it.
"""

import array
import collections
import os
import sys
import tempfile
import threading
import types

import numpy as np
import pytest

import scg

from .compare import same_values as same


def _outside_cases():
    """name -> () -> (function, change): the function reads 2.0 from an object outside
    its arguments; change() makes it read 3.0."""
    def submodule_attribute():
        pkg = types.ModuleType("scg_test_pkg")
        pkg.sub = types.ModuleType("scg_test_pkg.sub")
        pkg.sub.X = 2.0
        sys.modules["scg_test_pkg"] = pkg
        return (lambda x: pkg.sub.X * x), lambda: setattr(pkg.sub, "X", 3.0)

    def getattr_by_name():
        mod = types.ModuleType("scg_test_settings")
        mod.X = 2.0
        return (lambda x: getattr(mod, "X") * x), lambda: setattr(mod, "X", 3.0)

    def environment():
        os.environ["SCG_TEST_SCALE"] = "2.0"
        return (lambda x: float(os.environ["SCG_TEST_SCALE"]) * x), \
            lambda: os.environ.__setitem__("SCG_TEST_SCALE", "3.0")

    def deque():
        d = collections.deque([2.0])
        return (lambda x: d[0] * x), lambda: d.__setitem__(0, 3.0)

    def array_module():
        a = array.array("d", [2.0])
        return (lambda x: a[0] * x), lambda: a.__setitem__(0, 3.0)

    def masked_array():
        m = np.ma.MaskedArray([2.0, 5.0], mask=[False, True])
        return (lambda x: float(m.sum()) * x), lambda: m.__setitem__(0, 3.0)

    def masked_array_mask():
        m = np.ma.MaskedArray([2.0, 1.0], mask=[False, True])
        return (lambda x: float(m.sum()) * x), lambda: m.mask.__setitem__(1, False)

    def memmap():
        path = tempfile.mktemp(suffix=".dat")
        m = np.memmap(path, dtype=float, mode="w+", shape=(2,))
        m[:] = 2.0
        return (lambda x: np.asarray(m)[0] * x), lambda: m.__setitem__(0, 3.0)

    def bytearray_():
        b = bytearray([2])
        return (lambda x: b[0] * x), lambda: b.__setitem__(0, 3)

    return {f.__name__.strip("_"): f for f in (
        submodule_attribute, getattr_by_name, environment, deque, array_module,
        masked_array, masked_array_mask, memmap, bytearray_)}


OUTSIDE_CASES = _outside_cases()
# (objects scg.jit does not compare, or calls outside its allowlist: the function runs
# afresh, with the eager numbers)
RUN_AFRESH = {"environment", "array_module", "masked_array", "masked_array_mask", "bytearray"}


@pytest.mark.parametrize("case", list(OUTSIDE_CASES))
def test_a_change_outside_the_arguments_is_seen(case):
    fn, change = OUTSIDE_CASES[case]()
    jf = scg.jit(fn)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert same(fn(x), jf(x))
    if case in RUN_AFRESH:
        assert "runs afresh on every call" in jf.explain()
    else:
        assert jf.stats["replays"] > 0, jf.explain()
    change()
    expected = fn(x)
    assert same(jf(x), expected)
    assert same(jf(x), expected)


def test_a_torch_tensor_changed_in_place_runs_afresh():
    torch = pytest.importorskip("torch")
    t = torch.full((2,), 2.0, dtype=torch.float64)

    def f(x):
        return t.numpy() * x
    jf = scg.jit(f)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert same(f(x), jf(x))
    assert "runs afresh on every call" in jf.explain()  # (another library's object)
    t.mul_(1.5)
    assert same(jf(x), f(x))


def _minibatch_step(data):
    def loss(w, batch):
        def model():
            z = scg.sample("z", scg.Normal(batch @ w, 1.0))
            return np.sum(z ** 2)
        return scg.expectation(model, n=4, seed=0)

    def step(w, batch):
        return scg.grad(lambda w: loss(w, batch))(w)
    return step


def test_minibatches_as_memmap_slices_replay_each_batch():
    path = tempfile.mktemp(suffix=".dat")
    data = np.memmap(path, dtype=float, mode="w+", shape=(40, 3))
    data[:] = np.random.default_rng(1).normal(size=(40, 3))
    w = np.array([0.5, -1.0, 2.0])
    eager = _minibatch_step(data)
    jitted = scg.jit(_minibatch_step(data))
    for k in range(10):
        batch = data[4 * k:4 * k + 4]
        assert np.allclose(jitted(w, batch), eager(w, batch), rtol=1e-12, atol=0)
    assert jitted.stats["replays"] >= 6, jitted.explain()


def test_an_object_out_of_reach_runs_afresh_and_is_named():
    counter = iter([2.0, 2.0, 3.0, 3.0, 3.0])  # (a Python iterator: no contents to read)

    def f(x):
        return next(counter) * x
    jf = scg.jit(f)
    x = np.ones(2)
    got = [jf(x) for _ in range(5)]
    assert [g[0] for g in got] == [2.0, 2.0, 3.0, 3.0, 3.0]
    assert jf.stats["replays"] == 0
    assert "list_iterator" in jf.explain() and "pass what the function needs" in jf.explain()


def test_locks_and_files_run_afresh_unless_trusted():
    lock = threading.Lock()
    out = sys.stdout

    def f(x):
        with lock:
            assert out is not None
            return x * 2.0
    jf = scg.jit(f)
    for _ in range(5):
        jf(np.ones(2))
    assert jf.stats["replays"] == 0 and "lock" in jf.explain()
    jf = scg.jit(f, trust=(type(lock), type(out)))  # (vouched for: compared by identity)
    for _ in range(5):
        jf(np.ones(2))
    assert jf.stats["replays"] >= 2, jf.explain()


def test_a_module_attribute_read_through_a_computed_name_is_seen():
    settings = types.ModuleType("scg_test_computed")
    settings.scale_a = 2.0
    settings.scale_b = 5.0

    def f(x, which):
        return getattr(settings, "scale_" + which) * x
    jf = scg.jit(f)
    x = np.array([1.0, 2.0])
    for _ in range(4):
        assert same(jf(x, "a"), f(x, "a"))
    assert jf.stats["replays"] > 0, jf.explain()
    settings.scale_a = 3.0
    assert same(jf(x, "a"), f(x, "a"))
    settings.scale_c = 7.0  # (an attribute added later, read by a name not seen before)
    assert same(jf(x, "c"), f(x, "c"))
