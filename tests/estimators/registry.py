"""One registry of every estimator: how to make it, the models it serves, what it promises.

The generic tests (tests/estimators/test_every_estimator.py) run each entry on each of its
models: unbiased against the exact gradient, second derivatives right or a clear error,
scg.jit equal to eager, pickled copies that continue where the original is, and threads.
A new estimator joins them with one `Case(...)` line in ESTIMATORS.
"""

import itertools
from dataclasses import dataclass

import numpy as np

import scg

from .exact import numeric_grad, numeric_hessian


@dataclass(frozen=True)
class Model:
    """A model with its parameters and its exact expectation (for the exact derivatives)."""
    name: str
    build: object      # estimator -> model(theta)
    theta: np.ndarray
    exact: object      # theta -> the exact expectation

    def grad(self):
        return numeric_grad(self.exact, self.theta)

    def hessian(self):
        return numeric_hessian(self.exact, self.theta)


# x ~ Normal(mu, sigma), cost (x - 0.3)^2 + 0.5 x: E = (mu - 0.3)^2 + sigma^2 + 0.5 mu
def _normal(estimator):
    def model(theta):
        x = scg.sample("x", scg.Normal(theta[0], theta[1]), estimator=estimator)
        return (x - 0.3) ** 2 + 0.5 * x
    return model


def _normal_exact(theta):
    return (theta[0] - 0.3) ** 2 + theta[1] ** 2 + 0.5 * theta[0]


# three coins, a cost that couples them: E by enumeration of the 8 states
_W = np.array([1.0, -0.7, 0.4])
_STATES = np.array(list(itertools.product([0.0, 1.0], repeat=3)))


def _coins(estimator):
    def model(theta):
        b = scg.sample("b", scg.Bernoulli(logits=theta), estimator=estimator)
        return (b @ _W - 0.5) ** 2
    return model


def _coins_exact(theta):
    p = 1.0 / (1.0 + np.exp(-theta))
    weights = np.prod(np.where(_STATES == 1.0, p, 1.0 - p), axis=1)
    return weights @ (_STATES @ _W - 0.5) ** 2


# a choice among four values, one-hot
_TABLE = np.array([1.0, -0.5, 2.0, 0.3])


def _choice(estimator):
    def model(theta):
        k = scg.sample("k", scg.OneHotCategorical(logits=theta), estimator=estimator)
        return (k @ _TABLE) ** 2
    return model


def _choice_exact(theta):
    p = np.exp(theta - np.max(theta))
    return (p / p.sum()) @ _TABLE ** 2


# an importance-weighted bound: K = 3 particles of two coins, log-weights
# log p(x, z) - log q(z), the bound enumerated over the 4^3 particle assignments
_K = 3
_LOG_JOINT = np.array([[-1.2, 0.4], [-0.3, -2.0]])
_PAIRS = np.array(list(itertools.product([0.0, 1.0], repeat=2)))


def _iwae(estimator):
    def model(theta):
        with scg.plate("particles", _K):
            q = scg.Bernoulli(logits=np.broadcast_to(theta, (_K, 2))).to_event(1)
            z = scg.sample("z", q, estimator=estimator)
            a, b = z[..., 0], z[..., 1]
            log_joint = (_LOG_JOINT[0, 0] * (1 - a) * (1 - b) + _LOG_JOINT[0, 1] * (1 - a) * b
                         + _LOG_JOINT[1, 0] * a * (1 - b) + _LOG_JOINT[1, 1] * a * b)
            log_w = log_joint - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")
    return model


def _iwae_exact(theta):
    log_q = np.sum(_PAIRS * theta - np.logaddexp(0.0, theta), axis=-1)
    log_w = _LOG_JOINT[_PAIRS[:, 0].astype(int), _PAIRS[:, 1].astype(int)] - log_q
    total = 0.0
    for ks in itertools.product(range(4), repeat=_K):
        ks = list(ks)
        total += np.exp(np.sum(log_q[ks])) * -(np.logaddexp.reduce(log_w[ks]) - np.log(_K))
    return total


# the IWAE bound of a Gaussian model with K = 2 reparameterized particles: p(z) = N(0, 1),
# p(x | z) = N(z + b, 1) at x = 1.3, q(z) = N(mu, exp(log_s)); the bound by Gauss-Hermite
# quadrature over the two particles' noise
_X = 1.3


def _iwae_normal(estimator):
    def model(theta):
        mu, log_s, b = theta[0], theta[1], theta[2]
        with scg.plate("particles", 2):
            q = scg.Normal(mu * np.ones(2), np.exp(log_s) * np.ones(2))
            z = scg.sample("z", q, estimator=estimator)
            log_w = scg.Normal(0.0, 1.0).log_prob(z) + \
                scg.Normal(z + b, 1.0).log_prob(_X) - q.log_prob(z)
        return -scg.logmeanexp(log_w, plate="particles")
    return model


def _log_normal(v, mean, sd):
    return -0.5 * ((v - mean) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(60)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def _iwae_normal_exact(theta):
    mu, s, b = theta[0], np.exp(theta[1]), theta[2]
    e1, e2 = np.meshgrid(_NODES, _NODES, indexing="ij")
    weight = np.outer(_WEIGHTS, _WEIGHTS)
    log_w = np.stack([_log_normal(z, 0.0, 1.0) + _log_normal(_X, z + b, 1.0)
                      - _log_normal(z, mu, s) for z in (mu + s * e1, mu + s * e2)])
    return -np.sum(weight * (np.logaddexp.reduce(log_w, axis=0) - np.log(2)))


# a Gaussian mixture of three components, its assignments summed out of the likelihood
# (scg.Marginalize): E is -log p(x), summed over five points, exactly
_DATA = np.array([-1.9, -0.2, 0.4, 1.7, 2.6])


def _mixture_likelihood(estimator):
    def model(theta):
        weights, locs = scg.softmax(theta[:3]), theta[3:]
        with scg.plate("data", len(_DATA)):
            z = scg.sample("z", scg.Categorical(weights), estimator=estimator)
            scg.sample("x", scg.Normal(locs[z], 1.0), obs=_DATA)
    return model


def _mixture_likelihood_exact(theta):
    log_w = theta[:3] - np.logaddexp.reduce(theta[:3])
    joint = log_w[:, None] + _log_normal(_DATA[None, :], theta[3:, None], 1.0)
    return -np.sum(np.logaddexp.reduce(joint, axis=0))


MODELS = {m.name: m for m in (
    Model("normal", _normal, np.array([0.7, 1.3]), _normal_exact),
    Model("coins", _coins, np.array([-0.4, 0.3, 1.1]), _coins_exact),
    Model("choice", _choice, np.array([0.2, -0.3, 0.5, 0.0]), _choice_exact),
    Model("iwae", _iwae, np.array([0.4, -0.7]), _iwae_exact),
    Model("iwae_normal", _iwae_normal, np.array([0.2, -0.3, 0.4]), _iwae_normal_exact),
    Model("mixture_likelihood", _mixture_likelihood,
          np.array([0.3, -0.2, 0.1, -1.5, 0.2, 2.0]), _mixture_likelihood_exact),
)}


class HandWrittenLeaveOneOut(scg.estimators.Estimator):
    """A newcomer's estimator, written against the protocol only: REINFORCE with the mean
    of the other draws' costs as each draw's baseline."""

    name = "hand-written-loo"

    def draw(self, d):
        return d.sample()

    def term(self, site, ctx):
        if not ctx.has_downstream(site):
            return None
        q = ctx.q(site)
        others = (q.sum(axis=0) - q) / (q.shape[0] - 1)
        return scg.estimators.linear_term(ctx.log_prob(site), ctx.spread(q - others, site),
                                          1.0 / ctx.n)


@dataclass(frozen=True)
class Case:
    """An estimator of the registry.

    `make()` gives a fresh estimator; `models` the MODELS it serves; `unbiased` False for a
    knowingly biased estimator (a relaxation: its `explain()` must say so); `second_order`
    whether scg.hessian through it is right (for a relaxation: the Hessian of its relaxed
    objective, the derivative of its gradient at the same noise), else it must raise
    scg.EstimatorError; `n`
    the draws per estimate of the unbiasedness test; `exact` for a sum with no variance."""
    id: str
    make: object
    models: tuple
    unbiased: bool = True
    second_order: bool = False
    n: int = 20_000
    exact: bool = False


ESTIMATORS = [
    Case("score", lambda: scg.Score(), ("normal", "coins", "choice", "iwae"),
         second_order=True),
    Case("score_loo", lambda: scg.Score("loo"), ("normal", "coins", "choice", "iwae"),
         second_order=True),
    Case("score_moving_average", lambda: scg.Score(scg.baselines.MovingAverage(0.9)),
         ("normal", "coins", "choice"), second_order=True),
    Case("score_antithetic", lambda: scg.Score(antithetic=True), ("normal",),
         second_order=True),
    Case("score_loo_antithetic", lambda: scg.Score("loo", antithetic=True), ("normal",),
         second_order=True),
    Case("score_constant", lambda: scg.Score(scg.baselines.Constant(0.5)),
         ("normal", "coins", "choice"), second_order=True),
    Case("score_mean", lambda: scg.Score(scg.baselines.Mean()), ("coins", "choice"),
         unbiased=False),
    Case("score_grpo", lambda: scg.Score(scg.baselines.GRPO()), ("coins", "choice"),
         unbiased=False),
    Case("pathwise", lambda: scg.Pathwise(), ("normal", "iwae_normal"), second_order=True),
    Case("pathwise_dreg", lambda: scg.Pathwise(dreg=True), ("iwae_normal",)),
    Case("pathwise_antithetic", lambda: scg.Pathwise(antithetic=True), ("normal",),
         second_order=True),
    Case("measure_valued", lambda: scg.MeasureValued(), ("normal", "coins", "choice")),
    Case("measure_valued_uncoupled", lambda: scg.MeasureValued(coupled=False),
         ("normal", "coins")),
    Case("disarm", lambda: scg.DisARM(), ("coins", "choice")),
    Case("arms", lambda: scg.ARMS(3), ("coins", "choice")),
    Case("indecater", lambda: scg.IndeCateR(), ("coins", "choice")),
    Case("rebar", lambda: scg.REBAR(temperature=0.5, scale=1.0, learn=False),
         ("coins", "choice")),
    Case("rebar_hot_small_scale", lambda: scg.REBAR(temperature=3.0, scale=0.3, learn=False),
         ("coins", "choice")),
    Case("rebar_learning", lambda: scg.REBAR(temperature=0.5, scale=1.0, lr=0.05),
         ("coins", "choice")),
    Case("relax", lambda: scg.RELAX(lr=0.05), ("coins", "choice")),
    Case("unordered_set", lambda: scg.UnorderedSet(2), ("choice",)),
    Case("unordered_set_all", lambda: scg.UnorderedSet(4), ("choice",), n=2, exact=True),
    Case("enumerate", lambda: scg.Enumerate(), ("coins", "choice"), second_order=True,
         n=2, exact=True),
    Case("marginalize", lambda: scg.Marginalize(), ("mixture_likelihood",),
         second_order=True, n=2, exact=True),
    Case("gumbel_softmax", lambda: scg.GumbelSoftmax(temperature=0.5), ("coins", "choice"),
         unbiased=False, second_order=True),
    Case("gumbel_softmax_hard", lambda: scg.GumbelSoftmax(temperature=0.5, hard=True),
         ("coins", "choice"), unbiased=False),
    Case("reinmax", lambda: scg.ReinMax(temperature=1.5), ("coins", "choice"), unbiased=False),
    Case("gumbel_rao", lambda: scg.GumbelRao(temperature=0.5, k=4), ("coins", "choice"),
         unbiased=False),
    Case("gapped_st", lambda: scg.GappedST(temperature=0.5), ("coins", "choice"),
         unbiased=False),
    Case("hand_written_loo", HandWrittenLeaveOneOut, ("normal", "coins", "choice")),
    Case("vimco", lambda: scg.VIMCO(), ("iwae",)),
]


def pairs():
    """(case, model) for every estimator and every model it serves, with test ids."""
    return [(c, MODELS[m]) for c in ESTIMATORS for m in c.models]


def pair_ids():
    return [f"{c.id}-{m}" for c in ESTIMATORS for m in c.models]
