"""KL penalties toward a reference policy: k1, k2, k3 (Schulman 2020), in the reward or the loss.

The table of options, and each option's objective and bias, is in the function's docstring.
"""

import numpy as np

from ..numpy.rules import stop_gradient
from .losses import AGGREGATES, _aggregate, _shape, broadcasts, check_choice, check_mask

ESTIMATORS = ("k1", "k2", "k3")
WHERE = ("reward", "loss")


def kl_penalty(logp, logp_ref, mask, estimator="k1", where="reward", *, aggregate="token-mean", norm=None):
    """A KL penalty toward a reference policy, for the reward or for the loss.

    Which objective's gradient each placement estimates is in the table below: k1 in the
    reward is the unbiased one for grad KL(pi || ref); k1 in the loss has zero expected gradient; k3 in the loss (GRPO's default) follows the gradient
    of KL(ref || pi) instead; k2 in the loss drops the later tokens' terms.

    Per token, with `d = logp - logp_ref` at the sampled token:

    | estimator | value               | E_pi[value] per token | in the reward (score x sequence sum) | in the loss (its own gradient) |
    |-----------|---------------------|-----------------------|--------------------------------------|--------------------------------|
    | k1        | d                   | KL(pi, ref)           | unbiased for grad KL(pi || ref)      | zero in expectation: no KL gradient at all |
    | k2        | d ** 2 / 2          | >= KL (biased value)  | biased                               | biased for sequences: each token meets only its own d, not the later tokens' (unbiased for one token) |
    | k3        | exp(-d) - 1 + d     | KL(pi, ref)           | biased                               | biased: per token it is the gradient of KL(ref || pi), the other direction |

    "In the reward" subtracts `beta x` the sequence's sum of the estimator from its reward before
    the advantages (a constant: no gradient of its own); "in the loss" adds `beta x` the
    aggregated estimator to the loss and lets its gradient flow. Only k1 in the reward (with an
    unbiased advantage and seq-mean-token-sum) is unbiased for the gradient of
    `E[R] - beta KL(pi || pi_ref)`; a KL cost written in an scg model at the sampled tokens is
    unbiased too, by scg's own surrogate (docs/rl.md).

    Args:
        logp: log-probabilities of the sampled tokens under the policy, shape (batch, tokens)
            (leading axes allowed); traced for where="loss".
        logp_ref: the same under the reference policy (a constant).
        mask: boolean or 0/1, shape (batch, tokens); False marks padding.
        estimator: "k1", "k2" or "k3".
        where: "reward": returns each sequence's summed penalty, shape (batch,), a constant
            (stop-gradient) to subtract, times beta, from the rewards; "loss": returns the
            penalty aggregated as the policy loss is (`aggregate`), to add, times beta, to it.
        aggregate: for where="loss", as in `scg.rl.policy_loss`.
        norm: the constant of aggregate="seq-mean-token-sum-norm".
    Returns:
        (batch,) penalties for where="reward", the aggregated penalty for where="loss".

    Example:
        >>> lp, ref, m = np.log([[0.5, 0.25]]), np.log([[0.25, 0.25]]), np.ones((1, 2), bool)
        >>> scg.rl.kl_penalty(lp, ref, m, "k1", "reward").round(4).tolist()
        [0.6931]
    """
    check_choice("kl_penalty", "estimator", estimator, ESTIMATORS)
    check_choice("kl_penalty", "where", where, WHERE)
    shape = _shape("kl_penalty", "logp", logp)
    m = check_mask("kl_penalty", mask, shape)
    if not broadcasts(_shape("kl_penalty", "logp_ref", logp_ref), shape):
        raise ValueError(f"scg.rl.kl_penalty: logp_ref has shape {np.shape(logp_ref)}, logp {shape}; "
                         f"give both per token, (batch, tokens)")
    if where == "loss":
        check_choice("kl_penalty", "aggregate", aggregate, AGGREGATES)
    lp = logp if where == "loss" else stop_gradient(logp)
    d = lp - stop_gradient(logp_ref)
    if estimator == "k1":
        k = d
    elif estimator == "k2":
        k = 0.5 * d * d
    else:
        k = np.exp(-d) - 1.0 + d
    if where == "loss":
        return _aggregate(k, m, aggregate, norm=norm)
    return np.sum(np.where(np.broadcast_to(m, shape) > 0, k, 0.0), axis=-1)
