"""Training objectives on masked option logits [N, K] (unused slots hold -1e4, targets 0 there).

- soft_ce_loss: cross-entropy against gold probabilities.
- rlcd_loss: a policy-gradient term whose reward is a strictly proper scoring rule of Gaussian-
  perturbed answers (log + spherical score, minus RPS for score questions), plus the soft CE.
- td_lambda_targets: TD(lambda) targets for multi-turn yes/no episodes (ep_group, ep_step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

LOG_FLOOR = -9.21  # log(1e-4): one confident miss cannot dominate a batch's reward
SCORE_QTYPE = 1
NOUL_QTYPE = 2


def soft_ce_loss(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """-sum(target * log_softmax(masked logits)) averaged over rows."""
    z = logits.float().masked_fill(~mask, -1e4)
    return -(target * torch.log_softmax(z, dim=-1)).sum(-1).mean()


def proper_reward(q: torch.Tensor, target: torch.Tensor, qtype: torch.Tensor, mask: torch.Tensor,
                  w_sph: float = 0.5, w_rps: float = 1.0, log_floor: float = LOG_FLOOR) -> torch.Tensor:
    """Per-row reward of answer distribution q (rows of q may carry leading sample dims).

    log score sum(t * max(log q, floor)) + w_sph * sum(t * q) / ||q|| - w_rps * RPS (score rows only,
    sum over levels of (cdf_q - cdf_t)^2 / (k - 1)). Each term is strictly proper.
    """
    q = q * mask
    log_score = (target * torch.log(q.clamp(min=1e-30)).clamp(min=log_floor)).sum(-1)
    spherical = (target * q).sum(-1) / q.norm(dim=-1).clamp(min=1e-12)
    k = mask.sum(-1).float()
    rps = ((q.cumsum(-1) - target.cumsum(-1)) ** 2).sum(-1) / (k - 1).clamp(min=1.0)
    is_score = (qtype == SCORE_QTYPE).float()
    return log_score + w_sph * spherical - w_rps * rps * is_score


def rlcd_loss(logits: torch.Tensor, target: torch.Tensor, qtype: torch.Tensor, mask: torch.Tensor,
              samples: int = 4, sigma: float = 0.4, w_sph: float = 0.75, w_rps: float = 1.0,
              generator: torch.Generator | None = None, rl_weight: float = 1.0) -> torch.Tensor:
    """REINFORCE with Gaussian logit perturbations and a proper-scoring-rule reward, plus soft CE.

    z' = detach(logits) + eps, eps ~ N(0, sigma^2) made zero-mean over each row's real options;
    advantage = (reward - mean over samples) / std over samples; loss = -mean(adv * log N(z'; logits,
    sigma^2)) * rl_weight + soft_ce_loss. The policy term's gradient scales like 1/sigma per logit: with
    small batches it can drown the CE signal (after gradient clipping); rl_weight < 1 tones it down.
    """
    z = logits.float()
    maskf = mask.float()
    noise = torch.randn((samples, *z.shape), generator=generator, device=z.device) * sigma * maskf
    noise = noise - (noise.sum(-1, keepdim=True) / maskf.sum(-1, keepdim=True).clamp(min=1.0)) * maskf
    perturbed = (z.detach() + noise).masked_fill(~mask, -1e4)
    with torch.no_grad():
        reward = proper_reward(torch.softmax(perturbed, dim=-1), target, qtype, mask, w_sph, w_rps)
        adv = reward - reward.mean(0, keepdim=True)
        adv = adv / adv.std(0, keepdim=True).clamp(min=1e-6) if samples > 1 else adv
    log_prob = -(((perturbed - z) * maskf) ** 2).sum(-1) / (2 * sigma ** 2)
    policy = -(adv * log_prob).mean()
    return rl_weight * policy + soft_ce_loss(logits, target, mask)


def sigma_at(epoch_progress: float, start: float = 0.4, end: float = 0.1) -> float:
    """Linear anneal of the perturbation scale over training (progress in [0, 1])."""
    p = min(1.0, max(0.0, epoch_progress))
    return start + (end - start) * p


def td_lambda_targets(p_true: torch.Tensor, batch, lam: float = 1.0) -> torch.Tensor:
    """TD(lambda) targets for multi-turn episodes of yes/no (noul) questions; a new target tensor.

    `batch` is a mapping (or an object with these attributes):
      - "target": [N, K] gold probabilities; a noul row holds [P(false), P(true)] in columns 0 and 1.
      - "ep_group": [N] episode id of each row; a negative id (-1) marks a row outside any episode.
        Absent or None: no episodes, the targets come back unchanged (a copy).
      - "ep_step": [N] the row's turn within its episode (only the order matters; distinct per episode).
      - "qtype" (optional): [N] question types; every episode row must then be noul (2).
    `p_true`: [N] the model's current P(true) per row, the bootstrap values (read, never differentiated).

    Within an episode, turns t = 0..T-1 sorted by ep_step, the gold P(true) of the LAST turn is the
    episode's outcome y (the gold of earlier turns is not used):

        G[T-1] = y,    G[t] = (1 - lam) * p_true[t+1] + lam * G[t+1],    target[t] = [1 - G[t], G[t]]

    No discount and no intermediate rewards. lam = 1: every turn learns the outcome (the Monte-Carlo
    return); lam = 0: every turn learns the model's next-turn prediction (one-step TD), the last the
    outcome. Rows outside episodes keep their target.
    """
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be a number between 0 and 1, got {lam!r}")

    def get(key):
        return batch.get(key) if isinstance(batch, Mapping) else getattr(batch, key, None)

    target = get("target")
    if target is None:
        raise ValueError("td_lambda_targets: the batch has no 'target'")
    target = torch.as_tensor(target)
    if target.dim() != 2 or target.shape[1] < 2:
        raise ValueError(f"td_lambda_targets: target must be [N, K>=2], got shape {tuple(target.shape)}")
    out = target.clone()
    groups = get("ep_group")
    if groups is None:
        return out
    n = target.shape[0]
    groups = torch.as_tensor(groups).reshape(-1).tolist()
    steps = get("ep_step")
    if steps is None:
        raise ValueError("td_lambda_targets: the batch has 'ep_group' but no 'ep_step'")
    steps = torch.as_tensor(steps).reshape(-1).tolist()
    p = torch.as_tensor(p_true).detach().reshape(-1).double().tolist()
    if not len(groups) == len(steps) == len(p) == n:
        raise ValueError(f"td_lambda_targets: target has {n} rows but ep_group {len(groups)}, ep_step {len(steps)} "
                         f"and p_true {len(p)}")
    qtypes = get("qtype")
    qtypes = None if qtypes is None else torch.as_tensor(qtypes).reshape(-1).tolist()

    episodes: dict = {}
    for row, group in enumerate(groups):
        if group >= 0:
            if qtypes is not None and qtypes[row] != NOUL_QTYPE:
                raise ValueError(f"td_lambda_targets: row {row} is in episode {group} but is not a noul question "
                                 f"(qtype {qtypes[row]})")
            episodes.setdefault(group, []).append(row)
    rows, values = [], []
    for group, members in episodes.items():
        members.sort(key=lambda r: steps[r])
        ordered = [steps[r] for r in members]
        if len(set(ordered)) != len(ordered):
            raise ValueError(f"td_lambda_targets: episode {group} repeats an ep_step ({ordered})")
        g = float(target[members[-1], 1])
        for j in range(len(members) - 1, -1, -1):
            if j < len(members) - 1:
                g = (1.0 - lam) * p[members[j + 1]] + lam * g
            rows.append(members[j])
            values.append(g)
    if rows:
        index = torch.tensor(rows, dtype=torch.long, device=out.device)
        g = torch.tensor(values, dtype=out.dtype, device=out.device)
        out[index, 0] = 1.0 - g
        out[index, 1] = g
    return out
