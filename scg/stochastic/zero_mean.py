"""The derivative of mean zero that a model's `log q(z)` adds, left out.

An ELBO's cost holds `-log q(z)`, the log-probability of a site's own distribution at the
site's own draw. Its derivative in q's parameters at the draw held fixed has mean zero
(E_q[grad log q(z)] = 0) wherever it enters the costs linearly, with coefficients that do
not depend on the draw: it only adds variance. As Pyro's TraceGraph_ELBO, scg leaves it out
of first derivatives for a score-function site; `scg.Pathwise(stl=True)` does the same for a
pathwise site (sticking the landing, Roeder et al. 2017), where the derivative along the
draw's path stays.

The site's draw carries a law (`PerSample.law`, see distributions/base.py) that gives the
model that log-probability with the parameters held. The values computed from it say
whether they hold it linearly (`PerSample.held`) or otherwise (`PerSample.bent`, see
persample.py). A cost or a site's parameters that hold it otherwise need the derivative: for
a score-function site the run is made again with the derivative kept (`keep_direct`), and a
site with stl=True raises EstimatorError. Second derivatives keep it (scg.hessian stays
unbiased): under a nested derivative the law gives the plain log-probability.
"""

from ..core.tape import Box, Tracer
from ..distributions.base import family_of, state_of
from ..errors import EstimatorError
from ..estimators.dreg import log_prob_with_params_held
from .copies import Replan
from .persample import PerSample


def keep_direct(name):
    """The key, among a run's decisions, of a site whose log-probability's derivative the
    model needs (it uses `log q(z)` otherwise than linearly)."""
    return ("keep the derivative of log q at the draw", name)


class HeldLogProb:
    """The law of a site's draw: the log-probability of the site's own distribution at its
    own draw, with the distribution's parameters held (see the module docstring)."""

    def __init__(self, name, given, run, stl):
        self.name = name
        self.family = family_of(given)
        self.params = dict(self.family.params)
        self.state = state_of(self.family)  # (an attribute set since: another distribution)
        # (the run's decisions, not the run: the run holds the site, whose value holds
        # this, and a cycle would leave the whole run to the garbage collector)
        self.decisions = run.decisions
        self.stl = stl  # (Pathwise(stl=True): a use it cannot serve is an error)
        self.last = None  # (the value and what it gave: the same object for the same draw)

    def matches(self, dist):
        """Is `dist` the site's own distribution (the same family and parameter objects)?"""
        fam = family_of(dist)
        if fam is self.family:
            state = state_of(fam)
            return len(state) == len(self.state) and all(
                a is b for a, b in zip(state, self.state))
        if type(fam) is not type(self.family):
            return False
        params = fam.params
        return params.keys() == self.params.keys() and all(
            params[k] is v for k, v in self.params.items())

    def log_prob(self, dist, value, log_prob):
        if not self.matches(dist) or keep_direct(self.name) in self.decisions or \
                any(_nested(v) for v in self.params.values()):
            return None  # (the plain log-probability)
        key = getattr(value, "value", None)
        if self.last is not None and self.last[0] is key and self.last[1] is log_prob:
            return self.last[2]
        lp = log_prob_with_params_held(dist, value, log_prob)
        if isinstance(lp, PerSample):
            lp.held = frozenset({self.name})
        self.last = (key, log_prob, lp)
        return lp

    def refuse(self, where):
        """The model uses the held log-probability where its derivative is needed."""
        if self.stl:
            raise EstimatorError(
                f"site {self.name!r}: scg.Pathwise(stl=True) leaves out the derivative of "
                f"log q({self.name}) in q's parameters, which has mean zero only where it "
                f"enters the costs linearly (a single-sample ELBO); {where} uses it otherwise "
                "(a multi-sample bound's logmeanexp, a product with the draw): use "
                "scg.Pathwise(dreg=True) for a multi-sample bound, or scg.Pathwise()")
        self.decisions[keep_direct(self.name)] = True
        raise Replan()


def law_of(est, name, given, run):
    """A HeldLogProb for a site whose estimator leaves the zero-mean term out (the score
    function; Pathwise(stl=True)), else None."""
    if getattr(est, "leaves_zero_mean", False):
        return HeldLogProb(name, given, run, stl=est.differentiable)
    return None


def check_use(value, where, run):
    """A cost or a site's parameter `value` (`where` names it): refuse the held
    log-probabilities it holds otherwise than linearly; the sites whose held log-probability
    it holds linearly (for explain())."""
    if not isinstance(value, PerSample) or not (value.held or value.bent):
        return ()
    for s in sorted(value.bent):
        law = run.sites[s].draw.law if s in run.sites else None
        if isinstance(law, HeldLogProb):
            law.refuse(where)
    return tuple(sorted(value.held))


def _nested(v):
    """Is v traced for a derivative of a derivative (a Box of a Box)?"""
    while isinstance(v, Tracer):
        inner = v.value
        if isinstance(v, Box) and isinstance(inner, Box):
            return True
        v = inner
    return False
