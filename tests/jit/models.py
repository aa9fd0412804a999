"""Models and arguments shared by the tests of scg.jit in this folder."""

import numpy as np

import scg


def thetas(k=8):
    return [{"mu": np.array(0.1 * i - 0.2), "log_sigma": np.array(-0.5 + 0.05 * i)}
            for i in range(k)]


def normal_pathwise(theta):
    x = scg.sample("x", scg.Normal(theta["mu"], np.exp(theta["log_sigma"])),
                   estimator="pathwise")
    scg.cost("penalty", 0.1 * x ** 2)
    return (x - 1.5) ** 2


TARGETS = np.linspace(-0.5, 1.5, 10)


def bernoulli_loop(logits):
    probs = scg.sigmoid(logits)
    total = 0.0
    for i in range(10):
        a = scg.sample(f"a{i}", scg.Bernoulli(probs=probs[i]), estimator=scg.Score("loo"))
        total = total + (a - TARGETS[i]) ** 2
    return total


def bernoulli_plate(logits):
    probs = scg.sigmoid(logits)
    with scg.plate("sites", 10):
        a = scg.sample("a", scg.Bernoulli(probs=probs), estimator=scg.Score("loo"))
        scg.cost("fit", (a - TARGETS) ** 2)


def shifted_square(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0))
    return (x - 1.0) ** 2


def normal_model(mu):
    x = scg.sample("x", scg.Normal(mu, 1.0))
    return (x - 1.0) ** 2


def bernoulli_normal_model(logit):
    a = scg.sample("a", scg.Bernoulli(logits=logit))
    x = scg.sample("x", scg.Normal(a, 1.0))
    return (a - 0.3) ** 2 + x ** 2


def categorical_model(logits):
    k = scg.sample("k", scg.Categorical(logits=logits))
    return scg.take(np.array([1.0, 5.0, 2.0]), k, axis=0) ** 2


@scg.jit
def doubled(x):
    """A jitted function of a module, as `@scg.jit` on a training step."""
    return 2.0 * x
