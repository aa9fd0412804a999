"""RL fine-tuning objectives of sequence models, and their exact bias.

The losses trainers of language models use (TRL, verl, OpenRLHF), on per-token log-probabilities
with a mask, written with numpy functions that scg traces:

- `advantages(rewards, groups, kind)`: GRPO, Dr. GRPO, RLOO, REINFORCE++ (and its baseline).
- `policy_loss(logp, logp_old, adv, mask, kind, clip, aggregate)`: REINFORCE, PPO with
  clip-higher, GSPO, CISPO, truncated IS; token-mean, seq-mean-token-mean, seq-mean-token-sum
  and constant-normalized aggregation (`aggregate(loss_mat, mask, mode)`).
- `kl_penalty(logp, logp_ref, mask, estimator, where)`: k1, k2, k3, in the reward or the loss.
- `study(policy, reward, configs, ...)`: each configuration's exact expected gradient on a
  sequence space small enough to enumerate, against the exact gradient of
  E[R] - beta KL(pi || pi_ref).

Each function's docstring has a table of its options, with the objective each estimates and
its bias.
"""

from .advantages import advantages
from .kl import kl_penalty
from .losses import aggregate, policy_loss
from .study import Config, Study, study

__all__ = ["advantages", "policy_loss", "aggregate", "kl_penalty", "study", "Config", "Study"]
