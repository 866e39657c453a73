"""CPU bf16 autocast with Linear weights cast once (laya.cpu_bf16): the same numbers as autocast's
per-call cast, fp32 paths on the fp32 weights, and no stale copy after a weight changes."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

import laya
from laya.cpu_bf16 import Bf16Weights
from laya.questions import check_questions
from laya.sequence import collate

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
STATES = ["My order never arrived and nobody answers my emails.", "Thanks, all good!",
          "The app crashes every time I upload a photo, please fix it today or I cancel."]


def bf16_agent(path: str, monkeypatch) -> laya.Agent:
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    agent = laya.load(path, device="cpu")
    monkeypatch.delenv("LAYA_CPU_AMP")
    assert agent.dtype is torch.bfloat16 and agent.amp_enabled
    return agent


def batch_of(agent: laya.Agent):
    qs = check_questions(QUESTIONS)
    return collate([r for s in STATES for r in agent._rows(s, False, qs, 512, 192)[1]], 0)


def per_call_cast(agent: laya.Agent, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward as it ran before the cache: the class forward under autocast, which casts every weight."""
    model = agent.model
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return type(model).forward(model, *batch.tensors())


def cached(agent: laya.Agent, batch) -> tuple[torch.Tensor, torch.Tensor]:
    return agent.forward_backend.run(batch)


def linear_params(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Every fp32 parameter that reaches F.linear in the forward: nn.Linear weights/biases, head in-projections."""
    out = []
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            out += [p for p in (m.weight, m.bias) if p is not None]
        elif isinstance(m, torch.nn.MultiheadAttention):
            out += [p for p in (m.in_proj_weight, m.in_proj_bias) if p is not None]
    return out


def assert_bits_equal(a: tuple, b: tuple) -> None:
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and torch.equal(x, y), float((x.float() - y.float()).abs().max())


@pytest.fixture
def bundled(monkeypatch):
    from laya.registry import LAYA_MINI

    return bf16_agent(LAYA_MINI, monkeypatch)


@pytest.mark.parametrize("which", ["tiny", "bundled"])
def test_cached_weights_give_the_per_call_cast_bits(which, tiny_checkpoint, monkeypatch, request):
    agent = bf16_agent(tiny_checkpoint, monkeypatch) if which == "tiny" else request.getfixturevalue("bundled")
    batch = batch_of(agent)
    reference = per_call_cast(agent, batch)
    assert len(agent.bf16_weights) == 0
    assert_bits_equal(cached(agent, batch), reference)
    params = linear_params(agent.model)
    assert len(agent.bf16_weights) == len(params)  # every Linear (encoder and head) took its copy
    assert agent.bf16_weights.nbytes == sum(p.numel() * 2 for p in params)
    copies = [agent.bf16_weights.copy_of(p) for p in params]
    assert_bits_equal(cached(agent, batch), reference)
    assert all(agent.bf16_weights.copy_of(p) is c for p, c in zip(params, copies))  # made once, not per call
    fp32 = laya.load(agent.model_dir, device="cpu")._infer(batch)[0]
    assert not torch.equal(agent._infer(batch)[0], fp32)  # bf16 really ran


def test_the_forward_reads_the_copies(tiny_checkpoint, monkeypatch):
    agent = bf16_agent(tiny_checkpoint, monkeypatch)
    batch = batch_of(agent)
    before = cached(agent, batch)
    scorer = agent.model.scorer[1].weight
    agent.bf16_weights.copy_of(scorer).zero_()  # only the copy: the fp32 weight keeps its values
    assert not torch.equal(cached(agent, batch)[0], before[0])
    assert torch.equal(per_call_cast(agent, batch)[0], before[0])


@pytest.mark.parametrize("change", ["in_place", "load_state_dict", "new_storage", "new_parameter"])
def test_a_changed_weight_is_never_served_stale(change, tiny_checkpoint, monkeypatch):
    agent = bf16_agent(tiny_checkpoint, monkeypatch)
    batch = batch_of(agent)
    cached(agent, batch)
    layer = agent.model.encoder.layers[0].attn.Wqkv
    changed = layer.weight.detach() * 1.5
    if change == "in_place":
        with torch.no_grad():
            layer.weight.copy_(changed)
    elif change == "load_state_dict":
        state = agent.model.state_dict()
        state["encoder.layers.0.attn.Wqkv.weight"] = changed
        agent.model.load_state_dict(state)
    elif change == "new_storage":
        layer.weight.data = changed.clone()
    else:
        layer.weight = torch.nn.Parameter(changed.clone())
    assert_bits_equal(cached(agent, batch), per_call_cast(agent, batch))


def test_fp32_paths_use_the_fp32_weights(tiny_checkpoint, agent, monkeypatch):
    from laya.backends.eager import EagerBackend

    batch = batch_of(agent)
    with torch.no_grad():
        fp32 = type(agent.model).forward(agent.model, *batch.tensors())
    assert_bits_equal(agent.forward_backend.run(batch), fp32)  # the fp32 default: no autocast, no copies
    assert len(agent.bf16_weights) == 0

    bf16 = bf16_agent(tiny_checkpoint, monkeypatch)
    cached(bf16, batch)
    assert len(bf16.bf16_weights) > 0
    call = EagerBackend.call

    def fails_under_autocast(self, tensors):
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("no bf16 kernel here")
        return call(self, tensors)

    monkeypatch.setattr(EagerBackend, "call", fails_under_autocast)
    for _ in range(3):  # each retried in fp32; the third turns autocast off and frees the copies
        assert_bits_equal(bf16.forward_backend.run(batch), fp32)
    assert not bf16.amp_enabled and len(bf16.bf16_weights) == 0


def test_encode_texts_takes_the_copies_with_the_same_bits(tiny_checkpoint, monkeypatch):
    agent = bf16_agent(tiny_checkpoint, monkeypatch)

    class PerCallCast:  # today's path: autocast alone
        def scope(self, device, dtype):
            return contextlib.nullcontext()

    cache = agent.bf16_weights
    with_cache = agent.encode_texts(STATES)
    assert len(cache) > 0
    monkeypatch.setattr(agent, "bf16_weights", PerCallCast())
    assert (agent.encode_texts(STATES) == with_cache).all()


def test_the_model_users_see_is_unchanged(tiny_checkpoint, monkeypatch):
    agent = bf16_agent(tiny_checkpoint, monkeypatch)
    keys = list(agent.model.state_dict())
    kinds = [type(m) for m in agent.model.modules()]
    agent.predict(STATES[0], QUESTIONS)
    assert list(agent.model.state_dict()) == keys and [type(m) for m in agent.model.modules()] == kinds
    assert all(v.dtype is torch.float32 for v in agent.model.state_dict().values() if v.is_floating_point())


def test_scope_applies_to_cpu_bf16_without_grad_only():
    weights = Bf16Weights()
    w = torch.nn.Parameter(torch.randn(4, 3))
    x = torch.randn(2, 3)
    assert isinstance(weights.scope(torch.device("cpu"), torch.float16), contextlib.nullcontext)
    with torch.autocast("cpu", dtype=torch.bfloat16), weights.scope(torch.device("cpu"), torch.bfloat16):
        y = F.linear(x, w)  # grad enabled: autocast's own cast, so the gradient reaches the fp32 weight
        assert len(weights) == 0
        y.float().sum().backward()
        with torch.no_grad():
            F.linear(x, weight=w)
    assert w.grad is not None and len(weights) == 1
    del w, y  # (y's graph holds w)
    assert len(weights) == 0  # the copy goes with its parameter


def test_paired_copies_reorder_wqkv_rows_once_and_apart_from_the_plain_ones():
    from laya.rotary import pairs_side_by_side

    weights = Bf16Weights()
    wqkv = torch.nn.Parameter(torch.randn(48, 5))
    paired = weights.copy_of(wqkv, 8)
    assert torch.equal(paired, pairs_side_by_side(wqkv.detach().to(torch.bfloat16), 8))
    assert weights.copy_of(wqkv, 8) is paired  # made once
    plain = weights.copy_of(wqkv)
    assert torch.equal(plain, wqkv.detach().to(torch.bfloat16)) and len(weights) == 2
    assert weights.nbytes == 2 * wqkv.numel() * 2
    with torch.no_grad():
        wqkv.mul_(2)  # a write in place: both copies are made again
    assert torch.equal(weights.copy_of(wqkv, 8), pairs_side_by_side(wqkv.detach().to(torch.bfloat16), 8))


def test_paired_rows_are_reordered_even_where_no_copy_is_used():
    # with grad on (no cached copy), a paired Wqkv still reaches F.linear in pair order: the rotation expects it
    from laya.rotary import pairs_side_by_side

    weights = Bf16Weights()
    lin = torch.nn.Linear(5, 48)
    x = torch.randn(3, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with weights.scope(torch.device("cpu"), torch.bfloat16, {id(lin.weight): 8, id(lin.bias): 8}):
            got = lin(x)
        want = F.linear(x, pairs_side_by_side(lin.weight, 8), pairs_side_by_side(lin.bias, 8))
    assert torch.equal(got, want)
    assert len(weights) == 0  # grad was on: no copy
