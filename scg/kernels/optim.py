"""The optimizers' updates as one pass over the flattened parameters (scg/optim.py)."""

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _adam_kernel(g, m, v, t, lr, b1, b2, eps):
    c2 = (1.0 - b2 ** t) ** 0.5
    scale = lr * c2 / (1.0 - b1 ** t)
    eps2 = eps * c2
    m_new = np.empty_like(m)
    v_new = np.empty_like(v)
    delta = np.empty_like(g)
    for i in range(g.shape[0]):
        mi = b1 * m[i] + (1.0 - b1) * g[i]
        vi = b2 * v[i] + (1.0 - b2) * (g[i] * g[i])
        m_new[i] = mi
        v_new[i] = vi
        delta[i] = mi * scale / (math.sqrt(vi) + eps2)
    return delta, m_new, v_new


def adam_step(g, m, v, t, lr, b1, b2, eps):
    """(the step to subtract, new m, new v) of Adam with both bias corrections folded into
    the step size and eps, for flat float64 vectors g, m, v and step count t >= 1."""
    f64 = _F64
    if g.dtype != f64 or m.dtype != f64 or v.dtype != f64:
        g, m, v = (np.asarray(x, dtype=f64) for x in (g, m, v))
    return _adam_kernel(g, m, v, float(t), lr, b1, b2, eps)


_F64 = np.dtype(np.float64)
