"""Inputs and the torch reference for the decision-step kernel (decide_features_kernel), shared by its CPU
and GPU tests."""

from __future__ import annotations

import torch


def decide_inputs(B, k, d, seed):
    """fp32 CPU (scores, int32 live mask, rows) with the rows that matter: row 0 all live, row 1 one live
    column, row 2 a tie for the max (k > 1), row 6 all masked; elsewhere ~30% masked.  Masked columns hold
    scores above every live one and a NaN, so a kernel that read them would show it."""
    g = torch.Generator().manual_seed(seed)
    S = torch.randn(B, k, generator=g) * 3
    live = (torch.rand(B, k, generator=g) > 0.3).to(torch.int32)
    live[0] = 1
    if B > 1:
        live[1] = 0
        live[1, k // 2] = 1
    if B > 2 and k > 1:
        live[2] = 1
        a, b = torch.randperm(k, generator=g)[:2].tolist()
        S[2, a] = S[2, b] = S[2].max() + 0.5
    if B > 6:
        live[6] = 0
    masked = live == 0
    S[masked] = torch.where(torch.rand(int(masked.sum()), generator=g) < 0.5, 40.0, float("nan"))
    rows = torch.randn(B, k + 1, d, generator=g)
    return S, live, rows


def ref_decide(S, live, rows):
    """(Logits, ActIn) as laya.model.decide computes them (fp32 torch, on the inputs' device)."""
    from laya.model import MASKED_LOGIT, confidence_features

    logits = S.float().masked_fill(~live.bool(), MASKED_LOGIT)
    feats = confidence_features(logits, live.bool())
    return logits, torch.cat([rows[:, 0].float(), feats], dim=-1)
