"""The estimators the differential tester draws per site, what each serves and promises.

Mirrors tests/estimators/registry.py: every estimator and baseline of the registry, with
the families (of the grammar) it accepts, whether it is unbiased, whether scg.hessian
through it is an unbiased estimate of the Hessian, and whether its sum is exact.
"""

from dataclasses import dataclass

DISCRETE_FINITE = ("Bernoulli-logits", "Bernoulli-probs", "Categorical-logits",
                   "Categorical-probs", "OneHot-logits", "OneHot-probs")
# (generated as marginalized sites only)
BINOMIAL = ("Binomial",)
DISCRETE = DISCRETE_FINITE + ("Poisson",) + BINOMIAL
CONTINUOUS = ("Normal", "Gamma")
ALL = DISCRETE + CONTINUOUS
BERNOULLI = ("Bernoulli-logits", "Bernoulli-probs")
CATEGORICAL = ("Categorical-logits", "Categorical-probs", "OneHot-logits", "OneHot-probs")
ONEHOT = ("OneHot-logits", "OneHot-probs")


@dataclass(frozen=True)
class Choice:
    """An estimator as a generated model writes it (`code`, with {K} the site's number
    of categories), the families it serves, and what it promises."""
    key: str
    code: str
    families: tuple
    unbiased: bool = True
    second_order: bool = False
    exact: bool = False
    needs: str = ""      # "bound": a site in a plate with a logmeanexp over it downstream;
                         # "bound_log_prob": also its q.log_prob in the log-weights


CHOICES = [
    Choice("auto", '"auto"', ALL, second_order=True),
    Choice("score", '"score"', ALL, second_order=True),
    Choice("score_loo", 'scg.Score("loo")', ALL, second_order=True),
    Choice("score_moving_average", "scg.Score(scg.baselines.MovingAverage(0.9))", ALL,
           second_order=True),
    Choice("score_constant", "scg.Score(scg.baselines.Constant(0.5))", ALL,
           second_order=True),
    Choice("score_antithetic", "scg.Score(antithetic=True)", ("Normal",), second_order=True),
    Choice("score_loo_antithetic", 'scg.Score("loo", antithetic=True)', ("Normal",),
           second_order=True),
    Choice("pathwise", '"pathwise"', CONTINUOUS, second_order=True),
    Choice("pathwise_antithetic", "scg.Pathwise(antithetic=True)", ("Normal",),
           second_order=True),
    Choice("pathwise_dreg", "scg.Pathwise(dreg=True)", ("Normal",), needs="bound_log_prob"),
    Choice("measure_valued", "scg.MeasureValued()", ALL),
    Choice("measure_valued_uncoupled", "scg.MeasureValued(coupled=False)", ALL),
    Choice("disarm", "scg.DisARM()", BERNOULLI + CATEGORICAL),
    Choice("arms", "scg.ARMS(3)", BERNOULLI + CATEGORICAL),
    Choice("rebar", "scg.REBAR(temperature=0.5, scale=1.0, learn=False)",
           BERNOULLI + ("OneHot-logits",)),
    Choice("rebar_hot_small_scale", "scg.REBAR(temperature=3.0, scale=0.3, learn=False)",
           BERNOULLI + ("OneHot-logits",)),
    Choice("rebar_learning", "scg.REBAR(temperature=0.5, scale=1.0, lr=0.05)",
           BERNOULLI + ("OneHot-logits",)),
    Choice("relax", "scg.RELAX(lr=0.05)", BERNOULLI + ("OneHot-logits",)),
    Choice("unordered_set", "scg.UnorderedSet(2)", CATEGORICAL),
    Choice("unordered_set_all", "scg.UnorderedSet({K})", CATEGORICAL, exact=True),
    Choice("enumerate", "scg.Enumerate()", DISCRETE_FINITE, second_order=True, exact=True),
    Choice("vimco", "scg.VIMCO()", DISCRETE, needs="bound"),
    Choice("indecater", "scg.IndeCateR()", DISCRETE_FINITE),
    Choice("reinmax", "scg.ReinMax(temperature=1.5)", BERNOULLI + ONEHOT, unbiased=False),
    Choice("gumbel_rao", "scg.GumbelRao(temperature=0.5, k=3)", BERNOULLI + ONEHOT,
           unbiased=False),
    Choice("gapped_st", "scg.GappedST(temperature=0.5)", BERNOULLI + ONEHOT, unbiased=False),
    Choice("gumbel_softmax", "scg.GumbelSoftmax(temperature=0.5)", BERNOULLI + ONEHOT,
           unbiased=False),
    Choice("gumbel_softmax_hard", "scg.GumbelSoftmax(temperature=0.5, hard=True)",
           BERNOULLI + ONEHOT, unbiased=False),
    Choice("score_mean", "scg.Score(scg.baselines.Mean())", DISCRETE, unbiased=False),
    Choice("score_grpo", "scg.Score(scg.baselines.GRPO())", DISCRETE, unbiased=False),
]
# (not drawn per site: the marginal grammar gives it to the sites it sums out; it serves
# no drawn site)
MARGINALIZE = Choice("marginalize", "scg.Marginalize()", DISCRETE_FINITE + BINOMIAL,
                     second_order=True, exact=True)
BY_KEY = {c.key: c for c in CHOICES + [MARGINALIZE]}
