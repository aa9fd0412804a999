"""The pathwise (reparameterization) estimator: differentiate through x = path(noise, params)."""

import numpy as np

from ..distributions.base import family_name
from ..errors import EstimatorError
from .antithetic import check_antithetic
from .base import INVALID, Estimator
from .dreg import Proposal, scale_gradient
from .vimco import bound_multiple


class Pathwise(Estimator):
    """Gradients flow along the sampling path; needs `dist.has_rsample` and no jump downstream.

    Args:
        antithetic: draw the noise in pairs (eps and its mirror image); n must be even.
        dreg: doubly reparameterized gradients (Tucker et al. 2019) for particles in a
            plate averaged by a `scg.logmeanexp` bound (IWAE): the proposal's log-density
            at the draw, `q.log_prob(z)` with the distribution sampled from, is taken with
            its parameters held fixed, and the derivative reaching each particle is
            weighted by its normalized weight again. Unbiased; its signal-to-noise ratio
            for the proposal's parameters does not fall with K. First derivatives only.
        stl: sticking the landing (Roeder, Wu and Duvenaud 2017) for a single-sample ELBO:
            `q.log_prob(z)` of the distribution sampled from, at the draw, is taken with
            its parameters held fixed (its derivative flows along the draw only), which
            leaves out a term of mean zero. Unbiased where log q(z) enters the costs
            linearly; elsewhere (a multi-sample bound) EstimatorError, which points to
            dreg=True. Second derivatives keep the term.

    Example:
        >>> scg.sample("x", scg.Normal(mu, 1.0), estimator=scg.Pathwise())
    """

    name = "pathwise"
    own_draws = True
    draws_from_law = True
    differentiable = True

    def __init__(self, antithetic=False, dreg=False, stl=False):
        for name, flag in (("antithetic", antithetic), ("dreg", dreg), ("stl", stl)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"Pathwise: {name} must be True or False, got {flag!r}")
        if antithetic and dreg:
            raise EstimatorError("Pathwise: dreg=True and antithetic=True do not combine "
                                 "(the particles of a bound are its plate, not pairs)")
        if stl and dreg:
            raise EstimatorError("Pathwise: dreg=True holds the proposal's parameters in "
                                 "log q(z) already (and weighs the particles); drop stl=True")
        self.antithetic = bool(antithetic)
        self.dreg = bool(dreg)
        self.stl = bool(stl)

    @property
    def leaves_zero_mean(self):
        return self.stl

    @property
    def serves_masks(self):
        return not self.dreg  # (DReG weighs the particles of a bound)

    def check(self, name, dist):
        if not dist.has_rsample:
            raise EstimatorError(
                f"site {name!r}: estimator='pathwise' but {family_name(dist)} "
                "has no reparameterization path (its draws are discrete or have no "
                "differentiable map from noise); use estimator='score' or 'auto'")
        if self.antithetic:
            check_antithetic(name, dist)

    def draw(self, d):
        x = d.noise_path()
        if not self.dreg:
            return x
        if not d.run.plates:
            raise EstimatorError(
                f"site {d.name!r}: scg.Pathwise(dreg=True) serves particles drawn in a plate "
                "and averaged by scg.logmeanexp over it (an IWAE bound); this site is in no "
                "plate. Use scg.Pathwise()")
        proposal = Proposal(d.name, d.given, len(d.dist.batch_shape),
                            len(d.dist.event_shape), d.run.plates)
        d.aux["proposal"] = d.law = proposal
        d.run.proposals.append(proposal)
        return d.rewrap(x, scale_gradient(x.value, proposal.factor))

    def term(self, site, ctx):
        if not self.dreg or not ctx.has_downstream(site):
            return None
        proposal = site.aux["proposal"]
        if proposal.bound is None:
            plates = ", ".join(repr(p.name) for p in site.plates)
            raise EstimatorError(
                f"site {site.name!r}: scg.Pathwise(dreg=True) needs a multi-sample bound over "
                f"its plate ({plates}) downstream: return -scg.logmeanexp(log_w, plate=...) "
                "of the particles' log-weights; or use scg.Pathwise()")
        if not proposal.log_prob_seen:
            raise EstimatorError(
                f"site {site.name!r}: scg.Pathwise(dreg=True) needs the proposal's "
                f"log-density at the draw computed as q.log_prob({site.name}), q the "
                "distribution passed to scg.sample (or one with the same parameter values), "
                "so that its parameters can be held fixed there; the model computed it "
                "otherwise, or not at all")
        bound_multiple(site, ctx, proposal.bound, "scg.Pathwise(dreg=True)", every=True)
        # DReG's identity holds for a bound that depends on the particle through its
        # reparameterized path alone: a site drawn from a distribution that depends on the
        # draw adds its own terms that the weighting of the derivative at z would bias
        problem = _dependent_site(site, ctx.trace)
        if problem:
            raise EstimatorError(problem)
        return None

    def explain_terms(self, site, trace):
        problem = _dependent_site(site, trace) if self.dreg else None
        return [INVALID + problem] if problem else []

    def dice_log_prob(self, site, ctx):
        if self.dreg:
            self.unsupported_order(site)
        return None

    def describe(self, site):
        if self.dreg:
            return ("pathwise, doubly reparameterized (DReG): the proposal's log-density "
                    "held fixed, each particle's derivative weighted by its normalized weight "
                    "again")
        if self.stl:
            return ("pathwise, sticking the landing: log q at the draw with q's parameters "
                    "held fixed (a term of mean zero left out)")
        return "pathwise" + (", antithetic pairs (draw i + n/2 mirrors draw i)"
                             if self.antithetic else "")

    def __repr__(self):
        if self.dreg:
            return "Pathwise(dreg=True)"
        if self.stl:
            return "Pathwise(stl=True)"
        return "Pathwise(antithetic=True)" if self.antithetic else "Pathwise()"


def _dependent_site(site, trace):
    """Why a DReG site cannot be estimated here, or None: DReG's identity holds for a bound
    that depends on the particle through its reparameterized path alone; a site drawn from
    a distribution that depends on the draw adds terms that the reweighting of the
    derivative at the draw would bias."""
    later = sorted(s.name for s in trace.sites.values()
                   if s is not site and site.name in s.param_deps.up)
    if not later:
        return None
    return (f"site {site.name!r}: scg.Pathwise(dreg=True) needs the other sites of the "
            f"particle to be independent of its draw, but the distribution of site "
            f"{later[0]!r} depends on {site.name!r}; DReG's reweighting of the derivative at "
            f"{site.name!r} would bias the gradient. Use scg.Pathwise() at site {site.name!r} "
            "(it serves any other site)")
