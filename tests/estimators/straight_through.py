"""The model the straight-through estimators' tests share (ReinMax, Gumbel-Rao, gapped
straight-through): a four-way choice with a smooth cost of its value, its exact gradient,
and the derivatives written by hand that the estimators' formulas use."""

import numpy as np

import scg

TABLE = np.array([1.0, -0.5, 2.0, 0.3])
THETA = np.array([0.2, -0.4, 0.1, 0.5])
W = np.array([1.0, -0.7, 0.4])


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def jac(y):
    """The Jacobian of softmax at the scores whose image is y: diag(y) - y y^T."""
    return y[..., :, None] * (np.eye(y.shape[-1]) - y[..., None, :])


def choice(estimator):
    """k ~ OneHotCategorical(logits=theta), cost sin(k @ TABLE) + (k @ TABLE)^3."""
    def model(theta):
        k = scg.sample("k", scg.OneHotCategorical(logits=theta), estimator=estimator)
        return np.sin(k @ TABLE) + (k @ TABLE) ** 3
    return model


def f_prime(k):
    """The cost's derivative in the one-hot value k."""
    s = k @ TABLE
    return (np.cos(s) + 3 * s ** 2)[..., None] * TABLE


def true_grad(theta):
    """The exact gradient of the choice's expected cost, by enumeration."""
    p, f = softmax(theta), np.sin(TABLE) + TABLE ** 3
    return p * (f - p @ f)
