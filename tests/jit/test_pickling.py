"""The contract, pickling: a jitted function pickles with cloudpickle (for dask) as its
function and settings, and the copy records again; `@scg.jit` on a function of an
importable module pickles with `pickle` too, by its name. (A jitted step and a blackbox
model on a cluster: tests/studies/test_dask.py.) Values a recorded call leaves behind
(an expectation's `last_aux`) copy and pickle as their values.
"""

import copy
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


def _model_with_aux(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0))
    return (x - 1.0) ** 2, {"x": x, "mu": mu * 2.0}


def test_last_aux_of_a_recorded_call_copies_and_pickles_as_its_values():
    """After the recorded calls, E.last_aux holds the recording's values: copy.deepcopy and
    pickle give their plain arrays (they recursed without end, or could not pickle the
    recording)."""
    jitted = scg.expectation(_model_with_aux, n=4, seed=8, has_aux=True)
    step = scg.jit(lambda p: scg.value_and_grad(jitted, has_aux=True)(p))
    for k in range(3):
        (value, aux), g = step(np.array(0.1 * k))
        for copied in (copy.deepcopy(jitted.last_aux),
                       pickle.loads(pickle.dumps(jitted.last_aux))):
            assert type(copied["x"]) is np.ndarray
            np.testing.assert_array_equal(copied["x"], np.asarray(aux["x"]))

