"""The differential tester (API.md section 12): random models against exact references.

Random stochastic computation graphs from the grammar of tests/differential/grammar.py
(Bernoulli, Categorical, OneHotCategorical, Normal, Gamma and Poisson sites; parameters
that depend on earlier draws; plates, nested and subsampled; costs through arithmetic,
np.where, indexing by draws, einsum, sums and logmeanexp over plates; loops of sequential
sites; episode loops that end, with scg.mask and `if scg.all(~alive): break`), each site under an estimator of the registry that serves it, against the exact
expectation computed without scg (enumeration and quadrature, tests/differential/
reference.py):

- first order: scg.grad_samples' mean within 6 standard errors of the exact gradient
  (confirmed on independent draws before failing); an exact sum to the reference's
  accuracy; a knowingly biased estimator says "biased" in explain(), as does every
  site that warned;
- second order: scg.hessian within 6 standard errors of the exact Hessian over
  independent estimates where every estimator serves second order, else
  scg.EstimatorError naming a site;
- scg.jit of value_and_grad equal to eager, bit for bit, call after call.

Models with sites summed out (scg.Marginalize(); grammar.marginal_models) run through the
same checks, against the exact objective: E over the drawn sites of -log sum over the
marginalized sites' values of p(z | ...) exp(likelihood terms), per plate element, plus the
other costs. One in six or so breaks their contract (a cost or a drawn site downstream of a
marginalized site) and must raise scg.EstimatorError instead of returning a number.

An scg.EstimatorError for a documented limitation (an estimator that does not serve a
family or a structure) passes when it names a site; any other exception fails.

The default run draws a fixed, derandomized set of models. SCG_THOROUGH=1 or
`pytest --thorough` draws thousands; SCG_DIFFERENTIAL_LOG=path appends every failing model
to a file as soon as it is found. A failure shrinks to a minimal model and prints it
as code. Known, open bugs narrow the grammar (tests/differential/known_bugs.py).
"""

import os

from hypothesis import HealthCheck, event, given, settings

from tests.differential import harness
from tests.differential.grammar import marginal_models, models
from tests.differential.known_bugs import free_of_known_bugs

THOROUGH = os.environ.get("SCG_THOROUGH", "") not in ("", "0")
LOG = os.environ.get("SCG_DIFFERENTIAL_LOG", "")
_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]

if THOROUGH:
    FIRST_ORDER = settings(max_examples=3000, deadline=None, database=None,
                           suppress_health_check=_HEALTH, print_blob=True)
    JIT = settings(FIRST_ORDER, max_examples=2000)
    SECOND_ORDER = settings(FIRST_ORDER, max_examples=2000)
    MARGINAL_FIRST_ORDER = settings(FIRST_ORDER, max_examples=1500)
    MARGINAL_JIT = settings(FIRST_ORDER, max_examples=1000)
    MARGINAL_SECOND_ORDER = settings(FIRST_ORDER, max_examples=1000)
else:
    # (the models with marginalized sites take a share of the default run's budget)
    FIRST_ORDER = settings(max_examples=200, deadline=None, database=None, derandomize=True,
                           suppress_health_check=_HEALTH)
    JIT = settings(FIRST_ORDER, max_examples=96)
    SECOND_ORDER = settings(FIRST_ORDER, max_examples=160)
    MARGINAL_FIRST_ORDER = settings(FIRST_ORDER, max_examples=80)
    MARGINAL_JIT = settings(FIRST_ORDER, max_examples=32)
    MARGINAL_SECOND_ORDER = settings(FIRST_ORDER, max_examples=56)


def _run(check, model):
    """Run a check; with SCG_DIFFERENTIAL_LOG=path, every failing model (before
    shrinking too) is appended to that file as it is found."""
    try:
        event(check(model))
    except harness.Failure as failure:
        if LOG:
            with open(LOG, "a") as f:
                f.write(f"==== {check.__name__}\n{failure}\n")
        raise


@FIRST_ORDER
@given(models().filter(free_of_known_bugs("first_order")))
def test_gradient_against_the_exact_one(model):
    _run(harness.check_first_order, model)


@JIT
@given(models().filter(free_of_known_bugs("jit")))
def test_jit_equals_eager_bit_for_bit(model):
    _run(harness.check_jit, model)


@SECOND_ORDER
@given(models().filter(free_of_known_bugs("second_order")))
def test_hessian_against_the_exact_one_or_a_clear_error(model):
    _run(harness.check_second_order, model)


@MARGINAL_FIRST_ORDER
@given(marginal_models().filter(free_of_known_bugs("first_order")))
def test_marginalized_sites_gradient_against_the_exact_one(model):
    _run(harness.check_first_order, model)


@MARGINAL_JIT
@given(marginal_models().filter(free_of_known_bugs("jit")))
def test_marginalized_sites_jit_equals_eager_bit_for_bit(model):
    _run(harness.check_jit, model)


@MARGINAL_SECOND_ORDER
@given(marginal_models().filter(free_of_known_bugs("second_order")))
def test_marginalized_sites_hessian_against_the_exact_one(model):
    _run(harness.check_second_order, model)
