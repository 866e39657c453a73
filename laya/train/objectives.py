"""Training objectives on masked option logits [N, K] (unused slots hold -1e4, targets 0 there).

- soft_ce_loss: cross-entropy against gold probabilities.
- rlcd_loss: a policy-gradient term whose reward is a strictly proper scoring rule of Gaussian-
  perturbed answers (log + spherical score, minus RPS for score questions), plus the soft CE.
"""

from __future__ import annotations

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
