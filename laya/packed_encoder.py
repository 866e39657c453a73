"""ModernBERT's encoder on a padded batch's real tokens: embeddings, norms, projections and the MLP run on the
[T, d] rows that are not padding; only attention scatters them back into the padded [N, L] layout for SDPA.

In eval mode the arithmetic per token is the stock SDPA encoder's (the same modules, the same rotary function,
SDPA with the broadcast masks); padding rows, whose outputs nothing reads, are no longer computed. The compiled
CPU forward uses it (`compile=True`): at 16 x 3 on the base shape a fifth of the GEMM rows were padding.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .model import broadcast_masks


# below it the copies cost more than the rows saved: 1 x 3 (2% padding) 0.95x, cpu_packed_always_amx_2026-12-07.json
MIN_PADDING = 0.1
LAYER_PARTS = ("attn_norm", "attn", "mlp_norm", "mlp", "attention_type")
ATTENTION_PARTS = ("Wqkv", "Wo", "head_dim")


def packable(encoder: Any) -> bool:
    """A transformers ModernBERT encoder with SDPA attention, laid out as this module runs it."""
    from .backends import is_modernbert  # (laya.backends imports this module)

    config = getattr(encoder, "config", None)
    if not is_modernbert(config) or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    parts = ("embeddings", "layers", "rotary_emb", "final_norm")
    return all(hasattr(encoder, p) for p in parts) and all(
        all(hasattr(layer, p) for p in LAYER_PARTS) and all(hasattr(layer.attn, p) for p in ATTENTION_PARTS)
        for layer in encoder.layers)


def real_tokens(attention_mask: torch.Tensor) -> torch.Tensor:
    """Flat indices (into N * L) of the tokens the mask keeps, in row-major order; computed outside a compiled
    graph, so the token count reaches it as an input size."""
    return attention_mask.reshape(-1).nonzero().reshape(-1)


def packed_index(attention_mask: torch.Tensor) -> torch.Tensor | None:
    """`real_tokens` of a batch with at least MIN_PADDING of its token slots padding, else None (run it padded)."""
    index = real_tokens(attention_mask)
    return index if index.numel() <= (1.0 - MIN_PADDING) * attention_mask.numel() else None


def packed_encode(encoder: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  token_index: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden state [N, L, d] for `input_ids` [N, L]; rows at padding positions are zero."""
    from transformers.models.modernbert import modeling_modernbert as modeling

    if encoder.training:  # attention dropout and checkpointing are the stock forward's: train through it
        raise ValueError("packed_encode runs an encoder in eval mode only; call encoder.eval() first")
    if not packable(encoder):
        raise ValueError(f"packed_encode runs transformers' ModernBERT with SDPA attention, not "
                         f"{type(encoder).__name__} ({getattr(encoder.config, '_attn_implementation', None)!r})")

    n, length = input_ids.shape
    config = encoder.config
    h = encoder.embeddings(input_ids=input_ids.reshape(-1).index_select(0, token_index))  # [T, d]
    width = h.shape[-1]
    masks = broadcast_masks(attention_mask, config.sliding_window)
    positions = torch.arange(length, device=input_ids.device)[None]
    rotary = {kind: encoder.rotary_emb(h, positions, kind) for kind in dict.fromkeys(config.layer_types)}
    for layer in encoder.layers:
        attn = layer.attn
        qkv = attn.Wqkv(layer.attn_norm(h))  # [T, 3d]
        padded = qkv.new_zeros(n * length, qkv.shape[-1]).index_copy(0, token_index, qkv)
        q, k, v = padded.view(n, length, 3, -1, attn.head_dim).unbind(dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        cos, sin = rotary[layer.attention_type]
        q, k = modeling.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=masks[layer.attention_type],
                                             scale=attn.head_dim ** -0.5)
        out = out.transpose(1, 2).reshape(n * length, width).index_select(0, token_index)
        h = h + attn.Wo(out)
        h = h + layer.mlp(layer.mlp_norm(h))
    h = encoder.final_norm(h)
    return h.new_zeros(n * length, width).index_copy(0, token_index, h).view(n, length, width)
