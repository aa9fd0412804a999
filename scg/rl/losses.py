"""Policy losses of RL fine-tuning, on per-token log-probabilities with a mask.

The table of options, and each option's objective and bias, is in the function's docstring.
"""

import numpy as np

from ..core.tape import Box, Tracer
from ..numpy.rules import stop_gradient

KINDS = ("reinforce", "ppo", "gspo", "cispo", "tis")
AGGREGATES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def check_choice(fn, arg, value, choices):
    if value not in choices:
        raise ValueError(f"scg.rl.{fn}: unknown {arg} {value!r}; use one of {', '.join(map(repr, choices))}")


def check_mask(fn, mask, shape):
    """The mask as floats 0 and 1 that broadcast to `shape` (batch..., tokens)."""
    if isinstance(mask, Box):
        raise TypeError(f"scg.rl.{fn}: mask must be a plain boolean (or 0/1) array, not a value being "
                        f"differentiated; compute it from the token ids, e.g. tokens != pad_id")
    # (under scg.jit the mask is a recorded value: read through numpy functions, not np.asarray,
    # so that a replay checks the new mask instead of requiring the old one)
    m = mask if isinstance(mask, Tracer) else np.asarray(mask)
    if m.dtype != bool:
        if not (np.issubdtype(m.dtype, np.integer) or np.issubdtype(m.dtype, np.floating)):
            raise TypeError(f"scg.rl.{fn}: mask must be boolean or 0/1 numbers, got dtype {m.dtype}")
        if np.any((m != 0) & (m != 1)):
            plain = np.asarray(m)
            raise ValueError(f"scg.rl.{fn}: mask must hold only 0 and 1 (or be boolean), got "
                             f"{plain[(plain != 0) & (plain != 1)].ravel()[:3].tolist()}; pass a boolean "
                             f"mask such as attention_mask == 1")
    if len(m.shape) < 2 or not broadcasts(m.shape, shape):
        raise ValueError(f"scg.rl.{fn}: mask has shape {tuple(m.shape)}, which does not match logp's shape "
                         f"{tuple(shape)}; both are (batch, tokens), with the same leading axes")
    return np.where(m != 0, 1.0, 0.0)


def broadcasts(a, shape):
    """True when an array of shape `a` broadcasts to `shape` (without raising)."""
    try:
        return np.broadcast_shapes(tuple(a), tuple(shape)) == tuple(shape)
    except ValueError:
        return False


def _shape(fn, arg, x, min_ndim=2):
    shape = tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)
    if len(shape) < min_ndim:
        raise ValueError(f"scg.rl.{fn}: {arg} must have shape (batch, tokens) (leading axes allowed), "
                         f"got shape {shape}")
    return shape


def _masked_sum(x, m, axis):
    # (np.where, not x * m: padded positions may hold -inf or nan log-probabilities)
    return np.sum(np.where(m > 0, x, 0.0), axis=axis)


def aggregate(loss_mat, mask, mode, *, norm=None):
    """Reduce a (batch, tokens) matrix of per-token losses to the loss, as trainers do.

    Args:
        loss_mat: per-token losses, shape (..., batch, tokens); traced or plain.
        mask: boolean or 0/1 array broadcasting to loss_mat's shape; False marks padding.
        mode: "token-mean", "seq-mean-token-mean", "seq-mean-token-sum" or
            "seq-mean-token-sum-norm" (see `policy_loss`'s table).
        norm: the constant of "seq-mean-token-sum-norm" (default: the padded length, tokens).
    Returns:
        The loss, shape (...) (a scalar for a (batch, tokens) input). A sequence with no
        token counts in the means with loss 0.

    Example:
        >>> float(scg.rl.aggregate(np.array([[1.0, 3.0], [2.0, 0.0]]), np.array([[1, 1], [1, 0]]), "token-mean"))
        2.0
    """
    check_choice("aggregate", "aggregate", mode, AGGREGATES)
    shape = _shape("aggregate", "loss_mat", loss_mat)
    m = np.broadcast_to(check_mask("aggregate", mask, shape), shape)
    per_seq = _masked_sum(loss_mat, m, -1)
    count = np.sum(m, axis=-1)
    if mode == "token-mean":
        return np.sum(per_seq, axis=-1) / np.maximum(np.sum(count, axis=-1), 1.0)
    if mode == "seq-mean-token-mean":
        return np.mean(per_seq / np.maximum(count, 1.0), axis=-1)
    if mode == "seq-mean-token-sum":
        return np.mean(per_seq, axis=-1)
    if norm is None:
        norm = shape[-1]
    if not np.isscalar(norm) or not norm > 0:
        raise ValueError(f"scg.rl.aggregate: norm must be a positive number, got {norm!r}")
    return np.mean(per_seq, axis=-1) / float(norm)


_aggregate = aggregate  # (policy_loss's argument of the same name hides the function)


def policy_loss(logp, logp_old, adv, mask, kind="ppo", clip=(0.2, 0.2), aggregate="token-mean", *,
                cap=2.0, norm=None):
    """The policy loss of RL fine-tuning (PPO, GSPO, CISPO, truncated IS, REINFORCE).

    Minimize it: its negative gradient estimates, on-policy, the gradient of E[A] (with the
    advantages of `scg.rl.advantages`, of E[R]) up to the aggregation's weights. Each kind's
    objective and bias is in the table below; in short, on-policy every kind gives `-A grad logp` per token; off-policy "ppo" and "gspo" drop the
    gradient of clipped tokens (sequences), "cispo" keeps it with a clipped weight, "tis"
    truncates the importance weight at `cap`, "reinforce" ignores the ratio. Only
    aggregate="seq-mean-token-sum" (or "-norm", a constant multiple) weights the sequences as
    the gradient of E[R] does.

    All kinds have the same gradient on-policy (`logp_old` equal to `logp`): `-adv * grad logp`
    per token, aggregated. They differ off-policy (samples drawn by an older or a different policy), where the ratio
    `r = exp(logp - logp_old)` reweights, clips or stops the gradient:

    | kind        | per-token loss                                        | objective, and bias off-policy |
    |-------------|-------------------------------------------------------|--------------------------------|
    | reinforce   | -A logp                                               | E_pi[A] only on-policy; no correction for stale samples |
    | ppo         | max(-A r, -A clip(r, 1 - low, 1 + high))              | the clipped surrogate of PPO; clip-higher (DAPO) with high > low; no gradient where the ratio left the clip range in the advantage's direction |
    | gspo        | as ppo with the sequence ratio s = exp(mean_t log r)  | GSPO: one ratio per sequence (the geometric mean of the token ratios), clipped per sequence |
    | cispo       | -A sg(clip(r, 1 - low, 1 + high)) logp                | CISPO: every token keeps its gradient, the importance weight is clipped |
    | tis         | -A sg(min(r, cap)) logp                               | truncated importance sampling: unbiased while r <= cap, biased toward pi_old beyond |

    `sg` is `scg.stop_gradient`. `aggregate` turns the (batch, tokens) matrix into the loss:

    | aggregate                 | loss                                       | used by |
    |---------------------------|--------------------------------------------|---------|
    | token-mean                | sum of all tokens' losses / number of tokens in the batch | DAPO, verl's default |
    | seq-mean-token-mean       | mean over sequences of each sequence's token mean          | GRPO |
    | seq-mean-token-sum        | mean over sequences of each sequence's token sum           | the policy gradient of E[R] |
    | seq-mean-token-sum-norm   | mean over sequences of token sum / a constant (`norm`, default the padded length) | Dr. GRPO |

    Only seq-mean-token-sum (and its constant-scaled twin) estimates the gradient of the expected
    reward: the two means divide each sequence's gradient by a length that depends on the sample,
    which biases the update toward short or long answers (`scg.rl.study` measures how much).

    Args:
        logp: log-probabilities of the sampled tokens under the policy being trained, shape
            (batch, tokens) (leading axes allowed): traced, from a model or `scg.nn`.
        logp_old: the same under the policy that sampled them (a constant); None means
            on-policy (`scg.stop_gradient(logp)`).
        adv: advantages, shape (batch,) (one per sequence) or (batch, tokens); a constant.
        mask: boolean or 0/1, shape (batch, tokens); False marks padding.
        kind: "reinforce", "ppo", "gspo", "cispo" or "tis".
        clip: (low, high): the ratio is clipped to [1 - low, 1 + high] (high > low is DAPO's
            clip-higher). GSPO's paper uses (3e-4, 4e-4).
        aggregate: "token-mean", "seq-mean-token-mean", "seq-mean-token-sum" or
            "seq-mean-token-sum-norm".
        cap: the truncation of "tis" (Yao et al. 2025 use 2).
        norm: the constant of "seq-mean-token-sum-norm" (default: the padded length).
    Returns:
        The loss: a scalar (shape (...) with leading axes).

    Example:
        >>> logp = np.log(np.full((2, 3), 0.5))
        >>> g = scg.grad(lambda lp: scg.rl.policy_loss(lp, None, np.array([1.0, -1.0]),
        ...              np.ones((2, 3), bool), "ppo"))(logp)
        >>> g.tolist()
        [[-0.16666666666666666, -0.16666666666666666, -0.16666666666666666], [0.16666666666666666, 0.16666666666666666, 0.16666666666666666]]
    """
    check_choice("policy_loss", "kind", kind, KINDS)
    check_choice("policy_loss", "aggregate", aggregate, AGGREGATES)
    shape = _shape("policy_loss", "logp", logp)
    m = check_mask("policy_loss", mask, shape)
    try:
        low, high = (float(c) for c in clip)
    except (TypeError, ValueError):
        raise ValueError(f"scg.rl.policy_loss: clip must be a pair (low, high) of numbers, got {clip!r}") from None
    if not (0 <= low < 1 and high >= 0):
        raise ValueError(f"scg.rl.policy_loss: clip=(low, high) needs 0 <= low < 1 and high >= 0 (the ratio is "
                         f"clipped to [1 - low, 1 + high]), got {clip!r}")
    if not cap > 0:
        raise ValueError(f"scg.rl.policy_loss: cap must be positive, got {cap!r}")
    if logp_old is None:
        logp_old = stop_gradient(logp)
    else:
        if not broadcasts(_shape("policy_loss", "logp_old", logp_old), shape):
            raise ValueError(f"scg.rl.policy_loss: logp_old has shape {np.shape(logp_old)}, logp {shape}; "
                             f"give both per token, (batch, tokens)")
        logp_old = stop_gradient(logp_old)
    A = _advantage_per_token("policy_loss", adv, shape)
    if kind == "reinforce":
        per_token = -A * logp
    elif kind in ("ppo", "gspo"):
        if kind == "ppo":
            ratio = np.exp(logp - logp_old)
        else:
            # GSPO per token: the value of the sequence ratio, the gradient of logp_t
            # (verl's "GSPO-token"; with seq-mean-token-mean it is the sequence-level GSPO)
            log_s = _masked_sum(logp - logp_old, m, -1) / np.maximum(np.sum(np.broadcast_to(m, shape), -1), 1.0)
            ratio = np.exp(stop_gradient(log_s)[..., None] + logp - stop_gradient(logp))
        per_token = np.maximum(-A * ratio, -A * np.clip(ratio, 1.0 - low, 1.0 + high))
    elif kind == "cispo":
        weight = stop_gradient(np.clip(np.exp(logp - logp_old), 1.0 - low, 1.0 + high))
        per_token = -A * weight * logp
    else:  # tis
        weight = stop_gradient(np.minimum(np.exp(logp - logp_old), float(cap)))
        per_token = -A * weight * logp
    return _aggregate(per_token, m, aggregate, norm=norm)


def _advantage_per_token(fn, adv, shape):
    a = stop_gradient(adv)
    a_shape = tuple(np.shape(adv)) if not hasattr(adv, "shape") else tuple(adv.shape)
    if a_shape == shape[:-1]:
        return a[..., None]
    if a_shape == shape:
        return a
    raise ValueError(f"scg.rl.{fn}: adv has shape {a_shape}; for logp of shape {shape} give one advantage "
                     f"per sequence {shape[:-1]} or per token {shape}")
