"""DecisionModel: encoder + question-type embedding + pre-norm head + marker scorer + act head.

Attribute names are the published safetensors keys (`encoder.*`, `head.layers.{j}.*`, `type_emb`,
`scorer.{0,1,3}`, `act_head.{0,2}`, `temperature`), so checkpoints load with a strict
`load_state_dict` and no renaming. No backend code lives here.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

N_FEATURES = 4  # top1, top1 - top2, normalised entropy, k / 255
MASKED_LOGIT = -1e4


class HeadSelfAttention(nn.MultiheadAttention):
    """nn.MultiheadAttention with the same parameters, computed with SDPA and shape-agnostic reshapes.

    The stock module bakes the sequence length into traced graphs (ONNX); this one does not.
    """

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        n, length, d = query.shape
        qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
        qkv = qkv.reshape(n, -1, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        mask = None
        if key_padding_mask is not None:
            mask = (~key_padding_mask.bool())[:, None, None, :]  # True = may attend
        drop = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask, dropout_p=drop)
        out = out.transpose(1, 2).reshape(n, -1, d)
        return self.out_proj(out), None


def head_heads(d: int) -> int:
    """The decision head partitions by its own head count (64-wide heads), not the encoder's."""
    return max(1, d // 64)


def build_head_stack(d: int, layers: int, dropout: float) -> nn.TransformerEncoder | None:
    if layers == 0:
        return None
    layer = nn.TransformerEncoderLayer(d, nhead=head_heads(d), dim_feedforward=4 * d, dropout=dropout,
                                       batch_first=True, norm_first=True)
    attn = HeadSelfAttention(d, head_heads(d), dropout=dropout, batch_first=True)
    layer.self_attn = attn
    return nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)


def head_layer(layer: nn.TransformerEncoderLayer, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """One pre-norm head layer, written out so torch's fused encoder fast path never replaces it:
    x += SA(LN1(x)); x += FF(LN2(x)) with a ReLU feed-forward and key-padding mask."""
    y = layer.norm1(x)
    x = x + layer.dropout1(layer.self_attn(y, y, y, key_padding_mask=pad)[0])
    y = layer.linear2(layer.dropout(F.relu(layer.linear1(layer.norm2(x)))))
    return x + layer.dropout2(y)


class DecisionModel(nn.Module):
    def __init__(self, encoder: nn.Module, head_layers: int = 2, n_act: int = 2, dropout: float = 0.1,
                 no_init: bool = False):
        """`no_init=True` skips the head's weight initialisation (no RNG consumed, storage left as
        allocated): for a model whose weights are loaded right after, as `build_model` does."""
        super().__init__()
        d = encoder.config.hidden_size
        self.encoder = encoder
        # no_init: the head modules are built on the meta device (their init runs on no data), then
        # given real, uninitialised storage on the encoder's device
        with torch.device("meta") if no_init else contextlib.nullcontext():
            self.head = build_head_stack(d, head_layers, dropout)
            self.type_emb = nn.Embedding(3, d)
            self.scorer = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
            self.act_head = nn.Sequential(nn.Linear(d + N_FEATURES, 256), nn.GELU(), nn.Linear(256, n_act))
        if no_init:
            first = next(encoder.parameters(), None)
            device = first.device if first is not None and first.device.type != "meta" else torch.device("cpu")
            for name, child in self.named_children():
                if name != "encoder":
                    child.to_empty(device=device)
        self.register_buffer("temperature", torch.ones(3))
        self.head_checkpointing = False
        self.option_layout = "sequential"  # build_model sets the checkpoint's; only eager runs "parallel"

    def encode(self, input_ids, attention_mask, qtype, detach_encoder=False, encoder_mask=None, position_ids=None,
               option_ids=None, token_index=None, rotary=None):
        """Encoder states plus type embedding, through the head layers: [N, L, d].

        `encoder_mask` (optional) replaces the 2-D mask for the encoder only, e.g. `broadcast_masks`.
        `position_ids` and `option_ids` ([N, L]) select the parallel option layout (laya.parallel_layout).
        `token_index` (`laya.packed_encoder.real_tokens` of the mask) and/or `rotary` (`rotary_tables`) run a
        ModernBERT model in eval mode through `packed_model_states`: the encoder and head layers on the real
        tokens only, with rotary tables made outside."""
        parallel = position_ids is not None or option_ids is not None
        if token_index is not None or rotary is not None:
            if parallel or encoder_mask is not None:
                raise ValueError("token_index and rotary run the sequential layout with its own masks; pass "
                                 "neither position_ids/option_ids nor encoder_mask with them")
            from .packed_encoder import packed_model_states

            return packed_model_states(self, input_ids, attention_mask, qtype, token_index, rotary, detach_encoder)
        mask = attention_mask if encoder_mask is None else encoder_mask
        extra = {}
        if parallel:
            mask = self.parallel_inputs(attention_mask, position_ids, option_ids)
            extra = {"position_ids": position_ids}
        h = self.encoder(input_ids=input_ids, attention_mask=mask, **extra).last_hidden_state
        if detach_encoder:
            h = h.detach()
        h = h + self.type_emb(qtype)[:, None, :]
        if self.head is not None:
            pad = ~attention_mask.bool()
            for layer in self.head.layers:
                if self.head_checkpointing and self.training:
                    h = torch.utils.checkpoint.checkpoint(head_layer, layer, h, pad, use_reentrant=False)
                else:
                    h = head_layer(layer, h, pad)
        return h

    def parallel_inputs(self, attention_mask, position_ids, option_ids) -> dict:
        """ModernBERT's per-layer masks for the parallel layout (spec 3.9)."""
        from .parallel_layout import parallel_masks, require_modernbert

        config = self.encoder.config
        if position_ids is None or option_ids is None:
            raise ValueError("the parallel option layout needs both position_ids and option_ids ([N, L] each)")
        require_modernbert(config)
        return parallel_masks(attention_mask, position_ids, option_ids, getattr(config, "sliding_window", None))

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False,
                position_ids=None, option_ids=None, encoder_mask=None, token_index=None, rotary=None):
        h = self.encode(input_ids, attention_mask, qtype, detach_encoder, encoder_mask, position_ids, option_ids,
                        token_index, rotary)
        return decide(self, h, marker_pos, marker_mask)


def broadcast_masks(attention_mask: torch.Tensor, sliding_window: int) -> dict:
    """ModernBERT masks that stay broadcast: global layers get the key mask [N, 1, 1, L], sliding layers
    key mask AND the band |i - j| <= sliding_window as [N, 1, L, L]. The stock path builds [N, 1, L, L]
    for both, which torch.compile may expand to rows x heads x L x L."""
    key = attention_mask.bool()[:, None, None, :]
    pos = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    band = (pos[None, :] - pos[:, None]).abs() <= sliding_window
    return {"full_attention": key, "sliding_attention": key & band}


def decide(model: DecisionModel, h: torch.Tensor, marker_pos: torch.Tensor, marker_mask: torch.Tensor):
    """Scorer at the markers and the act head, from head output h [N, L, d] -> (logits, act_logits)."""
    index = marker_pos.clamp(min=0)[:, :, None].expand(-1, -1, h.shape[-1])
    m = torch.gather(h, 1, index)
    logits = model.scorer(m).squeeze(-1).float().masked_fill(~marker_mask, MASKED_LOGIT)
    feats = confidence_features(logits.detach(), marker_mask)
    act_input = torch.cat([h[:, 0].float(), feats], dim=-1)
    if not torch.is_autocast_enabled(h.device.type):
        # Explicit 16-bit copies (exports, AOTInductor) get inputs in the head's dtype; autocast decides otherwise.
        act_input = act_input.to(model.act_head[0].weight.dtype)
    return logits, model.act_head(act_input)


def confidence_features(logits: torch.Tensor, marker_mask: torch.Tensor) -> torch.Tensor:
    """[top1, top1 - top2, normalised entropy, clamp(k, 2) / 255] in fp32, one row per question."""
    p = torch.softmax(logits.float(), dim=-1)
    k = marker_mask.sum(-1).clamp(min=2).float()
    ent = -(p * torch.log(p.clamp(min=1e-9))).sum(-1) / torch.log(k)
    if p.shape[-1] == 1:  # single option column: topk(2) would fail
        top1, top2 = p[:, 0], torch.zeros_like(p[:, 0])
    else:
        top = torch.topk(p, 2, dim=-1).values
        top1, top2 = top[:, 0], top[:, 1]
    return torch.stack([top1, top1 - top2, ent, k / 255.0], dim=-1)


def apply_rope_config(ecfg: Any) -> Any:
    """Copy transformers-5 `rope_parameters` thetas onto 4.x `global_/local_rope_theta` attributes.

    Without it mmBERT silently runs local theta 10000 instead of 160000 on transformers 4.x.
    """
    params = getattr(ecfg, "rope_parameters", None)
    if not isinstance(params, dict):
        return ecfg
    full = params.get("full_attention", params)
    local = params.get("sliding_attention", params)
    for attr, source in (("global_rope_theta", full), ("local_rope_theta", local)):
        if hasattr(ecfg, attr) and isinstance(source, dict) and "rope_theta" in source:
            setattr(ecfg, attr, source["rope_theta"])
    return ecfg


def build_encoder(encoder_dir: str | None, name: str, pretrained: bool, revision: str | None = None) -> nn.Module:
    from transformers import AutoConfig, AutoModel

    if encoder_dir and not os.path.isdir(encoder_dir):
        encoder_dir = None  # a checkpoint without encoder/: the base encoder's config (spec 3.5)
    if not pretrained or encoder_dir:
        ecfg = apply_rope_config(AutoConfig.from_pretrained(encoder_dir or name))
        from transformers.initialization import no_init_weights

        with no_init_weights():  # the checkpoint overwrites every weight: skip the random init
            return AutoModel.from_config(ecfg, attn_implementation="sdpa", dtype=torch.float32)
    return AutoModel.from_pretrained(name, attn_implementation="sdpa", revision=revision, dtype=torch.float32)


def build_model(cfg: dict, encoder_dir: str | None = None, pretrained: bool = True,
                revision: str | None = None) -> DecisionModel:
    """The module tree for `cfg`; with pretrained=False nothing is initialised (a checkpoint follows)."""
    encoder = build_encoder(encoder_dir, cfg["encoder"], pretrained, revision)
    head_layers = int(cfg.get("head_layers", 2))
    n_act = len(cfg.get("act_costs", {}) or {}) + 1
    if pretrained and not encoder_dir:
        model = DecisionModel(encoder, head_layers, n_act)
    else:
        model = DecisionModel(encoder, head_layers, n_act, no_init=True)  # no RNG or time spent on init
    model.option_layout = cfg.get("option_layout") or "sequential"  # exports refuse "parallel" (spec 3.9)
    return model


def init_weights(model: DecisionModel, seed: int, std: float = 0.02) -> None:
    """Deterministic random weights (normal std, LayerNorms at 1/0, biases 0): for made checkpoints."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name.lower() or name.startswith("scorer.0")):  # BERT: LayerNorm
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * std)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

