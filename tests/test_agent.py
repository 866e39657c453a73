"""Agent behaviour: batching equals single calls, ordering, empties, errors, threads, OOM retry, hooks."""

import threading
import warnings

import numpy as np
import pytest
import torch

import laya
from _compare import assert_same
from laya.device import Precision

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
STATES = ["I want my money back for order 1234.", {"message": "The app crashes on login", "tier": "gold"},
          ["hello", "please cancel my plan"], "ok " * 400, "Short.", "The invoice total is wrong again!",
          {"ticket": 7, "body": "Refund please, this is the third time I ask."}, "Thanks, all good now."]


def test_result_shape_and_usage(agent):
    r = agent.predict(STATES[0], QUESTIONS)
    assert list(r) == ["model", "answers", "usage"] and r["model"] == "laya-rl-agent"
    assert list(r["answers"]) == ["intent", "anger", "urgent"]
    u = r["usage"]
    assert list(u) == ["input_tokens", "output_tokens", "state_tokens", "state_tokens_dropped", "truncated",
                       "truncated_questions"]
    assert u["output_tokens"] == 0 and u["truncated"] is False and u["truncated_questions"] == []
    from laya.sequence import encode
    assert u["state_tokens"] == len(encode(agent.tok, STATES[0]))
    probs = r["answers"]["intent"]["probabilities"]
    assert abs(sum(probs.values()) - 1) < 1e-3 and all(round(v, 4) == v for v in probs.values())


def test_truncation_usage(agent):
    r = agent.predict("ok " * 400, QUESTIONS, max_len=64)
    u = r["usage"]
    assert u["truncated"] and u["state_tokens"] == 400 and u["truncated_questions"] == ["intent", "anger", "urgent"]
    assert u["input_tokens"] == 64 * 3
    assert u["state_tokens_dropped"] == max(400 - (64 - n - 1) for n in (len(row) for row in _heads(agent)))


def _heads(agent):
    from laya.questions import check_questions
    from laya.sequence import build_head
    return [build_head(agent.tok, q, 96).ids for q in check_questions(QUESTIONS)]


def test_collapsed_options_reported(agent):
    qs = {"many": {"type": "choice", "instructions": "Which?", "criteria": [f"same shared prefix {i}" for i in range(30)]}}
    u = agent.predict("text", qs, head_max_len=64)["usage"]
    assert u["options"] == {"many": {"total": 30, "distinct": 1, "tokens_per_option": 4}}


def test_predict_batch_equals_predict(agent):
    single = [agent.predict(s, QUESTIONS) for s in STATES]
    for batch_size in (None, 1, 3):
        assert_same(agent.predict_batch(STATES, QUESTIONS, batch_size=batch_size), single)


def test_batched_logits_match_single_rows(agent):
    from laya.questions import check_questions
    from laya.sequence import collate
    qs = check_questions(QUESTIONS)
    rows = [agent._rows(s if isinstance(s, str) else str(s), False, qs, 96, 96)[1] for s in STATES]
    together, _ = agent._infer(collate([r for rs in rows for r in rs], 0))
    apart = np.concatenate([agent._infer(collate(rs, 0))[0][:, :together.shape[1]] for rs in rows])
    live = together > -1e3
    # padding changes float summation order: ~3e-5 on logits of magnitude ~8 (measured)
    np.testing.assert_allclose(together[live], apart[live], atol=1e-4, rtol=0)


def test_sort_by_length_keeps_input_order(agent):
    states = [("word " * n) for n in (50, 3, 80, 1, 20, 60, 7, 33, 90, 2, 44, 5)]
    plain = agent.predict_batch(states, QUESTIONS)
    sorted_run = agent.predict_batch(states, QUESTIONS, batch_size=2, sort_by_length=True)
    assert [r["usage"]["state_tokens"] for r in sorted_run] == [r["usage"]["state_tokens"] for r in plain]
    assert_same(sorted_run, plain)


def test_empty_inputs(agent):
    assert agent.predict_batch([], QUESTIONS) == []
    assert agent.predict("anything", {}) == {"model": "laya-rl-agent", "answers": {},
                                             "usage": {"input_tokens": 0, "output_tokens": 0}}


@pytest.mark.parametrize("states", ["text", b"bytes", {"a": 1}, 5])
def test_states_must_be_a_list(agent, states):
    with pytest.raises(TypeError, match="states must be a list"):
        agent.predict_batch(states, QUESTIONS)


def test_bad_inputs_are_refused_and_the_agent_keeps_working(agent):
    before = agent.predict(STATES[1], QUESTIONS)
    with pytest.raises(TypeError):
        agent.predict(None, QUESTIONS)
    with pytest.raises(TypeError):
        agent.predict_batch(["a", None], QUESTIONS)
    with pytest.raises(TypeError, match="questions must be a dict"):
        agent.predict("a", ["q"])
    with pytest.raises(ValueError, match="^question 'bad': "):
        agent.predict("a", {**QUESTIONS, "bad": {"type": "noul"}})
    with pytest.raises(ValueError, match="max_len must be a positive integer, got 0"):
        agent.predict("a", QUESTIONS, max_len=0)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        agent.predict("a", QUESTIONS, max_len=100000)
    with pytest.raises(ValueError, match="batch_size"):
        agent.predict_batch(["a"], QUESTIONS, batch_size=0)
    with pytest.raises(ValueError, match="min_confidence"):
        agent.predict("a", QUESTIONS, min_confidence=2)
    assert agent.predict(STATES[1], QUESTIONS) == before


def test_min_confidence_on_predict(agent):
    r = agent.predict(STATES[0], QUESTIONS, min_confidence={"default": 1.0, "noul:2": 0.0})
    assert r["answers"]["urgent"]["abstention"] == "passed"
    assert r["answers"]["intent"]["abstention"] == "abstained" and r["answers"]["intent"]["low_confidence"] is True
    assert "abstention" not in agent.predict(STATES[0], QUESTIONS)["answers"]["intent"]


def test_answers_depend_on_the_state(agent):
    a, b = (agent.predict(s, QUESTIONS)["answers"]["intent"]["probabilities"] for s in STATES[:2])
    assert a != b


def test_threads_get_the_serial_answers(agent):
    serial = [agent.predict(s, QUESTIONS) for s in STATES]
    got, errors = {}, []

    def work(i):
        try:
            for rep in range(4):
                j = (i + rep) % len(STATES)
                got[(i, rep)] = (j, agent.predict(STATES[j], QUESTIONS))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got) == 32
    for j, result in got.values():
        assert result == serial[j]  # same batch shapes as the serial call: bit-identical


def test_injected_cuda_oom_is_retried_on_cpu(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu")
    expected = agent.predict(STATES[0], QUESTIONS)
    cpu_forward, moves = agent._run_forward, []

    def pretend_relocate(device, precision):  # no GPU here: record the moves instead of making them
        moves.append(device.type)
        agent.device, agent.precision = device, precision

    def forward_that_ooms_on_gpu(batch):
        if agent.device.type == "cuda":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return cpu_forward(batch)

    agent._relocate, agent._run_forward = pretend_relocate, forward_that_ooms_on_gpu
    agent.device, agent.precision = torch.device("cuda"), Precision(torch.bfloat16, True)
    with pytest.warns(RuntimeWarning, match=r"^GPU memory exceeded during inference\. Retrying this request on CPU\.\.\.$"):
        got = agent.predict(STATES[0], QUESTIONS)
    assert got == expected
    assert agent.cpu_fallback_count == 1 and "out of memory" in agent.last_fallback_reason
    assert moves == ["cpu", "cuda"] and agent.device.type == "cuda" and agent.dtype == torch.bfloat16

    def broken(batch):
        raise RuntimeError("CUDA error: device-side assert triggered")  # not a memory error: propagates

    agent._run_forward = broken
    with pytest.raises(RuntimeError, match="device-side assert"):
        agent.predict(STATES[0], QUESTIONS)
    assert agent.cpu_fallback_count == 1


def test_failed_return_leaves_the_agent_on_cpu(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu")
    cpu_forward = agent._run_forward

    def relocate(device, precision):
        if device.type == "cuda":
            raise RuntimeError("no GPU")
        agent.device, agent.precision = device, precision

    agent._relocate = relocate
    agent._run_forward = lambda b: (_ for _ in ()).throw(RuntimeError("out of memory")) if agent.device.type == "cuda" \
        else cpu_forward(b)
    agent.device = torch.device("cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.predict(STATES[0], QUESTIONS)
    assert any("stays on the CPU" in str(w.message) for w in caught)
    assert agent.device.type == "cpu" and agent.predict(STATES[0], QUESTIONS)["answers"]


def test_hooks_rewrite_skip_and_observe(tiny_checkpoint):
    seen = []

    class Recorder:
        def on_predict_end(self, ctx):
            seen.append((ctx.usage["input_tokens"], ctx.elapsed_ms is not None))

    agent = laya.load(tiny_checkpoint, device="cpu", hooks=[Recorder()])

    def only_urgent(ctx):
        ctx.questions = {"urgent": ctx.questions["urgent"]}

    r = agent.predict("x", QUESTIONS, on_predict_start=only_urgent)
    assert list(r["answers"]) == ["urgent"] and seen[-1] == (r["usage"]["input_tokens"], True)
    cached = {"model": "cache", "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}
    assert agent.predict_batch(["a", "b"], QUESTIONS, on_predict_start=lambda ctx: ctx.skip([cached])) == [cached, cached]
    with pytest.raises(ValueError, match="skip"):
        agent.predict_batch(["a", "b", "c"], QUESTIONS, on_predict_start=lambda ctx: ctx.skip([cached, cached]))

    def boom(ctx):
        raise KeyError("hook bug")

    with pytest.raises(KeyError):
        agent.predict("x", QUESTIONS, on_predict_end=boom)
    with pytest.warns(RuntimeWarning, match=r"laya: hook boom\.on_predict_end failed: 'hook bug'"):  # (compat §8)
        assert agent.predict("x", QUESTIONS, on_predict_end=boom, hooks_raise=False)["answers"]


def test_warmup_repr_context_manager(tiny_checkpoint):
    with laya.load(tiny_checkpoint, device="auto" if not torch.cuda.is_available() else "cpu") as agent:
        assert repr(agent) == f"Agent(model_id={tiny_checkpoint!r}, device=cpu)"
        assert agent.backend == "eager" and agent.warmup() > 0
        assert agent.WARMUP_SHAPES == ((1, 64, 3), (4, 128, 5))
        assert laya.RLAgent is laya.Agent and laya.Agent.system_one is laya.Agent.predict
    assert agent.model is None


def test_cpu_bf16_autocast_runs_in_bf16_and_stays_close(tiny_checkpoint, monkeypatch):
    from laya.questions import check_questions
    from laya.sequence import collate

    fp32 = laya.load(tiny_checkpoint, device="cpu")
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    bf16 = laya.load(tiny_checkpoint, device="cpu")
    assert (bf16.amp_enabled, bf16.dtype, fp32.amp_enabled, fp32.dtype) == (True, torch.bfloat16, False, torch.float32)
    assert bf16.dtype_for(1) == torch.bfloat16 and next(bf16.model.parameters()).dtype == torch.float32
    qs = check_questions(QUESTIONS)
    batch = collate([r for s in STATES for r in fp32._rows(str(s), False, qs, 512, 192)[1]], 0)
    a, b = fp32._infer(batch)[0], bf16._infer(batch)[0]
    assert a.dtype == b.dtype == torch.float32 and a.is_cpu and b.is_cpu  # logits reach the host in fp32
    a, b = a.numpy(), b.numpy()
    live = a > -1e3
    error = np.abs(a - b)[live].max() / np.abs(a[live]).max()
    # bf16 keeps 8 mantissa bits; this std-0.3 random model amplifies that noise through its layers to
    # about 13% of the largest logit (measured). The bound catches a wrong cast, not bf16's own noise.
    assert 1e-4 < error < 0.25


def test_backend_requests_without_backends_fall_back_with_one_warning(tiny_checkpoint):
    with pytest.warns(RuntimeWarning, match="laya: backend 'tilelang' is unavailable .*using the eager forward instead"):
        agent = laya.load(tiny_checkpoint, device="cpu", backend="tilelang")
    assert agent.backend == "eager"
    with pytest.raises(ValueError, match="onnx"):
        laya.Agent(tiny_checkpoint, backend="onnx")


def test_question_sets_are_remembered_by_exact_content(agent):
    from laya.pipeline import checked_questions
    from laya.questions import check_questions

    q = {"c": {"type": "choice", "instructions": "Pick", "criteria": {"a": "x", "b": "y"}}}
    agent.predict("some text", q)
    q["c"]["criteria"]["b"] = "something else"  # mutated in place: a different key, not the remembered set
    fresh = {"c": {"type": "choice", "instructions": "Pick", "criteria": {"a": "x", "b": "something else"}}}
    assert checked_questions(q) == check_questions(fresh)
    assert agent.predict("some text", q) == agent.predict("some text", fresh)
    for a, b in (([1, 2], [True, 2]), ([1, 2], [1.0, 2]), ([0.0, 2], [-0.0, 2])):  # equal under ==, not the same
        qa = checked_questions({"c": {"type": "choice", "instructions": "i", "criteria": a}})
        qb = checked_questions({"c": {"type": "choice", "instructions": "i", "criteria": b}})
        assert qa != qb and [type(x) for x in qb[0].labels] == [type(x) for x in b]

    class Label(str):
        pass

    qs = checked_questions({"c": {"type": "choice", "instructions": "i", "criteria": [Label("a"), "b"]}})
    assert type(qs[0].labels[0]) is Label  # not plain data: validated every time, never from the cache
    for _ in range(2):  # invalid sets raise every time (nothing remembered)
        with pytest.raises(ValueError, match="unknown type 'bad'"):
            checked_questions({"c": {"type": "bad"}})
