"""The families of torch.distributions users (StudentT, Cauchy, the half families,
NegativeBinomial, Multinomial, MixtureSameFamily, TransformedDistribution) inside models:
each estimator that serves them against the exact gradient (quadrature, or sums over the
support), within 5 standard errors; transforms and transform_to."""

import numpy as np
import pytest
import scipy.special as ss
from scipy import integrate, stats

import scg
from tests.core.gradcheck import check_grads

T = scg.transforms
N = 40_000
Z = 5.0


def _quad(f, logpdf, low=-np.inf, high=np.inf, points=None):
    return integrate.quad(lambda x: f(x) * np.exp(logpdf(x)), low, high, limit=400,
                          epsabs=1e-12, epsrel=1e-11, points=points)[0]


def _exact_gradient(expect, theta, h=1e-4):
    """d/d theta of the exact expectation by central differences (quadrature is exact to
    about 1e-11, so the step's error dominates: about 1e-8)."""
    g = np.zeros_like(theta)
    for i in range(theta.size):
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        g[i] = (expect(up) - expect(down)) / (2 * h)
    return g


def _estimate(make, theta, estimator, cost, n=N):
    def model(t):
        return cost(scg.sample("x", make(t), estimator=estimator))
    gs = scg.grad_samples(scg.expectation(model, n=n, seed=1))(theta)
    return gs.mean, gs.stderr


def _assert_within(est, se, exact):
    assert np.all(np.abs(est - exact) <= Z * se + 1e-9), (est, se, exact)


CONTINUOUS = {
    # name: (scg family of theta, scipy logpdf of theta, theta, integration range)
    "StudentT": (lambda t: scg.StudentT(t[0], t[1], t[2]),
                 lambda t: stats.t(t[0], t[1], t[2]).logpdf, [3.0, 0.5, 2.0], (-np.inf, np.inf)),
    "StudentT-small-df": (lambda t: scg.StudentT(t[0], t[1], t[2]),
                          lambda t: stats.t(t[0], t[1], t[2]).logpdf, [0.8, -0.3, 0.7],
                          (-np.inf, np.inf)),
    "Cauchy": (lambda t: scg.Cauchy(t[0], t[1]), lambda t: stats.cauchy(t[0], t[1]).logpdf,
               [0.5, 2.0], (-np.inf, np.inf)),
    "HalfNormal": (lambda t: scg.HalfNormal(t[0]), lambda t: stats.halfnorm(scale=t[0]).logpdf,
                   [1.5], (0, np.inf)),
    "HalfCauchy": (lambda t: scg.HalfCauchy(t[0]), lambda t: stats.halfcauchy(scale=t[0]).logpdf,
                   [1.5], (0, np.inf)),
}


@pytest.mark.parametrize("estimator", ["pathwise", "score"])
@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_families_against_quadrature(name, estimator):
    make, logpdf, theta, (low, high) = CONTINUOUS[name]
    theta = np.array(theta)

    def cost(x):
        return np.tanh(x - 0.3)   # bounded: every family has its expectation

    exact = _exact_gradient(lambda t: _quad(lambda x: np.tanh(x - 0.3), logpdf(t), low, high),
                            theta)
    est, se = _estimate(make, theta, estimator, cost)
    _assert_within(est, se, exact)


def test_negative_binomial_score_and_measure_free_sum():
    theta = np.array([2.5, 0.4])   # total_count, logits
    k = np.arange(400.0)

    def expect(t):
        return np.sum(np.cos(0.7 * k) * stats.nbinom(t[0], ss.expit(-t[1])).pmf(k))

    exact = _exact_gradient(expect, theta)
    for make in (lambda t: scg.NegativeBinomial(t[0], logits=t[1]),
                 lambda t: scg.NegativeBinomial(t[0], probs=scg.sigmoid(t[1]))):
        est, se = _estimate(make, theta, "auto", lambda x: np.cos(0.7 * x))
        _assert_within(est, se, exact)


def test_negative_binomial_draws_follow_the_law():
    d = scg.NegativeBinomial(3.0, probs=0.6)
    x = d.sample(np.random.default_rng(0), (200_000,))
    counts = np.bincount(x.astype(int), minlength=40)[:40] / x.size
    pmf = stats.nbinom(3.0, 0.4).pmf(np.arange(40))
    assert np.all(np.abs(counts - pmf) <= Z * np.sqrt(pmf * (1 - pmf) / x.size) + 1e-12)


def test_multinomial_enumerate_is_exact_and_score_agrees():
    theta = np.array([0.2, -0.5, 0.9])
    w = np.array([1.0, -2.0, 0.5])

    def cost(x):
        return np.tanh(x @ w)

    support = scg.Multinomial(3, logits=theta).enumerate_support(expand=False)
    assert support.shape == (10, 3) and np.all(support.sum(-1) == 3)

    def expect(t):
        p = ss.softmax(t)
        return sum(np.tanh(x @ w) * stats.multinomial(3, p).pmf(x) for x in support)

    exact = _exact_gradient(expect, theta)
    est, se = _estimate(lambda t: scg.Multinomial(3, logits=t), theta, scg.Enumerate(), cost,
                        n=10)
    np.testing.assert_allclose(est, exact, atol=1e-7)
    est, se = _estimate(lambda t: scg.Multinomial(3, logits=t), theta, "auto", cost)
    _assert_within(est, se, exact)
    # probs: normalized, so the same gradient as through the softmax
    p = ss.softmax(theta)
    est_p, _ = _estimate(lambda t: scg.Multinomial(3, probs=t), p, scg.Enumerate(), cost, n=10)
    exact_p = _exact_gradient(lambda q: expect(np.log(q)), p)
    np.testing.assert_allclose(est_p - est_p @ p, exact_p - exact_p @ p, atol=1e-6)


def test_multinomial_normalized_over_its_support():
    d = scg.Multinomial(4, probs=np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]))
    support = d.enumerate_support()
    assert support.shape == (15, 2, 3)
    np.testing.assert_allclose(np.exp(d.log_prob(support)).sum(0), 1.0, rtol=1e-12)
    assert np.all(np.isneginf(d.log_prob(np.array([1.0, 1.0, 1.0]))))   # sums to 3, not 4


def test_mixture_score_against_quadrature_and_the_two_site_form():
    theta = np.array([0.3, -1.0, 1.5])   # logit of the weight, two component locs

    def mixture(t):
        return scg.MixtureSameFamily(scg.Categorical(logits=np.stack([0.0 * t[0], t[0]])),
                                     scg.Normal(t[1:], np.array([0.8, 0.5])))

    def logpdf(t):
        w = ss.expit(t[0])
        return lambda x: np.logaddexp(np.log(1 - w) + stats.norm(t[1], 0.8).logpdf(x),
                                      np.log(w) + stats.norm(t[2], 0.5).logpdf(x))

    exact = _exact_gradient(lambda t: _quad(np.tanh, logpdf(t)), theta)
    est, se = _estimate(mixture, theta, "auto", np.tanh)
    _assert_within(est, se, exact)

    def two_sites(t):   # the choice by enumeration, the component by its path
        k = scg.sample("k", scg.Categorical(logits=np.stack([0.0 * t[0], t[0]])),
                       estimator=scg.Enumerate())
        x = scg.sample("x", scg.Normal(scg.take(t[1:], k), scg.take(np.array([0.8, 0.5]), k)))
        return np.tanh(x)

    gs = scg.grad_samples(scg.expectation(two_sites, n=N, seed=2))(theta)
    _assert_within(gs.mean, gs.stderr, exact)


def test_mixture_draws_and_moments():
    d = scg.MixtureSameFamily(scg.Categorical(probs=np.array([0.3, 0.7])),
                              scg.Normal(np.array([-1.0, 2.0]), np.array([0.5, 1.0])))
    assert float(d.mean) == pytest.approx(1.1)
    assert float(d.variance) == pytest.approx(0.3 * 1.25 + 0.7 * 5.0 - 1.1 ** 2)
    assert float(d.cdf(0.5)) == pytest.approx(0.3 * stats.norm(-1, 0.5).cdf(0.5)
                                              + 0.7 * stats.norm(2, 1).cdf(0.5))
    vec = scg.MixtureSameFamily(scg.Categorical(probs=np.array([0.3, 0.7])),
                                scg.Normal(np.array([[0.0, 1.0], [2.0, 3.0]]), 1.0).to_event(1))
    x = vec.sample(np.random.default_rng(0), (5,))
    assert x.shape == (5, 2) and vec.log_prob(x).shape == (5,)
    with pytest.raises(ValueError, match="MixtureSameFamily: component has batch_shape"):
        scg.MixtureSameFamily(scg.Categorical(probs=np.array([0.3, 0.7])), scg.Normal(0.0, 1.0))


@pytest.mark.parametrize("estimator", ["pathwise", "score"])
def test_transformed_distribution_against_quadrature(estimator):
    theta = np.array([0.2, 0.9, 0.4, 1.3])   # base loc, base scale, affine loc, affine scale

    def make(t):
        return scg.TransformedDistribution(scg.Normal(t[0], t[1]), [
            T.AffineTransform(t[2], t[3]), T.TanhTransform()])

    def expect(t):   # E f(tanh(a + b z)), z ~ N(loc, scale): quadrature over the base
        return _quad(lambda z: np.sin(3 * np.tanh(t[2] + t[3] * z)),
                     stats.norm(t[0], t[1]).logpdf)

    exact = _exact_gradient(expect, theta)
    est, se = _estimate(make, theta, estimator, lambda y: np.sin(3 * y))
    _assert_within(est, se, exact)


def test_transformed_distribution_shapes_and_errors():
    base = scg.Normal(np.zeros(3), 1.0).to_event(1)
    d = scg.TransformedDistribution(base, [T.StickBreakingTransform()])
    assert d.batch_shape == () and d.event_shape == (4,)
    y = d.sample(np.random.default_rng(0), (6,))
    np.testing.assert_allclose(y.sum(-1), 1.0)
    assert np.isneginf(d.log_prob(np.array([0.5, 0.5, 0.5, -0.5])))
    with pytest.raises(ValueError, match=r"base\.to_event\(1\)"):
        scg.TransformedDistribution(scg.Normal(np.zeros(3), 1.0), [T.StickBreakingTransform()])
    e = scg.TransformedDistribution(scg.Normal(0.0, 1.0), [T.ExpTransform()])
    assert np.isneginf(e.log_prob(-1.0))
    with pytest.raises(NotImplementedError, match="no closed-form mean"):
        e.mean
    assert float(e.cdf(2.0)) == pytest.approx(stats.lognorm(1.0).cdf(2.0))
    assert float(e.icdf(0.3)) == pytest.approx(stats.lognorm(1.0).ppf(0.3))
    flipped = scg.TransformedDistribution(scg.Gamma(2.0, 1.0), T.AffineTransform(1.0, -2.0))
    e2 = scg.TransformedDistribution(scg.Exponential(1.0), T.AffineTransform(1.0, -2.0))
    assert float(e2.cdf(-1.0)) == pytest.approx(1 - stats.expon().cdf(1.0))
    assert float(flipped.mean) == pytest.approx(-3.0)
    assert float(flipped.variance) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="AffineTransform: parameter 'scale'"):
        T.AffineTransform(0.0, 0.0)


# ---------------------------------------------------------------- transforms
ELEMENTWISE = [T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.SoftplusTransform(),
               T.AffineTransform(0.5, -2.0), T.IdentityTransform()]


@pytest.mark.parametrize("t", ELEMENTWISE, ids=lambda t: type(t).__name__)
def test_elementwise_transforms_invert_and_their_log_determinants(t):
    x = np.array([-2.0, -0.3, 0.0, 0.7, 3.0])
    y = t(x)
    np.testing.assert_allclose(t.inv(y), x, rtol=1e-10, atol=1e-12)
    slope = scg.grad(lambda v: np.sum(t(v)))(x)
    np.testing.assert_allclose(t.log_abs_det_jacobian(x, y), np.log(np.abs(slope)), rtol=1e-10,
                               atol=1e-12)
    assert np.all(t.inside(y))
    check_grads(lambda v: np.sum(t.log_abs_det_jacobian(v, t(v)) + t(v)), (x,), order=2)


@pytest.mark.parametrize("t,x", [(T.StickBreakingTransform(), np.array([0.3, -1.2, 2.0])),
                                 (T.LowerCholeskyTransform(),
                                  np.array([[0.3, 0.0], [-1.2, 0.5]]))],
                         ids=["StickBreaking", "LowerCholesky"])
def test_vector_transforms_invert_and_their_log_determinants(t, x):
    y = t(x)
    np.testing.assert_allclose(t.inv(y), x, rtol=1e-10, atol=1e-12)
    jac = scg.jacobian(t)(x)
    if isinstance(t, T.StickBreakingTransform):
        square = jac[:-1]   # the first K - 1 entries determine the last
    else:
        rows = np.tril_indices(2)
        square = jac[rows][:, rows[0], rows[1]]
    assert float(t.log_abs_det_jacobian(x, y)) == pytest.approx(
        np.log(abs(np.linalg.det(square))), rel=1e-10)
    check_grads(lambda v: np.sum(t(v) ** 2) + t.log_abs_det_jacobian(v, t(v)), (x,), order=2)


def _every_parameter_constraint():
    from scg.distributions import constraints
    families = [getattr(scg, n) for n in scg.distributions.__all__]
    seen = {}
    for cls in families:
        declared = cls.__dict__.get("arg_constraints") if isinstance(cls, type) else None
        for base in (cls.__mro__ if isinstance(cls, type) else ()):
            declared = declared or base.__dict__.get("arg_constraints")
        for c in (declared if isinstance(declared, dict) else {}).values():
            if isinstance(c, constraints.Constraint):
                seen[id(c)] = c
    return list(seen.values())


@pytest.mark.parametrize("constraint", _every_parameter_constraint(), ids=repr)
def test_transform_to_every_parameter_constraint(constraint):
    if constraint.discrete:
        with pytest.raises(NotImplementedError, match="integers"):
            scg.transform_to(constraint)
        return
    t = scg.transform_to(constraint)
    rng = np.random.default_rng(0)
    shape = {0: (5,), 1: (4, 3), 2: (4, 3, 3)}[constraint.event_dim]
    u = rng.normal(size=shape) * 2.0
    y = t(u)
    assert np.all(constraint.check(y)), (constraint, y)
    np.testing.assert_allclose(t(t.inv(y)), y, rtol=1e-9, atol=1e-12)


def test_transform_to_a_parameter_while_optimizing():
    # the unconstrained value u of a scale: d/du E[x^2] for x ~ Normal(0, exp(u))
    t = scg.transform_to(scg.Normal.arg_constraints["scale"])
    E = scg.expectation(lambda u: scg.sample("x", scg.Normal(0.0, t(u))) ** 2, n=20_000, seed=0)
    gs = scg.grad_samples(E)(0.3)
    assert abs(gs.mean - 2 * np.exp(0.6)) <= Z * gs.stderr
