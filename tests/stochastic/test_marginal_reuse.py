"""A scg.markov chain computes what its steps share once (scg/stochastic/reuse.py): the
program scg.jit records grows by a few operations per step, and every value and gradient
is still the forward algorithm's by hand, also where the model uses one distribution at
two steps' values, changes a value in place, or gives each step its own transition."""

import functools
import re

import numpy as np
import pytest

import scg
from tests.estimators.exact import numeric_grad
from tests.stochastic.test_marginal import (_log_normal, _log_softmax, _lse, forward_algorithm,
                                            hmm, hmm_params)


def _operations(jitted):
    found = re.search(r"from a program of (\d+) operations", jitted.explain())
    assert found, jitted.explain()
    return int(found.group(1))


def _recorded(model, theta):
    step = scg.jit(scg.value_and_grad(scg.expectation(model, n=1)))
    for _ in range(3):
        step(theta)
    return step


def _forward(pi, a, emit):
    """-log p(x) of a chain by the forward algorithm: initial logits pi, transition logits
    a (rows), the emissions' log-densities emit[t, state]."""
    alpha = _log_softmax(pi) + emit[0]
    for t in range(1, len(emit)):
        alpha = _lse(alpha[:, None] + _log_softmax(a), axis=0) + emit[t]
    return -_lse(alpha)


def _check_eager_and_recorded(model, exact, theta, E=None):
    """Value and gradient of the model's expectation, eager and replayed by scg.jit, equal
    exact(theta) and its finite differences."""
    E = scg.expectation(model, n=1) if E is None else E
    for f in (scg.value_and_grad(E), _recorded(model, theta)):
        value, g = f(theta)
        assert value == pytest.approx(exact(theta), rel=1e-12)
        np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)


def test_a_chain_records_a_few_operations_per_step():
    """The transition's row, its log-probabilities and the emission's location are taken
    once per slot, not once per step: what grows with the chain is the emission's density,
    its derivative and their place in the forward algorithm's tables."""
    k = 3
    rng = np.random.default_rng(0)
    theta = rng.normal(size=k * k + 2 * k)
    sizes = {}
    for length in (10, 30):
        data = rng.normal(0, 2, length)
        step = _recorded(functools.partial(hmm, data, k), theta)
        sizes[length] = _operations(step)
        value, g = step(theta)
        exact = functools.partial(forward_algorithm, data, k)
        assert value == pytest.approx(exact(theta), rel=1e-12)
        np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)
    per_step = (sizes[30] - sizes[10]) / 20
    assert per_step <= 8, sizes  # (one per step for each of 40 operations before)


def test_a_long_chain_replays_after_two_recordings():
    """Two recordings of a chain of a thousand steps (as many observations, each a
    constant of the program) are the same program: the third call replays it."""
    k, length = 2, 1000
    rng = np.random.default_rng(6)
    theta = rng.normal(size=k * k + 2 * k)
    for _ in range(2):  # (and a second chain after it: nothing the first left changes it)
        data = rng.normal(0, 2, length)
        E = scg.expectation(functools.partial(hmm, data, k), n=1)
        step = scg.jit(scg.value_and_grad(E))
        for _ in range(3):
            value, _ = step(theta)
        assert step.stats["replays"] == 1, step.explain()
        assert value == pytest.approx(forward_algorithm(data, k, theta), rel=1e-12)


def test_one_distribution_at_two_steps_values_is_two_steps_terms():
    """The same distribution object at `locs[z]` of every step: the steps of one slot hold
    the same array, and each step's term depends on its own step's site."""
    k, length = 2, 6
    rng = np.random.default_rng(1)
    data = rng.normal(0, 1.5, length)
    prior = scg.Normal(0.0, 2.0)

    def model(theta):
        a, pi, locs = hmm_params(theta, k)
        trans, init = scg.softmax(a, axis=-1), scg.softmax(pi)
        z = None
        for t in scg.markov(range(length)):
            z = scg.sample(f"z{t}", scg.Categorical(init if t == 0 else trans[z]),
                           estimator=scg.Marginalize())
            scg.factor(f"p{t}", prior.log_prob(locs[z]))
            scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])

    def exact(theta):
        a, pi, locs = hmm_params(theta, k)
        emit = _log_normal(data[:, None], locs[None]) + _log_normal(locs, 0.0, 2.0)[None]
        return _forward(pi, a, emit)

    theta = rng.normal(size=k * k + 2 * k)
    _check_eager_and_recorded(model, exact, theta)


def test_independent_steps_in_one_slot_keep_their_own_terms():
    """history=0: every step's site takes the one slot, so consecutive steps hold the same
    array; the distribution that gave step t's term gives step t + 1's its own."""
    k, length = 3, 5
    rng = np.random.default_rng(5)
    data = rng.normal(0, 2, length)
    prior = scg.Normal(0.5, 2.0)

    def model(theta):
        weights, locs = scg.softmax(theta[:k]), theta[k:]
        for t in scg.markov(range(length), history=0):
            z = scg.sample(f"z{t}", scg.Categorical(weights), estimator=scg.Marginalize())
            scg.factor(f"p{t}", prior.log_prob(locs[z]))
            scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])

    def exact(theta):
        joint = _log_softmax(theta[:k])[None] + _log_normal(theta[k:], 0.5, 2.0)[None] + \
            _log_normal(data[:, None], theta[k:][None])
        return -np.sum(_lse(joint, axis=1))

    theta = rng.normal(size=2 * k)
    _check_eager_and_recorded(model, exact, theta)


def test_values_changed_in_place_between_steps():
    """A per-draw value changed in place (`mean += ...`), and a plain array the model
    writes into at every step: a later step computes from the new values."""
    k, length = 3, 7
    rng = np.random.default_rng(2)
    data = rng.normal(0, 2, length)

    def model(theta):
        a, pi, locs = hmm_params(theta, k)
        trans, init = scg.softmax(a, axis=-1), scg.softmax(pi)
        shift = np.zeros(k)
        z = None
        for t in scg.markov(range(length)):
            z = scg.sample(f"z{t}", scg.Categorical(init if t == 0 else trans[z]),
                           estimator=scg.Marginalize())
            shift[:] = 0.1 * t * np.arange(k)
            mean = locs[z]
            mean += 0.5 * t
            scg.sample(f"x{t}", scg.Normal(mean + scg.take(shift, z, axis=0), 1.0),
                       obs=data[t])

    def exact(theta):
        a, pi, locs = hmm_params(theta, k)
        steps = np.arange(length)[:, None]
        emit = _log_normal(data[:, None], locs[None] + 0.5 * steps + 0.1 * steps * np.arange(k))
        return _forward(pi, a, emit)

    theta = rng.normal(size=k * k + 2 * k)
    _check_eager_and_recorded(model, exact, theta)


def test_a_recorded_value_changed_in_place_is_not_taken_for_the_old_one():
    """Under scg.jit without a gradient the parameters are recorded values; one changed in
    place between two steps gives the later steps' terms its new entries (the recording is
    then not replayed, and every call is a fresh run)."""
    k, length = 2, 5
    rng = np.random.default_rng(3)
    data = rng.normal(0, 2, length)

    def model(theta):
        a, pi, locs = hmm_params(theta, k)
        locs = locs * 1.0  # (the model's own array: changed in place below)
        trans, init = scg.softmax(a, axis=-1), scg.softmax(pi)
        z = None
        for t in scg.markov(range(length)):
            probs = init if t == 0 else scg.take(trans, z, axis=0)
            z = scg.sample(f"z{t}", scg.Categorical(probs),
                           estimator=scg.Marginalize())
            scg.sample(f"x{t}", scg.Normal(scg.take(locs, z, axis=0), 1.0), obs=data[t])
            if t == 2:
                locs += 1.0

    def exact(theta):
        a, pi, locs = hmm_params(theta, k)
        later = (np.arange(length) > 2)[:, None]
        emit = _log_normal(data[:, None], locs[None] + 1.0 * later)
        return _forward(pi, a, emit)

    theta = rng.normal(size=k * k + 2 * k)
    E = scg.expectation(model, n=1)
    value = scg.jit(E)
    for _ in range(3):
        assert value(theta) == pytest.approx(exact(theta), rel=1e-12)
    assert E(theta) == pytest.approx(exact(theta), rel=1e-12)


def test_each_step_its_own_transition():
    """Transitions that differ from step to step are no shared table: the forward
    algorithm takes each step's own."""
    k, length = 3, 6
    rng = np.random.default_rng(4)
    data = rng.normal(0, 2, length)

    def model(theta):
        a, pi, locs = hmm_params(theta, k)
        init = scg.softmax(pi)
        z = None
        for t in scg.markov(range(length)):
            probs = init if t == 0 else scg.softmax(a * (1.0 + 0.2 * t), axis=-1)[z]
            z = scg.sample(f"z{t}", scg.Categorical(probs), estimator=scg.Marginalize())
            scg.sample(f"x{t}", scg.Normal(locs[z], 1.0), obs=data[t])

    def exact(theta):
        a, pi, locs = hmm_params(theta, k)
        emit = _log_normal(data[:, None], locs[None])
        alpha = _log_softmax(pi) + emit[0]
        for t in range(1, length):
            alpha = _lse(alpha[:, None] + _log_softmax(a * (1.0 + 0.2 * t)), axis=0) + emit[t]
        return -_lse(alpha)

    theta = rng.normal(size=k * k + 2 * k)
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("recomputed", [True, False])
def test_a_parameter_changed_in_place_after_the_distribution_was_made(recomputed):
    """The distribution's location is a plain array the model writes into between two
    log-probabilities at the same values (`locs[z]` computed again gives the same array,
    or the same object twice): the second term is the new location's, not the first
    one's again."""
    k = 3
    rng = np.random.default_rng(7)
    data = rng.normal(0, 2, 2)

    def model(theta):
        weights, locs = scg.softmax(theta[:k]), theta[k:]
        shift = np.zeros(1)
        prior = scg.Normal(shift, 2.0)
        z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        at = scg.take(locs, z, axis=0)
        scg.factor("before", prior.log_prob(at))
        shift += 1.0
        scg.factor("after", prior.log_prob(scg.take(locs, z, axis=0) if recomputed else at))
        scg.sample("x", scg.Normal(at, 1.0), obs=data[0])

    def exact(theta):
        locs = theta[k:]
        return -_lse(_log_softmax(theta[:k]) + _log_normal(locs, 0.0, 2.0) +
                     _log_normal(locs, 1.0, 2.0) + _log_normal(data[0], locs))

    theta = rng.normal(size=2 * k)
    E = scg.expectation(model, n=1)
    assert E(theta) == pytest.approx(exact(theta), rel=1e-12)
    _check_eager_and_recorded(model, exact, theta, E)


def test_a_familys_own_support_array_stays_the_familys():
    """A user's family gives its support as its own array (a class attribute): the values
    laid out from it, and the results kept of operations on them, are scg's copies; the
    family's array stays writable and its values are the site's."""
    from tests.distributions.test_capabilities import ThreeLevels

    observed = 0.3

    def model(theta):
        z = scg.sample("z", ThreeLevels(theta[:3]), estimator=scg.Marginalize())
        scg.sample("x", scg.Normal(z[..., None][..., 0] * theta[3], 1.0), obs=observed)

    def exact(theta):
        return -_lse(_log_softmax(theta[:3]) +
                     _log_normal(observed, np.array([-1.0, 0.0, 2.0]) * theta[3]))

    theta = np.array([0.1, 0.2, -0.3, 0.7])
    value, g = scg.value_and_grad(scg.expectation(model, n=1))(theta)
    assert value == pytest.approx(exact(theta), rel=1e-12)
    np.testing.assert_allclose(g, numeric_grad(exact, theta), rtol=1e-7, atol=1e-7)
    assert ThreeLevels.LEVELS.flags.writeable


def test_a_term_changed_in_place_after_it_was_given():
    """`scg.factor` of a value the model then changes in place (`lp += 1`, as numpy's
    aliasing allows), and an observed site's location changed in place after the site: each
    term is the value as it was given."""
    k = 3
    rng = np.random.default_rng(13)
    data = rng.normal(0, 2, 2)

    def model(theta):
        weights, locs = scg.softmax(theta[:k]), theta[k:]
        z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        term = locs[z] * 1.0
        scg.factor("a", term)
        term += 1.0
        scg.factor("b", term)
        mean = locs[z]
        scg.sample("x", scg.Normal(mean, 1.0), obs=data[0])
        mean *= 2.0
        scg.sample("y", scg.Normal(mean, 1.0), obs=data[1])

    def exact(theta):
        locs = theta[k:]
        return -_lse(_log_softmax(theta[:k]) + 2.0 * locs + 1.0 +
                     _log_normal(data[0], locs) + _log_normal(data[1], 2.0 * locs))

    theta = rng.normal(size=2 * k)
    _check_eager_and_recorded(model, exact, theta)


@pytest.mark.parametrize("recomputed", [True, False])
def test_a_log_probability_changed_in_place_is_not_given_again(recomputed):
    """log_prob at `locs[z]`, changed in place by the model (`lp += 1`), then log_prob at
    `locs[z]` again (computed again: the same array, or the same object): the second is the
    log-probability itself; and one changed after both were given leaves the other as it
    was."""
    k = 3
    rng = np.random.default_rng(14)
    data = rng.normal(0, 2, 1)

    def model(theta):
        weights, locs = scg.softmax(theta[:k]), theta[k:]
        prior = scg.Normal(0.0, 2.0)
        z = scg.sample("z", scg.Categorical(weights), estimator=scg.Marginalize())
        at = scg.take(locs, z, axis=0)
        again = (lambda: scg.take(locs, z, axis=0)) if recomputed else (lambda: at)
        first = prior.log_prob(at)
        first += 1.0
        second, third = prior.log_prob(again()), prior.log_prob(again())
        second -= 5.0
        for name, term in (("first", first), ("second", second), ("third", third)):
            scg.factor(name, term)
        scg.sample("x", scg.Normal(at, 1.0), obs=data[0])

    def exact(theta):
        locs = theta[k:]
        return -_lse(_log_softmax(theta[:k]) + 3.0 * _log_normal(locs, 0.0, 2.0) - 4.0 +
                     _log_normal(data[0], locs))

    theta = rng.normal(size=2 * k)
    _check_eager_and_recorded(model, exact, theta)
