"""One registry of every family: parameters, a scipy reference and test settings.

Adding a family to the tests is one `Example(...)` line here.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.special as ss
from scipy import stats

import scg


@dataclass
class Example:
    dist: type
    params: dict                       # plain parameter values (batch shape (2,) mostly)
    scipy_logpdf: object               # value, **params -> log-density (broadcasting)
    score_params: tuple = ()           # parameters whose score has mean zero
    discrete_max: int = None           # discrete: normalization checked on 0..discrete_max
    one_hot: bool = False              # values: the one-hot vectors of 0..discrete_max
    uniform_noise: object = None       # implicit families: (params, u) -> noise at level u
    id: str = field(default="")
    factory: object = None             # (**params, validate_args=None) -> dist, when the
    #                                    constructor does not take the params (composites)
    moments: bool = True               # mean and variance exist (not Cauchy, Exp of ...)

    def make(self, **override):
        return (self.factory or self.dist)(**{**self.params, **override})


T = scg.transforms


def _exp_affine_normal(base_loc, base_scale, t0_loc, t0_scale, validate_args=None):
    base = scg.Normal(base_loc, base_scale, validate_args=validate_args)
    return scg.TransformedDistribution(base, [T.AffineTransform(t0_loc, t0_scale),
                                              T.ExpTransform()])


def _affine_gamma(base_concentration, base_rate, t0_loc, t0_scale, validate_args=None):
    base = scg.Gamma(base_concentration, base_rate, validate_args=validate_args)
    return scg.TransformedDistribution(base, T.AffineTransform(t0_loc, t0_scale))


def _stick_breaking_normal(base_loc, base_scale, validate_args=None):
    base = scg.Normal(base_loc, base_scale, validate_args=validate_args).to_event(1)
    return scg.TransformedDistribution(base, [T.StickBreakingTransform()])


def _stick_breaking_logpdf(x, base_loc, base_scale):
    """By the change of variables written out: x_i = logit(y_i / left_i) + log(K - 1 - i)."""
    head = x[..., :-1]
    left = 1.0 - np.concatenate([np.zeros(head.shape[:-1] + (1,)),
                                 np.cumsum(head, -1)[..., :-1]], -1)
    z = head / left
    m = head.shape[-1]
    u = ss.logit(z) + np.log(np.arange(m, 0, -1.0))
    # |det dy/du| = prod z (1 - z) left
    return (np.sum(stats.norm(base_loc, base_scale).logpdf(u), -1)
            - np.sum(np.log(z * (1 - z) * left), -1))


def _mixture_logpdf(x, mixing_probs, component_loc, component_scale):
    x = np.asarray(x)[..., None]
    return np.log(np.sum(mixing_probs * stats.norm(component_loc, component_scale).pdf(x), -1))


def _mixture(mixing_probs, component_loc, component_scale, validate_args=None):
    return scg.MixtureSameFamily(scg.Categorical(probs=mixing_probs, validate_args=validate_args),
                                 scg.Normal(component_loc, component_scale,
                                            validate_args=validate_args))


def _multinomial_logpdf(x, total_count, probs=None, logits=None):
    p = probs if probs is not None else ss.softmax(logits, axis=-1)
    return stats.multinomial(total_count, p).logpmf(x)


def _mvn_logpdf(x, loc, scale_tril):
    cov = scale_tril @ scale_tril.T
    return stats.multivariate_normal(loc, cov).logpdf(x)


def _dirichlet_logpdf(x, concentration):
    x = np.atleast_2d(x)
    return np.array([stats.dirichlet(concentration).logpdf(row) for row in x.reshape(-1, x.shape[-1])]
                    ).reshape(x.shape[:-1])


def _categorical_logpdf(x, probs=None, logits=None):
    p = probs if probs is not None else ss.softmax(logits, axis=-1)
    x = np.asarray(x, dtype=int)
    return np.log(np.take_along_axis(np.broadcast_to(p, x.shape + p.shape[-1:]),
                                     x[..., None], -1)[..., 0])


def _one_hot_categorical_logpdf(x, probs=None, logits=None):
    p = probs if probs is not None else ss.softmax(logits, axis=-1)
    return stats.multinomial(1, p).logpmf(x)


EXAMPLES = [
    Example(scg.Normal, dict(loc=np.array([0.3, -1.0]), scale=np.array([1.5, 0.4])),
            lambda x, loc, scale: stats.norm(loc, scale).logpdf(x), ("loc", "scale")),
    Example(scg.MultivariateNormal,
            dict(loc=np.array([0.5, -0.2, 1.0]),
                 scale_tril=np.array([[1.0, 0, 0], [0.3, 0.8, 0], [-0.2, 0.4, 1.5]])),
            _mvn_logpdf, ("loc", "scale_tril")),
    Example(scg.LogNormal, dict(loc=np.array([0.2, -0.5]), scale=np.array([0.5, 0.3])),
            lambda x, loc, scale: stats.lognorm(scale, scale=np.exp(loc)).logpdf(x),
            ("loc", "scale")),
    Example(scg.Uniform, dict(low=np.array([-1.0, 2.0]), high=np.array([1.0, 5.0])),
            lambda x, low, high: stats.uniform(low, high - low).logpdf(x)),
    Example(scg.Exponential, dict(rate=np.array([0.5, 3.0])),
            lambda x, rate: stats.expon(scale=1 / rate).logpdf(x), ("rate",)),
    Example(scg.Laplace, dict(loc=np.array([0.0, 2.0]), scale=np.array([1.0, 0.5])),
            lambda x, loc, scale: stats.laplace(loc, scale).logpdf(x), ("loc", "scale")),
    Example(scg.Gumbel, dict(loc=np.array([0.0, 2.0]), scale=np.array([1.0, 0.5])),
            lambda x, loc, scale: stats.gumbel_r(loc, scale).logpdf(x), ("loc", "scale")),
    Example(scg.Gamma, dict(concentration=np.array([0.7, 4.0]), rate=np.array([2.0, 0.5])),
            lambda x, concentration, rate: stats.gamma(concentration, scale=1 / rate).logpdf(x),
            ("concentration", "rate"),
            uniform_noise=lambda p, u: ss.gammaincinv(p["concentration"], u)),
    Example(scg.Beta, dict(a=np.array([0.6, 3.0]), b=np.array([2.0, 1.5])),
            lambda x, a, b: stats.beta(a, b).logpdf(x), ("a", "b"),
            uniform_noise=lambda p, u: ss.betaincinv(p["a"], p["b"], u)),
    Example(scg.Dirichlet, dict(concentration=np.array([0.8, 2.0, 5.0])),
            _dirichlet_logpdf, ("concentration",),
            uniform_noise=lambda p, u: ss.gammaincinv(p["concentration"], u)),
    Example(scg.Bernoulli, dict(probs=np.array([0.2, 0.7])),
            lambda x, probs: stats.bernoulli(probs).logpmf(x), ("probs",), discrete_max=1),
    Example(scg.Bernoulli, dict(logits=np.array([-1.0, 2.0])),
            lambda x, logits: stats.bernoulli(ss.expit(logits)).logpmf(x), ("logits",),
            discrete_max=1, id="Bernoulli-logits"),
    Example(scg.Categorical, dict(probs=np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])),
            _categorical_logpdf, (), discrete_max=2),
    Example(scg.Categorical, dict(logits=np.array([[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])),
            _categorical_logpdf, ("logits",), discrete_max=2, id="Categorical-logits"),
    Example(scg.OneHotCategorical, dict(probs=np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])),
            _one_hot_categorical_logpdf, (), discrete_max=2, one_hot=True),
    Example(scg.OneHotCategorical, dict(logits=np.array([[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])),
            _one_hot_categorical_logpdf, ("logits",), discrete_max=2, one_hot=True,
            id="OneHotCategorical-logits"),
    Example(scg.Poisson, dict(rate=np.array([0.5, 4.0])),
            lambda x, rate: stats.poisson(rate).logpmf(x), ("rate",), discrete_max=60),
    Example(scg.Binomial, dict(total_count=np.array([5.0, 12.0]), probs=np.array([0.3, 0.8])),
            lambda x, total_count, probs: stats.binom(total_count, probs).logpmf(x), ("probs",),
            discrete_max=12),
    Example(scg.Geometric, dict(probs=np.array([0.3, 0.8])),
            lambda x, probs: stats.geom(probs, loc=-1).logpmf(x), ("probs",), discrete_max=150),
    Example(scg.StudentT, dict(df=np.array([9.0, 20.0]), loc=np.array([0.5, -1.0]),
                               scale=np.array([2.0, 0.5])),
            lambda x, df, loc, scale: stats.t(df, loc, scale).logpdf(x), ("df", "loc", "scale"),
            uniform_noise=lambda p, u: np.stack([ss.ndtri(u), ss.gammaincinv(0.5 * p["df"], u)],
                                                -1)),
    Example(scg.StudentT, dict(df=np.array([1.5, 3.0]), loc=np.array([0.5, -1.0]),
                               scale=np.array([2.0, 0.5])),
            lambda x, df, loc, scale: stats.t(df, loc, scale).logpdf(x), ("df", "loc", "scale"),
            uniform_noise=lambda p, u: np.stack([ss.ndtri(u), ss.gammaincinv(0.5 * p["df"], u)],
                                                -1), moments=False, id="StudentT-heavy"),
    Example(scg.Cauchy, dict(loc=np.array([0.5, -1.0]), scale=np.array([2.0, 0.5])),
            lambda x, loc, scale: stats.cauchy(loc, scale).logpdf(x), ("loc", "scale"),
            moments=False),
    Example(scg.HalfNormal, dict(scale=np.array([2.0, 0.5])),
            lambda x, scale: stats.halfnorm(scale=scale).logpdf(x), ("scale",)),
    Example(scg.HalfCauchy, dict(scale=np.array([2.0, 0.5])),
            lambda x, scale: stats.halfcauchy(scale=scale).logpdf(x), ("scale",), moments=False),
    Example(scg.NegativeBinomial, dict(total_count=np.array([2.5, 4.0]), probs=np.array([0.3, 0.6])),
            lambda x, total_count, probs: stats.nbinom(total_count, 1 - probs).logpmf(x),
            ("total_count", "probs"), discrete_max=200),
    Example(scg.NegativeBinomial, dict(total_count=np.array([2.5, 4.0]), logits=np.array([-0.8, 0.4])),
            lambda x, total_count, logits: stats.nbinom(total_count, ss.expit(-logits)).logpmf(x),
            ("total_count", "logits"), discrete_max=200, id="NegativeBinomial-logits"),
    Example(scg.Multinomial, dict(total_count=5, probs=np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])),
            _multinomial_logpdf, ()),
    Example(scg.Multinomial, dict(total_count=4, logits=np.array([[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])),
            _multinomial_logpdf, ("logits",), id="Multinomial-logits"),
    Example(scg.MixtureSameFamily,
            dict(mixing_probs=np.array([0.3, 0.7]), component_loc=np.array([-1.0, 2.0]),
                 component_scale=np.array([0.5, 1.0])),
            _mixture_logpdf, ("component_loc", "component_scale"), factory=_mixture),
    Example(scg.TransformedDistribution,
            dict(base_loc=np.array([0.2, -0.5]), base_scale=np.array([0.5, 0.3]),
                 t0_loc=np.array([0.1, 0.3]), t0_scale=np.array([1.5, 0.7])),
            lambda x, base_loc, base_scale, t0_loc, t0_scale: stats.lognorm(
                t0_scale * base_scale, scale=np.exp(t0_loc + t0_scale * base_loc)).logpdf(x),
            ("base_loc", "base_scale", "t0_loc", "t0_scale"), factory=_exp_affine_normal,
            moments=False, id="TransformedDistribution-exp-affine"),
    Example(scg.TransformedDistribution,
            dict(base_concentration=np.array([0.7, 4.0]), base_rate=np.array([2.0, 0.5]),
                 t0_loc=np.array([-1.0, 2.0]), t0_scale=np.array([2.0, -0.5])),
            lambda x, base_concentration, base_rate, t0_loc, t0_scale: stats.gamma(
                base_concentration, scale=1 / base_rate).logpdf((x - t0_loc) / t0_scale)
            - np.log(np.abs(t0_scale)),
            ("base_concentration", "base_rate", "t0_loc", "t0_scale"), factory=_affine_gamma,
            uniform_noise=lambda p, u: ss.gammaincinv(p["base_concentration"], u),
            id="TransformedDistribution-affine-gamma"),
    Example(scg.TransformedDistribution,
            dict(base_loc=np.array([0.3, -0.4, 0.1]), base_scale=np.array([0.8, 0.5, 1.2])),
            _stick_breaking_logpdf, ("base_loc", "base_scale"), factory=_stick_breaking_normal,
            moments=False, id="TransformedDistribution-stick-breaking"),
]
for _e in EXAMPLES:
    _e.id = _e.id or _e.dist.__name__

REPARAM = [e for e in EXAMPLES if e.make().has_rsample]
DISCRETE = [e for e in EXAMPLES if e.discrete_max is not None and not e.one_hot]
ONE_HOT = [e for e in EXAMPLES if e.one_hot]


def ids(examples):
    return [e.id for e in examples]
