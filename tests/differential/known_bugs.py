"""Bugs of scg that the differential tester found and that are not fixed yet.

Each entry narrows the grammar: generated models for which `applies` is true are not
drawn for the checks the entry names (first order, second order, jit), so that the default
run stays green while the bug is open. Each also has a plain
test of a minimal model in tests/test_differential_known_bugs.py, marked
xfail(strict=True): when the bug is fixed that test passes (and fails as an unexpected
pass), and the entry here is to be removed.
"""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class KnownBug:
    name: str
    description: str
    applies: Callable        # Model -> bool
    test: str                # the xfail test that holds a minimal model
    checks: tuple = ("first_order", "second_order", "jit")  # the checks it would fail


_COPYING = {"measure_valued", "measure_valued_uncoupled", "disarm", "rebar",
            "rebar_hot_small_scale", "rebar_learning", "relax", "unordered_set",
            "unordered_set_all", "enumerate", "score_loo_antithetic", "score_antithetic",
            "pathwise_antithetic"}


# (estimators whose copies of the run are drawn with common random numbers downstream)
_COPYING_RUNS = {"measure_valued", "measure_valued_uncoupled", "disarm", "rebar",
                 "rebar_hot_small_scale", "rebar_learning", "relax", "unordered_set",
                 "unordered_set_all", "enumerate"}


_RELAXING = {"rebar", "rebar_hot_small_scale", "rebar_learning", "relax"}
_GUMBEL = {"gumbel_softmax", "gumbel_softmax_hard"}
_ALONG_THE_DRAW = {"pathwise", "pathwise_antithetic", "pathwise_dreg"}


def _jump_downstream(model, site):
    """A comparison of the site's draw in some cost (np.where(x > c, ...))."""
    return any(c.kind == "where" and c.uses[:1] == (site.name,) for c in model.costs) or \
        (site.steps and site.step_cost_kind == "where")


def _estimators(model):
    return {s.estimator for s in model.sites}


KNOWN_BUGS = [
    KnownBug(
        "explain-antithetic-score-without-baseline",
        "Trace.explain() raises AttributeError (type(None).paired) for a site with "
        "scg.Score(antithetic=True): Score.describe reads the baseline's class when there "
        "is no baseline",
        lambda m: "score_antithetic" in _estimators(m),
        "test_explain_of_an_antithetic_score_site_without_baseline",
        checks=("first_order",)),
    KnownBug(
        "jit-traced-table-indexed-by-a-draw",
        "scg.jit raises IndexError while recording the backward pass of a theta-dependent "
        "table indexed by a Categorical draw ((theta[0] * table)[k] or scg.take(theta[0] * "
        "table, k)); the eager call works",
        lambda m: "table" in m.cost_kinds(),
        "test_jit_of_a_traced_table_indexed_by_a_draw", checks=("jit",)),
    KnownBug(
        "jit-gumbel-softmax-probs-never-replays",
        "scg.jit never replays a model with scg.GumbelSoftmax at a site parameterized by "
        "probs=: the relaxation changes numpy's error handling (np.errstate) inside the "
        "call, so every call runs afresh",
        lambda m: any(s.estimator.startswith("gumbel_softmax") and s.family.endswith("probs")
                      for s in m.sites),
        "test_jit_replays_gumbel_softmax_with_probs", checks=("jit",)),
    KnownBug(
        "rebar-learning-beside-another-copying-site",
        "scg.REBAR(learn=True) and scg.RELAX() at a site with no cost downstream, in a model "
        "with another site whose estimator copies the run (DisARM, MeasureValued, ...), "
        "raise a raw ValueError (operands could not be broadcast) from the tuning step "
        "instead of a gradient or scg.EstimatorError",
        lambda m: any(s.estimator in ("rebar_learning", "relax") for s in m.sites)
        and sum(s.estimator in _COPYING for s in m.sites) >= 2,
        "test_rebar_learning_beside_a_disarm_site"),
    KnownBug(
        "jit-copies-upstream-of-a-site-never-replay",
        "scg.jit never replays a model in which a site whose estimator copies the run "
        "(MeasureValued, DisARM, Enumerate, REBAR, RELAX, UnorderedSet) has a sample site "
        "downstream: every call runs afresh ('a generator's state was saved and restored "
        "during the call')",
        lambda m: any(s.estimator in _COPYING_RUNS and (s.steps or any(
            s.name in t.refs for t in m.sites)) for s in m.sites),
        "test_jit_replays_a_measure_valued_site_upstream_of_another_site", checks=("jit",)),
    KnownBug(
        "jit-gamma-pathwise-last-bit",
        "scg.jit's gradient through a pathwise Gamma site differs from eager's in the last "
        "bit in about one call in six (recorded calls and replays alike); eager is "
        "deterministic",
        lambda m: any(s.family == "Gamma" and s.estimator in ("auto", "pathwise")
                      for s in m.sites),
        "test_jit_of_a_pathwise_gamma_site_is_bit_for_bit", checks=("jit",)),
    KnownBug(
        "jit-unordered-set-probs-never-replays",
        "scg.jit never replays a model with scg.UnorderedSet at a site parameterized by "
        "probs=: the support check's functools.partial(_enough_support, k=...) is a new "
        "object on every call, so the recordings differ from call to call",
        lambda m: any(s.estimator.startswith("unordered_set") and s.family.endswith("probs")
                      for s in m.sites),
        "test_jit_replays_unordered_set_with_probs", checks=("jit",)),
    KnownBug(
        "jit-rebar-learning-last-bit",
        "scg.jit's replays of a model with scg.REBAR(learn=True) (or RELAX) give a gradient "
        "that differs from eager's in the last bit on some calls (seen with the site in a "
        "plate, and downstream of another site)",
        lambda m: any(s.estimator in ("rebar_learning", "relax") for s in m.sites),
        "test_jit_of_rebar_learning_in_a_plate_is_bit_for_bit", checks=("jit",)),
    KnownBug(
        "gumbel-softmax-log-prob-of-the-relaxed-value",
        "with scg.GumbelSoftmax(hard=False), q.log_prob(x) of the site's own relaxed value "
        "is not finite (FloatingPointError naming the cost), where REBAR and RELAX evaluate "
        "it in the family's continuous form; the relaxed objective of an importance-"
        "weighted bound cannot be formed",
        lambda m: any(s.estimator == "gumbel_softmax" and any(
            s.name in c.bound_log_prob for c in m.costs) for s in m.sites),
        "test_log_prob_of_a_gumbel_softmax_relaxed_value"),
    KnownBug(
        "explain-says-unbiased-after-a-bias-warning",
        "a site differentiated along the draw across a jump (REBAR or RELAX with "
        "np.where(x > c, ...) downstream; a Pathwise site upstream of a GumbelSoftmax "
        "site compared in np.where likewise) emits scg.BiasWarning while its explain() "
        "block says 'unbiased'",
        lambda m: any(s.estimator in _RELAXING | _GUMBEL and _jump_downstream(m, s)
                      for s in m.sites),
        "test_explain_agrees_with_a_bias_warning_of_rebar_across_a_jump",
        checks=("first_order",)),
    KnownBug(
        "multi-sample-estimators-in-an-outer-plate",
        "scg.VIMCO() and scg.Pathwise(dreg=True) for particles in a plate at dim=-2 (log-"
        "weights of shape (K, 1), Pyro's layout for a site in an outer plate only) raise a "
        "raw ValueError from scg.logmeanexp ('an axis that lies along no plate'); "
        "scg.Score() serves the same model",
        lambda m: m.plate("q") is not None and any(
            s.scope == "p" and s.estimator in ("vimco", "pathwise_dreg") for s in m.sites),
        "test_vimco_for_particles_in_an_outer_plate"),
    KnownBug(
        "grpo-second-order-error-names-no-site",
        "scg.hessian through scg.Score(scg.baselines.GRPO()) raises scg.EstimatorError "
        "that does not say which site (every other estimator's error names its site)",
        lambda m: "score_grpo" in _estimators(m),
        "test_grpo_second_order_error_names_the_site", checks=("second_order",)),
    KnownBug(
        "log-prob-of-probs-categorical-taken-for-a-jump",
        "Categorical(probs=...).log_prob and OneHotCategorical(probs=...).log_prob are taken "
        "for a jump on the path from a pathwise draw to a cost: a forced Pathwise site "
        "upstream emits a spurious scg.BiasWarning (its gradient is right; explain() says "
        "unbiased), and estimator='auto' falls back to the score function",
        lambda m: any(s.family in ("Categorical-probs", "OneHot-probs")
                      and any(s.name in c.bound_log_prob for c in m.costs) for s in m.sites)
        and any(s.family in ("Normal", "Gamma") and s.estimator in _ALONG_THE_DRAW
                for s in m.sites),
        "test_log_prob_of_a_categorical_with_probs_is_no_jump", checks=("first_order",)),
]


def known_bugs(model, check=None):
    """The known bugs a generated model would run into (in one check, or in any)."""
    return [b for b in KNOWN_BUGS if (check is None or check in b.checks)
            and b.applies(model)]


def free_of_known_bugs(check):
    """A filter of generated models for one check."""
    return lambda model: not known_bugs(model, check)
