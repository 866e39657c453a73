"""Spec gaps pinned: Agent.fit_temperatures/fit_binning (§1.3, §7.3), question-id error prefixes (§2.1),
spelled-out decide/decide_batch signatures (§1.3-§1.5), DecisionModel(no_init=) (§3.4) and the
MPS/CPU autocast-failure fp32 retry with AMP off after `_AMP_FAIL_LIMIT` failures (§1.3)."""

import inspect
import json
import warnings

import numpy as np
import pytest
import torch

import laya
from laya import agent as agent_mod
from laya.calibrate import fit_binning_map, fit_temperature_map
from laya.pipeline import Predictor

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
STATES = ["I want my money back for order 1234.", "The app crashes on login", "Thanks, all good now."]


def _records(n=300, seed=0, scale=4.0):
    """Over-confident logits (right answer 70% of the time): the fitted temperatures rise above 1."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        qtype = i % 3
        k = 2 if qtype == 2 else 3
        gold = int(rng.integers(k))
        top = gold if rng.random() < 0.7 else (gold + 1) % k
        logits = rng.normal(0, 1, k)
        logits[top] += scale
        target = [0.0] * k
        target[gold] = 1.0
        out.append((qtype, logits.tolist(), target, k))
    return out


# ---- §1.3 fit_temperatures / fit_binning ---------------------------------------------------------------

@pytest.fixture()
def fresh_agent(tiny_checkpoint):
    return laya.Agent(tiny_checkpoint, device="cpu")


def test_fit_methods_live_on_the_shared_predictor():
    from laya.onnx_agent import ONNXAgent

    for cls in (laya.Agent, ONNXAgent):
        assert cls.fit_temperatures is Predictor.fit_temperatures
        assert cls.fit_binning is Predictor.fit_binning
    sig = inspect.signature(Predictor.fit_temperatures)
    assert list(sig.parameters) == ["self", "records", "compute_ece", "seed"]
    assert sig.parameters["compute_ece"].default is False and sig.parameters["seed"].default == 0
    sig = inspect.signature(Predictor.fit_binning)
    assert list(sig.parameters) == ["self", "records", "min_bucket_n"]
    assert sig.parameters["min_bucket_n"].default == 200


def test_fit_temperatures_installs_and_returns_the_map(fresh_agent, tmp_path):
    records = _records()
    before = fresh_agent.predict(STATES[0], QUESTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = fresh_agent.fit_temperatures(records, compute_ece=True, seed=3)
    assert report == fit_temperature_map(records, compute_ece=True, seed=3)
    assert "report" in report and set(report) >= {"temperature", "temperature_by_options", "n_by_bucket",
                                                  "temperature_clamped"}  # compat-0.4.15 R-CAL-6 keys
    assert fresh_agent.temperature == report["temperature"] and all(t > 1.0 for t in report["temperature"])
    assert fresh_agent.temperature_by_options == report["temperature_by_options"]
    after = fresh_agent.predict(STATES[0], QUESTIONS)
    assert after["answers"]["intent"]["probabilities"] != before["answers"]["intent"]["probabilities"]
    # the installed temperatures are what save_calibration writes
    path = tmp_path / "cal.json"
    fresh_agent.save_calibration(str(path))
    assert json.loads(path.read_text())["temperature"] == report["temperature"]


def test_fit_temperatures_clamps_with_one_warning(fresh_agent, monkeypatch):
    import laya.calibrate as cal

    fake = {"temperature": [0.01, 1.5, float("nan")], "temperature_by_options": {"choice:3-5": 99.0},
            "n_by_bucket": {}, "temperature_clamped": {}}
    monkeypatch.setattr(cal, "fit_temperature_map", lambda records, compute_ece=False, seed=0: fake)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh_agent.fit_temperatures([]) is fake
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1
    assert fresh_agent.temperature[1] == 1.5
    assert all(0.5 <= t <= 5.0 for t in fresh_agent.temperature)
    assert fresh_agent.temperature_by_options["choice:3-5"] == 5.0


def test_fit_binning_uses_the_installed_temperatures(fresh_agent):
    records = _records(n=900, seed=1)
    fresh_agent.fit_temperatures(records)
    got = fresh_agent.fit_binning(records, min_bucket_n=250)
    want = fit_binning_map(records, fresh_agent.temperature, fresh_agent.temperature_by_options, min_bucket_n=250)
    assert got == want and fresh_agent.binning_map == want and set(want) == {"choice:3-5", "score:3-5", "noul:2"}
    assert fresh_agent.fit_binning(records, min_bucket_n=10_000) == {} and fresh_agent.binning_map == {}
    r = fresh_agent.predict(STATES[1], QUESTIONS)
    assert set(r["answers"]) == set(QUESTIONS)


# ---- §2.1 question-id errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("qid, text", [(None, "question id must not be None"),  # compat-0.4.15 R-Q-1 texts
                                        ("", "question id must be a non-empty string, got ''"),
                                        ("   ", "question id must be a non-empty string, got '   '")])
def test_question_id_errors_start_with_the_question_prefix(qid, text):
    from laya.questions import check_questions

    with pytest.raises(ValueError) as e:
        check_questions({qid: {"type": "score", "instructions": "x"}})
    assert str(e.value) == text


# ---- §1.3-§1.5 decide signatures -----------------------------------------------------------------------

def _decide_params(fn, first):
    sig = inspect.signature(fn)
    p = sig.parameters
    assert list(p) == ["self", first, "schema", "questions", "return_details", "min_confidence", "predict_kwargs"]
    assert p["schema"].default is None and p["schema"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for name, default in (("questions", None), ("return_details", False), ("min_confidence", None)):
        assert p[name].kind is inspect.Parameter.KEYWORD_ONLY and p[name].default is default
    assert p["predict_kwargs"].kind is inspect.Parameter.VAR_KEYWORD


def test_decide_signatures_are_spelled_out():
    from laya.onnx_agent import ONNXAgent
    from laya.router import Router

    for cls in (laya.Agent, ONNXAgent, Router):
        _decide_params(cls.decide, "state")
        _decide_params(cls.decide_batch, "states")


def test_decide_keywords_still_work(agent):
    qs = {"intent": QUESTIONS["intent"]}
    raw = agent.decide(STATES[0], questions=qs)
    assert raw == agent.predict(STATES[0], qs)["answers"]
    schema = {"type": "object", "properties": {"ok": {"type": "boolean", "description": "Is the customer happy?"}}}
    details = agent.decide(STATES[2], schema, return_details=True, min_confidence=0.0)
    plain = agent.decide(STATES[2], schema)
    assert details is not None and plain is not None
    batch = agent.decide_batch(STATES, schema, max_len=64)
    assert batch == [agent.decide(s, schema, max_len=64) for s in STATES]


# ---- §3.4 DecisionModel(no_init=) ----------------------------------------------------------------------

def _encoder():
    from transformers import ModernBertConfig, ModernBertModel

    cfg = ModernBertConfig(vocab_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                           num_attention_heads=2, max_position_embeddings=64)
    return ModernBertModel(cfg)


def test_decision_model_no_init_signature():
    from laya.model import DecisionModel

    sig = inspect.signature(DecisionModel)
    assert list(sig.parameters) == ["encoder", "head_layers", "n_act", "dropout", "no_init"]
    assert [p.default for p in list(sig.parameters.values())[1:]] == [2, 2, 0.1, False]


def test_decision_model_no_init_skips_head_init(monkeypatch):
    from laya.model import DecisionModel

    enc = _encoder()
    real = torch.nn.init.kaiming_uniform_
    touched = []

    def spy(tensor, *args, **kwargs):  # records inits that wrote real data
        if tensor.device.type != "meta":
            touched.append(tuple(tensor.shape))
        return real(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", spy)
    state = torch.random.get_rng_state()
    model = DecisionModel(enc, head_layers=1, no_init=True)
    assert torch.equal(torch.random.get_rng_state(), state)  # no RNG consumed
    assert touched == []
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert torch.equal(model.temperature, torch.ones(3))
    DecisionModel(enc, head_layers=1)  # the default path initialises the head
    assert touched and not torch.equal(torch.random.get_rng_state(), state)
    # the loaded-right-after path: a state dict fills every weight and the forward runs
    ref = DecisionModel(enc, head_layers=1)
    model.load_state_dict(ref.state_dict(), strict=True)
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    args = (ids, torch.ones_like(ids), torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.bool), torch.tensor([0]))
    with torch.no_grad():
        assert torch.allclose(model.eval()(*args)[0], ref.eval()(*args)[0])


# ---- §1.3 MPS/CPU autocast failure -> fp32 retry, AMP off after _AMP_FAIL_LIMIT ---------------------------

def _failing_under_autocast(model):
    forward = model.forward

    def patched(*args, **kwargs):
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("bf16 kernel not implemented")
        return forward(*args, **kwargs)

    model.forward = patched


def test_cpu_autocast_failure_retries_fp32_then_turns_amp_off(tiny_checkpoint, agent, monkeypatch):
    assert agent_mod._AMP_FAIL_LIMIT == 3
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    amp = laya.Agent(tiny_checkpoint, device="cpu")
    assert amp.amp_enabled and amp.dtype == torch.bfloat16
    _failing_under_autocast(amp.model)
    want = [agent.predict(s, QUESTIONS) for s in STATES]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = []
        for i, s in enumerate(STATES):
            got.append(amp.predict(s, QUESTIONS))
            if i < 2:
                assert amp.amp_enabled and amp._amp_failures == i + 1
        assert not amp.amp_enabled and amp.dtype == torch.float32 and amp.dtype_for(4) == torch.float32
        got.append(amp.predict(STATES[0], QUESTIONS))  # AMP off: no autocast, no failure, no warning
    assert got == want + want[:1]
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1 and "float32" in str(runtime[0].message)
    assert amp.cpu_fallback_count == 0  # the OOM fallback is a separate path


def test_cpu_autocast_failures_must_be_consecutive(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CPU_AMP", "bfloat16")
    amp = laya.Agent(tiny_checkpoint, device="cpu")
    forward = amp.model.forward
    fail = {"on": True}

    def flaky(*args, **kwargs):
        if fail["on"] and torch.is_autocast_enabled("cpu"):
            raise RuntimeError("autocast trouble")
        return forward(*args, **kwargs)

    amp.model.forward = flaky
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        amp.predict(STATES[0], QUESTIONS)
        amp.predict(STATES[1], QUESTIONS)
        assert amp._amp_failures == 2
        fail["on"] = False
        amp.predict(STATES[2], QUESTIONS)  # a success under AMP resets the count
        assert amp._amp_failures == 0 and amp.amp_enabled
        fail["on"] = True
        amp.predict(STATES[0], QUESTIONS)
        amp.predict(STATES[1], QUESTIONS)
    assert amp.amp_enabled and amp._amp_failures == 2


def test_errors_that_fp32_also_raises_propagate(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    amp = laya.Agent(tiny_checkpoint, device="cpu")

    def broken(*args, **kwargs):
        raise KeyError("not an autocast problem")

    amp.model.forward = broken
    with pytest.raises(KeyError):
        amp.predict(STATES[0], QUESTIONS)
    assert amp._amp_failures == 0 and amp.amp_enabled


# ---- review fixes: fit_temperatures vs an existing binning map; bad records -----------------------------

def test_fit_temperatures_clears_a_stale_binning_map_with_one_warning(fresh_agent):
    records = _records()
    fresh_agent.fit_binning(records, min_bucket_n=10)
    assert fresh_agent.binning_map
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh_agent.fit_temperatures(records)
    assert fresh_agent.binning_map is None
    notes = [w for w in caught if issubclass(w.category, RuntimeWarning) and "binning" in str(w.message)]
    assert len(notes) == 1 and "fit_binning" in str(notes[0].message)
    with warnings.catch_warnings():  # nothing to clear: no warning
        warnings.simplefilter("error")
        fresh_agent.fit_temperatures(records)


@pytest.mark.parametrize("bad, needle", [
    ((7, [1.0, 2.0, 3.0], [1.0, 0.0, 0.0], 3), "qtype"),
    ((0, [1.0, 2.0], [1.0, 0.0, 0.0], 3), "logits"),
    ((0, [1.0, 2.0, 3.0], [1.0, 0.0, 0.0], 0), "k must"),
    ((0, [1.0, 2.0, 3.0]), "record must be"),  # compat-0.4.15 R-CAL-4 text
])
def test_bad_calibration_record_names_its_index(fresh_agent, bad, needle):
    records = _records(n=20)
    records.insert(5, bad)
    with pytest.raises(ValueError, match=r"records\[5\]") as e:
        fresh_agent.fit_temperatures(records)
    assert needle in str(e.value)
    with pytest.raises(ValueError, match=r"records\[5\]"):
        fresh_agent.fit_binning(records)
