"""Training objectives on masked option logits [N, K] (unused slots hold -1e4, targets 0 there).

- soft_ce_loss: cross-entropy against gold probabilities.
- rlcd_loss: a policy-gradient term whose reward is a strictly proper scoring rule of Gaussian-
  perturbed answers (log + spherical score, minus RPS for score questions), plus the soft CE.
- td_lambda_targets: lambda-return targets for the turns of multi-turn episodes.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

LOG_FLOOR = -9.21  # log(1e-4): one confident miss cannot dominate a batch's reward
SCORE_QTYPE = 1


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


def rlcd_loss(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, qtype: torch.Tensor,
              sigma: float = 0.4, samples: int = 4, w_sph: float = 0.75, w_rps: float = 1.0, *,
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


def sigma_at_progress(progress: float, start: float = 0.4, end: float = 0.1) -> float:
    """Linear anneal of the perturbation scale over training (progress in [0, 1]; the loop's per-step form)."""
    p = min(1.0, max(0.0, progress))
    return start + (end - start) * p


def sigma_at(epoch: float, epochs: float, start: float = 0.4, end: float = 0.1) -> float:
    """The perturbation scale of epoch `epoch` (0-based) of `epochs`: start at the first, end at the last."""
    return sigma_at_progress(epoch / (epochs - 1) if epochs > 1 else 0.0, start, end)


def _episode_field(batch: Any, name: str) -> Any:
    value = batch.get(name) if isinstance(batch, dict) else getattr(batch, name, None)
    if value is None:
        raise ValueError(f"td_lambda_targets: the batch has no {name!r}; give every row its episode "
                         "(ep_group) and turn number (ep_step)")
    return torch.as_tensor(value).reshape(-1).tolist()


def _plain_target(batch: Any) -> Any:
    """A copy of batch["target"] when the batch carries no episodes (no ep_group), else None."""
    if not isinstance(batch, dict) or batch.get("ep_group") is not None or batch.get("target") is None:
        return None
    target = batch["target"]
    return target.clone() if isinstance(target, torch.Tensor) else copy.deepcopy(target)


def td_lambda_targets(p_true: Any, batch: Any, lam: float = 1.0) -> torch.Tensor:
    """TD(lambda) targets for multi-turn episodes: rows of one episode share `ep_group`, `ep_step` orders
    them; rows with a negative ep_group are single turns and keep their own value.

    Within an episode sorted by step, with V_t = p_true of turn t, the last turn's target is its own
    V_T (the outcome) and earlier turns bootstrap backwards (no discount, no intermediate reward):
    G_t = (1 - lam) * V_{t+1} + lam * G_{t+1}. lam = 1 gives every turn the episode's final value
    (Monte Carlo), lam = 0 the next turn's value (TD(0)). Returns a detached float tensor shaped like
    p_true; `batch` is a mapping or an object with `ep_group` and `ep_step`.
    """
    if isinstance(lam, bool) or not (isinstance(lam, (int, float)) and 0.0 <= float(lam) <= 1.0):
        raise ValueError(f"td_lambda_targets: lam must be a number in [0, 1], got {lam!r}")
    single_turn = _plain_target(batch)
    if single_turn is not None:
        return single_turn
    values = torch.as_tensor(p_true).detach().float()
    flat = values.reshape(-1)
    groups, steps = _episode_field(batch, "ep_group"), _episode_field(batch, "ep_step")
    if not len(groups) == len(steps) == flat.numel():
        raise ValueError(f"td_lambda_targets: {flat.numel()} values but {len(groups)} ep_group and {len(steps)} "
                         "ep_step entries; give one of each per row")
    episodes: dict = {}
    for row, (group, step) in enumerate(zip(groups, steps)):
        if not (math.isfinite(group) and math.isfinite(step)):
            raise ValueError(f"td_lambda_targets: row {row} has ep_group {group!r} and ep_step {step!r}; both must "
                             "be finite numbers")
        if group >= 0:
            episodes.setdefault(group, []).append((step, row))
    out = flat.clone()
    for group, turns in episodes.items():
        turns.sort()
        if len({step for step, _ in turns}) < len(turns):
            raise ValueError(f"td_lambda_targets: episode {group} has two rows with the same ep_step; "
                             "number each turn of an episode once")
        target = float(flat[turns[-1][1]])
        for (_, row), (_, after) in zip(reversed(turns[:-1]), reversed(turns[1:])):
            target = (1.0 - lam) * float(flat[after]) + lam * target
            out[row] = target
    return out.reshape(values.shape)
