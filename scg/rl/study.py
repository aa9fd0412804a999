"""The exact expected gradient of RL fine-tuning losses on a sequence space small enough to enumerate.

`study(policy, reward, configs, ...)` lists every sequence, every group of `group_size`
sequences and each group's probability, and computes each configuration's expected update
exactly (no sampling), against the exact gradient of `E[R] - beta KL(pi || pi_ref)`.
"""

import dataclasses
import itertools

import numpy as np

from ..core import pytree
from ..differential_operators import grad, jacobian
from .advantages import KINDS as ADVANTAGES, advantages
from .kl import ESTIMATORS, WHERE, kl_penalty
from .losses import AGGREGATES, KINDS as LOSSES, check_choice, policy_loss


@dataclasses.dataclass(frozen=True)
class Config:
    """One training configuration of `scg.rl.study`: a loss, its advantages and aggregation, a KL.

    Args:
        loss: a kind of `scg.rl.policy_loss` ("reinforce", "ppo", "gspo", "cispo", "tis").
        advantages: a kind of `scg.rl.advantages` ("rloo", "grpo", "dr_grpo", ...).
        aggregate: an aggregation of `scg.rl.policy_loss` ("seq-mean-token-sum", ...).
        kl: None, or an estimator of `scg.rl.kl_penalty` ("k1", "k2", "k3"), weighted by the
            study's beta.
        kl_where: "reward" or "loss" (with kl), None without.
        clip, cap, eps: as in `policy_loss` (clip, cap) and `advantages` (eps).

    Example:
        >>> scg.rl.Config(loss="ppo", advantages="grpo", aggregate="token-mean", kl="k3", kl_where="loss").kl
        'k3'
    """
    loss: str = "reinforce"
    advantages: str = "rloo"
    aggregate: str = "seq-mean-token-sum"
    kl: str | None = None
    kl_where: str | None = None
    clip: tuple = (0.2, 0.2)
    cap: float = 2.0
    eps: float = 1e-4

    def __post_init__(self):
        check_choice("Config", "loss", self.loss, LOSSES)
        check_choice("Config", "advantages", self.advantages, ADVANTAGES)
        check_choice("Config", "aggregate", self.aggregate, AGGREGATES)
        if (self.kl is None) != (self.kl_where is None):
            raise ValueError(f"scg.rl.Config: give kl and kl_where together (kl={self.kl!r}, "
                             f"kl_where={self.kl_where!r}), e.g. kl='k1', kl_where='reward'")
        if self.kl is not None:
            check_choice("Config", "kl", self.kl, ESTIMATORS)
            check_choice("Config", "kl_where", self.kl_where, WHERE)

    def describe(self):
        kl = "-" if self.kl is None else f"{self.kl} in {self.kl_where}"
        return self.loss, self.advantages, self.aggregate, kl


@dataclasses.dataclass
class Row:
    """One configuration's result: see `Study`."""
    config: Config
    expected: object
    norm_ratio: float
    cosine: float
    max_error: float
    variance: float


class Study:
    """The result of `scg.rl.study`: `res[label]` is a `Row` with

    - `.expected`: the expected update (minus the expected gradient of the loss), shaped like params;
    - `.norm_ratio`: its norm over the exact gradient's; `.cosine`: the cosine between them;
    - `.max_error`: the largest coordinate of expected - exact;
    - `.variance`: the total variance (trace of the covariance) of one group's update;

    and `res.exact` is the exact gradient of E[R] - beta KL(pi || pi_ref), shaped like params;
    `res.info` holds the sizes (sequences, groups) and the settings of the study.
    """

    def __init__(self, rows, exact, info):
        self.rows, self.exact, self.info = rows, exact, info

    def __getitem__(self, label):
        return self.rows[label]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def table(self):
        """A text table of every configuration: loss, advantages, aggregation, KL and the bias figures."""
        i = self.info
        head = (f"exact expected updates: {i['sequences']} sequences (vocab {i['vocab']}, length {i['length']}"
                f"{', eos ' + str(i['eos']) if i['eos'] is not None else ''}), groups of {i['group_size']} "
                f"({i['groups']} groups), beta {i['beta']}; |exact gradient| = {i['exact_norm']:.4g}")
        cols = ("config", "loss", "advantages", "aggregate", "KL", "|E g|/|g*|", "cosine", "max err", "variance")
        rows = [(label, *r.config.describe(), f"{r.norm_ratio:.4f}", f"{r.cosine:.4f}",
                 f"{r.max_error:.3g}", f"{r.variance:.4g}") for label, r in self.rows.items()]
        widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
        fmt = "  ".join(f"{{:{'<' if k < 5 else '>'}{w}}}" for k, w in enumerate(widths))
        return "\n".join([head, fmt.format(*cols), fmt.format(*("-" * w for w in widths))] +
                         [fmt.format(*r) for r in rows])

    def __repr__(self):
        return self.table()

    def plot(self, path):
        """Save a picture of each configuration's norm ratio and cosine to `path` (needs matplotlib).

        Returns:
            The path written.
        """
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("Study.plot needs matplotlib: pip install matplotlib "
                              "(or pip install 'scg[plot]'); Study.table() needs nothing") from None
        labels = list(self.rows)
        y = np.arange(len(labels))
        fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(labels) + 1.5), sharey=True)
        for ax, key, xlabel in ((axes[0], "norm_ratio", "|expected update| / |exact gradient|"),
                                (axes[1], "cosine", "cosine(expected update, exact gradient)")):
            ax.barh(y, [getattr(self.rows[k], key) for k in labels], color="tab:blue")
            ax.axvline(1.0, color="k", lw=0.8)
            ax.set_xlabel(xlabel)
        axes[0].set_yticks(y, labels)
        axes[0].set_ylabel("configuration")
        axes[0].invert_yaxis()
        fig.suptitle(f"exact bias of RL losses for E[R] - {self.info['beta']} KL")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def study(policy, reward, configs, *, params, ref_params=None, vocab, length, group_size, beta=0.0,
          eos=None, old_params=None, max_groups=200_000):
    """Each configuration's exact expected update against the exact gradient of E[R] - beta KL.

    What is exact: every one of the `vocab ** length` sequences is listed with its probability,
    and every group of `group_size` sequences drawn i.i.d. from the sampling policy with the
    group's probability; each group's loss is differentiated with scg (the batch of the loss
    is one group: one prompt), and the expectation is the probability-weighted sum. No
    sampling, no tolerance: the numbers are those of the losses of `scg.rl` on each group.
    The target is the exact gradient of E_pi[R] - beta KL(pi || pi_ref) by enumeration.

    Args:
        policy: `policy(params, prefix)` gives the next token's log-probabilities, shape
            (..., vocab), for prefixes of shape (..., t), 0 <= t < length (normalized, e.g. by
            `scg.log_softmax`).
        reward: `reward(tokens)` maps complete sequences (..., length) to rewards (...).
        configs: a dict label -> `scg.rl.Config` (or a dict of its fields).
        params: the policy's parameters (a pytree), where the gradient is taken.
        ref_params: the reference policy's parameters (needed with beta or a KL config).
        vocab, length: the sequence space, `vocab ** length` sequences.
        group_size: G, the sequences sampled per prompt (the group of the advantages).
        beta: the KL weight of the objective (and of each config's penalty).
        eos: None (every sequence has `length` tokens) or a token id that ends a sequence: the
            tokens after the first eos are padding (masked, and the sequence space holds
            each ended sequence once, padded with eos).
        old_params: None (on-policy) or the parameters of the policy that samples the groups
            (`logp_old`): the off-policy bias of reused samples.
        max_groups: the largest number of groups to enumerate.
    Returns:
        A `Study`: `res[label]` has `.expected`, `.norm_ratio`, `.cosine`, `.max_error`,
        `.variance` (per group); `res.exact`; `res.table()`; `res.plot(path)`.

    Example:
        >>> def policy(theta, prefix):      # a table: position x previous token -> logits
        ...     prev = prefix[..., -1] + 1 if prefix.shape[-1] else np.zeros(prefix.shape[:-1], int)
        ...     return scg.log_softmax(theta[prefix.shape[-1]][prev], axis=-1)
        >>> res = scg.rl.study(policy, lambda y: (y == 1).sum(-1) * 1.0,
        ...                    {"rloo": scg.rl.Config()}, params=np.zeros((2, 3, 2)),
        ...                    vocab=2, length=2, group_size=2)
        >>> round(res["rloo"].norm_ratio, 12), round(res["rloo"].cosine, 12)
        (1.0, 1.0)
    """
    configs = _configs(configs)
    vocab, length, G = (_positive_int(n, name) for n, name in
                        ((vocab, "vocab"), (length, "length"), (group_size, "group_size")))
    needs_ref = beta != 0 or any(c.kl is not None for c in configs.values())
    if needs_ref and ref_params is None:
        raise ValueError("scg.rl.study: beta or a config's kl needs ref_params (the reference policy's parameters)")
    if eos is not None and not (isinstance(eos, (int, np.integer)) and 0 <= eos < vocab):
        raise ValueError(f"scg.rl.study: eos must be a token id in [0, {vocab}), got {eos!r}")

    seqs = np.array(list(itertools.product(range(vocab), repeat=length)), dtype=np.int64).reshape(-1, length)
    mask, valid = _ended(seqs, eos)
    leaves, treedef, _ = pytree.flatten(params)
    shapes = [np.shape(x) for x in leaves]
    flat0 = np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in leaves])

    def unflatten(v):
        out, k = [], 0
        for s in shapes:
            n = int(np.prod(s))
            out.append(v[k:k + n].reshape(s))
            k += n
        return pytree.unflatten(treedef, out)

    def token_logp(p):
        cols = []
        for t in range(length):
            out = policy(p, seqs[:, :t])
            if tuple(out.shape) != (len(seqs), vocab):
                raise ValueError(f"scg.rl.study: policy(params, prefix) returned shape {tuple(out.shape)} for "
                                 f"prefixes of shape {seqs[:, :t].shape}; it must give ({len(seqs)}, {vocab}), "
                                 f"the next token's log-probabilities")
            cols.append(np.take_along_axis(out, seqs[:, t:t + 1], axis=-1)[:, 0])
        return np.stack(cols, axis=1)

    def plain_logp(p, who):
        for t in range(length):
            lse = np.logaddexp.reduce(np.asarray(policy(p, seqs[:, :t]), dtype=float), axis=-1)
            if not np.allclose(lse, 0.0, atol=1e-9):
                raise ValueError(f"scg.rl.study: policy({who}, prefix) does not give normalized "
                                 f"log-probabilities at position {t} (logsumexp {lse.ravel()[0]:.6g}); "
                                 f"end it with scg.log_softmax")
        return np.where(mask, np.asarray(token_logp(p), dtype=float), 0.0)

    lp = plain_logp(params, "params")
    seq_lp = lp.sum(1)
    p = np.where(valid, np.exp(seq_lp), 0.0)
    lp_old = lp if old_params is None else plain_logp(old_params, "old_params")
    q = p if old_params is None else np.where(valid, np.exp(lp_old.sum(1)), 0.0)
    lp_ref = plain_logp(ref_params, "ref_params") if needs_ref else np.zeros_like(lp)
    R = np.asarray(reward(seqs), dtype=float)
    if R.shape != (len(seqs),):
        raise ValueError(f"scg.rl.study: reward(tokens) returned shape {R.shape} for tokens of shape "
                         f"{seqs.shape}; it must give one reward per sequence, ({len(seqs)},)")
    if not np.all(np.isfinite(R)):
        raise ValueError("scg.rl.study: reward(tokens) returned nan or inf")

    # d logp[s, t] / d params for every sequence and position (padding rows are 0)
    J = np.asarray(jacobian(lambda v: token_logp(unflatten(v)))(flat0), dtype=float)
    J = J * mask[..., None]
    support = np.nonzero(q > 0)[0]
    n_groups = len(support) ** G
    if n_groups > max_groups:
        raise ValueError(f"scg.rl.study: {len(support)} sequences in groups of {G} make {n_groups} groups, more "
                         f"than max_groups={max_groups}; use a smaller vocab, length or group_size "
                         f"(or raise max_groups)")
    idx = support[np.array(list(itertools.product(range(len(support)), repeat=G)), dtype=np.int64).reshape(-1, G)]
    w = np.prod(q[idx], axis=1)

    # the target: grad E_pi[R] - beta grad KL = E_pi[score * (R - beta log(pi / ref))]
    f = R - beta * (seq_lp - lp_ref.sum(1)) if needs_ref else R
    exact = np.einsum("s,s,sp->p", np.where(p > 0, p * f, 0.0), np.ones(len(seqs)), J.sum(1))
    exact_norm = float(np.linalg.norm(exact))

    rows = {}
    for label, cfg in configs.items():
        D = _loss_gradient(cfg, idx, lp, lp_old, lp_ref, mask, R, G, beta)
        W = np.zeros_like(lp)
        np.add.at(W, idx, w[:, None, None] * D)
        mean = -np.einsum("sl,slp->p", W, J)
        var = 0.0
        for k in range(0, len(idx), 4096):  # (one group's update at a time would be slow; all at once, large)
            gk = -np.einsum("kgl,kglp->kp", D[k:k + 4096], J[idx[k:k + 4096]])
            var += float(np.sum(w[k:k + 4096] * np.sum((gk - mean) ** 2, axis=1)))
        norm = float(np.linalg.norm(mean))
        with np.errstate(divide="ignore", invalid="ignore"):
            rows[label] = Row(cfg, unflatten(mean), norm / exact_norm if exact_norm else float("nan"),
                              float(mean @ exact) / (norm * exact_norm) if norm and exact_norm else float("nan"),
                              float(np.max(np.abs(mean - exact))), var)
    info = dict(vocab=vocab, length=length, group_size=G, beta=beta, eos=eos, sequences=int(valid.sum()),
                groups=n_groups, exact_norm=exact_norm)
    return Study(rows, unflatten(exact), info)


def _loss_gradient(cfg, idx, lp, lp_old, lp_ref, mask, R, G, beta):
    """d loss / d logp for every enumerated group, shape (groups, G, length)."""
    LP, LPold, LPref, M = lp[idx], lp_old[idx], lp_ref[idx], mask[idx]
    rewards = R[idx]
    if cfg.kl_where == "reward":  # (a constant: the penalty at the sampled tokens)
        rewards = rewards - beta * kl_penalty(LP, LPref, M, cfg.kl, "reward")
    adv = advantages(rewards, G, cfg.advantages, eps=cfg.eps)

    def loss(logp):
        total = policy_loss(logp, LPold, adv, M, cfg.loss, cfg.clip, cfg.aggregate, cap=cfg.cap)
        if cfg.kl_where == "loss":
            total = total + beta * kl_penalty(logp, LPref, M, cfg.kl, "loss", aggregate=cfg.aggregate)
        return np.sum(total)  # (groups are independent: each group's own gradient)

    return np.asarray(grad(loss)(LP), dtype=float)


def _ended(seqs, eos):
    """The mask of generated tokens (up to and including the first eos) and the canonical sequences."""
    if eos is None:
        return np.ones(seqs.shape, bool), np.ones(len(seqs), bool)
    is_eos = seqs == eos
    before = np.cumsum(is_eos, axis=1) - is_eos  # eos tokens strictly before each position
    mask = before == 0
    valid = np.all(mask | is_eos, axis=1)  # (after an eos only eos: each ended sequence once)
    return mask, valid


def _configs(configs):
    if not isinstance(configs, dict) or not configs:
        raise TypeError("scg.rl.study: configs must be a non-empty dict label -> scg.rl.Config (or a dict of its fields)")
    out = {}
    for label, c in configs.items():
        if isinstance(c, dict):
            unknown = set(c) - {f.name for f in dataclasses.fields(Config)}
            if unknown:
                raise ValueError(f"scg.rl.study: config {label!r} has unknown fields {sorted(unknown)}; "
                                 f"use {[f.name for f in dataclasses.fields(Config)]}")
            c = Config(**c)
        if not isinstance(c, Config):
            raise TypeError(f"scg.rl.study: config {label!r} must be a scg.rl.Config or a dict, got {type(c).__name__}")
        out[label] = c
    return out


def _positive_int(n, name):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"scg.rl.study: {name} must be a positive integer, got {n!r}")
    return int(n)
