"""First-order optimizers over pytrees of arrays: SGD (with momentum) and Adam.

An optimizer is a small object with `init(params) -> state` and
`update(grads, state, params) -> (new_params, new_state)`; parameters, gradients and
states are nested dicts / lists / tuples of arrays, as `scg.grad` returns them. Nothing
is modified in place. The convention is minimization: the update moves against the gradient.

Example:
    >>> opt = scg.optim.Adam(1e-2)
    >>> state = opt.init(params)
    >>> for _ in range(100):
    ...     params, state = opt.update(scg.grad(E)(params), state, params)
"""

import math

import numpy as np

from .core import effects, pytree
from .core.tape import Tracer
from .kernels.optim import adam_step
from .numpy.rules import shape


class SGD:
    """Stochastic gradient descent, with optional (heavy-ball) momentum.

    v <- momentum * v + g;  params <- params - lr * v   (v = g when momentum is 0)
    """

    def __init__(self, lr, momentum=0.0):
        if lr <= 0:
            raise ValueError(f"SGD: lr must be positive, got {lr}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1), got {momentum}")
        self.lr, self.momentum = float(lr), float(momentum)

    def init(self, params):
        if not self.momentum:
            return None
        leaves, treedef = pytree.flatten_leaves(params)
        return pytree.unflatten(treedef, [np.zeros(np.shape(p)) for p in leaves])

    def update(self, grads, state, params):
        p_leaves, treedef = pytree.flatten_leaves(params)
        g_leaves = pytree.flatten_leaves(grads)[0]
        _check(p_leaves, g_leaves, "SGD")
        if not self.momentum:
            return pytree.unflatten(treedef, [p - self.lr * g for p, g in
                                              zip(p_leaves, g_leaves)]), None
        v_leaves = [self.momentum * v + g
                    for v, g in zip(pytree.flatten_leaves(state)[0], g_leaves)]
        new = [p - self.lr * v for p, v in zip(p_leaves, v_leaves)]
        return pytree.unflatten(treedef, new), pytree.unflatten(treedef, v_leaves)

    def __repr__(self):
        return f"SGD(lr={self.lr:g}, momentum={self.momentum:g})"


class Adam:
    """Adam (Kingma and Ba, 2015) with bias-corrected moments.

    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;
    params <- params - lr * m_hat / (sqrt(v_hat) + eps), m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t)
    """

    def __init__(self, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        if lr <= 0:
            raise ValueError(f"Adam: lr must be positive, got {lr}")
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"Adam: b1 and b2 must be in [0, 1), got {b1}, {b2}")
        self.lr, self.b1, self.b2, self.eps = float(lr), float(b1), float(b2), float(eps)

    def init(self, params):
        """State: {"t": 0, "m": zeros, "v": zeros}; the moments are kept as one flat vector
        each (one numpy pass per update instead of one per leaf)."""
        size = sum(int(np.size(p)) for p in pytree.flatten_leaves(params)[0])
        # (t as a numpy integer: the type it has after an update, traced or not)
        return {"t": np.int64(0), "m": np.zeros(size), "v": np.zeros(size)}

    def update(self, grads, state, params):
        p_leaves, treedef = pytree.flatten_leaves(params)
        g_leaves = pytree.flatten_leaves(grads)[0]
        _check(p_leaves, g_leaves, "Adam")
        t = state["t"] + 1
        b1, b2 = self.b1, self.b2
        g = np.concatenate([x.reshape(-1) if type(x) is np.ndarray else np.ravel(x)
                            for x in g_leaves])
        if not any(_traced(x) for x in (g, t, state["m"], state["v"])):
            # one pass over the parameters (recorded as one operation by scg.jit)
            delta, m, v = effects.stateful(adam_step, g, state["m"], state["v"], t, self.lr, b1,
                                      b2, self.eps)
            return _apply(p_leaves, treedef, delta), {"t": t, "m": m, "v": v}
        m = b1 * state["m"] + (1.0 - b1) * g
        v = b2 * state["v"] + (1.0 - b2) * (g * g)
        # both bias corrections folded into the step size and eps (Adam paper, sec. 2):
        # m_hat / (sqrt(v_hat) + eps) = c * m / (sqrt(v) + eps * sqrt(1 - b2^t))
        c2 = (1.0 - b2 ** t) ** 0.5
        delta = m * (self.lr * c2 / (1.0 - b1 ** t))
        delta /= np.sqrt(v) + self.eps * c2
        return _apply(p_leaves, treedef, delta), {"t": t, "m": m, "v": v}

    def __repr__(self):
        return f"Adam(lr={self.lr:g}, b1={self.b1:g}, b2={self.b2:g}, eps={self.eps:g})"


def _apply(p_leaves, treedef, delta):
    """The parameters minus their slices of the flat step `delta`."""
    new_p, k = [], 0
    for p in p_leaves:
        p_shape = shape(p)
        size = math.prod(p_shape)
        new_p.append(p - delta[k:k + size].reshape(p_shape))
        k += size
    return pytree.unflatten(treedef, new_p)


def _traced(x):
    """Is x a value being differentiated (then the update is written with primitives)?"""
    return isinstance(x, Tracer) and not x.floor


def _check(p_leaves, g_leaves, who):
    if len(p_leaves) != len(g_leaves):
        raise ValueError(f"{who}.update: the gradients have {len(g_leaves)} leaves but the "
                         f"parameters have {len(p_leaves)}")
    for p, g in zip(p_leaves, g_leaves):
        if shape(p) != shape(g):
            raise ValueError(f"{who}.update: a gradient of shape {np.shape(g)} for a parameter "
                             f"of shape {np.shape(p)}")
