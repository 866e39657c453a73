"""The eager Agent on CUDA (skipped without a GPU): autocast policy, batching, parity with the CPU."""

import numpy as np
import pytest
import torch

import laya

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?"},
}
STATES = ["I want my money back.", {"message": "The app crashes on login"}, ["hi", "cancel please"], "ok " * 300]


def logits_of(agent, states):
    from laya.questions import check_questions
    from laya.sequence import collate
    qs = check_questions(QUESTIONS)
    rows = [r for s in states for r in agent._rows(str(s), False, qs, 512, 192)[1]]
    return np.asarray(agent._infer(collate(rows, 0))[0])  # a host tensor or array


def test_cuda_agent_uses_bf16_autocast_and_matches_cpu(tiny_checkpoint, monkeypatch):
    monkeypatch.delenv("LAYA_CUDA_AMP", raising=False)
    gpu = laya.load(tiny_checkpoint, device="cuda")
    cpu = laya.load(tiny_checkpoint, device="cpu")
    major, _ = torch.cuda.get_device_capability()
    assert gpu.amp_enabled and gpu.dtype == (torch.bfloat16 if major >= 8 else torch.float16)
    assert next(gpu.model.parameters()).dtype == torch.float32 and repr(gpu).endswith("device=cuda)")
    a, b = logits_of(cpu, STATES), logits_of(gpu, STATES)
    live = a > -1e3
    # bf16 noise amplified by this std-0.3 random model (CPU bf16 autocast measured ~13% of max logit)
    assert np.abs(a - b)[live].max() < 0.25 * np.abs(a[live]).max()


def test_cuda_fp16_env_and_multi_chunk_batches(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CUDA_AMP", "fp16")
    gpu = laya.load(tiny_checkpoint, device="cuda:0")
    assert gpu.dtype == torch.float16
    states = STATES * 5
    whole = gpu.predict_batch(states, QUESTIONS)
    chunked = gpu.predict_batch(states, QUESTIONS, batch_size=3, sort_by_length=True)
    for x, y in zip(whole, chunked):
        for qid in QUESTIONS:
            assert x["answers"][qid]["confidence"] == pytest.approx(y["answers"][qid]["confidence"], abs=2e-2)
    assert gpu.warmup() > 0


def test_cuda_agent_reads_weights_onto_the_gpu_with_the_cpu_agents_exact_values(tiny_checkpoint, monkeypatch):
    from laya import agent as agent_module

    reads = []
    real = agent_module.load_weights
    monkeypatch.setattr(agent_module, "load_weights",
                        lambda *a, **kw: reads.append((a[2:], kw)) or real(*a, **kw))
    gpu = laya.load(tiny_checkpoint, device="cuda")
    # one read, onto the GPU, and no CPU fallback after it
    assert reads == [((f"cuda:{torch.cuda.current_device()}",), {"assign": True})]
    cpu = laya.load(tiny_checkpoint, device="cpu")
    g, c = gpu.model.state_dict(), cpu.model.state_dict()
    assert g.keys() == c.keys()
    for name, t in g.items():
        assert t.is_cuda and t.dtype == c[name].dtype, name
        assert torch.equal(t.cpu(), c[name]), name
    # buffers the build computes (e.g. rotary inverse frequencies) come from the CPU, bit for bit, as before
    for (name, b), (_, b_cpu) in zip(gpu.model.named_buffers(), cpu.model.named_buffers()):
        assert b.is_cuda and torch.equal(b.cpu(), b_cpu), name
