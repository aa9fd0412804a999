"""scg.RelaxedBernoulli and scg.RelaxedOneHotCategorical: the concrete log-density (against
torch.distributions), the rounding distributed as the family, the conditional noise given
the rounding distributed as the noise given it, and Bernoulli/OneHotCategorical.relaxed."""

import numpy as np
import pytest

import scg
from scg.distributions._util import plain
from scg.distributions.base import broadcast_shape, declares

torch = pytest.importorskip("torch")


def test_log_prob_against_torch():
    rng = np.random.default_rng(0)
    logits, T = np.array([0.3, -1.2, 2.0]), 0.7
    y = rng.uniform(0.05, 0.95, size=(5, 3))
    want = torch.distributions.RelaxedBernoulli(torch.tensor(T, dtype=torch.float64),
                                                logits=torch.tensor(logits)).log_prob(
        torch.tensor(y)).numpy()
    np.testing.assert_allclose(scg.RelaxedBernoulli(T, logits).log_prob(y), want, rtol=1e-10)
    logits = np.array([0.2, -0.4, 0.1, 0.5])
    y = rng.dirichlet(np.ones(4), size=5)
    want = torch.distributions.RelaxedOneHotCategorical(
        torch.tensor(T, dtype=torch.float64), logits=torch.tensor(logits)).log_prob(
        torch.tensor(y)).numpy()
    np.testing.assert_allclose(scg.RelaxedOneHotCategorical(T, logits).log_prob(y), want,
                               rtol=1e-10)


def test_families_declare_their_relaxations():
    for d in (scg.Bernoulli(probs=0.3), scg.Bernoulli(logits=0.3),
              scg.OneHotCategorical(probs=np.array([0.2, 0.8])),
              scg.OneHotCategorical(logits=np.zeros(3)).to_event(0)):
        assert declares(d, "relaxed")
    assert not declares(scg.Categorical(logits=np.zeros(3)), "relaxed")
    assert not declares(scg.Normal(0.0, 1.0), "relaxed")
    np.testing.assert_allclose(scg.Bernoulli(probs=0.3).relaxed(1.0).logits,
                               np.log(0.3 / 0.7))
    np.testing.assert_allclose(scg.OneHotCategorical(probs=np.array([0.2, 0.8])).relaxed(
        1.0).logits, np.log([0.2, 0.8]))
    with pytest.raises(NotImplementedError, match="declares no concrete relaxation"):
        scg.Normal(0.0, 1.0).relaxed(1.0)


@pytest.mark.parametrize("make", [lambda: scg.RelaxedBernoulli(0.5, np.array([0.4, -1.0])),
                                  lambda: scg.RelaxedOneHotCategorical(
                                      0.5, np.array([0.2, -0.4, 0.1, 0.5]))],
                         ids=["coin", "one-hot"])
def test_rounding_and_conditional_noise(make):
    """hard(draw) has the family's law; (b, conditional(b, v)) has the law of (b, z)."""
    r, n = make(), 200_000
    rng = np.random.default_rng(1)
    u = r.noise(rng, (n,))
    z = r.logits + r.noise_of(u)
    b = r.hard(r.soft(z))
    p = np.asarray(r.soft(r.logits))
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(b.mean(axis=0) - p) < 5 * se)
    z_tilde = np.asarray(r.conditional(b, rng.random(u.shape)))
    np.testing.assert_array_equal(r.hard(r.soft(z_tilde)), b)  # (it rounds to b)
    # the same law: the mean of a bounded function of the scores, per value of b
    for value in np.unique(b.reshape(-1, b.shape[-1]) if b.ndim > 2 else b[..., 0]):
        pick = (np.all(b == np.eye(b.shape[-1])[int(np.argmax(value))], axis=-1)
                if z.ndim == 2 and r.event_shape else b[:, 0] == value)
        # (scores of categories are defined up to a common shift: compare their images)
        a, c = np.asarray(r.soft(z[pick])), np.asarray(r.soft(z_tilde[pick]))
        se = np.sqrt(a.var(axis=0) / len(a) + c.var(axis=0) / len(c))
        assert np.all(np.abs(a.mean(axis=0) - c.mean(axis=0)) < 5 * se)


def test_a_draw_and_its_rounding():
    r = scg.OneHotCategorical(logits=np.zeros(3)).relaxed(0.5)
    y = r.sample(np.random.default_rng(0), (4,))
    np.testing.assert_allclose(y.sum(axis=-1), 1.0)
    np.testing.assert_array_equal(r.hard(y), np.eye(3)[np.argmax(y, axis=-1)])
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        scg.RelaxedBernoulli(0.0, 0.3)


class Coin(scg.Distribution):
    """A user's own family (no scg family among its bases) that declares a relaxation."""

    arg_constraints = {}
    support = scg.Bernoulli.support

    def __init__(self, logits, validate_args=None):
        self.logits = logits
        super().__init__({"logits": logits}, broadcast_shape(logits),
                         validate_args=validate_args)

    def _sample(self, rng, shape):
        p = 1.0 / (1.0 + np.exp(-plain(self.logits)))  # (as scg's families read them)
        return (rng.random(self._extended_shape(shape)) < p).astype(float)

    def log_prob(self, value):
        return value * self.logits - scg.softplus(self.logits)

    def relaxed(self, temperature):
        return scg.RelaxedBernoulli(temperature, self.logits, validate_args=False)


@pytest.mark.parametrize("make", [lambda: scg.ReinMax(1.5), lambda: scg.GumbelRao(0.5, 3),
                                  lambda: scg.GappedST(0.5),
                                  lambda: scg.GumbelSoftmax(0.5, hard=True)],
                         ids=["reinmax", "gumbel_rao", "gapped_st", "st_gumbel_softmax"])
def test_a_users_own_family_that_declares_a_relaxation_is_served(make):
    w = np.array([1.0, -0.7, 0.4])

    def model(family):
        def f(a):
            b = scg.sample("b", family(a), estimator=make())
            return (b @ w - 0.5) ** 2
        return f
    a = np.array([0.3, -1.2, 0.8])
    assert declares(Coin(a), "relaxed")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scg.BiasWarning)
        mine = scg.grad(scg.expectation(model(Coin), n=64, seed=3))(a)
        theirs = scg.grad(scg.expectation(model(lambda a: scg.Bernoulli(logits=a)), n=64,
                                          seed=3))(a)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)
