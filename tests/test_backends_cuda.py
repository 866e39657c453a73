"""Backends on CUDA (skipped without a GPU): compile backend parity, limits, auto, OOM round trip."""

import warnings

import pytest
import torch

import laya

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

QUESTIONS = {"intent": {"type": "choice", "instructions": "Which?", "criteria": ["refund", "bug", "other"]},
             "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
             "urgent": {"type": "noul", "instructions": "Urgent?"}}
STATES = ["refund my order", {"message": "the app crashes on login"}, ["hi", "cancel please"], "ok " * 150]


def close(a, b, tol):
    for x, y in zip(a, b):
        for qid in QUESTIONS:
            assert x["answers"][qid]["confidence"] == pytest.approx(y["answers"][qid]["confidence"], abs=tol)


@pytest.fixture(scope="module")
def eager(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cuda")


def test_compile_backend_matches_eager_and_enforces_its_max_len(tiny_checkpoint, eager, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYA_INDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    agent = laya.load(tiny_checkpoint, device="cuda", backend="compile")
    backend = agent.backend_object
    assert agent.backend == "compile" and backend.warmup_s > 0 and backend.cache_dir == str(tmp_path / "inductor")
    for batch_size in (None, 1, 3):
        # bf16 on both sides; compiled kernels fuse differently: a few thousandths on confidences
        close(agent.predict_batch(STATES, QUESTIONS, batch_size=batch_size), eager.predict_batch(STATES, QUESTIONS), 0.02)
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
    close([result], [eager.predict(STATES[0], QUESTIONS)], 0.02)  # the CPU retry ran fp32


def test_legacy_compile_true_on_cuda(tiny_checkpoint, eager):
    agent = laya.load(tiny_checkpoint, device="cuda", compile=True, compile_mode="reduce-overhead")
    assert agent.backend == "compile" and agent._compiled
    close(agent.predict_batch(STATES, QUESTIONS), eager.predict_batch(STATES, QUESTIONS), 0.02)
