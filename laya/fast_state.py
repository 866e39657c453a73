"""The fast path's per-plan state: padded geometries, their static (pinned) buffers, 16-bit weights."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Plan:
    """One padded geometry: a CUDA graph and its static buffers exist per plan."""

    packed: bool
    rows: int  # B: batch rows, a power of two
    length: int  # L: padded tokens per row (dense; 0 for packed plans)
    tokens: int  # M: token rows through the GEMMs (B * L dense, bucketed real count packed)


def _staged(size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """(int32 device buffer, its host twin, a numpy view of the twin): the twin is pinned on CUDA, so the
    copy between them is asynchronous."""
    host = torch.zeros(size, dtype=torch.int32, pin_memory=device.type == "cuda")
    return torch.zeros(size, dtype=torch.int32, device=device), host, host.numpy()


class PlanSlot:
    """Static inputs of one plan (the encoder's CUDA graph reads these addresses), its captured graph,
    and the decision steps (``DecisionStep``) of the marker counts its requests had.

    The inputs are views of one int32 device buffer, ``static`` =
    [ids | types | positions | lens | starts | blocks], with a host twin ``host`` of the same layout
    (pinned on CUDA) that each request is written into and copied from in one asynchronous copy.  The lock
    and the end-of-request synchronisation keep the host from rewriting ``host`` while that copy reads it.

    ``blocks`` (packed plans only; empty for dense ones) is the varlen attention kernels' block table for
    query blocks of ``bm`` rows, the bm of every varlen kernel of the plan's token-row class.  Sequences
    of n_b tokens need sum ceil(n_b / bm) <= ceil(M / bm) + B entries (each wastes at most one partial
    block); entries past the request's are -1 (no work), which a graph replay launches as no-op blocks.
    """

    def __init__(self, plan: Plan, device: torch.device, bm: int | None = None):
        m, b = plan.tokens, plan.rows
        nb = -(-m // bm) + b if plan.packed else 0
        self.bm = bm
        self.static, self.host, h = _staged(3 * m + 2 * b + nb, device)
        self.ids, self.types, self.positions = self.static[:m], self.static[m:2 * m], self.static[2 * m:3 * m]
        self.lens = self.static[3 * m:3 * m + b]  # tokens of each sequence (0: an empty bucket row)
        self.starts = self.static[3 * m + b:3 * m + 2 * b]  # first token row of each sequence (attention, gathers)
        self.blocks = self.static[3 * m + 2 * b:]  # packed attention's query blocks (K.varlen_blocks)
        self.host_ids, self.host_types, self.host_positions = h[:m], h[m:2 * m], h[2 * m:3 * m]
        self.host_lens, self.host_starts = h[3 * m:3 * m + b], h[3 * m + b:3 * m + 2 * b]
        self.host_blocks = h[3 * m + 2 * b:]
        self.host_blocks.fill(-1)
        if not plan.packed:  # a dense row r starts at r * L whatever the request
            self.host_starts[:] = np.arange(b) * plan.length
        self.graph: Any = None
        self.out: torch.Tensor | None = None  # the graph's head output rows [M, d] fp32
        self.runs = 0  # eager runs so far (before the capture)
        self.heads: dict[int, DecisionStep] = {}


class DecisionStep:
    """The decision step of one plan for requests of k marker columns: the gather index of each bucket
    row's CLS and marker token rows and the marker mask (static, with a pinned host twin like
    ``PlanSlot``), its captured graph, and ``result`` = [logits B x k | act logits B x n_act] fp32 on the
    host, which the step's output is copied into.  Bucket rows beyond the request's are dummies (index 0,
    no live marker) and are cut off after the copy."""

    def __init__(self, plan: Plan, k: int, n_act: int, device: torch.device):
        b = plan.rows
        self.static, self.host, h = _staged(b * (k + 1) + b * k, device)
        self.index = self.static[:b * (k + 1)]
        self.live = self.static[b * (k + 1):].view(b, k)
        self.host_index, self.host_live = h[:b * (k + 1)].reshape(b, k + 1), h[b * (k + 1):].reshape(b, k)
        self.result = torch.zeros(b * (k + n_act), dtype=torch.float32, pin_memory=device.type == "cuda")
        self.host_result = self.result.numpy()
        self.graph: Any = None
        self.out: torch.Tensor | None = None  # the graph's output (what `result` is copied from)


class GemmWeight:
    """A GEMM operand: 16-bit weight [N, K] once, fp32 bias (zeros when the layer has none)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype):
        self.w = weight.detach().to(dtype).contiguous()
        self.b = (bias.detach().float() if bias is not None else
                  torch.zeros(weight.shape[0], device=weight.device)).contiguous()
        self.has_bias = bias is not None


class NormWeight:
    def __init__(self, norm: torch.nn.LayerNorm):
        self.w = norm.weight.detach().float().contiguous()
        self.b = (norm.bias.detach().float() if norm.bias is not None else torch.zeros_like(self.w)).contiguous()
        self.has_bias = norm.bias is not None
        self.eps = float(norm.eps)


def linears_in(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of `module` whose nn.Linear weights and biases are in `dtype` (other layers unchanged)."""
    module = copy.deepcopy(module)
    for child in module.modules():
        if isinstance(child, torch.nn.Linear):
            child.to(dtype)
    return module
