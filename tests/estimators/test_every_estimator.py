"""Every estimator of the registry (tests/estimators/registry.py) on every model it serves.

Unbiased against the exact gradient (within 5 standard errors at fixed seeds; an exact
sum to rounding); second derivatives right within 5 standard errors over independent
expectations, or `scg.EstimatorError`; scg.jit gives the eager numbers and replays;
a pickled expectation continues where the original is; expectations in threads give
what they give alone. A knowingly biased estimator says so in `explain()`.
"""

import warnings

import cloudpickle

import numpy as np
import pytest

import scg

from tests.stochastic.test_threads import run_in_threads
from .registry import pair_ids, pairs

PAIRS = pairs()
IDS = pair_ids()


def _expectation(case, model, n=None, seed=0, study=False):
    E = scg.expectation(model.build(case.make()), n=n or case.n, seed=seed)
    E.warn_lost_history = not study  # (a study's expectations are called once, by design)
    return E


@pytest.fixture(autouse=True)
def _bias_warnings_of_biased_cases(request):
    """A knowingly biased estimator warns (tests/estimators/test_grpo.py and
    test_baselines.py test the warnings); the suite turns any other BiasWarning into an
    error."""
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    if case is None or case.unbiased:
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        yield


@pytest.mark.parametrize("case, model", PAIRS, ids=IDS)
def test_unbiased_against_the_exact_gradient(case, model):
    E = _expectation(case, model, seed=11)
    gs = scg.grad_samples(E)(model.theta)
    exact = model.grad()
    if case.exact:
        np.testing.assert_allclose(gs.mean, exact, rtol=1e-6, atol=1e-8)
        return
    if not case.unbiased:
        assert "biased" in E.last_trace.explain()
        return
    # (an estimator exact in some coordinate, as antithetic pairs for a quadratic cost's
    # location or a measure-valued derivative over every category: to rounding)
    z = (gs.mean - exact) / np.maximum(gs.stderr, 1e-8)
    assert np.all(np.abs(z) < 5), (case.id, model.name, gs.mean, exact, z)


@pytest.mark.parametrize("case, model", PAIRS, ids=IDS)
def test_second_derivatives_or_a_clear_error(case, model):
    if not case.second_order and case.unbiased:
        with pytest.raises(scg.EstimatorError, match="first derivatives only"):
            scg.hessian(_expectation(case, model, n=100))(model.theta)
        return
    if not case.second_order:  # (knowingly biased: a clear error, or its bias warned of)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                scg.hessian(_expectation(case, model, n=100))(model.theta)
            except scg.EstimatorError as error:
                assert "first derivatives only" in str(error)
                return
        assert any(issubclass(w.category, scg.BiasWarning) for w in caught), case.id
        return
    if not case.unbiased:
        # a relaxation: the Hessian of its relaxed objective, which at the same noise is
        # the derivative of its gradient (no expectation to compare with)
        h = scg.hessian(_expectation(case, model, n=200, seed=1))(model.theta)
        step = 1e-5
        fd = np.stack([(scg.grad(_expectation(case, model, n=200, seed=1))(model.theta + step * e)
                        - scg.grad(_expectation(case, model, n=200, seed=1))(model.theta - step * e))
                       / (2 * step) for e in np.eye(len(model.theta))], axis=-1)
        np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-8)
        return
    if case.exact:
        h = scg.hessian(_expectation(case, model))(model.theta)
        np.testing.assert_allclose(h, model.hessian(), rtol=1e-4, atol=1e-5)
        return
    runs = np.array([scg.hessian(_expectation(case, model, n=2_000, seed=s, study=True))(model.theta)
                     for s in range(30)])
    mean, stderr = runs.mean(axis=0), runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    exact = model.hessian()
    # (entries with no variance, as a pathwise Hessian of a quadratic: to rounding)
    z = (mean - exact) / np.maximum(stderr, 1e-6)
    assert np.all(np.abs(z) < 5), (case.id, model.name, mean, exact, z)


@pytest.mark.parametrize("case, model", PAIRS, ids=IDS)
def test_jit_gives_the_eager_numbers_and_replays(case, model):
    E, Ej = (_expectation(case, model, n=64, seed=3) for _ in range(2))
    eager, jitted = scg.grad(E), scg.jit(scg.grad(Ej))
    for _ in range(6):
        np.testing.assert_allclose(jitted(model.theta), eager(model.theta),
                                   rtol=1e-12, atol=1e-14)
    assert jitted.stats["replays"] >= 2, jitted.explain()
    # the same draws from the same generator, and the same state kept between calls
    assert Ej.rng.bit_generator.state == E.rng.bit_generator.state
    # (baselines and self-tuning estimators; to rounding: a BLAS kernel's last bit may
    # depend on the alignment of its arrays)
    assert _state_leaves(Ej.states).keys() == _state_leaves(E.states).keys()
    for key, value in _state_leaves(E.states).items():
        np.testing.assert_allclose(_state_leaves(Ej.states)[key], value, rtol=1e-10,
                                   atol=1e-14, err_msg=str(key))


def _state_leaves(states):
    """{(site, part, key, ...): number or array} of an expectation's site states."""
    out = {}

    def walk(prefix, x):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(prefix + (k,), v)
        else:
            out[prefix] = x
    for name in states:
        walk((name, "baseline"), states[name].baseline)
        walk((name, "estimator"), states[name].estimator)
    return out


@pytest.mark.parametrize("case, model", PAIRS, ids=IDS)
def test_a_pickled_expectation_continues_where_the_original_is(case, model):
    E = _expectation(case, model, n=64, seed=5)
    for _ in range(2):
        scg.grad(E)(model.theta)
    E2 = cloudpickle.loads(cloudpickle.dumps(E))
    for _ in range(2):
        np.testing.assert_array_equal(scg.grad(E2)(model.theta), scg.grad(E)(model.theta))


@pytest.mark.parametrize("case, model", PAIRS, ids=IDS)
def test_threads_give_what_each_gives_alone(case, model):
    def job(seed):
        E = _expectation(case, model, n=256, seed=seed)
        return [scg.grad(E)(model.theta) for _ in range(5)]

    alone = [job(s) for s in range(4)]
    together = run_in_threads(*[lambda s=s: job(s) for s in range(4)])
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_the_registry_holds_every_estimator_and_baseline():
    """Every estimator scg exports and every baseline of scg.baselines has a Case: a new
    one joins the generic tests with one line in tests/estimators/registry.py."""
    import inspect
    from .registry import ESTIMATORS
    made = [case.make() for case in ESTIMATORS]
    kinds = {type(e) for e in made} | {type(getattr(e, "baseline", None)) for e in made}
    estimators = {getattr(scg.estimators, name) for name in scg.estimators.__all__}
    estimators = {c for c in estimators if inspect.isclass(c) and
                  issubclass(c, scg.estimators.Estimator) and c is not scg.estimators.Estimator}
    baselines = {c for _, c in inspect.getmembers(scg.baselines, inspect.isclass)
                 if issubclass(c, scg.baselines.Baseline) and c is not scg.baselines.Baseline
                 and c.__module__ == scg.baselines.__name__}
    assert estimators and baselines
    assert not (estimators | baselines) - kinds, (estimators | baselines) - kinds


class _Coin(scg.Bernoulli):
    """A user's subclass of a family (a name of its own, nothing else changed)."""


class _Choice(scg.OneHotCategorical):
    pass


@pytest.mark.parametrize("case, model", [(c, m) for c, m in PAIRS
                                         if m.name in ("coins", "choice")],
                         ids=[i for (c, m), i in zip(PAIRS, IDS)
                              if m.name in ("coins", "choice")])
def test_a_subclass_of_a_family_is_served_as_the_family(case, model, monkeypatch):
    """Every estimator serves a user's subclass of Bernoulli or OneHotCategorical as it
    serves the family: the same gradient from the same seed."""
    want = scg.grad(_expectation(case, model, n=64, seed=4))(model.theta)
    monkeypatch.setattr(scg, "Bernoulli", _Coin)
    monkeypatch.setattr(scg, "OneHotCategorical", _Choice)
    got = scg.grad(_expectation(case, model, n=64, seed=4))(model.theta)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
