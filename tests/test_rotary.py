"""laya.rotary: ModernBERT's rotary embedding bit for bit, swapped in only around the eager CPU bf16 forward."""

from __future__ import annotations

import threading

import pytest
import torch
from transformers.models.modernbert import modeling_modernbert as hf

import laya
from laya import rotary
from laya.questions import check_questions
from laya.sequence import collate

QUESTIONS = {"intent": {"type": "choice", "instructions": "What does the customer want?",
                        "criteria": ["refund", "bug", "other"]},
             "urgent": {"type": "noul", "instructions": "Is it urgent?"}}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
@pytest.mark.parametrize("rows,length,heads,dim", [(1, 1, 1, 2), (3, 92, 12, 64), (2, 17, 4, 32)])
def test_bit_identical_to_transformers(dtype, rows, length, heads, dim):
    gen = torch.Generator().manual_seed(rows * 1000 + length)
    qkv = (torch.randn(rows, length, 3, heads, dim, generator=gen) * 20).to(dtype)  # the packed projection's views
    q, k = (t.transpose(1, 2) for t in qkv.unbind(dim=-3)[:2])
    cos, sin = torch.randn(2, 1, length, dim, generator=gen).unbind(0)
    cos[..., 0, 0] = float("inf")  # non-finite values travel the same way too
    want = hf.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
    got = rotary.apply_rotary(q, k, cos, sin, unsqueeze_dim=1)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype == dtype and g.shape == w.shape
        assert torch.equal(torch.nan_to_num(w.float(), nan=7.0), torch.nan_to_num(g.float(), nan=7.0))
        assert torch.equal(w.isnan(), g.isnan())


def test_scope_swaps_and_restores_even_on_error_and_nested():
    original = hf.apply_rotary_pos_emb
    assert rotary.matches_installed()
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is rotary.apply_rotary
        with rotary.scope():
            assert hf.apply_rotary_pos_emb is rotary.apply_rotary
        assert hf.apply_rotary_pos_emb is rotary.apply_rotary  # the outer forward is still inside
    assert hf.apply_rotary_pos_emb is original
    with pytest.raises(RuntimeError, match="boom"), rotary.scope():
        raise RuntimeError("boom")
    assert hf.apply_rotary_pos_emb is original


def test_overlapping_scopes_in_threads_restore_once():
    original, inside, leave = hf.apply_rotary_pos_emb, threading.Barrier(3), threading.Event()

    def forward():
        with rotary.scope():
            inside.wait()
            leave.wait()

    threads = [threading.Thread(target=forward) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert hf.apply_rotary_pos_emb is rotary.apply_rotary
    leave.set()
    for t in threads:
        t.join()
    assert hf.apply_rotary_pos_emb is original


def test_no_swap_when_the_installed_function_differs(monkeypatch):
    monkeypatch.setattr(rotary, "_checked", None)
    monkeypatch.setattr(hf, "apply_rotary_pos_emb", lambda q, k, cos, sin, unsqueeze_dim=1: (q + 1, k))
    changed = hf.apply_rotary_pos_emb
    assert not rotary.matches_installed()
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is changed
    monkeypatch.setattr(rotary, "_checked", None)  # (re-checked against the real function by later tests)


def test_cpu_bf16_forward_uses_it_with_the_same_logits(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    agent = laya.load(tiny_checkpoint, device="cpu")
    monkeypatch.delenv("LAYA_CPU_AMP")
    assert agent.dtype is torch.bfloat16
    qs = check_questions(QUESTIONS)
    batch = collate([r for s in ("refund me please", "the app crashes on login, fix it")
                     for r in agent._rows(s, False, qs, 512, 192)[1]], 0)
    calls = []
    real = rotary.apply_rotary
    monkeypatch.setattr(rotary, "apply_rotary", lambda *a, **k: calls.append(1) or real(*a, **k))
    logits, act = agent.forward_backend.run(batch)
    layers = len(agent.model.encoder.layers)
    assert len(calls) == layers and hf.apply_rotary_pos_emb is not rotary.apply_rotary
    model = agent.model
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # transformers' own rotary, per-call casts
        want_logits, want_act = type(model).forward(model, *batch.tensors())
    assert torch.equal(logits, want_logits) and torch.equal(act, want_act)
    agent.predict("refund me please", QUESTIONS)
    assert len(calls) > layers  # the public path goes through it too
    monkeypatch.setenv("LAYA_CPU_AMP", "off")
    fp32 = laya.load(tiny_checkpoint, device="cpu")
    before = len(calls)
    fp32.predict("refund me please", QUESTIONS)
    assert len(calls) == before  # fp32 answers run transformers' function, as published
