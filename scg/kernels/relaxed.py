"""The plain Jacobians of the straight-through estimators of a categorical, one numba pass
each, with numpy twins: Gumbel-Rao's averaged Jacobian, and ReinMax's.

Gumbel-Rao: the mean, over k conditional Gumbel draws given a one-hot draw b, of the
Jacobian of softmax at those scores over T.

For each row (one categorical choice of K logits a, theta = log_softmax(a)) and each of the
k uniform vectors v, the scores given that the argmax is the chosen c are z~_c = -log(t) and
z~_i = -log(t + m_i / p_i) for i != c, with m = -log v and t = m_c (see
`RelaxedOneHotCategorical.conditional`). The chosen score is the largest, so softmax(z~ / T)
is, up to its sum, y_i = (1 + m_i / (p_i t))^(-1/T) (1 at c): no overflow at any T, and no
transcendental at T = 1 beyond the k K logarithms of v. The result per row is
(1 / (k T)) sum_j (diag(y_j) - y_j y_j^T), the plain Jacobian that the straight-through
gradient meets (numpy's own passes over the (k, rows, K) draws reduce over the short last
axis of K, which costs more than the arithmetic).

ReinMax: 2 J(pi1) - J(pi0) / 2 with pi0 = softmax(a), pi1 = (softmax(a / T) + b) / 2 and
J(y) = diag(y) - y y^T, per row; in numpy some fifteen passes over the (rows, K) and
(rows, K, K) arrays, here one.
"""

import math

import numpy as np
from numba import njit

_TINY = np.finfo(float).tiny
_BELOW_ONE = 1.0 - np.finfo(float).epsneg  # (the uniforms clipped into (0, 1) as numpy's)


@njit(cache=True)
def _row_max(x, r):
    """The largest entry of row r of x (-inf for an empty row)."""
    top = -np.inf
    for i in range(x.shape[1]):
        if x[r, i] > top:
            top = x[r, i]
    return top


@njit(cache=True, error_model="numpy")
def _conditional_softmax_jacobian(logits, b, log_v, temperature, out):
    """out[r] = the mean Jacobian of row r; logits, b (rows, K); log_v (k, rows, K), the
    logarithms of the uniforms (numpy's vectorized log is several times faster than a
    scalar one here)."""
    rows, K = logits.shape
    k = log_v.shape[0]
    inv_p = np.empty(K)
    y = np.empty(K)
    diag = np.empty(K)
    outer = np.empty((K, K))  # (the row's sum of y y^T, kept in a small block)
    power = -1.0 / temperature
    scale = 1.0 / (k * temperature)
    for r in range(rows):
        top = _row_max(logits, r)
        total = 0.0
        for i in range(K):
            total += math.exp(logits[r, i] - top)
        lse = top + math.log(total)
        for i in range(K):
            inv_p[i] = math.exp(lse - logits[r, i])  # 1 / p_i = exp(-theta_i)
            diag[i] = 0.0
            for c in range(K):
                outer[i, c] = 0.0
        for j in range(k):
            t = 0.0
            for i in range(K):
                t -= b[r, i] * log_v[j, r, i]
            total = 0.0
            for i in range(K):
                if b[r, i] != 0.0:
                    e = 1.0
                elif temperature == 1.0:
                    e = t / (t - log_v[j, r, i] * inv_p[i])
                else:
                    e = math.exp(power * math.log1p(-log_v[j, r, i] * inv_p[i] / t))
                y[i] = e
                total += e
            norm = 1.0 / total
            for i in range(K):
                y[i] *= norm
            for i in range(K):
                yi = y[i]
                diag[i] += yi
                for c in range(K):
                    outer[i, c] += yi * y[c]
        for i in range(K):
            for c in range(K):
                out[r, i, c] = ((diag[i] if i == c else 0.0) - outer[i, c]) * scale


def conditional_softmax_jacobian(logits, b, v, temperature):
    """The mean over axis 0 of v (k uniform draws, (k, *batch, K)) of the Jacobian of
    softmax at the conditional Gumbel scores given the one-hot b, over T: (*batch, K, K).
    logits and b broadcast to v's trailing shape (plain arrays)."""
    log_v = np.clip(v, _TINY, _BELOW_ONE)
    np.log(log_v, out=log_v)
    shape = log_v.shape[1:]
    K = shape[-1]
    flat_logits = np.ascontiguousarray(np.broadcast_to(logits, shape), dtype=float)
    flat_b = np.ascontiguousarray(np.broadcast_to(b, shape), dtype=float)
    out = np.empty(shape + (K,))
    _conditional_softmax_jacobian(flat_logits.reshape(-1, K), flat_b.reshape(-1, K),
                                  log_v.reshape(log_v.shape[0], -1, K), float(temperature),
                                  out.reshape(-1, K, K))
    return out


def conditional_softmax_jacobian_twin(logits, b, v, temperature):
    """The same in numpy, along the formulas as written (scores, softmax, Jacobians)."""
    logits = np.asarray(logits, dtype=float)
    theta = logits - np.max(logits, axis=-1, keepdims=True)
    theta = theta - np.log(np.sum(np.exp(theta), axis=-1, keepdims=True))
    m = -np.log(np.clip(v, _TINY, _BELOW_ONE))
    t = np.sum(b * m, axis=-1, keepdims=True)
    scores = np.where(b != 0.0, -np.log(t), -np.log(m * np.exp(-theta) + t)) / temperature
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    y = e / np.sum(e, axis=-1, keepdims=True)
    jacobians = y[..., :, None] * (np.eye(y.shape[-1]) - y[..., None, :])
    return np.mean(jacobians, axis=0) / temperature


@njit(cache=True, error_model="numpy")
def _reinmax_softmax_jacobian(logits, b, temperature, out):
    """out[r] = 2 J(pi1) - J(pi0) / 2 of row r; logits, b (rows, K)."""
    rows, K = logits.shape
    pi0 = np.empty(K)
    pi1 = np.empty(K)
    for r in range(rows):
        top = _row_max(logits, r)
        total = 0.0
        for i in range(K):
            pi0[i] = math.exp(logits[r, i] - top)
            total += pi0[i]
        for i in range(K):
            pi0[i] /= total
        if temperature == 1.0:
            for i in range(K):
                pi1[i] = 0.5 * (pi0[i] + b[r, i])
        else:
            total = 0.0
            for i in range(K):
                pi1[i] = math.exp((logits[r, i] - top) / temperature)
                total += pi1[i]
            for i in range(K):
                pi1[i] = 0.5 * (pi1[i] / total + b[r, i])
        for i in range(K):
            for c in range(K):
                one = 1.0 if i == c else 0.0
                out[r, i, c] = 2.0 * (pi1[i] * (one - pi1[c])) - 0.5 * (pi0[i] * (one - pi0[c]))


def reinmax_softmax_jacobian(logits, b, temperature):
    """ReinMax's Jacobian 2 J(pi1) - J(pi0) / 2 per row, pi0 = softmax(logits), pi1 =
    (softmax(logits / T) + b) / 2 (the one-hot draw b): (*batch, K, K). logits broadcast
    to b's shape (plain arrays)."""
    b = np.ascontiguousarray(b, dtype=float)
    shape = b.shape
    K = shape[-1]
    flat_logits = np.ascontiguousarray(np.broadcast_to(logits, shape), dtype=float)
    out = np.empty(shape + (K,))
    _reinmax_softmax_jacobian(flat_logits.reshape(-1, K), b.reshape(-1, K),
                              float(temperature), out.reshape(-1, K, K))
    return out


def reinmax_softmax_jacobian_twin(logits, b, temperature):
    """The same in numpy, along the formulas as written."""
    logits = np.broadcast_to(np.asarray(logits, dtype=float), np.shape(b))

    def softmax(x):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)

    def jacobian(y):
        return y[..., :, None] * (np.eye(y.shape[-1]) - y[..., None, :])

    pi0 = softmax(logits)
    pi1 = 0.5 * (softmax(logits / temperature) + b)
    return 2.0 * jacobian(pi1) - 0.5 * jacobian(pi0)
