"""An estimator written the way a newcomer writes one: `draw` and `term`, nothing else.

What it did not say is not guessed: a first-order term with no account of higher orders
makes a second derivative raise, naming the site (before, the Hessian left the site's
score out and came back wrong: 8.0 where the exact value is 6.11)."""

import numpy as np
import pytest

import scg
from tests.estimators.registry import HandWrittenLeaveOneOut as LeaveOneOut


def model(theta):
    a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=LeaveOneOut())
    return (a - 2.0 * theta) ** 2


def exact(theta):
    p = 1.0 / (1.0 + np.exp(-theta))
    return p * (1.0 - 2.0 * theta) ** 2 + (1.0 - p) * (2.0 * theta) ** 2


def test_its_gradient_is_unbiased():
    theta, n = 0.4, 4000
    g = scg.grad_samples(scg.expectation(model, n=n, seed=1))(theta)
    h = 1e-6
    want = (exact(theta + h) - exact(theta - h)) / (2 * h)
    se = g.samples.std() / np.sqrt(n)
    assert abs(g.mean - want) < 5 * se, (g.mean, want, se)


def test_a_second_derivative_raises_naming_the_site():
    E = scg.expectation(model, n=64, seed=0)
    with pytest.raises(scg.EstimatorError, match="site 'a'.*first derivatives only"):
        scg.hessian(E)(np.array(0.4))


def test_an_estimator_that_states_its_higher_orders_keeps_them():
    """The score function's DiCE form, stated by the estimator: the Hessian is right."""
    class WithDice(LeaveOneOut):
        def dice_log_prob(self, site, ctx):
            return ctx.log_prob(site)

    def model_dice(theta):
        a = scg.sample("a", scg.Bernoulli(logits=theta), estimator=WithDice())
        return (a - 2.0 * theta) ** 2

    theta, h = 0.4, 1e-4
    want = (exact(theta + h) - 2 * exact(theta) + exact(theta - h)) / h ** 2
    got = scg.hessian(scg.expectation(model_dice, n=200_000, seed=0))(np.array(theta))
    assert abs(float(got) - want) < 0.1, (got, want)
