"""Review of the last changes: 901ad31 (a large pathwise Normal's noise drawn again by the
scale's derivative, fused.DrawnAgain) and 4a6db0a (matmul by .dot for 1-D/2-D operands;
Distribution.finite_log_prob_of_draws skipping the site's finiteness check).

The tests marked "BUG" failed on the reviewed code (all three are fixed: the noise's
position is saved under the generator's lock with its draw; the finiteness check is
skipped only for draws of the law, not an enumeration's support points; a family's
subclass with its own log_prob does not inherit the promise); the others pin risky cases
that were found to behave."""

import threading
import time

import numpy as np
import pytest

import scg
from scg.core.tape import strip
from scg.kernels import fused as F
from scg.numpy.rules import _matmul
from scg.stochastic import sites as S
from tolerances import assert_close_ulps, assert_product_close

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


# ======================================================================= 901ad31: BUG
def test_drawn_again_noise_is_the_noise_when_another_thread_draws_from_the_generator():
    """BUG (901ad31, fixed). `SiteDraw.noise_path` saved the generator's position
    (`fused.DrawnAgain.before` -> `save_position`) *before* `Normal.noise` took the bit
    generator's lock (`fused.standard_normal`). A numpy Generator is shared and
    thread-safe by its lock (`seed=` accepts one, "shared"): when another thread is
    drawing from it at that moment, the saved position is not where the noise is drawn,
    so the scale's derivative multiplies the cotangent by unrelated noise. The per-draw
    gradient in sigma of E[x^2] must be 2 x eps with eps = (x - mu) / sigma; with the
    noise drawn again it is silently wrong (with the noise kept it is right)."""
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


# ================================================================= 901ad31: fine
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


# ======================================================================= 4a6db0a (a)
_KINDS = ["f8", "f4", "i8", "i1", "bool", "c16", "object"]


def _array(rng, shape, kind, layout):
    if kind == "bool":
        a = rng.random(shape) < 0.5
    elif kind in ("i8", "i1"):
        a = rng.integers(-9, 9, shape).astype(kind)
    elif kind == "c16":
        a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    elif kind == "object":
        a = rng.integers(-9, 9, shape).astype(object)
    else:
        a = rng.normal(size=shape).astype(kind)
    if layout == "T" and a.ndim == 2:
        a = np.ascontiguousarray(a.T).T
    elif layout == "strided":
        a = np.repeat(a[..., None], 2, axis=-1)[..., 1]
    return a


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((0,), (0,)), ((4, 3), (3,)), ((4, 0), (0,)),
                                   ((3,), (3, 5)), ((0,), (0, 5)), ((4, 3), (3, 5)),
                                   ((0, 3), (3, 0))])
def test_matmul_by_dot_is_np_matmul_for_vectors_and_matrices(sa, sb):
    """Same type (a numpy scalar for vector . vector), shape, dtype and values (within the
    rounding bound of the result's dtype: which BLAS kernel runs depends on the machine) for every
    dtype pair and layout; mismatched shapes and 0-d operands still raise ValueError."""
    rng = np.random.default_rng(0)
    for ka in _KINDS:
        for kb in _KINDS:
            for la in ("c", "T", "strided"):
                for lb in ("c", "T", "strided"):
                    a, b = _array(rng, sa, ka, la), _array(rng, sb, kb, lb)
                    want, got = np.matmul(a, b), _matmul(a, b)
                    assert type(got) is type(want)
                    assert np.shape(got) == np.shape(want)
                    assert np.asarray(got).dtype == np.asarray(want).dtype
                    assert_product_close(got, want, a, b)
    for a, b in [(np.array(2.0), np.ones(3)), (np.ones(3), np.array(2.0)),
                 (np.array(1.0), np.array(1.0)), (np.ones(3), np.ones(4)),
                 (np.ones((2, 3)), np.ones(4)), (np.ones(3), np.ones((4, 2)))]:
        with pytest.raises(ValueError):
            np.matmul(a, b)
        with pytest.raises(ValueError):
            _matmul(a, b)


def _fd(f, x, h=1e-6):
    x = np.array(x, dtype=float)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    out = np.array(cols).reshape(x.shape + np.shape(cols[0]))
    k = np.ndim(cols[0])
    return np.moveaxis(out, list(range(x.ndim)), list(range(k, k + x.ndim)))


def test_matmul_gradients_and_hessians_through_vectors_and_matrices():
    """Gradients and Hessians through @ for vector.vector, matrix.vector (integer, bool
    and strided constants), vector.matrix, matrix.matrix and empty products, against
    central differences; scg.jit replays the eager gradient."""
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(3, 5))
    v3, v4 = rng.normal(size=3), rng.normal(size=4)
    Ai, Ab = rng.integers(-3, 4, (4, 3)), rng.random((4, 3)) < 0.5
    cases = [
        (lambda x: np.sin(x @ v3), 0.3 * v3),
        (lambda x: x @ x, v3),
        (lambda x: np.sum(np.sin(A @ x)), v3),
        (lambda x: np.sum(np.sin(Ai @ x)), v3),
        (lambda x: np.sum(np.sin(Ab @ x)), v3),
        (lambda x: np.sum(np.sin(A.T[:, ::2] @ x[::2])), v4),
        (lambda x: np.sum(np.cos(x @ B)), v3),
        (lambda x: np.sum(np.cos(x @ v3)), A),
        (lambda x: np.sum(np.cos(v4 @ x)), A),
        (lambda x: np.sum(np.cos(x @ x.T)), A),
        (lambda x: np.sum(np.zeros((0, 3)) @ x) + np.sum(x ** 2), v3),
    ]
    # Eager and jit may form a product with different kernels (GEMV, GEMM). An entry of a
    # gradient sums at most K products of a cotangent (|.| <= 2) and an operand (|.| <= M);
    # the cotangent carries the rounding of a forward product (at most K^2 M^2 eps, through
    # sin or cos): each route is within 2 K^2 M (1 + K M^2) eps of the exact value.
    K = 5
    for f, x in cases:
        M = max(np.max(np.abs(c)) for c in (A, B, v3, v4, Ai, x))
        g = scg.grad(f)(x)
        np.testing.assert_allclose(g, _fd(f, x), atol=1e-6)
        np.testing.assert_allclose(scg.hessian(f)(x), _fd(scg.grad(f), x), atol=1e-5)
        jitted = scg.jit(scg.grad(f))
        for _ in range(3):
            assert_close_ulps(jitted(x), g, 2 * 2 * K ** 2, scale=M * (1 + K * M ** 2))


# ======================================================================= 4a6db0a (b)
def test_enumerated_support_point_of_zero_probability_is_not_silently_minus_inf():
    """BUG (4a6db0a). `Site.log_prob` skips the finiteness check when the estimator has
    `own_draws` and the family sets `finite_log_prob_of_draws`. But scg.Enumerate sets
    own_draws too (for the support test) and its values are *every point of the support*,
    not draws: a coin with probs exactly 0 (a valid, validated parameter) is evaluated
    at 1, whose log-probability is -inf. Before 4a6db0a the site raised its
    FloatingPointError; now the log-probability is -inf without it (the weights
    exp(-inf) = 0 happen to give the right mean here, but with probs that depend on
    theta the failure surfaces only as a non-finite gradient from elsewhere)."""
    def model(th):
        b = scg.sample("b", scg.Bernoulli(probs=np.array([0.0, 0.4])),
                       estimator=scg.Enumerate())
        return np.sum((b - th) ** 2)

    E = scg.expectation(model, n=3, seed=0)
    try:
        with np.errstate(divide="ignore"):
            scg.value_and_grad(E)(0.25)
    except FloatingPointError as e:
        assert "site 'b': log_prob is not finite" in str(e)
        return
    lp = np.asarray(strip(E.last_trace.sites["b"].log_prob()))
    assert np.isfinite(lp).all(), "a non-finite log-probability without the site's error"


def test_bernoulli_subclass_with_its_own_log_prob_keeps_the_site_check():
    """BUG (4a6db0a). `finite_log_prob_of_draws` is a class attribute, inherited by a user
    subclass of Bernoulli that overrides log_prob (here the textbook formula
    x log p + (1 - x) log(1 - p), which is nan at p = 1, a valid, validated parameter:
    sigmoid(40) rounds to 1.0). The promise "finite by construction" is Bernoulli's
    log_prob's, not the subclass's: the site's FloatingPointError naming the site is no
    longer raised (only a later, vaguer "gradient estimate is not finite")."""
    class TextbookCoin(scg.Bernoulli):
        def log_prob(self, value):
            p = self.probs
            return value * np.log(p) + (1 - value) * np.log(1 - p)

    def model(th):
        b = scg.sample("b", TextbookCoin(probs=scg.sigmoid(th)), estimator=scg.Score())
        return (b - 0.3) ** 2

    with np.errstate(all="ignore"), \
            pytest.raises(FloatingPointError, match="site 'b': log_prob is not finite"):
        scg.grad(scg.expectation(model, n=4, seed=0))(np.array([40.0, 0.0]))


@pytest.mark.parametrize("est", ["score", "loo", "disarm"])
@pytest.mark.parametrize("kw", [{"probs": [0.0, 1.0, 0.4]}, {"logits": [1e308, -1e308, 0.3]}])
def test_own_draws_of_coins_at_the_edges_are_finite(est, kw):
    """probs exactly 0 and 1, logits at +-1e308, inside to_event and a plate: the coin's own
    draws have finite log-probabilities (the skipped check had nothing to find)."""
    estimator = {"score": scg.Score(), "loo": scg.Score(baseline="loo"),
                 "disarm": scg.DisARM()}[est]
    (name, values), = kw.items()

    def model(th):
        with scg.plate("p", 3):
            law = scg.Bernoulli(**{name: np.asarray(values) * (1.0 + 0.0 * th)})
            b = scg.sample("b", law, estimator=estimator)
        return np.sum((b - 0.3) ** 2 * (1.0 + th))

    E = scg.expectation(model, n=6, seed=0)
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            scg.grad(E)(0.5)
    except FloatingPointError as e:  # (DisARM at p in {0, 1}: its own, earlier error)
        assert est == "disarm" and "probs" in kw, e
        return
    assert np.isfinite(np.asarray(strip(E.last_trace.sites["b"].log_prob()))).all()


def test_coin_checks_with_validation_off_and_under_jit():
    """Validation turned off after a distribution was built keeps its (valid) parameters;
    with validation off an infinite logit gets the site's error; under scg.jit a replay
    with an infinite logit still raises (the constraint is re-checked on replays)."""
    def model(th):
        b = scg.sample("b", scg.Bernoulli(logits=th), estimator=scg.Score(baseline="loo"))
        return np.sum(b * np.arange(1.0, 4.0))

    good, bad = np.array([0.5, -1.0, 2.0]), np.array([0.5, np.inf, 2.0])
    f = scg.jit(scg.grad(scg.expectation(model, n=8, seed=0)))
    for _ in range(3):
        assert np.isfinite(f(good)).all()
    with pytest.raises(ValueError, match="must be real"):
        f(bad)
    built = scg.Bernoulli(logits=good)
    scg.distributions.set_validation(False)
    try:
        with np.errstate(all="ignore"), \
                pytest.raises(FloatingPointError, match="site 'b': log_prob is not finite"):
            f(bad)
        E = scg.expectation(lambda th: np.sum(scg.sample("b", built, estimator="score") * th),
                            n=8, seed=0)
        assert np.isfinite(scg.grad(E)(1.0))
    finally:
        scg.distributions.set_validation(True)
