"""Episodes that end: `scg.mask(alive)` counts a step's sites and costs only where the
episode is alive, `scg.all(done)` ends the loop once every draw's episode has ended, and with
one draw a Python branch on score-function draws is allowed (the costs after it depend on
them). Against the exact gradient by enumeration of every action sequence."""

import itertools
import re

import numpy as np
import pytest

import scg

T = 6


def _steps_alive(actions):
    """Steps of an episode: a walk of +1 / -1 that ends when |position| reaches 2."""
    pos = 0
    for t, a in enumerate(actions):
        pos += 2 * a - 1
        if abs(pos) >= 2:
            return t + 1
    return len(actions)


def _exact(theta):
    p = 1 / (1 + np.exp(-theta))
    return sum(np.prod([p if a else 1 - p for a in seq]) * -_steps_alive(seq)
               for seq in itertools.product([0, 1], repeat=T))


def _exact_grad(theta, h=1e-6):
    return (_exact(theta + h) - _exact(theta - h)) / (2 * h)


def masked(theta):
    pos, alive = 0.0, True
    for t in range(T):
        with scg.mask(alive):
            a = scg.sample(f"a{t}", scg.Bernoulli(logits=theta))
            scg.cost(f"r{t}", -1.0)
        pos = pos + 2 * a - 1
        alive = alive & (np.abs(pos) < 2)
        if scg.all(~alive):
            break


def branching(theta):
    pos = 0.0
    for t in range(T):
        a = scg.sample(f"a{t}", scg.Bernoulli(logits=theta))
        scg.cost(f"r{t}", -1.0)
        pos = pos + 2 * a - 1
        if np.abs(pos) >= 2:
            break


def test_masked_episodes_are_unbiased():
    E = scg.expectation(masked, n=100_000, seed=0)
    assert E(0.4) == pytest.approx(_exact(0.4), abs=0.03)
    gs = scg.grad_samples(E)(0.4)
    assert abs(gs.mean - _exact_grad(0.4)) < 5 * gs.stderr


def test_with_one_draw_an_episode_may_break_on_its_own_draws():
    E = scg.expectation(branching, n=1, seed=0)
    g = np.array([scg.grad(E)(0.4) for _ in range(6_000)])
    assert abs(g.mean() - _exact_grad(0.4)) < 5 * g.std() / np.sqrt(g.size)


def test_a_branch_on_a_pathwise_draw_is_refused_even_with_one_draw():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        if x > 0:
            return 1.0
        return 0.0

    with pytest.raises(scg.TracingError, match="estimator='score'"):
        scg.grad(scg.expectation(model, n=1, seed=0))(0.1)
    with pytest.raises(scg.TracingError, match="scg.all"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.1)


def test_the_loop_ends_when_every_episode_has_ended_and_jit_checks_it():
    ended_early = [len(scg.trace(masked, 3.0, n=3, seed=seed).sites) < T for seed in range(20)]
    assert any(ended_early)   # every walk hit the wall before T steps: the loop broke
    jitted = scg.jit(scg.grad(scg.expectation(masked, n=6, seed=1)))
    eager = scg.expectation(masked, n=6, seed=1)
    for _ in range(30):   # the step where the loop ends changes from call to call
        assert jitted(0.4) == scg.grad(eager)(0.4)
    assert "scg.all(...) of a per-draw condition" in jitted.explain()


def test_a_mask_on_an_estimator_with_copies_is_an_error():
    def model(theta):
        alive = scg.sample("first", scg.Bernoulli(logits=theta)) > 0
        with scg.mask(alive):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=scg.Enumerate())
        return a

    with pytest.raises(scg.EstimatorError, match="site 'a' is drawn inside scg.mask"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.2)


def test_masks_nest_and_a_plain_false_masks_everything():
    def model(theta, outer):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        with scg.mask(outer):
            with scg.mask(x > 0):
                scg.cost("c", x)
        return 0.0 * x

    # E[x; x > 0] for x ~ N(theta, 1): d/dtheta = P(x > 0) = Phi(theta)
    from scipy.stats import norm
    gs = scg.grad_samples(scg.expectation(model, n=100_000, seed=0))(0.3, True)
    assert abs(gs.mean - norm.cdf(0.3)) < 5 * gs.stderr
    assert scg.grad(scg.expectation(model, n=100, seed=0))(0.3, False) == 0.0


def test_a_mask_that_is_not_boolean_is_a_type_error():
    def model(theta):
        x = scg.sample("x", scg.Normal(theta, 1.0))
        with scg.mask(x):
            scg.cost("c", x)

    with pytest.raises(TypeError, match="boolean condition"):
        scg.grad(scg.expectation(model, n=4, seed=0))(0.3)


def test_which_estimators_serve_masks_is_their_declaration():
    """An estimator says whether its sites may be drawn inside scg.mask (`serves_masks`):
    the score function and pathwise derivatives do, a user's own estimator that declares it
    does, VIMCO and DReG (which weigh particles) and copying estimators do not."""
    class OwnScore(scg.estimators.Estimator):
        name = "own-score"
        serves_masks = True

        def draw(self, d):
            return d.sample()

        def term(self, site, ctx):
            q = ctx.q(site)
            return scg.estimators.linear_term(ctx.log_prob(site), ctx.spread(q, site),
                                              1.0 / ctx.n)

    def model(theta, estimator):
        alive = scg.sample("first", scg.Bernoulli(logits=theta)) > 0
        with scg.mask(alive):
            a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=estimator)
        return a

    own = scg.grad(scg.expectation(model, n=64, seed=0))(0.2, OwnScore())
    score = scg.grad(scg.expectation(model, n=64, seed=0))(0.2, scg.Score())
    assert np.isclose(own, score)
    for refused in (scg.VIMCO(), scg.Enumerate(), scg.DisARM()):
        assert not refused.serves_masks
    assert scg.Pathwise().serves_masks and not scg.Pathwise(dreg=True).serves_masks



def _walk(steps):
    """A walk whose cost at each step is its position: the costs downstream of each step's
    draw are that step's and every later one's (nested lists, each the tail of the last)."""
    def model(theta):
        pos = 0.0
        for t in range(steps):
            a = scg.sample(f"a{t}", scg.Bernoulli(logits=theta), estimator=scg.Score("loo"))
            pos = pos + (2 * a - 1)
            scg.cost(f"r{t}", 0.1 * t * pos)
    return model


def _program_size(steps):
    grad = scg.jit(scg.grad(scg.expectation(_walk(steps), n=4, seed=0)), validate=1)
    grad(np.array(0.3))
    grad(np.array(0.3))
    found = re.search(r"a program of (\d+) operations", grad.explain())
    assert found, grad.explain()
    return int(found.group(1))


def test_the_costs_after_each_step_are_summed_once_for_a_whole_loop():
    # summed back from the last cost, each partial sum serving the step before: T
    # additions in all, not T^2 / 2, so the program grows by the same amount per step
    small, middle, large = (_program_size(k) for k in (20, 40, 80))
    assert large - middle == 2 * (middle - small)


def test_costs_summed_from_the_last_are_the_reward_to_go():
    theta, n, steps = np.array(0.4), 64, 12
    g = scg.grad(scg.expectation(_walk(steps), n=n, seed=3))(theta)
    E = scg.expectation(_walk(steps), n=n, seed=3)
    E(theta)
    a = np.stack([E.last_trace.sites[f"a{t}"].value for t in range(steps)], 1)
    costs = 0.1 * np.arange(steps) * np.cumsum(2 * a - 1, axis=1)
    later = costs[:, ::-1].cumsum(1)[:, ::-1]        # the step's own cost and the rest
    adv = (n * later - later.sum(0, keepdims=True)) / (n - 1)
    p = 1 / (1 + np.exp(-theta))
    assert np.allclose(g, np.sum(adv * (a - p)) / n, rtol=1e-12, atol=1e-14)
