"""A large pathwise Normal draw: the tape keeps where its noise was drawn, not the noise,
and the scale's derivative draws it again. Every result must be the one of the tape that
keeps the noise, bit for bit."""

import numpy as np
import pytest

import scg
from scg.core.tape import Box
from scg.kernels import fused as F
from scg.stochastic import sites as S

N = F.REUSE_MIN + 3  # (the smallest size at which the noise is not kept)
THETA = {"mu": 2.0, "sigma": 1.5}


def _needs_numba_draws():
    # where numba's normal draws are not numpy's, the noise is kept and never drawn again
    if not F.numba_draws(np.random.default_rng()):
        pytest.skip("numba's normal draws differ from numpy's here: no noise is drawn again")


def _model(theta):
    x = scg.sample("x", scg.Normal(theta["mu"], theta["sigma"]), estimator="pathwise")
    return x ** 2 + np.sin(x)


@pytest.fixture
def keeping_the_noise(monkeypatch):
    def keep(d):
        monkeypatch.setattr(S.SiteDraw, "noise_path", lambda self: self.path(self.noise()))
    return keep


def test_per_draw_gradients_and_the_mean_are_those_of_the_kept_noise(keeping_the_noise):
    _needs_numba_draws()
    E = scg.expectation(_model, n=N, seed=4)
    samples = scg.grad_samples(E)(THETA).samples
    box = E.last_trace.sites["x"].draw.value
    assert type(box) is Box and type(box.args[0]) is F.DrawnAgain  # (the mechanism ran)
    mean = scg.grad(scg.expectation(_model, n=N, seed=5))(THETA)
    keeping_the_noise(None)
    E = scg.expectation(_model, n=N, seed=4)
    expected = scg.grad_samples(E)(THETA).samples
    assert type(E.last_trace.sites["x"].draw.value.args[0]) is np.ndarray
    for k in THETA:
        np.testing.assert_array_equal(samples[k], expected[k])
    expected_mean = scg.grad(scg.expectation(_model, n=N, seed=5))(THETA)
    for k in THETA:
        np.testing.assert_array_equal(mean[k], expected_mean[k])


def test_the_noise_drawn_again_is_the_noise():
    _needs_numba_draws()
    rng = np.random.default_rng(9)
    rng.standard_normal(5)
    with F.positions_of_draws() as taken:
        noise = scg.Normal(0.0, 1.0).noise(rng, (N,))
    (position, shape), = taken
    again = F.DrawnAgain(position, shape)
    np.testing.assert_array_equal(again.values(), noise)
    g = np.random.default_rng(1).normal(size=N)
    np.testing.assert_array_equal(again.times(g), g * noise)
    assert again.times(np.broadcast_to(1.0, (N,))) is None  # (then values() and numpy)
    other = np.random.Generator(np.random.Philox(0))  # (numpy's own draws: the noise kept)
    assert not F.numba_draws(other) and F.numba_draws(rng)
