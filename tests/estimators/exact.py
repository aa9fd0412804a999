"""Exact references for estimator tests: finite differences of closed forms."""

import numpy as np


def sig(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


def numeric_grad(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (f(x + h) - f(x - h)) / (2 * h)
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h)
                     for e in np.eye(x.size).reshape((x.size,) + x.shape)]).reshape(x.shape)


def numeric_hessian(f, x, h=1e-4):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (f(x + h) - 2 * f(x) + f(x - h)) / h ** 2
    basis = np.eye(x.size).reshape((x.size,) + x.shape)
    return np.array([[(f(x + h * (a + b)) - f(x + h * (a - b)) - f(x - h * (a - b))
                       + f(x - h * (a + b))) / (4 * h * h) for b in basis] for a in basis])
