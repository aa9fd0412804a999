"""What estimators over a finite support ask of a family: the probability of each of its
values, from the family's own `enumerate_support` and `log_prob` (never its name).

UnorderedSet and IndeCateR take the log-probabilities of every value of the support;
DisARM and ARMS serve a family of two values (a coin) by its own copula, the probability
of the second value being the coin's p and log p(second) - log p(first) its logit, and
other finite supports by coupled draws (coupled_categorical.py). A coin that declares
that logit (`log_odds`, Bernoulli) gives both directly: a few elementwise operations of
its parameters per call (under scg.jit, per replay) instead of its log_prob at every value.
"""

import numpy as np

from ..core import effects
from ..distributions.base import declares, family_name, family_of
from ..errors import EstimatorError
from ..kernels.parallel import all_finite
from ..numpy import rules as R
from .enumerate import support_of


def plain_log_probs(d, who):
    """log p of every value of the support at a draw `d` (a SiteDraw), plain, physical
    shape (*batch, S) or (rows, *batch, S) for per-draw parameters; EstimatorError naming
    the site when they do not hold all the probability (a support that misses values)."""
    family = d.plain_family()
    if declares(family, "log_odds"):  # (two values whose probabilities add up to 1)
        return effects.opaque(_coin_log_probs, _plain_log_odds(family),
                              tuple(family.batch_shape))
    given = {k: v for k, v in family.params.items() if v is not None}
    # (one operation of the plain parameters: a replay computes them as the call did)
    lp = effects.opaque(_support_log_probs, type(family), tuple(given), *given.values())
    if not effects.check(_normalized, lp, f"site {d.name!r}: its support holds all the "
                         "probability"):
        raise EstimatorError(
            f"site {d.name!r}: {who} sums over the values that {family_name(d.dist)} "
            "declares (enumerate_support), but their probabilities exp(log_prob) do not add "
            "up to 1 at some element: the declared support misses values, or log_prob is not "
            "normalized. Declare every value of the support, or use scg.Score('loo')")
    return lp


def _support_log_probs(cls, keys, *values):
    """log p of every value of the support of cls(**params), shape ([rows,] *batch, S)."""
    family = cls(**dict(zip(keys, values)), validate_args=False)
    return _support_last(family.log_prob(family.enumerate_support(expand=True)))


def traced_log_probs(site, ctx):
    """log p of each value of the support, traced in the parameters: a list of S arrays of
    physical shape (rows, *batch) (the family's batch shape, to_event dims included)."""
    inner = family_of(site.dist)
    support = support_of(site.name, site.dist, repr(site.estimator))
    shape = (ctx.trace.rows,) + tuple(inner.batch_shape) + support.shape[1:]
    traced = traced_family(site, ctx)
    return [traced.log_prob(np.broadcast_to(v, shape)) for v in support]


def log_probs_at_rows(site, ctx, rows):
    """log p of every value of the support at the given rows of the run, traced in the
    parameters, as one array of physical shape (S, len(rows), *batch): one evaluation of
    the family's log_prob at the stacked values (its log-normalizer once, not once per
    value), and only the rows asked for (an estimator whose terms live on the main copy's
    rows need not differentiate the others)."""
    inner = family_of(site.dist)
    support = support_of(site.name, site.dist, repr(site.estimator))
    rows = np.asarray(rows)
    params = {k: (None if v is None else R.take(ctx.param(site, k), rows, axis=0))
              for k, v in inner.params.items()}
    shape = (len(rows),) + tuple(inner.batch_shape) + support.shape[1:]
    values = np.stack([np.broadcast_to(v, shape) for v in support])
    return inner._rebuild(params).log_prob(values)


def traced_family(site, ctx):
    """The site's family with its parameters traced, of physical shape (rows, *batch_shape,
    *event part): its log_prob at plain values (rows, *batch, *event) is traced, (rows,
    *batch) (the family's batch shape, to_event dims included)."""
    inner = family_of(site.dist)
    params = {k: (None if v is None else ctx.param(site, k)) for k, v in inner.params.items()}
    return inner._rebuild(params)


def coin_values(name, dist, who):
    """The two values of a coin's support (shape (2,): two values, no event dims, as
    Bernoulli's), or None for another finite support (a categorical); EstimatorError naming
    the site if the family declares no finite support (`enumerate_support`)."""
    if not declares(dist, "enumerate_support"):
        raise EstimatorError(
            f"site {name!r}: {who} serves families with a finite support (enumerate_support): "
            "coins such as Bernoulli, and Categorical, OneHotCategorical, Binomial or a "
            f"user's own; not {family_name(dist)}, which declares none. Use 'auto', "
            "scg.Score('loo') or, with a sampling path, scg.Pathwise()")
    support = support_of(name, dist, who)
    return support if support.shape == (2,) else None


def plain_coin(d, who):
    """(p, max(p, 1 - p)) of a coin at a draw `d`, p the probability of its second value,
    plain: from its declared log_odds, else from its log_prob of its two values;
    EstimatorError naming the site if the logit is not finite (probs exactly 0 or 1)."""
    family = d.plain_family()
    declared = declares(family, "log_odds")
    # (the logit, or both log-probabilities: its check joins the other finiteness checks)
    known = _plain_log_odds(family) if declared else plain_log_probs(d, who)
    if not effects.check(all_finite, known, f"site {d.name!r}: both values of the coin "
                         "possible"):
        raise EstimatorError(
            f"site {d.name!r}: {who} differentiates the coin's logit, log p(second value) - "
            "log p(first value), and one of them has probability 0 at some element. The "
            "derivative exists: scg.MeasureValued() gives it exactly at the boundary")
    if declared:  # (elementwise operations: recorded one by one, each as eager runs it)
        p = R.sigmoid(known)
        return p, np.maximum(p, 1.0 - p)
    return effects.opaque(_second, known), effects.opaque(_larger, known)


def traced_logit(site, ctx):
    """log p(second value) - log p(first value), traced, physical shape (rows, *batch)
    (the coin's declared log_odds: its logits, whose derivative is the estimate's own)."""
    inner = family_of(site.dist)
    if declares(inner, "log_odds"):
        params = {k: (None if v is None else ctx.param(site, k))
                  for k, v in inner.params.items()}
        return inner._rebuild(params).log_odds()
    first, second = traced_log_probs(site, ctx)
    return second - first


def _plain_log_odds(family):
    """The declared log-odds of a plain family, a float array (under scg.jit, recorded)."""
    return effects.asarray(family.log_odds(), dtype=float)


def _coin_log_probs(logit, batch_shape):
    """(log p(first), log p(second)) = (-softplus(a), -softplus(-a)) of the log-odds a,
    shape (*batch, 2) (the physical batch: rows first for per-draw parameters)."""
    lp = -np.logaddexp(0.0, np.stack([logit, np.negative(logit)], axis=-1))
    shape = np.broadcast_shapes(tuple(batch_shape), np.shape(logit)) + (2,)
    return lp if lp.shape == shape else np.broadcast_to(lp, shape)


def _support_last(lp):
    lp = np.asarray(lp, dtype=float)
    return lp.transpose(tuple(range(1, lp.ndim)) + (0,))  # (np.moveaxis's result)


def _normalized(lp):
    # (exp of at least -700 never underflows, and values below that add nothing that
    # counts at this tolerance: no np.errstate)
    total = np.exp(np.maximum(lp, -700.0)).sum(axis=-1)
    return bool((np.abs(total - 1.0) <= 1e-6).all())


def _second(lp):
    return np.exp(lp[..., 1])


def _larger(lp):
    """max(p, 1 - p), accurate near 0 and 1 (sigmoid(|logit|))."""
    return np.exp(np.max(lp, axis=-1))
