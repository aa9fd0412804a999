"""Every numba kernel against its numpy twin; implicit derivatives against scipy."""

import numpy as np
import pytest
import scipy.special as ss

from scg.kernels import continuous as C
from scg.kernels import discrete as D
from scg.kernels import heavy_tails as H
from scg.kernels import implicit as I
from scg.kernels import special as S
from scg.kernels.primitives import run

rng = np.random.default_rng(0)
POS = rng.uniform(0.2, 4.0, 50)
REAL = rng.normal(0.0, 2.0, 50)
UNIT = rng.uniform(0.02, 0.98, 50)
COUNT = rng.integers(0, 6, 50).astype(float)

# (kernel, twin, arguments, number of `which` values)
KERNELS = {
    "normal": (C.normal_density, C.normal_density_twin, (REAL, REAL[::-1], POS), 4),
    "loc_scale_path": (C.loc_scale_path, C.loc_scale_path_twin, (REAL, REAL[::-1], POS), 4),
    "lognormal": (C.lognormal_density, C.lognormal_density_twin, (POS, REAL, POS[::-1]), 4),
    "lognormal_path": (C.lognormal_path, C.lognormal_path_twin, (REAL, REAL[::-1] / 4, POS / 4), 4),
    "laplace": (C.laplace_density, C.laplace_density_twin, (REAL, REAL[::-1], POS), 4),
    "gumbel": (C.gumbel_density, C.gumbel_density_twin, (REAL, REAL[::-1], POS), 4),
    "exponential": (C.exponential_density, C.exponential_density_twin, (POS, POS[::-1]), 3),
    "exponential_path": (C.exponential_path, C.exponential_path_twin, (POS, POS[::-1]), 3),
    "gamma": (C.gamma_density, C.gamma_density_twin, (POS, POS[::-1], POS ** 2), 4),
    "beta": (C.beta_density, C.beta_density_twin, (UNIT, POS, POS[::-1]), 4),
    "poisson": (D.poisson_density, D.poisson_density_twin, (COUNT, POS), 3),
    "geometric": (D.geometric_density, D.geometric_density_twin, (COUNT, UNIT), 3),
    "binomial": (D.binomial_density, D.binomial_density_twin, (COUNT, COUNT + 3.0, UNIT), 4),
    "studentt": (H.studentt_density, H.studentt_density_twin, (REAL, POS, REAL[::-1], POS ** 2), 5),
    "cauchy": (H.cauchy_density, H.cauchy_density_twin, (REAL, REAL[::-1], POS), 4),
    "half_normal": (H.half_normal_density, H.half_normal_density_twin, (POS, POS[::-1]), 3),
    "half_cauchy": (H.half_cauchy_density, H.half_cauchy_density_twin, (POS, POS[::-1]), 3),
    "scale_path": (H.scale_path, H.scale_path_twin, (POS, POS[::-1]), 3),
    "negative_binomial": (D.negative_binomial_density, D.negative_binomial_density_twin,
                          (COUNT, POS, UNIT), 4),
    "negative_binomial_logits": (D.negative_binomial_logits_density,
                                 D.negative_binomial_logits_density_twin, (COUNT, POS, REAL), 4),
}
DISCRETE_KERNELS = ("poisson", "geometric", "binomial", "negative_binomial",
                    "negative_binomial_logits")


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_matches_twin(name):
    kernel, twin, args, n_which = KERNELS[name]
    for which in range(n_which):
        if name in DISCRETE_KERNELS and which == 1:
            continue                       # no derivative in a discrete value
        if name == "binomial" and which == 2:
            continue                       # total_count is not differentiable
        np.testing.assert_allclose(run(kernel, which, *args), twin(which, *args),
                                   rtol=1e-12, atol=1e-14, err_msg=f"{name} which={which}")


def test_kernels_broadcast_like_numpy():
    x = rng.normal(size=(5, 2, 3))
    loc, scale = rng.normal(size=(3,)), rng.uniform(1, 2, (2, 1))
    np.testing.assert_allclose(run(C.normal_density, 0, x, loc, scale),
                               C.normal_density_twin(0, x, loc, scale), rtol=1e-12)


def test_fused_normal_kernel_matches_twin():
    eps = rng.standard_normal(1000)
    outs = [np.empty(1000) for _ in range(3)]
    C.normal_score_and_path(eps, 0.3, 1.7, *outs)
    for a, b in zip(outs, C.normal_score_and_path_twin(eps, 0.3, 1.7)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_special_kernels_match_twins_and_scipy():
    x = np.concatenate([rng.uniform(0.01, 30, 200), [0.05, 1.0, 2.0, 1e3, 1e6], [-0.5, -3.3]])
    out = np.empty_like(x)
    S.digamma_kernel(out, x)
    np.testing.assert_allclose(out, S.digamma_twin(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ss.digamma(x), rtol=1e-12, atol=1e-14)
    S.lgamma_kernel(out, x)
    np.testing.assert_allclose(out, S.lgamma_twin(x), rtol=1e-12, atol=1e-13)
    xp = x[x > 0]
    out = np.empty_like(xp)
    for n in (1, 2, 3):
        S.polygamma_kernel(n, out, xp)
        np.testing.assert_allclose(out, S.polygamma_twin(n, xp), rtol=1e-12)
        np.testing.assert_allclose(out, ss.polygamma(n, xp), rtol=1e-12)


CONC = [0.05, 0.1, 0.5, 1.0, 3.0, 10.0, 100.0, 1000.0]
LEVELS = np.array([1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.9999])


def _log_fd(f, p, eps=1e-6):
    """d log f / dp by central differences (log scale: tiny draws stay accurate)."""
    return (np.log(f(p * (1 + eps))) - np.log(f(p * (1 - eps)))) / (2 * p * eps)


@pytest.mark.parametrize("a", CONC)
def test_gamma_implicit_derivative(a):
    x = ss.gammaincinv(a, LEVELS)
    k = run(I.gamma_dxda_kernel, 0, a, x)
    fd = _log_fd(lambda aa: ss.gammaincinv(aa, LEVELS), a) * x
    np.testing.assert_allclose(k, fd, rtol=1e-6)
    np.testing.assert_allclose(k, I.gamma_dxda_twin(a, x), rtol=1e-8)


@pytest.mark.parametrize("a", CONC)
@pytest.mark.parametrize("b", [0.05, 0.5, 3.0, 100.0, 1000.0])
def test_beta_implicit_derivative(a, b):
    x, y = ss.betaincinv(a, b, LEVELS), ss.betaincinv(b, a, 1 - LEVELS)   # y = 1 - x
    low = x < 0.5
    xx = np.where(low, x, 1 - y)
    # a draw is a float: compare only where 1 - x is represented to 1e-8 or better
    ok = (xx > 0) & (1 - xx > 1e-8)
    for which, par in ((0, "a"), (1, "b")):
        def inv(p, first):
            return ss.betaincinv(*((p, b) if par == "a" else (a, p)), LEVELS) if first else \
                ss.betaincinv(*((b, p) if par == "a" else (p, a)), 1 - LEVELS)
        p = a if par == "a" else b
        fd = np.where(low, _log_fd(lambda q: inv(q, True), p) * x,
                      -_log_fd(lambda q: inv(q, False), p) * y)
        k = run(I.beta_dx_kernel, which, a, b, xx)
        np.testing.assert_allclose(k[ok], fd[ok], rtol=1e-6, err_msg=par)
        np.testing.assert_allclose(k, I.beta_dx_twin(which, a, b, xx), rtol=1e-8)


def test_implicit_kernels_have_one_compiled_signature():
    """Small calls go through the compiled entry point of a kernel's only overload; an
    implicit kernel compiled first for other array layouts returned inf there (a Gamma
    path differentiated with a plain concentration, then inside a model)."""
    import numpy as np
    import scg
    from scg.kernels import heavy_tails as H
    for kernel in (I.gamma_dxda_kernel, I.beta_dx_kernel, H.studentt_density,
                   H.cauchy_density, H.half_normal_density, H.half_cauchy_density, H.scale_path):
        assert len(kernel.signatures) == 1, kernel
    g = scg.Gamma(3.0, 1.0).noise(np.random.default_rng(0), (2,))
    scg.grad(lambda a: np.sum(scg.Gamma(a, 1.0).path(g)))(3.0)

    def model(r):
        return np.tanh(scg.sample("x", scg.Gamma(r, 1.5)))

    gs = scg.grad_samples(scg.expectation(model, n=2000, seed=0))(np.array(2.5))
    assert np.isfinite(gs.mean)


def test_fused_passes_of_the_new_families_match_the_primitives():
    """The benchmark's one-pass kernels against the density kernels and the path derivatives
    (StudentT's in df against a central difference at a fixed CDF level)."""
    n = 200
    z, u = rng.standard_normal(n), rng.uniform(0.05, 0.95, n)
    df, loc, scale = 3.5, 0.3, 1.7
    g = ss.gammaincinv(df / 2, u)
    x, scores, paths = np.empty(n), np.empty((3, n)), np.empty((2, n))
    H.studentt_score_and_path(z, g, df, loc, scale, x, scores, paths)
    np.testing.assert_allclose(x, loc + scale * z * np.sqrt(df / (2 * g)), rtol=1e-13)
    for k in range(3):
        np.testing.assert_allclose(scores[k], run(H.studentt_density, k + 2, x, df, loc, scale),
                                   rtol=1e-12, atol=1e-14)
    h = 1e-6

    def draw(d):
        return loc + scale * z * np.sqrt(d / (2 * ss.gammaincinv(d / 2, u)))

    np.testing.assert_allclose(paths[0], (draw(df + h) - draw(df - h)) / (2 * h), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(paths[1], (x - loc) / scale, rtol=1e-12)
    eps = rng.standard_cauchy(n)
    x, scores = np.empty(n), np.empty((2, n))
    H.cauchy_score_and_path(eps, loc, scale, x, scores)
    np.testing.assert_allclose(scores[1], H.cauchy_density_twin(3, x, loc, scale), rtol=1e-12)
    for cauchy, twin in ((False, H.half_normal_density_twin), (True, H.half_cauchy_density_twin)):
        e = np.abs(eps)
        x, score = np.empty(n), np.empty(n)
        H.half_score_and_path(cauchy, e, scale, x, score)
        np.testing.assert_allclose(score, twin(2, x, scale), rtol=1e-12)
        np.testing.assert_allclose(x, scale * e, rtol=1e-15)
