"""The score-function (REINFORCE) estimator: grad log p(w) times its downstream costs."""

import warnings

import numpy as np

from ..core import effects

from ..core.tape import read_only, strip
from ..kernels.primitives import PARALLEL_MIN
from ..distributions.base import family_name, family_of
from ..errors import BiasWarning, EstimatorError
from .antithetic import check_antithetic
from .base import Estimator
from .baselines import Baseline, BaselineShapeError, as_baseline, check_shape
from .terms import linear_term, magic_box
from ..numpy import rules as R


_FUSED_MIN = PARALLEL_MIN  # draws: below, the general term (its log-densities are cheap)


def require_seen_outcomes(site, run, who="the score-function estimator"):
    """Raise EstimatorError where the derivative in `probs` of a discrete family needs an
    outcome of probability exactly 0 (the family's `probs_boundary`): the score function
    (and `who`, an estimator built on it) weighs the costs of the outcomes drawn, so it
    never sees that one (at p = 1 a coin's f(0)), and gives a plausible wrong number (0
    for a single coin) although the derivative exists."""
    dist = family_of(site.dist)
    probs = dist.params.get("probs")
    boundary = getattr(type(dist), "probs_boundary", None)
    if probs is None or boundary is None or not run.carries_gradient(probs):
        return
    p = effects.asarray(probs, dtype=float)
    if effects.check(boundary.test, p, f"site {site.name!r}: every outcome's probability "
                     "above 0"):
        return
    raise EstimatorError(
        f"site {site.name!r}: {who} differentiates probs, which is "
        f"{boundary.where}; an outcome of probability 0 is never drawn, so its cost never "
        "enters the estimate, but the derivative in probs needs it (d E / dp = f(1) - f(0) "
        f"for a coin). To get the derivative, {boundary.advice}")


def require_resolved_draws(site, run):
    """Raise EstimatorError where a family says its draws are too coarse for the score at
    these parameters (`score_caveat`: a Normal's scale lost in its loc's rounding)."""
    dist = family_of(site.dist)
    caveat = getattr(dist, "score_caveat", None)
    if caveat is None or not any(run.carries_gradient(v) for v in dist.params.values()):
        return
    why = caveat()
    if why is not None:
        raise EstimatorError(
            f"site {site.name!r}: the score-function estimator cannot serve {why}. The "
            "pathwise estimator does not need the noise back (dx/dloc = 1, dx/dscale = "
            "eps): estimator='pathwise', where no jump lies downstream; or draw the offset "
            "about 0 and add loc after (x = loc + scg.sample(name, scg.Normal(0, scale)))")


class Score(Estimator):
    """Weight grad log p(w | parents) by (downstream costs - baseline).

    Args:
        baseline: None (plain REINFORCE), a number, 'loo', 'mean', or a
            `scg.baselines.Baseline` such as `MovingAverage(0.9)`.
        antithetic: draw the noise in pairs (families with a sampling path only); n must
            be even. A leave-one-out baseline then leaves out the draw's pair.

    Example:
        >>> scg.sample("a", scg.Bernoulli(probs=p), estimator=scg.Score(baseline="loo"))
    """

    name = "score"
    serves_masks = True
    own_draws = True
    draws_from_law = True
    # (log q(z) of the site's own distribution at its draw, entering a cost linearly: its
    # derivative in q's parameters has mean zero and is left out of first derivatives)
    leaves_zero_mean = True

    def __init__(self, baseline=None, antithetic=False):
        self.baseline = as_baseline(baseline)
        if not isinstance(antithetic, (bool, np.bool_)):
            raise TypeError(f"Score: antithetic must be True or False, got {antithetic!r}")
        self.antithetic = bool(antithetic)

    @property
    def biased(self):
        """Knowingly biased when its baseline is (GRPO, the batch mean)."""
        return self.baseline is not None and self.baseline.biased

    def check(self, name, dist):
        if self.antithetic:
            if not dist.has_rsample:
                raise EstimatorError(
                    f"site {name!r}: antithetic draws need a sampling path from noise; "
                    f"{family_name(dist)} has none. Drop antithetic=True")
            check_antithetic(name, dist)

    def draw(self, d):
        return d.sample()

    def after_draw(self, site, run):
        require_seen_outcomes(site, run)
        require_resolved_draws(site, run)
        names = site.dist.moving_support
        if not names:
            return
        dist = family_of(site.dist)
        moving = [p for p in names if run.carries_gradient(dist.params.get(p))]
        if moving:
            warnings.warn(
                f"site {site.name!r}: the score-function estimator is biased here: the "
                f"support of {dist!r} moves with {', '.join(moving)}, and the score misses "
                "the boundary term. Use a pathwise estimator (estimator='pathwise', valid "
                "when no jump lies downstream)", BiasWarning, stacklevel=4)

    # ------------------------------------------------------------ surrogate
    def _weights(self, site, ctx, q):
        """(the advantage q - b, or the baseline b for the DiCE form)."""
        b = self.baseline
        if b is None:
            return q if ctx.first_order else None
        if not ctx.first_order and b.first_order_only:
            raise EstimatorError(f"site {site.name!r}: the baseline {b!r} serves first "
                                 f"derivatives only ({b.first_order_only}); use "
                                 "scg.Score('loo') for second derivatives")
        state = ctx.baseline_state(site.name)
        out = b.paired(q, ctx.first_order) if self.antithetic else None
        if out is None:
            # (one recorded operation under scg.jit: replays read the state as it is then)
            what = "advantage" if ctx.first_order else "value"
            try:
                out = effects.stateful(getattr(b, what), q, effects.State(state))
                check_shape(b, q, out, what)
            except BaselineShapeError as e:
                raise EstimatorError(f"site {site.name!r}: {e}") from None
            ctx.check_baseline(site.name, b, q, state)
        ctx.update_baseline(site.name, b, q, state)
        return read_only(np.broadcast_to(out, q.shape))

    def term(self, site, ctx):
        if not ctx.has_downstream(site):  # a site no cost depends on contributes nothing
            return None
        fused = self._fused_term(site, ctx)
        if fused is not None:
            return fused
        advantage = self._weights(site, ctx, ctx.q(site))
        return linear_term(ctx.log_prob(site), ctx.spread(advantage, site), 1.0 / ctx.n)

    def _fused_term(self, site, ctx):
        """The term of a site with many draws whose family gives it without its
        log-densities (`score_term`: one pass for the cotangents of all its parameters),
        when the layout is plain: no copies, no plates, one number per draw, and the
        log-probability not computed already (by the model, or by another term). The
        log-densities are checked to be finite as `Site.log_prob` checks them, by the
        count the pass that drew the site noted, or by a pass that stores nothing. None
        otherwise."""
        dist = site.dist
        score_term = getattr(dist, "score_term", None)
        if score_term is None or ctx.trace.rows < _FUSED_MIN or ctx.copies or ctx.grid.plates \
                or dist.batch_shape or dist.event_shape or site._log_prob is not None \
                or site.mask is not None \
                or effects.sees_operations() or \
                dist.last_log_prob(site.draw) is not None:
            return None
        x = strip(site.draw)
        params = {key: ctx.param(site, key) for key in dist.params}
        bad = dist.log_prob_nonfinite(x, params)
        if bad is None:
            return None
        if bad:
            raise FloatingPointError(
                f"site {site.name!r}: log_prob is not finite for {bad} of {np.size(x)} "
                f"entries of {dist!r}: a degenerate parameter (a scale or rate of 0, or one "
                "that overflows), or a draw outside the support")
        # the costs downstream, as ctx.q lays them out here (without copies and plates,
        # one number per draw)
        total = None
        for c in ctx.trace.downstream_costs(site):
            value = strip(ctx.costs[c.name][0])
            total = value if total is None else total + value
        q = np.broadcast_to(np.asarray(total, dtype=float), (ctx.trace.rows,))
        b = self.baseline
        affine = b.affine(q) if b is not None and not self.antithetic else None
        if affine is not None:
            # the advantage q * k - t (leave-one-out's), formed inside the term's pass
            # instead of as an array; the checks and the (empty) update as in `_weights`
            state = ctx.baseline_state(site.name)
            ctx.check_baseline(site.name, b, q, state)
            ctx.update_baseline(site.name, b, q, state)
            k, t = affine
            return score_term(x, params, q, 1.0 / ctx.n, k=k, t=t)
        return score_term(x, params, self._weights(site, ctx, q), 1.0 / ctx.n)

    def dice_log_prob(self, site, ctx):
        return ctx.log_prob(site)

    def dice_term(self, site, ctx):
        b = self._weights(site, ctx, ctx.q(site)) if ctx.has_downstream(site) else None
        if b is None or np.all(b == 0.0):
            return None
        # (1 - box(log p(w))) b_w, weighted as in Loaded DiCE by the box of the score sites
        # upstream of w: zero in value and in expectation at every order, and it also
        # reduces the variance of the cross terms of higher derivatives
        term = R.multiply(R.subtract(1.0, magic_box(ctx.log_prob(site))),
                          ctx.spread(b, site, traced=True))
        tau = ctx.upstream_tau(site)
        return term if tau is None else R.multiply(magic_box(tau), term)

    # ------------------------------------------------------------ explanation
    def describe(self, site):
        b = self.baseline
        text = f"score, baseline: {b.describe() if b is not None else 'none'}"
        if self.antithetic:
            text += ", antithetic pairs (draw i + n/2 mirrors draw i)"
            if b is None:
                text += ("; each draw's score meets its own cost, so the two terms of a "
                         "pair, whose noise differs by its sign, combine where the score is "
                         "odd in the noise (a Normal's loc) into the central difference "
                         "grad log p(x_i) * (f(x_i) - f(x_i')) / 2 of evolution strategies")
            elif type(b).paired is not Baseline.paired:
                text += "; the baseline leaves out the draw's pair"
        return text

    def cost_factor(self, site):
        return f"box(log p({site.name}))"

    def explain_terms(self, site, trace):
        lines = []
        parents = sorted(p for p in site.param_deps.smooth
                         if p in trace.sites and trace.sites[p].estimator.differentiable)
        if parents:
            lines.append(f"log p({site.name}) passes pathwise gradients to "
                         f"{', '.join(parents)} through its parameters")
        if site.zero_mean_costs:
            lines.append(f"log p({site.name}) at its own draw enters "
                         f"{', '.join(repr(c) for c in site.zero_mean_costs)} linearly: its "
                         "derivative there (mean zero) is left out of first derivatives, as "
                         "Pyro's TraceGraph_ELBO does; second derivatives keep it")
        down = " + ".join([c.name for c in trace.downstream_costs(site)] or ["no cost"])
        weight = self.baseline.formula(down) if self.baseline is not None else f"({down})"
        lines.append(f"grad log p({site.name}) * {weight}")
        return lines

    def __repr__(self):
        extra = ", antithetic=True" if self.antithetic else ""
        return f"Score(baseline={self.baseline!r}{extra})"
