"""The encoder on a padded batch's real tokens only (laya.packed_encoder) against the stock ModernBERT forward."""

import pytest
import torch

import laya
from laya.model import broadcast_masks
from laya.packed_encoder import TokenLayout, encode_rows, packable, real_tokens, rotary_tables


def packed_encode(encoder, input_ids, attention_mask, token_index=None, rotary=None) -> torch.Tensor:
    """The packed encoder's last hidden state laid out as the stock one's, [N, L, d]."""
    layout = TokenLayout(attention_mask, token_index)
    masks = broadcast_masks(attention_mask, encoder.config.sliding_window)
    return layout.spread(encode_rows(encoder, input_ids, layout, masks, rotary)).view(layout.n, layout.length, -1)


def padded_batch(agent, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of random token ids, right-padded with the tokenizer's pad id to the longest."""
    width = max(lengths)
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(1000, 2000, (len(lengths), width), generator=gen)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    ids[mask == 0] = agent.tok.pad_token_id
    return ids, mask


def test_real_tokens_are_the_mask_in_row_major_order():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    assert real_tokens(mask).tolist() == [0, 1, 3, 6, 7, 8]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("packed", [True, False])
def test_packed_encode_matches_the_stock_encoder_on_real_tokens(tiny_checkpoint, dtype, packed):
    agent = laya.load(tiny_checkpoint, device="cpu")
    encoder = agent.model.encoder
    assert packable(encoder)
    window = encoder.config.sliding_window
    lengths = [3, 5 * window, 2 * window + 1, 5 * window]  # past the local window; one row without padding
    ids, mask = padded_batch(agent, lengths)
    index = real_tokens(mask) if packed else None
    with torch.no_grad(), torch.autocast("cpu", dtype, enabled=dtype is not torch.float32):
        want = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        got = packed_encode(encoder, ids, mask, index)
    assert got.shape == want.shape and got.dtype == want.dtype
    # the same modules and the same SDPA on the same values: equal up to GEMM blocking over another row count
    tol = 1e-5 if dtype is torch.float32 else 0.02
    real = mask.bool()
    assert torch.allclose(got[real].float(), want[real].float(), rtol=0, atol=tol)
    if packed:
        assert not got[~real].any()  # padding positions are zeros, not stale values
    else:  # every token slot computed, as the stock forward does
        assert torch.allclose(got.float(), want.float(), rtol=0, atol=tol)


def test_rotary_tables_are_the_rotary_modules_own_in_fp32(tiny_checkpoint):
    encoder = laya.load(tiny_checkpoint, device="cpu").model.encoder
    tables = rotary_tables(encoder, 7, "cpu")
    kinds = list(dict.fromkeys(encoder.config.layer_types))
    assert list(tables) == kinds and len(kinds) == 2
    for kind, (cos, sin) in tables.items():
        want_cos, want_sin = encoder.rotary_emb(torch.zeros(1), torch.arange(7)[None], kind)
        assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (1, 7, encoder.config.hidden_size
                                                                         // encoder.config.num_attention_heads)
        assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


def test_given_rotary_tables_are_used_not_remade(tiny_checkpoint, monkeypatch):
    """Inside a compiled graph the tables would be recomputed per layer, head and row: given ones are read as is."""
    agent = laya.load(tiny_checkpoint, device="cpu")
    encoder = agent.model.encoder
    ids, mask = padded_batch(agent, [3, 9])
    tables = rotary_tables(encoder, 9, "cpu")
    with torch.no_grad():
        want = packed_encode(encoder, ids, mask)
        monkeypatch.setattr(encoder.rotary_emb, "forward", lambda *a: pytest.fail("rotary tables remade"))
        assert torch.equal(packed_encode(encoder, ids, mask, None, tables), want)
        doubled = {kind: (2 * cos, 2 * sin) for kind, (cos, sin) in tables.items()}
        assert not torch.equal(packed_encode(encoder, ids, mask, None, doubled), want)  # and they are read


def test_token_index_refuses_the_parallel_layout_and_an_encoder_mask(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu")
    ids, mask = padded_batch(agent, [4, 6])
    qtype = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="token_index and rotary run the sequential layout"):
        agent.model.encode(ids, mask, qtype, position_ids=torch.zeros_like(ids), option_ids=torch.zeros_like(ids),
                           token_index=real_tokens(mask))
    with pytest.raises(ValueError, match="token_index and rotary run the sequential layout"):
        agent.model.encode(ids, mask, qtype, encoder_mask=mask, token_index=real_tokens(mask))


@pytest.mark.parametrize("lengths", [[1], [1, 7], [9, 9], [3, 20, 16, 11]])
def test_a_decision_forward_with_token_index_matches_the_stock_one(tiny_checkpoint, lengths):
    """One-token rows, a one-row batch, a batch without padding, rows past the local window with slots padded to
    16: the answers' logits are the stock forward's (each row its own question type and marker positions)."""
    agent = laya.load(tiny_checkpoint, device="cpu")
    ids, mask = padded_batch(agent, lengths)
    if len(lengths) == 4:
        assert max(lengths) > 2 * agent.model.encoder.config.sliding_window
        ids = torch.cat((ids, torch.full((4, 12), agent.tok.pad_token_id)), 1)  # slots up to 32, as compile pads
        mask = torch.cat((mask, torch.zeros(4, 12, dtype=mask.dtype)), 1)
    n = len(lengths)
    marker_pos = torch.stack([torch.arange(2) * (length - 1) for length in lengths])  # first and last token
    marker_mask = torch.ones(n, 2, dtype=torch.bool)
    qtype = torch.arange(n) % 3
    with torch.no_grad():
        want = agent.model(ids, mask, marker_pos, marker_mask, qtype)
        got = agent.model(ids, mask, marker_pos, marker_mask, qtype, token_index=real_tokens(mask))
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=2e-6, atol=1e-5)  # fp32 GEMMs blocked over another row count


def test_head_layer_rows_is_the_head_layer_with_several_heads():
    """The tiny checkpoint's head has one head: a two-head layer pins the packed head's head layout."""
    from laya.model import build_head_stack, head_layer
    from laya.packed_encoder import TokenLayout, head_layer_rows

    torch.manual_seed(0)
    layer = build_head_stack(128, 1, dropout=0.0).layers[0].eval()
    assert layer.self_attn.num_heads == 2
    mask = torch.tensor([[1] * 5 + [0] * 3, [1] * 8, [1] * 2 + [0] * 6])
    x = torch.randn(3, 8, 128)
    index = real_tokens(mask)
    with torch.no_grad():
        want = head_layer(layer, x, ~mask.bool())[mask.bool()]
        got = head_layer_rows(layer, x.reshape(-1, 128)[index], TokenLayout(mask, index), mask.bool()[:, None, None])
    assert torch.allclose(got, want, rtol=0, atol=1e-5)


def test_token_index_goes_through_the_packed_forward(tiny_checkpoint, monkeypatch):
    import laya.packed_encoder

    agent = laya.load(tiny_checkpoint, device="cpu")
    ids, mask = padded_batch(agent, [2, 6])
    calls, packed = [], laya.packed_encoder.packed_model_states
    monkeypatch.setattr(laya.packed_encoder, "packed_model_states",
                        lambda *args: calls.append(args[4]) or packed(*args))
    with torch.no_grad():
        agent.model.encode(ids, mask, torch.zeros(2, dtype=torch.long), token_index=real_tokens(mask))
        agent.model.encode(ids, mask, torch.zeros(2, dtype=torch.long))
    assert len(calls) == 1 and calls[0].tolist() == [0, 1, 6, 7, 8, 9, 10, 11]


def test_packable_refuses_other_attention_and_training(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu")
    encoder = agent.model.encoder
    assert not packable(torch.nn.Linear(2, 2))
    ids, mask = padded_batch(agent, [3, 5])
    encoder.config._attn_implementation = "eager"  # packed attention is SDPA's: it would answer differently
    try:
        assert not packable(encoder)
        refusal = r"SDPA attention \(and its rotary convention\), not ModernBertModel \('eager'\)"
        with pytest.raises(ValueError, match=refusal):
            packed_encode(encoder, ids, mask, real_tokens(mask))
    finally:
        encoder.config._attn_implementation = "sdpa"
    assert packable(encoder)
    from laya import packed_encoder as module

    with pytest.MonkeyPatch.context() as patch:  # transformers' rotary changed under us: the stock forward
        patch.setattr(module, "matches_installed", lambda: False)
        assert not packable(encoder)
    encoder.train()  # attention dropout and checkpointing live in the stock forward only
    with pytest.raises(ValueError, match="eval mode only"):
        packed_encode(encoder, ids, mask, real_tokens(mask))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotate_is_transformers_rotary_bit_for_bit(tiny_checkpoint, dtype):
    """The one-pass rotation (a swap of halves with the sign in sin) gives apply_rotary_pos_emb's exact values."""
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    from laya.rotary import rotate_pointwise as rotate, turned_sin

    encoder = laya.load(tiny_checkpoint, device="cpu").model.encoder
    gen = torch.Generator().manual_seed(5)
    head_dim = encoder.config.hidden_size // encoder.config.num_attention_heads
    q, k = (torch.randn(2, 3, 11, head_dim, generator=gen).to(dtype) for _ in range(2))
    for kind, (cos, sin) in rotary_tables(encoder, 11, "cpu").items():
        want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
        got_q, got_k = rotate(q, cos, turned_sin(sin)), rotate(k, cos, turned_sin(sin))
        assert got_q.dtype == dtype and torch.equal(got_q, want_q) and torch.equal(got_k, want_k), kind
