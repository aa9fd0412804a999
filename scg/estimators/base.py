"""The estimator protocol: everything the stochastic layer asks of a site's estimator.

A model run calls, for each sample site, in this order:

1. `check(name, dist)`: raise `scg.EstimatorError` if the estimator cannot serve this
   family (or these parameters) at all.
2. `copies(name, dist, plates)`: how many evaluations of the rest of the model one draw of
   this site needs (1 for most; the support size for an enumeration, the positive and
   negative parts of a measure-valued derivative, the two halves of an antithetic pair of
   DisARM). The run lays the copies of all sites out along the draws' axis (see
   `scg.stochastic.copies`): the rest of the model is evaluated once per copy as a branch
   of the run, with the same upstream values, the other copying sites at their main
   values, and shared downstream randomness (common random numbers).
3. `draw(d)`: the site's value, given a `SiteDraw` `d` (see `scg.stochastic.sites`) that
   supplies noise, plain samples and the copy layout.
4. `after_draw(site, run)`: warnings that need the finished site (a moving support).

(`check_layout(name, copies)`: an estimator whose copies multiply may refuse a layout too
large before it is allocated. An estimator that tunes its own parameters between calls is a
`scg.estimators.learned.Learned`, whose `probe` the stochastic layer runs; one whose draws
are not its distribution's says so in `d.law`.)

Then, to build the surrogate objective, `weight(site, ctx)` (how the costs of the site's
copies are combined), `term(site, ctx)` (its first-order terms), and for derivatives of
higher order `dice_log_prob(site, ctx)` and `dice_term(site, ctx)`; `ctx` is the
surrogate's `SurrogateContext`. `describe(site)` and `explain_terms(site, trace)` give its
lines in `Trace.explain()`. Each method has a neutral default, so an estimator overrides
only what it changes: a newcomer's estimator is `draw` and `term` (and `copies` if it
evaluates the rest of the model more than once), and gives first derivatives; a second
derivative through it raises until it says what its `dice_log_prob` is.
"""

from ..errors import EstimatorError


# how a line of an estimator's explain_terms() starts when a gradient call would raise
INVALID = "a gradient raises EstimatorError: "


class Estimator:
    """Base class of the gradient estimators of a sample site.

    Attributes:
        name: a short name, also the `kind` of the site's node in `Trace.graph`.
        biased: the estimate is knowingly biased (a relaxation); `explain()` says so.
        differentiable: the draw carries derivatives along its sampling path, so a jump or
            black box downstream biases it (the stochastic layer checks this).
        antithetic: draws come in pairs (draw i with draw i + n/2).
        baseline: a `scg.baselines.Baseline` or None (score-function estimators).
        own_draws: the site's values are draws of its distribution (or points of its
            support), so the log-probability the surrogate takes of them skips the
            support test; False for values of another law (a relaxation).
        draws_from_law: the site's values are draws of its distribution (not points of
            its support, which may have probability 0): a family whose draws always have
            a finite log-probability then skips checking it. A class that defines `draw`
            makes its own promises: the ones it does not state are False on it (set when
            the class is made, so the attribute reads what holds); a subclass that keeps
            its parent's `draw` keeps its parent's promises.
        serves_masks: its sites may be drawn inside `scg.mask`: one evaluation of the
            model per draw and each draw weighted as drawn (it neither copies the run nor
            reweights the draws, which a mask would leave half counted).
        copies_multiply: its copies (see `copies`) are an exact sum over the site's values,
            so every copying site that meets it in a cost is evaluated at each of them
            (the copies multiply); otherwise they are branches of the run beside other
            sites' (1 + the sum of the extra copies per draw), with copy 0 a main value.
    """

    name = "estimator"
    biased = False
    differentiable = False
    antithetic = False
    baseline = None
    own_draws = False
    draws_from_law = False
    copies_multiply = False
    serves_masks = False
    leaves_zero_mean = False  # (log q at the site's own draw, in a cost: see zero_mean.py)

    _PROMISES = ("own_draws", "draws_from_law")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "draw" in cls.__dict__:  # (a draw of its own: the parent's promises were about
            # the parent's draws; it makes those it states, and no other)
            for promise in Estimator._PROMISES:
                if promise not in cls.__dict__:
                    setattr(cls, promise, False)

    # ------------------------------------------------------------ validity and drawing
    def check(self, name, dist):
        """Raise `EstimatorError` if this estimator cannot serve `dist` at site `name`."""

    def copies(self, name, dist, plates):
        """Evaluations of the downstream model that one draw of this site needs."""
        return 1

    def draw(self, d):
        """The site's value: a `PerSample` (traced if `differentiable`) or a plain array
        of physical shape (rows, *batch_shape, *event_shape)."""
        raise NotImplementedError(f"{type(self).__name__} must implement draw(d)")

    def after_draw(self, site, run):
        """Checks that need the finished site; warn here."""

    def check_layout(self, name, copies):
        """For an estimator whose copies multiply (`copies_multiply`): raise
        `EstimatorError` if the run's layout of copies (`scg.stochastic.copies.Copies`,
        checked before the run that would allocate it) is more than it serves."""

    def evaluations(self, site):
        """Model evaluations per draw (for explain() and studies)."""
        return self.copies(site.name, site.dist, site.plates)

    # ------------------------------------------------------------ surrogate
    def weight(self, site, ctx):
        """For a site with several copies: the weight of each copy's costs, laid out on the
        grid (rows, *plate axes), traced if it depends on the parameters; None otherwise."""
        return None

    def term(self, site, ctx):
        """The site's terms of the first-order surrogate (zero in value), or None."""
        return None

    def dice_log_prob(self, site, ctx):
        """The log-probability that the DiCE form puts in the magic box of every cost
        downstream of the site, or None (derivatives of any order). An estimator with a
        first-order `term` that does not say what its higher orders are gets a clear
        error here (`unsupported_order`): never a Hessian that leaves its terms out."""
        if type(self).term is not Estimator.term:
            self.unsupported_order(site)
        return None

    def dice_term(self, site, ctx):
        """An extra zero-valued term of the DiCE form (a baseline), or None."""
        return None

    def unsupported_order(self, site):
        """Raise a clear error: this estimator gives first derivatives only."""
        raise EstimatorError(
            f"site {site.name!r}: {self!r} estimates first derivatives only; a second "
            "derivative (scg.hessian, a nested scg.grad) through it would be wrong. Use "
            "scg.Score(), scg.Pathwise() or scg.Enumerate() at this site for higher orders")

    # ------------------------------------------------------------ explanation
    def describe(self, site):
        """One line for explain(): what the estimator computes at this site."""
        return self.name

    def cost_factor(self, site):
        """How a cost downstream of the site is weighted in the surrogate (for explain()),
        or None."""
        return None

    def explain_terms(self, site, trace):
        """Lines for explain()'s account of the first-derivative terms (a line that starts
        with INVALID says why a gradient call raises; explain() then calls the site not
        valid)."""
        return []

    def __repr__(self):
        return f"{type(self).__name__}()"
