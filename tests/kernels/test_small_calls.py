"""Small kernel calls whose parameters are single numbers run the flat kernel in the
calling thread, with the numbers passed as numbers: the values are those of the 2-D
kernel with the parameters filled in, bit for bit, for contiguous, strided and 2-D draws,
eagerly and in scg.jit's specialized calls."""

import numpy as np
import pytest

from scg.kernels import continuous as K
from scg.kernels.primitives import _broadcast_call, _small_call, _strided_grid, laid_out, run

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


def _materialized(kernel, which, args):
    """The 2-D kernel on every argument broadcast and copied to the full shape."""
    arrays = [np.asarray(a, dtype=float) for a in args]
    shape = np.broadcast_shapes(*[a.shape for a in arrays])
    grid = (1, int(np.prod(shape)))
    views = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(grid) for a in arrays]
    for v in views:
        v.flags.writeable = False
    out = np.empty(grid)
    kernel(which, out, *views)
    return out.reshape(shape)


@pytest.mark.parametrize("which", [0, 1, 2, 3])
@pytest.mark.parametrize("scale", [1.0, 1.7, "per component"])
def test_arguments_broadcast_along_other_axes(which, scale):
    """A mixture's observations (N,) against its components' locations (1, K, 1): the
    kernel runs on strided views of both, eagerly and in scg.jit's call specialized to the
    recording (its constants laid out once), with the values of the kernel on the
    arguments broadcast and copied, bit for bit. A recorded argument that is not
    contiguous in a replay takes the general call."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    loc = rng.normal(size=(1, 4, 1))
    scale = rng.uniform(0.5, 2.0, size=(1, 4, 1)) if scale == "per component" else scale
    args = (x, loc, scale)
    expected = _materialized(K.normal_density, which, args)
    np.testing.assert_array_equal(run(K.normal_density, which, *args), expected)
    assert _strided_grid((1, 4, 300), [np.shape(a) for a in (x, loc)],
                         [np.asarray(a).strides for a in (x, loc)])[:2] == (4, 300)
    constants = (0, 2)  # (the observations and the scale: constants of a program)
    call = _broadcast_call(K.normal_density, which, args, constants)
    assert call is not None and call.prefilled == constants
    laid = [laid_out(a, *call.grid) if k in constants else a for k, a in enumerate(args)]
    np.testing.assert_array_equal(call(*laid), expected)
    other = rng.normal(size=(1, 4, 1))
    laid[1] = other
    np.testing.assert_array_equal(call(*laid), _materialized(K.normal_density, which,
                                                             (x, other, scale)))
    strided = np.repeat(other, 2, axis=1)[:, ::2]  # (not contiguous: the general call)
    laid[1] = strided
    np.testing.assert_array_equal(call(*laid), _materialized(K.normal_density, which,
                                                             (x, strided, scale)))


def test_a_model_whose_calls_arrive_as_the_kept_calls_overflow_still_replays(monkeypatch):
    # (scg.jit's specialized kernel calls are constants of its programs: two recordings
    # replay only if they name the same function, also when the kept ones overflow while
    # the first recording makes its calls)
    import scg
    from scg.kernels import primitives

    monkeypatch.setattr(primitives, "_KEPT_CALLS", 6)

    def log_density(x):
        return np.sum(scg.Normal(x, 1.5).log_prob(np.linspace(-1.0, 1.0, x.size)))

    def three_densities(x):  # (three kinds of call: the scale a number, a vector, x's)
        return np.sum(scg.Normal(x, 1.5).log_prob(np.full(x.shape, 0.2))) + \
            np.sum(scg.Normal(0.3, x * x + 1.0).log_prob(np.full(x.shape, 0.1))) + \
            np.sum(scg.Normal(x, x * x + 1.0).log_prob(np.full(x.shape, -0.1)))

    for size in range(2, 7):  # (other shapes first: the kept calls are nearly full)
        f = scg.jit(log_density)
        for _ in range(3):
            f(np.linspace(0.0, 1.0, size))
    g = scg.jit(three_densities)
    x = np.linspace(0.0, 1.0, 11)
    for _ in range(4):
        assert g(x) == three_densities(x)
    assert g.stats["replays"] >= 1, g.explain()
