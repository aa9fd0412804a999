"""The flat parallel kernels against their twins, and `run` choosing them only when valid;
the parallel leave-one-out advantage against the baseline's own formula; a forked child."""

import multiprocessing
import os

import numpy as np
import pytest

from scg.estimators.baselines import LeaveOneOut
from scg.kernels import continuous as C
from scg.kernels import parallel as P
from scg.kernels.primitives import PARALLEL_MIN, readonly_flat, run, run_flat

rng = np.random.default_rng(1)
N = PARALLEL_MIN + 7  # large enough for the flat kernels
X = rng.normal(0.5, 2.0, N)
G = rng.normal(size=N)
FLATS = [(C.normal_density, P.normal_density_flat, C.normal_density_twin),
         (C.loc_scale_path, P.loc_scale_path_flat, C.loc_scale_path_twin)]


def _two_d(kernel, which, x, loc, scale):
    """The 2-D kernel itself, on explicit (n, 1) copies of the parameters."""
    out = np.empty((x.size, 1))
    args = [np.full((x.size, 1), v) for v in (loc, scale)]
    kernel(which, out, x.reshape(-1, 1), *args)
    return out.reshape(-1)


@pytest.mark.parametrize("kernel, flat, twin", FLATS)
def test_flat_kernels_match_twins_and_2d_kernels(kernel, flat, twin):
    for which in range(4):
        for g in (None, G):
            out = np.empty(N)
            flat(which, out, readonly_flat(np.empty(0) if g is None else g),
                 readonly_flat(X), 0.3, 1.7)
            np.testing.assert_allclose(out, P.flat_twin(twin, which, g, X, 0.3, 1.7),
                                       rtol=1e-12, atol=1e-14)
            expected = _two_d(kernel, which, X, 0.3, 1.7)
            np.testing.assert_array_equal(out, expected if g is None else g * expected)


def test_run_takes_the_flat_kernel_only_for_single_valued_parameters():
    loc = np.broadcast_to(np.array([0.3]), (N,))     # a per-draw copy of one value
    out = run_flat(C.normal_density, 2, (X, loc, np.float64(1.7)), G)
    np.testing.assert_array_equal(out, G * _two_d(C.normal_density, 2, X, 0.3, 1.7))
    np.testing.assert_array_equal(run(C.normal_density, 0, X, loc, 1.7),
                                  _two_d(C.normal_density, 0, X, 0.3, 1.7))
    varying = np.linspace(0.1, 1.0, N)
    assert run_flat(C.normal_density, 0, (X, varying, 1.7)) is None      # per-draw values
    assert run_flat(C.normal_density, 0, (X[:100], 0.3, 1.7)) is None    # small
    assert run_flat(C.normal_density, 0, (X[::2], 0.3, 1.7)) is None     # not contiguous
    assert run_flat(C.normal_density, 0, (X, np.full(3, 0.3), 1.7)) is None  # bad broadcast
    assert run_flat(C.normal_density, 2, (X, 0.3, 1.7), G[:, None]) is None  # g's shape
    assert run_flat(C.gumbel_density, 0, (X, 0.3, 1.7)) is None          # no flat variant
    np.testing.assert_allclose(run(C.normal_density, 0, X, varying, 1.7),
                               C.normal_density_twin(0, X, varying, 1.7), rtol=1e-12)


@pytest.mark.parametrize("size", [10, 40, N])
def test_count_nonfinite(size):
    x = rng.normal(size=size)
    assert P.count_nonfinite(x) == 0
    x[[1, 3, size - 1]] = [np.inf, np.nan, -np.inf]
    assert P.count_nonfinite(x) == 3
    odd = x[1::2]                                          # not contiguous: the numpy count
    assert P.count_nonfinite(odd) == np.count_nonzero(~np.isfinite(odd)) > 0
    assert P.count_nonfinite(np.full(size, 1e308)) == 0    # the sum overflows, no entry does


@pytest.mark.parametrize("shape", [(N,), (N // 3, 3), (N // 4, 2, 2)])
def test_loo_advantage_is_the_baselines_formula(shape):
    q = rng.normal(size=shape) ** 2
    np.testing.assert_array_equal(P.loo_advantage(np.broadcast_to(q, shape)),
                                  LeaveOneOut().advantage(q, {}))
    assert P.loo_advantage(q[:100]) is None                     # small: numpy does it
    assert P.loo_advantage(np.broadcast_to(q[:1], shape)) is None  # one value for all draws


def _count_in_child(x):
    return P.count_nonfinite(x)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_the_kernels_after_its_parent():
    x = rng.normal(size=N)
    assert P.count_nonfinite(x) == 0                       # the parent's pool is running
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_count_in_child, (x,)).get(timeout=60) == 0


@pytest.mark.parametrize("x", [0.5, np.inf, np.float64(np.nan), 3, np.array(-np.inf),
                               np.array([[1.0, np.nan], [np.inf, 2.0]]), np.array([1, 2]),
                               np.arange(6.0).reshape(2, 3)[:, ::2], np.array([])])
def test_count_nonfinite_of_tiny_values(x):
    assert P.count_nonfinite(x) == np.count_nonzero(~np.isfinite(np.asarray(x, dtype=float)))
