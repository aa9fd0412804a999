"""dist.entropy(), dist.cdf(x), dist.icdf(u) and scg.kl_divergence(p, q): against scipy and
quadrature, differentiable to second order (finite differences), inside models too."""

import numpy as np
import pytest
import scipy.special as ss
from scipy import integrate, stats

import scg
from tests.core.gradcheck import check_grads

X = np.array([0.2, 0.6, 1.5])
U = np.array([1e-12, 0.1, 0.5, 0.9, 1 - 1e-9])

# (scg distribution from a parameter vector, the parameters, the scipy distribution,
# has cdf and icdf in closed form)
FAMILIES = {
    "Normal": (lambda t: scg.Normal(t[0], t[1]), [0.3, 1.7], stats.norm(0.3, 1.7), True),
    "LogNormal": (lambda t: scg.LogNormal(t[0], t[1]), [0.3, 0.7],
                  stats.lognorm(0.7, scale=np.exp(0.3)), True),
    "Laplace": (lambda t: scg.Laplace(t[0], t[1]), [0.3, 1.7], stats.laplace(0.3, 1.7), True),
    "Gumbel": (lambda t: scg.Gumbel(t[0], t[1]), [0.3, 1.7], stats.gumbel_r(0.3, 1.7), True),
    "Uniform": (lambda t: scg.Uniform(t[0], t[1]), [-1.0, 2.0], stats.uniform(-1.0, 3.0), True),
    "Exponential": (lambda t: scg.Exponential(t[0]), [2.0], stats.expon(scale=0.5), True),
    "Gamma": (lambda t: scg.Gamma(t[0], t[1]), [2.5, 1.5], stats.gamma(2.5, scale=1 / 1.5),
              False),
    "Beta": (lambda t: scg.Beta(t[0], t[1]), [2.0, 3.0], stats.beta(2.0, 3.0), False),
    "Bernoulli": (lambda t: scg.Bernoulli(probs=t[0]), [0.3], stats.bernoulli(0.3), False),
    "Geometric": (lambda t: scg.Geometric(t[0]), [0.3], stats.geom(0.3, loc=-1), False),
    "Cauchy": (lambda t: scg.Cauchy(t[0], t[1]), [0.3, 1.7], stats.cauchy(0.3, 1.7), True),
    "HalfNormal": (lambda t: scg.HalfNormal(t[0]), [1.7], stats.halfnorm(scale=1.7), True),
    "HalfCauchy": (lambda t: scg.HalfCauchy(t[0]), [1.7], stats.halfcauchy(scale=1.7), True),
    "StudentT": (lambda t: scg.StudentT(t[0], t[1], t[2]), [3.5, 0.3, 1.7],
                 stats.t(3.5, 0.3, 1.7), False),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_entropy_cdf_icdf_against_scipy(name):
    make, params, ref, closed = FAMILIES[name]
    d = make(np.array(params))
    assert float(d.entropy()) == pytest.approx(ref.entropy(), rel=1e-12, abs=1e-13)
    if name in ("Bernoulli", "Geometric"):
        np.testing.assert_allclose(d.cdf(np.array([-0.5, 0.0, 0.5, 1.0, 3.0])),
                                   ref.cdf([-0.5, 0.0, 0.5, 1.0, 3.0]), rtol=1e-12)
    if closed:
        np.testing.assert_allclose(d.cdf(X), ref.cdf(X), rtol=1e-12, atol=1e-15)
        if name == "HalfNormal":  # (scipy's ppf rounds (1 + u) / 2: at 1e-12 it is 1e-4 off)
            assert float(d.icdf(U[0])) == pytest.approx(np.sqrt(np.pi / 2) * 1.7 * U[0],
                                                        rel=1e-12)
            np.testing.assert_allclose(d.icdf(U[1:]), ref.ppf(U[1:]), rtol=1e-9)
        else:
            np.testing.assert_allclose(d.icdf(U), ref.ppf(U), rtol=1e-9)
        np.testing.assert_allclose(d.cdf(d.icdf(U[1:-1])), U[1:-1], rtol=1e-12)
    elif name not in ("Bernoulli", "Geometric"):
        with pytest.raises(NotImplementedError, match=f"{name} has no closed-form cdf"):
            d.cdf(X)


def test_entropies_of_vector_families():
    c = np.array([1.5, 2.0, 3.0])
    assert float(scg.Dirichlet(c).entropy()) == pytest.approx(stats.dirichlet(c).entropy(),
                                                              rel=1e-12)
    logits = np.array([0.1, 0.5, -1.0])
    p = ss.softmax(logits)
    for d in (scg.Categorical(logits=logits), scg.OneHotCategorical(probs=p)):
        assert float(d.entropy()) == pytest.approx(stats.entropy(p), rel=1e-12)
    L = np.array([[1.0, 0.0], [0.5, 2.0]])
    ref = stats.multivariate_normal(np.zeros(2), L @ L.T).entropy()
    assert float(scg.MultivariateNormal(np.zeros(2), L).entropy()) == pytest.approx(ref)
    assert float(scg.Bernoulli(logits=np.log(0.3 / 0.7)).entropy()) == pytest.approx(
        stats.bernoulli(0.3).entropy(), rel=1e-12)
    assert np.shape(scg.Normal(np.zeros(3), 1.0).to_event(1).entropy()) == ()
    with pytest.raises(NotImplementedError, match="Poisson has no closed-form entropy"):
        scg.Poisson(2.0).entropy()


def _quad_kl(p, q, low, high):
    return integrate.quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), low, high)[0]


def test_kl_divergences_against_quadrature_and_sums():
    kl = scg.kl_divergence
    assert kl(scg.Normal(0.3, 1.2), scg.Normal(-0.5, 0.7)) == pytest.approx(
        _quad_kl(stats.norm(0.3, 1.2), stats.norm(-0.5, 0.7), -20, 20), rel=1e-9)
    assert kl(scg.Gamma(2.0, 1.5), scg.Gamma(3.0, 0.5)) == pytest.approx(
        _quad_kl(stats.gamma(2, scale=1 / 1.5), stats.gamma(3, scale=2), 0, 80), rel=1e-8)
    assert kl(scg.Beta(2.0, 3.0), scg.Beta(1.5, 0.7)) == pytest.approx(
        _quad_kl(stats.beta(2, 3), stats.beta(1.5, 0.7), 0, 1), rel=1e-8)
    assert kl(scg.Exponential(2.0), scg.Exponential(0.5)) == pytest.approx(
        _quad_kl(stats.expon(scale=0.5), stats.expon(scale=2.0), 0, 60), rel=1e-8)
    assert kl(scg.Poisson(2.0), scg.Poisson(3.5)) == pytest.approx(sum(
        stats.poisson(2).pmf(k) * (stats.poisson(2).logpmf(k) - stats.poisson(3.5).logpmf(k))
        for k in range(100)), rel=1e-10)
    p1, q1 = ss.expit(0.3), 0.6
    assert kl(scg.Bernoulli(logits=0.3), scg.Bernoulli(probs=q1)) == pytest.approx(
        p1 * np.log(p1 / q1) + (1 - p1) * np.log((1 - p1) / (1 - q1)), rel=1e-10)
    p, q = ss.softmax([0.1, 0.5, -1.0]), ss.softmax([0.0, -0.4, 0.3])
    for make in (scg.Categorical, scg.OneHotCategorical):
        assert kl(make(probs=p), make(probs=q)) == pytest.approx(np.sum(p * np.log(p / q)))
    Lp, Lq = np.array([[1.0, 0.0], [0.3, 0.8]]), np.array([[1.5, 0.0], [-0.2, 0.6]])
    mp, mq = np.array([0.1, 0.2]), np.array([-0.3, 0.4])
    Sp, Sq = Lp @ Lp.T, Lq @ Lq.T
    iq = np.linalg.inv(Sq)
    ref = 0.5 * (np.trace(iq @ Sp) + (mq - mp) @ iq @ (mq - mp) - 2 +
                 np.log(np.linalg.det(Sq) / np.linalg.det(Sp)))
    assert kl(scg.MultivariateNormal(mp, Lp), scg.MultivariateNormal(mq, Lq)) == \
        pytest.approx(ref, rel=1e-12)
    a, c = np.array([1.5, 2.0, 3.0]), np.array([0.7, 1.0, 2.5])
    draws = stats.dirichlet(a).rvs(400_000, random_state=0).T
    mc = stats.dirichlet(a).logpdf(draws) - stats.dirichlet(c).logpdf(draws)
    assert abs(kl(scg.Dirichlet(a), scg.Dirichlet(c)) - mc.mean()) < \
        5 * mc.std() / np.sqrt(mc.size)
    both = kl(scg.Normal(np.zeros(3), 1.0).to_event(1), scg.Normal(np.ones(3), 2.0).to_event(1))
    assert both == pytest.approx(3 * kl(scg.Normal(0.0, 1.0), scg.Normal(1.0, 2.0)))
    assert kl(scg.Cauchy(0.3, 1.2), scg.Cauchy(-0.5, 0.7)) == pytest.approx(
        _quad_kl(stats.cauchy(0.3, 1.2), stats.cauchy(-0.5, 0.7), -np.inf, np.inf), rel=1e-8)
    assert kl(scg.HalfCauchy(1.2), scg.HalfCauchy(0.7)) == pytest.approx(
        _quad_kl(stats.halfcauchy(scale=1.2), stats.halfcauchy(scale=0.7), 0, np.inf), rel=1e-8)
    assert kl(scg.HalfNormal(1.2), scg.HalfNormal(0.7)) == pytest.approx(
        _quad_kl(stats.halfnorm(scale=1.2), stats.halfnorm(scale=0.7), 0, 30), rel=1e-9)
    pm, qm = np.array([0.2, 0.5, 0.3]), np.array([0.4, 0.4, 0.2])
    support = scg.Multinomial(4, probs=pm).enumerate_support(expand=False)
    ref = sum(stats.multinomial(4, pm).pmf(x) * (stats.multinomial(4, pm).logpmf(x)
                                                   - stats.multinomial(4, qm).logpmf(x))
              for x in support)
    assert kl(scg.Multinomial(4, probs=pm), scg.Multinomial(4, probs=qm)) == \
        pytest.approx(ref, rel=1e-10)
    with pytest.raises(ValueError, match="same total_count"):
        kl(scg.Multinomial(4, probs=pm), scg.Multinomial(3, probs=qm))
    with pytest.raises(NotImplementedError, match="no closed form for Normal from Laplace"):
        kl(scg.Normal(0.0, 1.0), scg.Laplace(0.0, 1.0))
    with pytest.raises(ValueError, match="different event dims"):
        kl(scg.Normal(np.zeros(2), 1.0).to_event(1), scg.Normal(np.zeros(2), 1.0))


@pytest.mark.parametrize("what", ["normal_cdf_icdf", "lognormal", "gamma_entropy_kl",
                                  "studentt_entropy", "cauchy_kl_cdf", "half_families",
                                  "beta_kl", "dirichlet_kl", "bernoulli_kl", "mvn_kl"])
def test_derivatives_to_second_order(what):
    fns = {
        "normal_cdf_icdf": (lambda t: scg.Normal(t[0], t[1]).cdf(0.4) +
                            scg.Normal(t[0], t[1]).icdf(0.3) +
                            scg.Normal(t[0], t[1]).entropy(), [0.3, 1.2]),
        "lognormal": (lambda t: scg.LogNormal(t[0], t[1]).cdf(1.3) +
                      scg.LogNormal(t[0], t[1]).icdf(0.7), [0.1, 0.6]),
        "gamma_entropy_kl": (lambda t: scg.Gamma(t[0], t[1]).entropy() +
                             scg.kl_divergence(scg.Gamma(t[0], t[1]), scg.Gamma(2.0, 1.0)),
                             [2.5, 1.5]),
        "studentt_entropy": (lambda t: scg.StudentT(t[0], 0.0, t[1]).entropy(), [3.5, 1.5]),
        "cauchy_kl_cdf": (lambda t: scg.kl_divergence(scg.Cauchy(t[0], t[1]), scg.Cauchy(
            0.2, 0.9)) + scg.Cauchy(t[0], t[1]).cdf(0.4) + scg.Cauchy(t[0], t[1]).icdf(0.3),
            [0.3, 1.2]),
        "half_families": (lambda t: scg.kl_divergence(scg.HalfNormal(t[0]), scg.HalfNormal(
            t[1])) + scg.HalfCauchy(t[0]).cdf(0.7) + scg.HalfNormal(t[1]).icdf(0.4)
            + scg.kl_divergence(scg.HalfCauchy(t[0]), scg.HalfCauchy(t[1])), [1.3, 0.6]),
        "beta_kl": (lambda t: scg.kl_divergence(scg.Beta(t[0], t[1]), scg.Beta(1.5, 0.7)),
                    [2.0, 3.0]),
        "dirichlet_kl": (lambda t: scg.kl_divergence(scg.Dirichlet(t), scg.Dirichlet(
            np.array([0.7, 1.0, 2.5]))), [1.5, 2.0, 3.0]),
        "bernoulli_kl": (lambda t: scg.kl_divergence(scg.Bernoulli(logits=t[0]),
                                                     scg.Bernoulli(logits=t[1])), [0.3, -0.4]),
        "mvn_kl": (lambda t: scg.kl_divergence(
            scg.MultivariateNormal(t[:2], np.array([[1.0, 0.0], [0.3, 0.8]])),
            scg.MultivariateNormal(np.zeros(2), np.array([[1.5, 0.0], [-0.2, 0.6]]))),
            [0.1, 0.2]),
    }
    f, x = fns[what]
    check_grads(f, (np.array(x),), order=2)


def test_inside_a_model_on_per_draw_parameters():
    def model(mu):
        z = scg.sample("z", scg.Normal(mu, 1.0))
        return scg.kl_divergence(scg.Normal(z, 1.0), scg.Normal(0.0, 1.0))  # z^2 / 2

    gs = scg.grad_samples(scg.expectation(model, n=20_000, seed=0))(0.7)
    assert abs(gs.mean - 0.7) < 5 * gs.stderr  # d/dmu E[z^2 / 2] = mu
