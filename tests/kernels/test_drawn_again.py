"""The noise of a large pathwise Normal draw, drawn again for the scale's derivative.

`fused.DrawnAgain` keeps where the noise was drawn rather than the noise; every result
must be the one with the noise kept, bit for bit: the noise's position is saved with
its draw, under the generator's lock, so another thread drawing from the same generator
does not change it; plates and vector parameters, per-draw parameters of two sites,
value_and_grad, grad_samples, the generator's state after and the trace agree; on Philox
the noise is kept, and scg.jit and scg.hessian agree with the kept noise.
"""

import threading
import time

import numpy as np
import pytest

import scg
from scg.kernels import fused as F
from scg.stochastic import sites as S


N = F.REUSE_MIN + 3  # the smallest draw whose noise is drawn again


N2 = 2_100_000  # with a batch of 2: 4.2e6 entries >= REUSE_MIN


_DRAWN_AGAIN = S.SiteDraw.noise_path


_KEEP = lambda self: self.path(self.noise())  # noqa: E731  (the reference: noise kept)


def _both(monkeypatch, run):
    """run() with the noise drawn again, then with the noise kept (same seeds)."""
    monkeypatch.setattr(S.SiteDraw, "noise_path", _DRAWN_AGAIN)
    again = run()
    monkeypatch.setattr(S.SiteDraw, "noise_path", _KEEP)
    kept = run()
    monkeypatch.setattr(S.SiteDraw, "noise_path", _DRAWN_AGAIN)
    return again, kept


def _leaves(x, path=""):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from _leaves(x[k], f"{path}/{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}/{i}")
    else:
        yield path, x


def _assert_bitwise(a, b):
    la, lb = list(_leaves(a)), list(_leaves(b))
    assert [p for p, _ in la] == [p for p, _ in lb]
    for (p, va), (_, vb) in zip(la, lb):
        if isinstance(va, (bytes, str, int)) and not isinstance(va, bool):
            assert va == vb, p
        else:
            assert np.shape(va) == np.shape(vb), p
            np.testing.assert_array_equal(np.asarray(va), np.asarray(vb), err_msg=p)


def _needs_numba_draws():
    # where numba's normal draws are not numpy's, the noise is kept and never drawn again
    if not F.numba_draws(np.random.default_rng()):
        pytest.skip("numba's normal draws differ from numpy's here: no noise is drawn again")


def _mechanism(E, site="x"):
    return type(E.last_trace.sites[site].draw.value.args[0])


def test_drawn_again_noise_is_the_noise_when_another_thread_draws_from_the_generator():
    """`SiteDraw.noise_path` saves the generator's position (`fused.DrawnAgain.before` ->
    `save_position`) under the bit generator's lock, with the draw of the noise
    (`fused.standard_normal`). A numpy Generator is shared and thread-safe by its lock
    (`seed=` accepts one, "shared"): while another thread draws from it, the saved position
    must still be where the noise is drawn, so that the scale's derivative multiplies the
    cotangent by that noise. The per-draw gradient in sigma of E[x^2] must be 2 x eps with
    eps = (x - mu) / sigma, as it is with the noise kept."""
    _needs_numba_draws()
    mu, sigma = 2.0, 1.5
    g = np.random.default_rng(11)

    def model(mu, sigma):
        x = scg.sample("x", scg.Normal(mu, sigma), estimator="pathwise")
        return x * x

    E = scg.expectation(model, n=N, seed=g)
    scg.grad(E, argnums=1)(mu, sigma)  # (warm: compilation out of the race)
    other = threading.Thread(target=lambda: g.standard_normal(40_000_000))
    other.start()
    time.sleep(0.05)  # (the other thread holds the generator's lock, drawing)
    samples = scg.grad_samples(E, argnums=1)(mu, sigma).samples
    other.join()
    assert _mechanism(E) is F.DrawnAgain
    x = E.last_trace.sites["x"].value
    expected = 2 * x * ((x - mu) / sigma)
    np.testing.assert_allclose(samples, expected, rtol=1e-9, atol=1e-9)


def test_drawn_again_plate_and_vector_parameters_bit_for_bit(monkeypatch):
    """Plates, a vector of locations/scales (n = 2.1e6, batch 2), scg.grad twice then
    grad_samples, the generator's state after, and E.last_trace (site value, costs):
    identical to the kept noise."""
    _needs_numba_draws()
    th = {"mu": np.array([0.5, -1.0]), "sigma": np.array([1.5, 0.3])}

    def model(th):
        with scg.plate("p", 2):
            x = scg.sample("x", scg.Normal(th["mu"], th["sigma"]), estimator="pathwise")
        return np.sum(x ** 2 + np.sin(x) * x)

    def run():
        E = scg.expectation(model, n=N2, seed=1)
        out = [scg.grad(E)(th), scg.grad(E)(th)]
        mech = _mechanism(E)
        out.append(scg.grad_samples(E)(th).samples)
        out += [E.rng.bit_generator.state["state"]["state"],
                E.last_trace.sites["x"].value, E.last_trace.costs]
        return out, mech

    (again, m1), (kept, m2) = _both(monkeypatch, run)
    assert m1 is F.DrawnAgain and m2 is np.ndarray
    _assert_bitwise(again, kept)


def test_drawn_again_per_draw_parameters_two_sites_value_and_grad(monkeypatch):
    """Two Normal sites, the second's loc and scale per-draw (from the first), a cost
    using the draw twice, estimator 'auto' on the second, value_and_grad and grad with
    respect to the scale only; a user Generator whose later draws must match."""
    _needs_numba_draws()

    def model(mu, sigma):
        z = scg.sample("z", scg.Normal(mu, sigma), estimator="pathwise")
        x = scg.sample("x", scg.Normal(0.5 * z, sigma * np.exp(0.1 * z)))
        return x * x + z * x

    def run():
        g = np.random.default_rng(7)
        E = scg.expectation(model, n=N, seed=g)
        out = [scg.value_and_grad(E, argnums=(0, 1))(2.0, 1.5),
               scg.grad(E, argnums=1)(2.0, 1.5)]
        mech = (_mechanism(E, "z"), _mechanism(E, "x"))
        out += [E.last_trace.sites["x"].value, g.standard_normal(3)]
        return out, mech

    (again, m1), (kept, m2) = _both(monkeypatch, run)
    assert m1 == (F.DrawnAgain, F.DrawnAgain) and m2 == (np.ndarray, np.ndarray)
    _assert_bitwise(again, kept)


def test_drawn_again_not_used_on_philox_and_jit_hessian_agree(monkeypatch):
    """A Generator on Philox keeps the noise (nothing changes); scg.jit of the gradient
    (recording keeps the noise) and scg.hessian agree with the kept noise bit for bit."""
    def model(mu, sigma):
        x = scg.sample("x", scg.Normal(mu, sigma), estimator="pathwise")
        return x * x + np.sin(x)

    def run():
        E = scg.expectation(model, n=N, seed=np.random.Generator(np.random.Philox(3)))
        out = [scg.grad(E, argnums=(0, 1))(2.0, 1.5)]
        mech = _mechanism(E)
        E2 = scg.expectation(model, n=N, seed=3)
        f = scg.jit(scg.grad(E2, argnums=(0, 1)))
        out += [f(2.0, 1.5) for _ in range(3)]
        out.append(scg.hessian(E2, argnums=(0, 1))(2.0, 1.5))
        return out, mech

    (again, m1), (kept, m2) = _both(monkeypatch, run)
    assert m1 is np.ndarray and m2 is np.ndarray
    _assert_bitwise(again, kept)
