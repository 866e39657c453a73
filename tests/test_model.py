"""DecisionModel numerics against independent float64 references, on fresh random inputs."""

import copy
import math

import pytest
import torch
from torch import nn

from laya.model import build_model, confidence_features, head_heads, head_layer, init_weights

TINY_ENCODER = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                "global_attn_every_n_layers": 2, "local_attention": 16, "vocab_size": 300, "pad_token_id": 0,
                "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import ModernBertConfig

    folder = tmp_path_factory.mktemp("enc")
    ModernBertConfig(**TINY_ENCODER).save_pretrained(folder)
    m = build_model({"encoder": "x", "head_layers": 2, "act_costs": {"escalate": 0.5}}, str(folder), pretrained=False)
    init_weights(m, seed=11, std=0.2)
    return m.eval()


def test_head_counts():
    assert (head_heads(1024), head_heads(768), head_heads(64), head_heads(32)) == (16, 12, 1, 1)


def test_head_layer_matches_a_float64_reference():
    torch.manual_seed(1234)
    d, heads = 128, 2
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
    from laya.model import HeadSelfAttention
    mine = HeadSelfAttention(d, heads, batch_first=True)
    mine.load_state_dict(layer.self_attn.state_dict())
    layer.self_attn = mine
    layer = layer.double().eval()
    x = torch.randn(3, 9, d, dtype=torch.float64)
    lengths = [9, 5, 1]
    pad = torch.arange(9)[None, :] >= torch.tensor(lengths)[:, None]
    got = head_layer(layer, x, pad)

    def reference(xb, n):  # written from the definition: x += SA(LN1 x); x += FF(LN2 x), keys < n only
        y = nn.functional.layer_norm(xb, (d,), layer.norm1.weight, layer.norm1.bias, 1e-5)
        q, k, v = (y @ layer.self_attn.in_proj_weight.T + layer.self_attn.in_proj_bias).chunk(3, -1)
        split = lambda t: t.reshape(-1, heads, d // heads).transpose(0, 1)  # noqa: E731
        s = split(q) @ split(k).transpose(1, 2) / math.sqrt(d // heads)
        s[:, :, n:] = -math.inf
        o = (torch.softmax(s, -1) @ split(v)).transpose(0, 1).reshape(-1, d)
        xb = xb + o @ layer.self_attn.out_proj.weight.T + layer.self_attn.out_proj.bias
        y = nn.functional.layer_norm(xb, (d,), layer.norm2.weight, layer.norm2.bias, 1e-5)
        return xb + torch.relu(y @ layer.linear1.weight.T + layer.linear1.bias) @ layer.linear2.weight.T + layer.linear2.bias

    for b, n in enumerate(lengths):
        torch.testing.assert_close(got[b, :n], reference(x[b], n)[:n], atol=1e-10, rtol=1e-10)


def test_confidence_features_definition():
    torch.manual_seed(1234)
    logits = torch.randn(4, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)
    logits = logits.masked_fill(~mask, -1e4)
    f = confidence_features(logits, mask).double()
    for i in range(4):
        p = torch.softmax(logits[i].double(), -1)
        top = torch.sort(p, descending=True).values
        k = max(2, int(mask[i].sum()))
        ent = -(p * torch.log(p.clamp(min=1e-9))).sum() / math.log(k)
        torch.testing.assert_close(f[i], torch.stack([top[0], top[0] - top[1], ent, torch.tensor(k / 255.0, dtype=torch.float64)]),
                                   atol=1e-6, rtol=1e-6)
    single = confidence_features(torch.tensor([[2.0], [0.5]]), torch.ones(2, 1, dtype=torch.bool))
    assert single[:, 0].tolist() == [1.0, 1.0] and single[:, 1].tolist() == [1.0, 1.0]  # top2 = 0
    assert single[0, 3].item() == pytest.approx(2 / 255)


def test_forward_masks_and_matches_float64(model):
    torch.manual_seed(1234)
    ids = torch.randint(5, 300, (3, 20))
    att = torch.ones(3, 20, dtype=torch.long)
    att[1, 12:] = 0
    att[2, 7:] = 0
    pos = torch.tensor([[1, 4, 6], [2, 3, 0], [1, 5, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 0]], dtype=torch.bool)
    qtype = torch.tensor([0, 1, 2])
    with torch.no_grad():
        logits, act = model(ids, att, pos, mask, qtype)
        ref_logits, ref_act = model.double()(ids, att, pos, mask, qtype)
        model.float()
    assert logits.dtype == torch.float32 and logits.shape == (3, 3) and act.shape == (3, 2)
    assert logits[1, 2].item() == logits[2, 2].item() == -1e4
    # logits leave the model as fp32 by design (fp32 upcast before masking), also from a float64 model
    torch.testing.assert_close(logits.double(), ref_logits.double(), atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(act.double(), ref_act.double(), atol=2e-4, rtol=1e-4)


def test_act_head_input_follows_explicit_16bit_weights(model):
    """An explicit bf16 copy (as exports and AOTInductor use) runs without autocast: no dtype mismatch."""
    torch.manual_seed(1234)
    ids = torch.randint(5, 300, (2, 10))
    att = torch.ones(2, 10, dtype=torch.long)
    pos = torch.tensor([[1, 2], [3, 4]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    half = copy.deepcopy(model).to(torch.bfloat16)
    with torch.no_grad():
        logits, act = half(ids, att, pos, mask, torch.zeros(2, dtype=torch.long))
        ref, _ = model(ids, att, pos, mask, torch.zeros(2, dtype=torch.long))
    assert logits.dtype == torch.float32 and act.dtype == torch.bfloat16
    assert torch.isfinite(act).all()
    # bf16 end to end on a std-0.2 random model: a coarse bound that still catches a wrong layer
    assert (logits - ref).abs().max() < 0.25 * ref.abs().max()
