"""The contract, pickling: a jitted function pickles with cloudpickle (for dask) as its
function and settings, and the copy records again; `@scg.jit` on a function of an
importable module pickles with `pickle` too, by its name. (A jitted step and a blackbox
model on a cluster: tests/studies/test_dask.py.)
"""

import pickle

import numpy as np
import pytest

import scg

from .compare import same_bits


def test_a_jitted_closure_round_trips_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    E = scg.expectation(lambda mu: (scg.sample("x", scg.Normal(mu, 1.0)) - 1.0) ** 2,
                        n=4, seed=0)
    step = scg.jit(scg.grad(E), validate=3)
    for _ in range(5):
        step(np.array(0.3))
    assert step.stats["replays"] > 0, step.explain()
    copy = cloudpickle.loads(cloudpickle.dumps(step))
    assert copy is not step and copy.validate == 3 and copy.stats["calls"] == 0
    for _ in range(5):  # (the copy and its own expectation draw what the original draws)
        assert same_bits(copy(np.array(0.3)), step(np.array(0.3)))
    assert copy.stats["replays"] > 0, copy.explain()


def test_a_jitted_function_of_a_module_pickles_with_pickle():
    """`@scg.jit` on a module's function: pickle (multiprocessing, concurrent.futures)
    takes it by its name, as it takes functions; cloudpickle too."""
    import cloudpickle

    from .models import doubled
    for _ in range(4):
        doubled(np.ones(2))
    assert pickle.loads(pickle.dumps(doubled)) is doubled
    assert cloudpickle.loads(cloudpickle.dumps(doubled)) is doubled
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(doubled))(np.ones(2)), 2.0)
