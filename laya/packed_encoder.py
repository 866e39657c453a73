"""A ModernBERT DecisionModel's encoder and head layers written for Inductor's CPU code: embeddings, norms,
projections and MLPs run on the [T, d] rows that are not padding; only attention spreads them back into the
padded [N, L] layout for SDPA.

In eval mode the arithmetic per token is the stock SDPA encoder's (the same modules, the same rotary arithmetic,
SDPA with the broadcast masks); padding rows, whose outputs nothing reads, are no longer computed. The compiled
CPU forward uses it (`compile=True`): at 16 x 3 on the base shape a fifth of the GEMM rows were padding, and
the stock rotary code cost a pass per layer of fp32 buffers (cpu_fused_rotary_amx_2026-12-07.json).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .model import broadcast_masks
from .rotary import matches_installed, rotate_pointwise, turned_sin


# CPU flash SDPA runs a median 1.37x faster at multiples of 16 (0.98-2.44x, cpu_sdpa_lengths_amx_2026-12-07.json)
ATTENTION_ALIGN = 16
LAYER_PARTS = ("attn_norm", "attn", "mlp_norm", "mlp", "attention_type")
ATTENTION_PARTS = ("Wqkv", "Wo", "head_dim")


def packable(encoder: Any) -> bool:
    """A transformers ModernBERT encoder with SDPA attention, laid out as this module runs it."""
    from .backends import is_modernbert  # (laya.backends imports this module)

    config = getattr(encoder, "config", None)
    if not is_modernbert(config) or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    parts = ("embeddings", "layers", "rotary_emb", "final_norm")
    return matches_installed() and all(hasattr(encoder, p) for p in parts) and all(
        all(hasattr(layer, p) for p in LAYER_PARTS) and all(hasattr(layer.attn, p) for p in ATTENTION_PARTS)
        for layer in encoder.layers)


def real_tokens(attention_mask: torch.Tensor) -> torch.Tensor:
    """Flat indices (into N * L) of the tokens the mask keeps, in row-major order; computed outside a compiled
    graph, so the token count reaches it as an input size."""
    return attention_mask.reshape(-1).nonzero().reshape(-1)


def rotary_tables(encoder: Any, length: int, device: torch.device | str) -> dict:
    """ModernBERT's rotary (cos, sin) [1, L, head_dim] per layer type, in fp32, as its rotary module makes them.
    Made outside a compiled graph: inside one, Inductor inlines cos and sin into each layer's rotary kernel, for
    every head and row."""
    probe = torch.empty(0, device=device)  # fp32: the module's own arithmetic, cast to the stream's dtype later
    positions = torch.arange(length, device=device)[None]
    return {kind: encoder.rotary_emb(probe, positions, kind) for kind in dict.fromkeys(encoder.config.layer_types)}


class TokenLayout:
    """Where the T computed rows sit among a padded batch's N x L token slots: every slot in row-major order
    without `token_index`, else the real tokens only (`real_tokens`)."""

    def __init__(self, attention_mask: torch.Tensor, token_index: torch.Tensor | None):
        self.n, self.length = attention_mask.shape
        self.index = token_index
        self.slots = None  # each slot's row, or T (a zero row appended) for padding: gathers fuse, scatters do not
        if token_index is not None:
            rows = token_index.shape[0]
            self.slots = torch.full((self.n * self.length,), rows, dtype=torch.long,
                                    device=token_index.device).index_copy(
                0, token_index, torch.arange(rows, device=token_index.device))

    def rows(self, slotted: torch.Tensor) -> torch.Tensor:
        """Values per slot, [N * L, ...] -> [T, ...] for the computed rows."""
        return slotted if self.index is None else slotted.index_select(0, self.index)

    def per_row(self, values: torch.Tensor) -> torch.Tensor:
        """[N, w] values of each batch row -> [T, w], one for each computed row."""
        if self.index is None:
            return values[:, None].expand(self.n, self.length, values.shape[-1]).reshape(-1, values.shape[-1])
        return values.index_select(0, torch.div(self.index, self.length, rounding_mode="floor"))

    def spread(self, rows: torch.Tensor) -> torch.Tensor:
        """[T, w] rows -> [N * L, w] over every slot, zeros at padding when only real tokens were computed."""
        return rows if self.slots is None else F.pad(rows, (0, 0, 0, 1))[self.slots]


def check_packable(encoder: Any) -> None:
    if encoder.training:  # attention dropout and checkpointing are the stock forward's: train through it
        raise ValueError("the packed forward runs an encoder in eval mode only; call encoder.eval() first")
    if not packable(encoder):
        raise ValueError(f"the packed forward runs transformers' ModernBERT with SDPA attention (and its rotary "
                         f"convention), not "
                         f"{type(encoder).__name__} ({getattr(encoder.config, '_attn_implementation', None)!r})")


def encode_rows(encoder: Any, input_ids: torch.Tensor, layout: TokenLayout, masks: dict,
                rotary: dict | None) -> torch.Tensor:
    """The encoder's last hidden state on `layout`'s rows [T, d]; attention runs over the padded slots. `rotary` is
    `rotary_tables(encoder, L, device)` (made here when None)."""
    check_packable(encoder)
    n, length = layout.n, layout.length
    h = encoder.embeddings(input_ids=layout.rows(input_ids.reshape(-1)))  # [T, d]
    width = h.shape[-1]
    tables = rotary_tables(encoder, length, input_ids.device) if rotary is None else rotary
    turned = {kind: (cos.to(h.dtype), turned_sin(sin.to(h.dtype))) for kind, (cos, sin) in tables.items()}
    for layer in encoder.layers:
        attn = layer.attn
        qkv = layout.spread(attn.Wqkv(layer.attn_norm(h)))  # [N * L, 3d]
        # sizes spelled out: a -1 left Inductor floor divisions of symbols, and 1 x 3 ran 3.3x slower
        q, k, v = qkv.view(n, length, 3, width // attn.head_dim, attn.head_dim).unbind(dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        cos, sin = turned[layer.attention_type]
        q, k = rotate_pointwise(q, cos, sin), rotate_pointwise(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=masks[layer.attention_type],
                                             scale=attn.head_dim ** -0.5)
        h = h + attn.Wo(layout.rows(out.transpose(1, 2).reshape(n * length, width)))
        h = h + layer.mlp(layer.mlp_norm(h))
    return encoder.final_norm(h)


def packed_model_states(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, qtype: torch.Tensor,
                        token_index: torch.Tensor | None, rotary: dict | None,
                        detach_encoder: bool = False) -> torch.Tensor:
    """DecisionModel.encode in eval mode on the layout's rows: the encoder, the type embedding and the head
    layers; [N, L, d], zeros at padding slots when only real tokens were computed (nothing reads them)."""
    if model.training:
        raise ValueError("the packed forward runs a DecisionModel in eval mode only; call model.eval() first")
    layout = TokenLayout(attention_mask, token_index)
    masks = broadcast_masks(attention_mask, model.encoder.config.sliding_window)
    rows = encode_rows(model.encoder, input_ids, layout, masks, rotary)
    if detach_encoder:
        rows = rows.detach()
    rows = rows + layout.per_row(model.type_emb(qtype))
    for layer in model.head.layers if model.head is not None else ():
        rows = head_layer_rows(layer, rows, layout, masks["full_attention"])
    return layout.spread(rows).view(layout.n, layout.length, -1)


def head_layer_rows(layer: Any, x: torch.Tensor, layout: TokenLayout, key_mask: torch.Tensor) -> torch.Tensor:
    """laya.model.head_layer in eval mode on `layout`'s rows [T, d]: only its attention sees the padded slots."""
    attn = layer.self_attn
    n, length, width = layout.n, layout.length, x.shape[-1]
    qkv = layout.spread(F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias))
    q, k, v = qkv.view(n, length, 3, attn.num_heads, width // attn.num_heads).permute(2, 0, 3, 1, 4)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
    x = x + attn.out_proj(layout.rows(out.transpose(1, 2).reshape(n * length, width)))
    return x + layer.linear2(F.relu(layer.linear1(layer.norm2(x))))
