"""Small kernel calls whose parameters are single numbers run the flat kernel in the
calling thread, with the numbers passed as numbers: the values are those of the 2-D
kernel with the parameters filled in, bit for bit, for contiguous, strided and 2-D draws,
eagerly and in scg.jit's specialized calls."""

import numpy as np
import pytest

from scg.kernels import continuous as K
from scg.kernels.primitives import _small_call, run

KERNELS = [(K.normal_density, (0, 1, 2, 3)), (K.loc_scale_path, (0, 2, 3))]


def _filled(kernel, which, x, params):
    """The 2-D kernel on the draws with each parameter filled in (the general call)."""
    grid = (x.shape[0], x.size // x.shape[0])
    views = [np.ascontiguousarray(x).reshape(grid)]
    for p in params:
        views.append(np.full(grid, float(np.asarray(p).reshape(-1)[0])))
    for v in views:
        v.flags.writeable = False
    out = np.empty(grid)
    kernel(which, out, *views)
    return out.reshape(x.shape)


def _draws(form, rng):
    if form == "contiguous":
        return rng.normal(size=7)
    if form == "strided":
        return rng.normal(size=14)[::2]
    return rng.normal(size=(5, 3))


@pytest.mark.parametrize("kernel, whichs", KERNELS)
@pytest.mark.parametrize("form", ["contiguous", "strided", "matrix"])
@pytest.mark.parametrize("kind", ["numpy scalar", "float", "one-entry array"])
def test_numbers_passed_as_numbers_give_the_filled_kernels_values(kernel, whichs, form, kind):
    rng = np.random.default_rng(0)
    x = _draws(form, rng)
    loc, scale = -0.3, 1.7
    params = {"numpy scalar": (np.float64(loc), np.float64(scale)), "float": (loc, scale),
              "one-entry array": (np.array([loc]), np.array([scale]))}[kind]
    for which in whichs:
        expected = _filled(kernel, which, x, params)
        np.testing.assert_array_equal(run(kernel, which, x, *params), expected)
        call = _small_call(kernel, which, (x, *params))
        assert call is not None
        np.testing.assert_array_equal(call(x, *params), expected)
        # (the specialized call is made once and replayed on other values of the same kinds)
        y = x * 2.5
        np.testing.assert_array_equal(call(y, *params), _filled(kernel, which, y, params))
