"""The forward algorithm as primitives: the log-partition of a chain and its marginals.

A chain of m variables of K values each has unary log-potentials U (..., m, K) and pairwise
ones P (..., m - 1, K, K) (P[i, j, k] between variable i at j and variable i + 1 at k);
leading dims are a batch. `chain_log_partition(U, P)` is log sum over the K^m joint values
of exp(sum of the potentials), by the forward algorithm (m K^2 work). Its derivatives are
the marginals: in U the one-variable marginals, in P the pairwise ones
(`chain_marginals`: both from one forward-backward pass in numba); their own
derivatives differentiate numpy twins of the same recursions on the tape, so derivatives of
every order follow (scg/stochastic/marginal.py sums a `scg.markov` chain with them).
"""

import threading

import numpy as np
from numba import njit

from ..core.tape import Primitive, defvjp
from ..numpy import rules as R
from .primitives import composite_vjp


@njit(cache=True, error_model="numpy")
def _forward(u, p, alpha, step):
    """The forward algorithm with normalized messages: alpha[b, i, k] is the log of the sum
    over the values of variables 0..i-1 with variable i at k, less step[b, 0] + ... +
    step[b, i] (so that each alpha[b, i] has a logsumexp of 0 and stays small whatever the
    chain's length); step[b, i] is the log of that sum's total at i over its total at i - 1
    (at 0, its total). log Z = sum of the steps."""
    batch, m, k = u.shape
    for b in range(batch):
        for i in range(m):
            for c in range(k):
                if i == 0:
                    alpha[b, 0, c] = u[b, 0, c]
                    continue
                top = -np.inf
                for j in range(k):
                    v = alpha[b, i - 1, j] + p[b, i - 1, j, c]
                    if v > top:
                        top = v
                if top == -np.inf:
                    alpha[b, i, c] = -np.inf
                    continue
                total = 0.0
                for j in range(k):
                    total += np.exp(alpha[b, i - 1, j] + p[b, i - 1, j, c] - top)
                alpha[b, i, c] = top + np.log(total) + u[b, i, c]
            top = -np.inf
            for c in range(k):
                if alpha[b, i, c] > top:
                    top = alpha[b, i, c]
            if top == -np.inf:
                step[b, i] = -np.inf
                continue
            total = 0.0
            for c in range(k):
                total += np.exp(alpha[b, i, c] - top)
            step[b, i] = top + np.log(total)
            for c in range(k):
                alpha[b, i, c] -= step[b, i]


@njit(cache=True, error_model="numpy")
def _marginals(u, p, alpha, step, mu, mp):
    """The backward pass on the same scale: beta[i, j] = log of the sum over variables
    i+1.. with variable i at j, less step[i+1] + ... + step[m-1]; then mu = exp(alpha +
    beta), mp[i, j, c] = exp(alpha[i, j] + p[i, j, c] + u[i+1, c] + beta[i+1, c] -
    step[i+1])."""
    batch, m, k = u.shape
    beta = np.empty((m, k))
    for b in range(batch):
        for j in range(k):
            beta[m - 1, j] = 0.0
        for i in range(m - 2, -1, -1):
            for j in range(k):
                top = -np.inf
                for c in range(k):
                    v = p[b, i, j, c] + u[b, i + 1, c] + beta[i + 1, c]
                    if v > top:
                        top = v
                if top == -np.inf:
                    beta[i, j] = -np.inf
                    continue
                total = 0.0
                for c in range(k):
                    total += np.exp(p[b, i, j, c] + u[b, i + 1, c] + beta[i + 1, c] - top)
                beta[i, j] = top + np.log(total) - step[b, i + 1]
        for i in range(m):
            for j in range(k):
                mu[b, i, j] = np.exp(alpha[b, i, j] + beta[i, j])
        for i in range(m - 1):
            for j in range(k):
                for c in range(k):
                    mp[b, i, j, c] = np.exp(alpha[b, i, j] + p[b, i, j, c] + u[b, i + 1, c] +
                                            beta[i + 1, c] - step[b, i + 1])


def _flat(u, p):
    """U and P broadcast over their batch dims and flattened to (batch, m, K), (batch, m-1,
    K, K), contiguous; and the batch shape."""
    u = np.asarray(u, dtype=float)
    p = np.asarray(p, dtype=float)
    lead = np.broadcast_shapes(u.shape[:-2], p.shape[:-3])
    m, k = u.shape[-2:]
    u = np.ascontiguousarray(np.broadcast_to(u, lead + (m, k))).reshape(-1, m, k)
    p = np.ascontiguousarray(np.broadcast_to(p, lead + (m - 1, k, k))).reshape(-1, m - 1, k, k)
    return u, p, lead


def _log_partition(u, p):
    u, p, lead = _flat(u, p)
    alpha, step = np.empty(u.shape), np.empty(u.shape[:2])
    _forward(u, p, alpha, step)
    out = np.sum(step, axis=1)
    return out.reshape(lead) if lead else out[0]


def _both_marginals(u, p):
    u, p, lead = _flat(u, p)
    alpha, step = np.empty(u.shape), np.empty(u.shape[:2])
    _forward(u, p, alpha, step)
    mu, mp = np.empty(u.shape), np.empty(p.shape)
    _marginals(u, p, alpha, step, mu, mp)
    return mu.reshape(lead + mu.shape[1:]), mp.reshape(lead + mp.shape[1:])


def _joined_marginals(u, p):
    """Both marginals from one pass, flattened and joined along a last axis (the unary
    ones first): shape (..., m K + (m - 1) K^2)."""
    u, p, lead = _flat(u, p)
    batch, m, k = u.shape
    alpha, step = np.empty(u.shape), np.empty(u.shape[:2])
    _forward(u, p, alpha, step)
    out = np.empty((batch, m * k + (m - 1) * k * k))
    _marginals(u, p, alpha, step, out[:, :m * k].reshape(u.shape),
               out[:, m * k:].reshape(p.shape))
    return out.reshape(lead + out.shape[1:])


# ---------------------------------------------------------------------- numpy twins
def _twin_alphas(u, p):
    m = R.shape(u)[-2]
    alphas = [u[..., 0, :]]
    for i in range(1, m):
        step = R.logsumexp(alphas[-1][..., :, None] + p[..., i - 1, :, :], axis=-2)
        alphas.append(step + u[..., i, :])
    return alphas


def _twin_betas(u, p):
    m = R.shape(u)[-2]
    betas = [np.zeros(R.shape(u)[:-2] + R.shape(u)[-1:])]
    for i in range(m - 2, -1, -1):
        ahead = u[..., i + 1, :] + betas[0]
        betas.insert(0, R.logsumexp(p[..., i, :, :] + ahead[..., None, :], axis=-1))
    return betas


def _twin_log_partition(u, p):
    return R.logsumexp(_twin_alphas(u, p)[-1], axis=-1)


def _twin_unary(u, p):
    alphas, betas = _twin_alphas(u, p), _twin_betas(u, p)
    log_z = R.logsumexp(alphas[-1], axis=-1)
    return np.exp(np.stack([a + b for a, b in zip(alphas, betas)], axis=-2) -
                  log_z[..., None, None])


def _twin_pairwise(u, p):
    alphas, betas = _twin_alphas(u, p), _twin_betas(u, p)
    log_z = R.logsumexp(alphas[-1], axis=-1)
    m = R.shape(u)[-2]
    pairs = [alphas[i][..., :, None] + p[..., i, :, :] + (u[..., i + 1, :] + betas[i + 1])[..., None, :]
             for i in range(m - 1)]
    return np.exp(np.stack(pairs, axis=-3) - log_z[..., None, None, None])


def _split(joined, u_shape, p_shape):
    """The unary and pairwise marginals out of `chain_marginals`'s joined array."""
    lead = tuple(R.shape(joined))[:-1]
    m, k = u_shape[-2:]
    return (R.reshape(joined[..., :m * k], lead + (m, k)),
            R.reshape(joined[..., m * k:], lead + (m - 1, k, k)))


def _twin_joined(u, p):
    unary, pairwise = _twin_unary(u, p), _twin_pairwise(u, p)
    lead = tuple(R.shape(unary))[:-2]
    return np.concatenate([R.reshape(unary, lead + (-1,)), R.reshape(pairwise, lead + (-1,))],
                          axis=-1)


_BATCH = R.batch_core_dims(2, 3)

chain_log_partition = Primitive(
    "chain_log_partition", _log_partition, batch=_BATCH,
    doc="log sum over a chain's joint values of exp(unary + pairwise potentials).")
chain_unary_marginals = Primitive(
    "chain_unary_marginals", lambda u, p: _both_marginals(u, p)[0], batch=_BATCH,
    doc="The one-variable marginals of a chain, shape (..., m, K).")
chain_pairwise_marginals = Primitive(
    "chain_pairwise_marginals", lambda u, p: _both_marginals(u, p)[1], batch=_BATCH,
    doc="The pairwise marginals of a chain's neighbours, shape (..., m - 1, K, K).")

chain_marginals = Primitive(
    "chain_marginals", _joined_marginals, batch=_BATCH,
    doc="Both marginals of a chain from one forward-backward pass, flattened and joined: "
        "shape (..., m K + (m - 1) K^2), the unary ones first.")


class _Stash(threading.local):
    last = None  # (g, u, p, pairwise marginals) left by the rule of u for the rule of p


_STASH = _Stash()


def _unary_rule(g, ans, u, p):
    # both marginals from one pass: the pairwise ones are left for the rule of p, which
    # the backward pass calls next with the same cotangent and arguments
    unary, pairwise = _split(chain_marginals(u, p), R.shape(u), R.shape(p))
    _STASH.last = (g, u, p, pairwise)
    return R.unbroadcast(R.multiply(R.reshape(g, R.shape(g) + (1, 1)), unary), R.shape(u))


def _pairwise_rule(g, ans, u, p):
    last, _STASH.last = _STASH.last, None
    if last is not None and last[0] is g and last[1] is u and last[2] is p:
        pairwise = last[3]
    else:  # (u has no derivative here)
        pairwise = chain_pairwise_marginals(u, p)
    return R.unbroadcast(R.multiply(R.reshape(g, R.shape(g) + (1, 1, 1)), pairwise),
                         R.shape(p))


defvjp(chain_log_partition, _unary_rule, _pairwise_rule)
defvjp(chain_marginals, composite_vjp(_twin_joined, 0), composite_vjp(_twin_joined, 1))
defvjp(chain_unary_marginals, composite_vjp(_twin_unary, 0), composite_vjp(_twin_unary, 1))
defvjp(chain_pairwise_marginals, composite_vjp(_twin_pairwise, 0),
       composite_vjp(_twin_pairwise, 1))
