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
@pytest.mark.parametrize("table_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,length,heads,dim,table_rows", [(1, 1, 1, 2, 1), (3, 92, 12, 64, 1), (2, 17, 4, 32, 2)])
def test_bit_identical_to_transformers(dtype, table_dtype, rows, length, heads, dim, table_rows):
    gen = torch.Generator().manual_seed(rows * 1000 + length)
    qkv = (torch.randn(rows, length, 3, heads, dim, generator=gen) * 20).to(dtype)  # the packed projection's views
    q, k = (t.transpose(1, 2) for t in qkv.unbind(dim=-3)[:2])
    cos, sin = torch.randn(2, table_rows, length, dim, generator=gen).to(table_dtype).unbind(0)
    cos[..., 0, 0] = float("inf")  # non-finite values travel the same way too (a NaN's sign bit may differ)
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
            inside.wait(timeout=30)
            leave.wait(timeout=30)

    threads = [threading.Thread(target=forward, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        inside.wait(timeout=30)
        assert hf.apply_rotary_pos_emb is rotary.apply_rotary
    finally:
        leave.set()
        for t in threads:
            t.join(timeout=30)
    assert hf.apply_rotary_pos_emb is original


def test_no_swap_when_the_installed_function_differs(monkeypatch):
    monkeypatch.setattr(rotary, "_checked", None)
    monkeypatch.setattr(hf, "apply_rotary_pos_emb", lambda q, k, cos, sin, unsqueeze_dim=1: (q + 1, k))
    changed = hf.apply_rotary_pos_emb
    assert not rotary.matches_installed()
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is changed


def test_patches_by_others_are_left_alone(monkeypatch):
    original = hf.apply_rotary_pos_emb
    assert rotary.matches_installed()

    def theirs(q, k, cos, sin, unsqueeze_dim=1):  # the same numbers, another object: a patch made after the check
        return original(q, k, cos, sin, unsqueeze_dim)

    def shifted(q, k, cos, sin, unsqueeze_dim=1):  # other numbers: never stood in for
        return original(q + 1, k, cos, sin, unsqueeze_dim)

    monkeypatch.setattr(hf, "apply_rotary_pos_emb", shifted)
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is shifted  # a new object is checked again before any swap
    monkeypatch.setattr(hf, "apply_rotary_pos_emb", theirs)
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is rotary.apply_rotary
    assert hf.apply_rotary_pos_emb is theirs  # what was there goes back
    monkeypatch.setattr(hf, "apply_rotary_pos_emb", original)
    with rotary.scope():
        assert hf.apply_rotary_pos_emb is rotary.apply_rotary
        hf.apply_rotary_pos_emb = theirs  # patched by someone while a forward is inside
    assert hf.apply_rotary_pos_emb is theirs  # and their patch is not undone on the way out


def test_cpu_bf16_forward_uses_it_with_the_same_logits(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(rotary, "_pair_heads", False)  # (the paired layout sums q.k in another order: below)
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


def test_a_failing_scope_leaves_no_torch_function_mode_behind(tiny_checkpoint, monkeypatch):
    import contextlib

    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    agent = laya.load(tiny_checkpoint, device="cpu")
    batch = collate(agent._rows("refund me", False, check_questions(QUESTIONS), 512, 192)[1], 0)

    @contextlib.contextmanager
    def broken():
        raise RuntimeError("no rotary here")
        yield

    monkeypatch.setattr(rotary, "scope", broken)
    depth = torch._C._len_torch_function_stack()
    logits, _ = agent.forward_backend.run(batch)  # the CPU autocast failure reruns in fp32
    assert torch.isfinite(logits).all() and torch._C._len_torch_function_stack() == depth


def test_other_encoders_leave_transformers_alone(monkeypatch):
    import contextlib
    import os

    entered = []

    @contextlib.contextmanager
    def counting():
        entered.append(1)
        yield

    monkeypatch.setattr(rotary, "scope", counting)
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    mini = laya.load(os.path.join(os.path.dirname(laya.__file__), "laya_mini"), device="cpu")  # a BERT encoder
    assert mini.dtype is torch.bfloat16
    mini.predict("refund me please", QUESTIONS)
    assert entered == []


def _bf16_agent_and_batch(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    agent = laya.load(tiny_checkpoint, device="cpu")
    monkeypatch.delenv("LAYA_CPU_AMP")
    batch = collate([r for s in ("refund me please", "the app crashes on login, fix it")
                     for r in agent._rows(s, False, check_questions(QUESTIONS), 512, 192)[1]], 0)
    return agent, batch


def test_paired_heads_forward_rotates_pairs_and_keeps_the_answers(tiny_checkpoint, monkeypatch):
    agent, batch = _bf16_agent_and_batch(tiny_checkpoint, monkeypatch)
    calls = []
    real = rotary._rotate_paired
    monkeypatch.setattr(rotary, "_rotate_paired", lambda *a: calls.append(1) or real(*a))
    paired, paired_act = agent.forward_backend.run(batch)
    assert len(calls) == 2 * len(agent.model.encoder.layers)  # q and k of every layer, in rotation pairs
    before = agent.predict_batch(["refund me please", "the app crashes on login, fix it"], QUESTIONS)
    monkeypatch.setattr(rotary, "_pair_heads", False)
    halves, halves_act = agent.forward_backend.run(batch)
    assert len(calls) > 2 * len(agent.model.encoder.layers)  # predict_batch went through it too, not the last run
    calls.clear()
    # the same rotation; only q.k's summation order differs (bf16 attention inputs, fp32 sums)
    torch.testing.assert_close(paired, halves, rtol=2**-6, atol=0.06)
    torch.testing.assert_close(paired_act, halves_act, rtol=2**-6, atol=0.06)
    assert not calls
    after = agent.predict_batch(["refund me please", "the app crashes on login, fix it"], QUESTIONS)
    probs = [(a["answers"]["intent"]["probabilities"][o], b["answers"]["intent"]["probabilities"][o])
             for a, b in zip(before, after) for o in ("refund", "bug", "other")]
    probs += [(a["answers"]["urgent"]["noul"], b["answers"]["urgent"]["noul"]) for a, b in zip(before, after)]
    assert max(abs(x - y) for x, y in probs) <= 0.01  # (bf16's own error vs fp32 is ~0.01-0.04)
    assert [a["answers"]["intent"]["choice"] for a in before] == [a["answers"]["intent"]["choice"] for a in after]
    assert agent._amp_failures == 0  # (no fp32 retry hid a failing bf16 forward)


def test_weights_that_cannot_reorder_rows_get_halves_and_transformers_bits(tiny_checkpoint, monkeypatch):
    import contextlib

    agent, batch = _bf16_agent_and_batch(tiny_checkpoint, monkeypatch)

    class PerCallCast:  # (parity_cpu.py's stand-in: autocast casts every weight per call)
        def scope(self, device, dtype):
            return contextlib.nullcontext()

    agent.bf16_weights = PerCallCast()
    monkeypatch.setattr(rotary, "_rotate_paired", lambda *a: pytest.fail("paired rotation without paired rows"))
    logits, act = agent.forward_backend.run(batch)
    model = agent.model
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want_logits, want_act = type(model).forward(model, *batch.tensors())
    assert torch.equal(logits, want_logits) and torch.equal(act, want_act)


def test_a_wqkv_that_is_not_a_plain_linear_is_not_paired(tiny_checkpoint, monkeypatch):
    agent, _ = _bf16_agent_and_batch(tiny_checkpoint, monkeypatch)
    assert len(agent.forward_backend._wqkv_head_dims()) == len(agent.model.encoder.layers)  # (no bias here)

    class Hooked(torch.nn.Linear):
        pass

    attention = next(m for m in agent.model.modules() if type(m).__name__ == "ModernBertAttention")
    plain = attention.Wqkv
    attention.Wqkv = Hooked(plain.in_features, plain.out_features, bias=False)
    dims = agent.forward_backend._wqkv_head_dims()
    assert len(dims) == len(agent.model.encoder.layers) - 1 and id(attention.Wqkv.weight) not in dims


def test_only_views_of_a_marked_product_rotate_as_pairs_and_only_in_its_thread():
    gen = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 5, 3, 2, 8, generator=gen).to(torch.bfloat16)
    cos, sin = torch.randn(2, 2, 5, 4, generator=gen).unbind(0)
    cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    q, k = (t.transpose(1, 2) for t in qkv.unbind(dim=-3)[:2])
    want = hf.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
    perm = torch.arange(8).view(2, 4).t().reshape(-1)  # halves -> side-by-side pairs
    product = qkv[..., perm].contiguous()  # what a paired Wqkv gives
    rotary.mark_paired(product)
    pq, pk = (t.transpose(1, 2) for t in product.unbind(dim=-3)[:2])
    seen = []
    thread = threading.Thread(target=lambda: seen.append(rotary.apply_rotary(pq, pk, cos, sin)))
    thread.start()
    thread.join()
    paired = rotary.apply_rotary(pq, pk, cos, sin)
    assert all(torch.equal(a, b[..., perm]) for a, b in zip(paired, want))  # pairs, the same values
    assert all(torch.equal(a, b) for a, b in zip(rotary.apply_rotary(q, k, cos, sin), want))  # unmarked: halves
    assert not any(torch.equal(a, b[..., perm]) for a, b in zip(seen[0], want))  # another thread: not its mark
    with pytest.raises(RuntimeError, match="equal halves"):
        rotary.apply_rotary(pq, pk, torch.randn_like(cos), sin)  # a table whose halves differ: refused
    with pytest.raises(RuntimeError, match="both from one paired Wqkv"):
        rotary.apply_rotary(pq, k, cos, sin)


def test_hooked_or_reparametrised_wqkv_keeps_transformers_layout(tiny_checkpoint, monkeypatch):
    agent, batch = _bf16_agent_and_batch(tiny_checkpoint, monkeypatch)
    attention = next(m for m in agent.model.modules() if type(m).__name__ == "ModernBertAttention")
    paired_before = len(agent.forward_backend._wqkv_head_dims())
    calls = []
    real = rotary._rotate_paired
    monkeypatch.setattr(rotary, "_rotate_paired", lambda *a: calls.append(1) or real(*a))
    reference, _ = agent.forward_backend.run(batch)
    layers = len(agent.model.encoder.layers)
    assert len(calls) == 2 * layers
    seen = []
    handle = attention.Wqkv.register_forward_hook(lambda mod, inp, out: seen.append(out.clone()))
    try:
        assert len(agent.forward_backend._wqkv_head_dims()) == paired_before - 1  # the hooked one is left out
        calls.clear()
        hooked, _ = agent.forward_backend.run(batch)
    finally:
        handle.remove()
    assert len(calls) == 2 * (layers - 1)
    torch.testing.assert_close(hooked, reference, rtol=2**-6, atol=0.06)
    # a weight computed per call (not the listed parameter) is not reordered, so its product is not marked
    monkeypatch.setattr(agent.forward_backend, "_wqkv_head_dims", lambda: {})
    calls.clear()
    plain, _ = agent.forward_backend.run(batch)
    assert not calls
    torch.testing.assert_close(plain, reference, rtol=2**-6, atol=0.06)


def test_pairs_side_by_side_reorders_q_and_k_rows_only():
    rows = torch.arange(3 * 2 * 8).float()  # 2 heads of 8
    out = rotary.pairs_side_by_side(rows, 8)
    assert out[:8].tolist() == [0, 4, 1, 5, 2, 6, 3, 7] and out[16:24].tolist() == [16, 20, 17, 21, 18, 22, 19, 23]
    assert torch.equal(out[32:], rows[32:])  # v rows as they were
    weight = torch.randn(48, 5)
    assert torch.equal(rotary.pairs_side_by_side(weight, 8)[:, 2], rotary.pairs_side_by_side(weight[:, 2], 8))


def test_a_forward_nested_inside_a_paired_one_keeps_its_own_layout(tiny_checkpoint, monkeypatch):
    agent, batch = _bf16_agent_and_batch(tiny_checkpoint, monkeypatch)
    monkeypatch.setenv("LAYA_CPU_AMP", "off")
    fp32 = laya.load(tiny_checkpoint, device="cpu")
    outer_alone, _ = agent.forward_backend.run(batch)

    def nested_run(pair: bool):
        # between layer 0's paired Wqkv product and the next layer's: another ModernBERT and the same agent again
        monkeypatch.setattr(rotary, "_pair_heads", pair)
        nested: list = []

        def hook(*_):
            if not nested:  # (once: the nested run of the same agent passes this hook too)
                nested.append(None)
                nested[0] = (fp32.forward_backend.run(batch)[0], agent.forward_backend.run(batch)[0])

        handle = agent.model.encoder.layers[0].register_forward_hook(hook)
        try:
            outer, _ = agent.forward_backend.run(batch)
        finally:
            handle.remove()
        return outer, nested[0]

    outer, (other, same) = nested_run(True)
    _, (other_unpaired, _) = nested_run(False)
    assert torch.equal(outer, outer_alone) and torch.equal(same, outer_alone)
    assert torch.equal(other, other_unpaired)  # the other model's products are not marked: its own layout
