"""KL divergences in closed form: `kl_divergence(p, q)` = E_p[log p(x) - log q(x)].

Each pair of families has its formula here, registered with `register_kl` (a family
pair that has none raises a clear error); all are written in scg's operations, so they
are differentiable in both distributions' parameters and work on per-draw parameters
inside a model. `to_event` wrappers sum the divergence over their event dims.
"""

import numpy as np

from ..core.tape import strip
from ..kernels.special_primitives import digamma, lgamma
from ..numpy import rules as R
from .base import Independent
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .exponential import Exponential
from .gamma import Gamma
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal, triangular_solve
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson

_KL = {}


def register_kl(p_type, q_type):
    """Register `fn(p, q)` as the KL divergence of a p_type from a q_type."""
    def register(fn):
        _KL[(p_type, q_type)] = fn
        return fn
    return register


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], shape of the broadcast batch shapes.

    Example:
        >>> scg.kl_divergence(scg.Normal(mu, sigma), scg.Normal(0.0, 1.0))
    """
    if isinstance(p, Independent) or isinstance(q, Independent):
        if not (isinstance(p, Independent) and isinstance(q, Independent) and p.k == q.k):
            raise ValueError(f"kl_divergence: {p!r} and {q!r} have different event dims; "
                             "apply the same .to_event(k) to both")
        kl = kl_divergence(p.base, q.base)
        return np.sum(kl, axis=tuple(range(-p.k, 0)))
    fn = _KL.get((type(p), type(q)))
    if fn is None:
        pairs = ", ".join(sorted({f"{a.__name__}-{b.__name__}" for a, b in _KL}))
        raise NotImplementedError(
            f"kl_divergence: no closed form for {type(p).__name__} from {type(q).__name__} "
            f"in scg (the pairs: {pairs}); estimate it inside a model instead, as "
            "p.log_prob(x) - q.log_prob(x) at a draw x of p")
    return fn(p, q)


@register_kl(Normal, Normal)
def _normal(p, q):
    ratio = p.scale / q.scale
    return 0.5 * (ratio ** 2 + ((p.loc - q.loc) / q.scale) ** 2 - 1.0) - np.log(ratio)


@register_kl(MultivariateNormal, MultivariateNormal)
def _mvn(p, q):
    d = p.event_shape[0]
    diag = np.eye(d)
    # tr(S_q^-1 S_p) = |L_q^-1 L_p|^2 (Frobenius), the Mahalanobis term by one solve
    m = triangular_solve(q.scale_tril, np.swapaxes(p.scale_tril, -1, -2))
    z = triangular_solve(q.scale_tril, q.loc - p.loc)
    log_det_q = np.sum(np.log(np.sum(q.scale_tril * diag, axis=-1)), axis=-1)
    log_det_p = np.sum(np.log(np.sum(p.scale_tril * diag, axis=-1)), axis=-1)
    return 0.5 * (np.sum(m ** 2, axis=(-2, -1)) + np.sum(z ** 2, axis=-1) - d) + \
        log_det_q - log_det_p


def _log_probs_01(b):
    """(log P(1), log P(0)) of a Bernoulli, stable for logits."""
    if b.logits is not None:
        return -R.softplus(-b.logits), -R.softplus(b.logits)
    return np.log(b.probs), np.log1p(-b.probs)


@register_kl(Bernoulli, Bernoulli)
def _bernoulli(p, q):
    lp1, lp0 = _log_probs_01(p)
    lq1, lq0 = _log_probs_01(q)
    p1 = np.exp(lp1)
    return p1 * (lp1 - lq1) + (1.0 - p1) * (lp0 - lq0)


def _categorical(p, q):
    lp, lq = p._log_probs(), q._log_probs()
    pp = np.exp(lp)
    return np.sum(np.where(np.greater(pp, 0.0), pp * (lp - lq), 0.0), axis=-1)


register_kl(Categorical, Categorical)(_categorical)
register_kl(OneHotCategorical, OneHotCategorical)(_categorical)


@register_kl(Exponential, Exponential)
def _exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1.0 - np.log(ratio)


@register_kl(Gamma, Gamma)
def _gamma(p, q):
    a, b, c, d = p.concentration, p.rate, q.concentration, q.rate
    return (a - c) * digamma(a) - lgamma(a) + lgamma(c) + c * (np.log(b) - np.log(d)) + \
        a * (d - b) / b


@register_kl(Beta, Beta)
def _beta(p, q):
    a, b, c, d = p.a, p.b, q.a, q.b
    log_beta_p = lgamma(a) + lgamma(b) - lgamma(a + b)
    log_beta_q = lgamma(c) + lgamma(d) - lgamma(c + d)
    return log_beta_q - log_beta_p + (a - c) * digamma(a) + (b - d) * digamma(b) + \
        (c - a + d - b) * digamma(a + b)


@register_kl(Dirichlet, Dirichlet)
def _dirichlet(p, q):
    a, c = p.concentration, q.concentration
    a0, c0 = np.sum(a, axis=-1), np.sum(c, axis=-1)
    return lgamma(a0) - np.sum(lgamma(a), axis=-1) - lgamma(c0) + np.sum(lgamma(c), axis=-1) + \
        np.sum((a - c) * (digamma(a) - digamma(a0)[..., None]), axis=-1)


@register_kl(Poisson, Poisson)
def _poisson(p, q):
    return p.rate * (np.log(p.rate) - np.log(q.rate)) - p.rate + q.rate


# ---------------------------------------------------------------- heavy tails, half families, counts
@register_kl(Cauchy, Cauchy)
def _cauchy(p, q):
    # log(((s_p + s_q)^2 + (l_p - l_q)^2) / (4 s_p s_q))
    return np.log((p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2) - np.log(4.0 * p.scale * q.scale)


@register_kl(HalfCauchy, HalfCauchy)
def _half_cauchy(p, q):
    # both folded at 0, symmetric: the divergence of the Cauchy laws before folding
    return 2.0 * np.log(p.scale + q.scale) - np.log(4.0 * p.scale * q.scale)


@register_kl(HalfNormal, HalfNormal)
def _half_normal(p, q):
    ratio = p.scale / q.scale
    return 0.5 * (ratio ** 2 - 1.0) - np.log(ratio)


@register_kl(Multinomial, Multinomial)
def _multinomial(p, q):
    # n times the Categorical divergence, for the same total_count n
    n_p = np.asarray(strip(p.total_count), dtype=float)
    n_q = np.asarray(strip(q.total_count), dtype=float)
    if n_p.shape != n_q.shape or np.any(n_p != n_q):
        raise ValueError("kl_divergence: Multinomials of different total_count have different "
                         "supports (the divergence is infinite or undefined); give both the "
                         "same total_count")
    lp, lq = p._log_probs(), q._log_probs()
    pk = np.exp(lp)
    return p.total_count * np.sum(np.where(np.greater(pk, 0.0), pk * (lp - lq), 0.0), axis=-1)
