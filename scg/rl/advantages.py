"""Advantages of RL fine-tuning from one reward per sequence, by group (prompt) or batch.

The table of options, and each option's objective and bias, is in the function's docstring.
"""

import numpy as np

from ..core.tape import Tracer
from .losses import check_choice

KINDS = ("grpo", "dr_grpo", "rloo", "reinforce++", "reinforce++_baseline", "none")


def advantages(rewards, groups, kind="grpo", *, eps=1e-4):
    """One advantage per sequence from one reward per sequence (GRPO, Dr. GRPO, RLOO, REINFORCE++).

    The objective each kind serves and its bias are in the table below: "rloo" and "none"
    are unbiased for grad E[R], "dr_grpo" is (G - 1) / G of it, "grpo" and the REINFORCE++
    kinds are biased.

    Each sequence's advantage multiplies the gradient of its log-probability. With `R` the
    rewards of one group of G sequences sampled for the same prompt:

    | kind                  | advantage of sequence i                        | expected gradient (on-policy, seq-mean-token-sum) |
    |-----------------------|------------------------------------------------|---------------------------------------------------|
    | none                  | R_i                                            | grad E[R], unbiased (high variance)                |
    | rloo                  | R_i - mean of the other G - 1 rewards          | grad E[R], unbiased                                |
    | dr_grpo               | R_i - group mean                               | (G - 1) / G grad E[R]: the right direction         |
    | grpo                  | (R_i - group mean) / (group std + eps)         | biased: each group is reweighted by 1 / its std    |
    | reinforce++           | (R_i - batch mean) / (batch std + eps)         | biased (slightly): the batch statistics include R_i |
    | reinforce++_baseline  | group mean removed, then batch whitening       | biased, as reinforce++                             |

    The std is the sample standard deviation (ddof=1, as torch.std, TRL and verl); eps is added
    after the square root (TRL's 1e-4; verl uses 1e-6).

    Args:
        rewards: one reward per sequence, shape (batch,) (leading axes allowed: each row of the
            last axis is a batch). A plain array (rewards carry no gradient).
        groups: the group size G (consecutive blocks of G sequences share a prompt; G must divide
            the batch), or an integer array of shape (batch,) naming each sequence's prompt.
        kind: "grpo", "dr_grpo", "rloo", "reinforce++", "reinforce++_baseline" or "none".
        eps: added to a standard deviation before dividing.
    Returns:
        The advantages, the shape of `rewards`.

    Example:
        >>> scg.rl.advantages(np.array([1.0, 0.0, 0.0, 0.0]), 2, "rloo").tolist()
        [1.0, -1.0, 0.0, 0.0]
    """
    check_choice("advantages", "kind", kind, KINDS)
    # (a value recorded by scg.jit stays one: np.asarray would make a replay require the same rewards)
    r = rewards * 1.0 if isinstance(rewards, Tracer) else np.asarray(rewards, dtype=float)
    if len(r.shape) < 1 or r.shape[-1] == 0:
        raise ValueError(f"scg.rl.advantages: rewards must have shape (batch,), one per sequence; got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("scg.rl.advantages: rewards must be finite numbers; found nan or inf")
    B = r.shape[-1]
    if kind in ("none", "reinforce++"):
        return r * 1.0 if kind == "none" else _whiten(r, eps)
    index = _group_index(groups, B)
    sizes = np.bincount(index)
    sizes = sizes[sizes > 0]
    if kind in ("grpo", "rloo") and np.any(sizes < 2):
        raise ValueError(f"scg.rl.advantages: kind={kind!r} needs at least 2 sequences per group; "
                         f"a group has {sizes.min()} (give more samples per prompt, or use 'reinforce++')")
    mean = _group_reduce(r, index, np.mean)
    if kind == "dr_grpo":
        return r - mean
    if kind == "rloo":
        G = np.bincount(index)[index]
        return (r - mean) * G / (G - 1)  # (= R_i - mean of the others)
    if kind == "grpo":
        std = _group_reduce(r, index, lambda x, axis: np.std(x, axis=axis, ddof=1))
        return (r - mean) / (std + eps)
    return _whiten(r - mean, eps)  # reinforce++_baseline


def _whiten(x, eps):
    if x.shape[-1] < 2:
        raise ValueError("scg.rl.advantages: batch whitening needs at least 2 sequences in the batch")
    return (x - np.mean(x, axis=-1, keepdims=True)) / (np.std(x, axis=-1, ddof=1, keepdims=True) + eps)


def _group_index(groups, B):
    """Each sequence's group as 0..k-1."""
    if np.ndim(groups) == 0:
        if isinstance(groups, bool) or not float(groups).is_integer() or groups < 1 or B % int(groups):
            raise ValueError(f"scg.rl.advantages: groups={groups!r} must be a group size that divides the batch "
                             f"({B}), or an array of each sequence's prompt id")
        return np.arange(B) // int(groups)
    g = np.asarray(groups)
    if g.shape != (B,):
        raise ValueError(f"scg.rl.advantages: groups has shape {g.shape}; give one prompt id per sequence, "
                         f"shape ({B},), or a group size")
    _, index = np.unique(g, return_inverse=True)
    return index.reshape(B)


def _group_reduce(r, index, fn):
    """fn over each group along the last axis, broadcast back to every member."""
    sizes = np.bincount(index)
    if np.all(sizes == sizes[0]) and np.array_equal(index, np.arange(len(index)) // sizes[0]):
        # consecutive groups of one size: one reshape (a loop per group is slow for many prompts)
        x = np.reshape(r, tuple(r.shape[:-1]) + (len(sizes), int(sizes[0])))
        return np.reshape(np.broadcast_to(fn(x, axis=-1)[..., None], x.shape), r.shape)
    out = np.empty_like(r)
    for k in range(index.max() + 1):
        sel = index == k
        out[..., sel] = fn(r[..., sel], axis=-1)[..., None]
    return out
