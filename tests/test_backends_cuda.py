"""Backends on CUDA (skipped without a GPU): compile backend parity, limits, auto, OOM round trip."""

import warnings

import numpy as np
import pytest
import torch

import laya

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

QUESTIONS = {"intent": {"type": "choice", "instructions": "Which?", "criteria": ["refund", "bug", "other"]},
             "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
             "urgent": {"type": "noul", "instructions": "Urgent?"}}
STATES = ["refund my order", {"message": "the app crashes on login"}, ["hi", "cancel please"], "ok " * 150]


def logits(agent, states):
    from laya.questions import check_questions
    from laya.sequence import collate
    rows = [r for s in states for r in agent._rows(str(s), False, check_questions(QUESTIONS), 256, 96)[1]]
    return np.asarray(agent._infer(collate(rows, 0))[0])  # a host tensor or array


def close(agent, reference):
    """bf16 on both sides but different fusions; this std-0.3 random model amplifies bf16 rounding to
    ~13% of the largest logit (measured on CPU bf16), so the bound is relative to that scale."""
    a, b = logits(agent, STATES), logits(reference, STATES)
    live = b > -1e3
    assert np.abs(a - b)[live].max() < 0.25 * np.abs(b[live]).max()


@pytest.fixture(scope="module")
def eager(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cuda")


def test_compile_backend_matches_eager_and_enforces_its_max_len(tiny_checkpoint, eager, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYA_INDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    from torch._dynamo.utils import counters
    graphs_before = counters["stats"]["unique_graphs"]
    agent = laya.load(tiny_checkpoint, device="cuda", backend="compile")
    backend = agent.backend_object
    assert agent.backend == "compile" and backend.warmup_s > 0 and backend.cache_dir == str(tmp_path / "inductor")
    assert counters["stats"]["unique_graphs"] - graphs_before == 1  # 1-row warm-up batches share the graph
    close(agent, eager)
    for batch_size in (1, 3):
        assert [list(r["answers"]) for r in agent.predict_batch(STATES, QUESTIONS, batch_size=batch_size)] == \
            [list(QUESTIONS)] * len(STATES)
    first = agent.predict_batch(STATES, QUESTIONS)
    assert agent.predict_batch(STATES, QUESTIONS) == first  # CUDA-graph replays give identical answers
    limit = backend.max_len
    with pytest.raises(ValueError, match=rf"rows of {limit + 44} tokens but the compile backend was built for at most {limit}"):
        agent.predict("ok " * 2000, QUESTIONS, max_len=limit + 44)
    assert agent.warmup(shapes=((2, 40, 3),)) > 0


def test_auto_on_cuda_and_explicit_wins(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cuda", backend="auto", compile=True, compile_warmup=False)
    expected = laya.backends.auto_policy(agent)
    assert expected in ("tilelang", "compile") and agent.backend == expected and not agent._compiled


def test_oom_round_trip_reinstalls_the_backend(tiny_checkpoint, eager):
    agent = laya.load(tiny_checkpoint, device="cuda")
    agent.set_backend("compile", warmup=False)
    real = agent._run_forward
    calls = []

    def oom_once(batch):
        calls.append(agent.device.type)
        if len(calls) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return real(batch)

    agent._run_forward = oom_once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = agent.predict(STATES[0], QUESTIONS)
    assert any("Retrying this request on CPU" in str(w.message) for w in caught)
    assert calls == ["cuda", "cpu"] and agent.cpu_fallback_count == 1
    assert agent.device.type == "cuda" and agent.backend == "compile" and agent.dtype == eager.dtype
    assert result["answers"]["intent"]["choice"] in ("refund", "bug", "other")
    close(agent, eager)  # back on the GPU with its backend


def test_legacy_compile_true_on_cuda(tiny_checkpoint, eager):
    agent = laya.load(tiny_checkpoint, device="cuda", compile=True, compile_mode="reduce-overhead")
    assert agent.backend == "compile" and agent._compiled
    close(agent, eager)
