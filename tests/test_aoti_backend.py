"""The `aoti` backend on the CPU: a .pt2 package of the tiny checkpoint in place of the model forward.

The package is the one scripts/check_aoti.py builds in the session fixture `aoti_package` (fp32,
rows 1-8, marker slots 2-8, tokens 32-512 in multiples of 16), so it is compiled once per session.
Tolerance against eager on the same fp32 weights: 1e-4 on probabilities of the raw forward (float
reordering only; measured ~1e-6), 2e-4 on the rounded (4 decimals) probabilities of predict answers.
The error-path tests need no package and run without a C++ compiler.
"""

from __future__ import annotations

import json
import types
import warnings
import zipfile

import pytest
import torch

import laya
from laya import backends
from laya.backends.base import BackendUnavailable
from laya.export import aoti

PROB_TOL = 1e-4
ANSWER_TOL = 2e-4
QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "billing": "a charge",
                            "cancel": "end the plan", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Does it need a reply today?"},
}
STATES = ["I was charged twice for order 1234 and want a refund.", "The app crashes on login. " * 20, "hi",
          {"ticket": "cancel my plan", "tier": "pro"}]


@pytest.fixture()
def fresh(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cpu")


@pytest.fixture()
def aoti_agent(tiny_checkpoint, aoti_package):
    return laya.load(tiny_checkpoint, device="cpu", backend="aoti", aoti_path=aoti_package)


def probs(logits: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.double().masked_fill(~live.bool(), float("-inf")), dim=-1)


# ---- names, selection, errors (no package needed) ----------------------------------------------


def test_registered_and_never_auto():
    assert "aoti" not in backends.NAMES and "aoti" in backends.EXTRA_NAMES and "aoti" in backends.known_names()
    assert backends.normalise(" AOTI ") == "aoti"
    assert backends.backend_class("aoti").__name__ == "AOTIBackend"
    for device, dtype in [("cpu", torch.float32), ("cuda", torch.bfloat16), ("cuda", torch.float32)]:
        fake = types.SimpleNamespace(parallel_options=False, device=torch.device(device), dtype=dtype,
                                     model=types.SimpleNamespace(encoder=types.SimpleNamespace(
                                         config=types.SimpleNamespace(model_type="modernbert"))))
        assert backends.auto_policy(fake) != "aoti"


def test_needs_a_package_and_a_file(fresh, tmp_path):
    with pytest.raises(ValueError, match=r"aoti backend needs a package: set_backend\('aoti', aoti_path="):
        fresh.set_backend("aoti")
    missing = tmp_path / "nope.pt2"
    with pytest.raises(FileNotFoundError, match=r"AOTInductor package not found at .*nope\.pt2.*check_aoti\.py"):
        fresh.set_backend("aoti", aoti_path=str(missing))
    assert fresh.backend == "eager"
    with pytest.raises(FileNotFoundError, match="nope.pt2"):
        laya.load(fresh.model_dir, device="cpu", backend="aoti", aoti_path=str(missing))
    with pytest.raises(ValueError, match="aoti_path is for backend='aoti'"):
        laya.load(fresh.model_dir, device="cpu", aoti_path=str(missing))


def fake_package(path, record: dict | None) -> str:
    """A .pt2-shaped zip with (or without) a laya record and no compiled code."""
    meta = {} if record is None else {aoti.METADATA_KEY: json.dumps(record)}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("decision/data/aotinductor/model/x.wrapper_metadata.json", json.dumps(meta))
    return str(path)


def test_unusable_package_warns_once_then_eager(fresh, tmp_path):
    garbage = tmp_path / "garbage.pt2"
    garbage.write_bytes(b"not a package")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh.set_backend("aoti", aoti_path=str(garbage)) == "eager"
    assert len(caught) == 1 and str(caught[0].message).startswith("laya: backend 'aoti' is unavailable (")
    assert "not a .pt2 package" in str(caught[0].message)
    assert str(caught[0].message).endswith("; using the eager forward instead.")
    assert fresh.backend == "eager" and "forward" not in fresh.model.__dict__
    with pytest.raises(BackendUnavailable, match="no laya record"):
        fresh.set_backend("aoti", strict=True, aoti_path=fake_package(tmp_path / "bare.pt2", None))
    record = {"format": aoti.INFO_FORMAT, "device": "cuda", "ranges": {"rows": [1, 8], "markers": [2, 8],
                                                                        "tokens": [32, 512]}}
    with pytest.raises(BackendUnavailable, match=r"compiled for cuda, the agent runs on cpu; load the agent with "
                                                 r"device='cuda' or export a package on this device"):
        fresh.set_backend("aoti", strict=True, aoti_path=fake_package(tmp_path / "gpu.pt2", record))
    result = fresh.predict("refund please", QUESTIONS)  # still answers, eagerly
    assert result["answers"]["intent"]["choice"] in QUESTIONS["intent"]["criteria"]


# ---- with the packaged tiny checkpoint -----------------------------------------------------------


def test_predict_matches_eager(agent, aoti_agent):
    """Answers through the package equal eager ones; 12 rows (4 states x 3 questions) also exercise
    the row split (the package takes at most 8 rows per call)."""
    assert aoti_agent.backend == "aoti" and aoti_agent.model.__dict__.get("forward") is not None
    backend = aoti_agent.backend_object
    assert backend.ranges == aoti.Ranges() and backend.info["device"] == "cpu" and backend.max_len == 512
    want = agent.predict_batch(STATES, QUESTIONS)
    got = aoti_agent.predict_batch(STATES, QUESTIONS)
    for w, g in zip(want, got):
        assert g["usage"] == w["usage"] and g["model"] == w["model"]
        for qid, answer in w["answers"].items():
            other = g["answers"][qid]
            assert other.get("choice") == answer.get("choice") and other["type"] == answer["type"]
            for key in ("score", "noul", "confidence", "answer_confidence"):
                if key in answer:
                    assert other[key] == pytest.approx(answer[key], abs=ANSWER_TOL), (qid, key)
            for label, p in answer.get("probabilities", {}).items():
                assert other["probabilities"][label] == pytest.approx(p, abs=ANSWER_TOL), (qid, label)
            assert other["action"]["act_probability"] == pytest.approx(answer["action"]["act_probability"],
                                                                       abs=ANSWER_TOL)


@pytest.mark.parametrize("rows,tokens,slots", [(1, 5, 1), (5, 37, 3), (2, 100, 8), (11, 70, 2)])
def test_forward_pads_into_the_ranges(agent, aoti_agent, rows, tokens, slots):
    """Shapes other than the export example (3 x 64 x 4): tokens off the 16-grid and below the 32
    minimum, one marker slot (padded to the 2-slot minimum), 8 slots, and rows above the maximum.
    Outputs keep the request's shape; probabilities match eager within PROB_TOL."""
    gen = torch.Generator().manual_seed(rows * 1000 + tokens)
    ids = torch.randint(1000, 2000, (rows, tokens), generator=gen)
    mask = torch.ones_like(ids)
    for i in range(rows):  # ragged rows, like a real batch
        valid = max(slots + 2, tokens - 3 * i)
        mask[i, valid:] = 0
        ids[i, valid:] = 0
    pos = torch.arange(1, slots + 1).repeat(rows, 1)
    live = torch.ones(rows, slots, dtype=torch.bool)
    if slots > 1:
        live[-1, -1] = False
        pos[-1, -1] = 0
    qtype = torch.arange(rows) % 3
    with torch.no_grad():
        ref_logits, ref_act = type(agent.model).forward(agent.model, ids, mask, pos, live, qtype)
        logits, act = aoti_agent.model(ids, mask, pos, live, qtype)
    assert logits.shape == ref_logits.shape == (rows, slots) and act.shape == ref_act.shape
    assert (probs(logits, live) - probs(ref_logits, live)).abs().max() < PROB_TOL
    assert (torch.softmax(act.double(), -1) - torch.softmax(ref_act.double(), -1)).abs().max() < PROB_TOL
    assert torch.equal(logits.argmax(-1), ref_logits.argmax(-1))


def test_out_of_range_requests_are_refused(aoti_agent):
    long_state = "refund " * 700
    with pytest.raises(ValueError) as tokens_error:
        aoti_agent.predict(long_state, QUESTIONS, max_len=1000)
    text = str(tokens_error.value)
    assert "rows of 1000 tokens but the aoti backend was built for at most 512" in text
    assert "pass max_len<=512" in text and "backend='eager'" in text and "re-export" in text
    assert "accepts 32-512 tokens" in text
    assert aoti_agent.predict(long_state, QUESTIONS, max_len=512)["usage"]["truncated"]  # what it advised works
    many = {"pick": {"type": "choice", "instructions": "Which one?", "criteria": [f"option {i}" for i in range(9)]}}
    with pytest.raises(ValueError) as slots_error:
        aoti_agent.predict("hello", many)
    text = str(slots_error.value)
    assert "9 marker slots, i.e. a question with 9 options (the package accepts 2-8)" in text
    assert "backend='eager'" in text and "re-export the package with larger ranges" in text
    backend = aoti_agent.backend_object
    with pytest.raises(ValueError, match=r"rows of 600 tokens \(the package accepts 32-512 tokens"):
        backend.check_request(600, 2)


def test_switching_and_weight_check(fresh, aoti_package):
    assert fresh.set_backend("aoti", package=aoti_package) == "aoti"  # the spelling works too
    assert fresh.set_backend("eager") == "eager" and "forward" not in fresh.model.__dict__
    with torch.no_grad():
        next(fresh.model.parameters()).add_(0.5)  # other weights: the package must not serve them
    with pytest.raises(ValueError, match="exported from other weights"):
        fresh.set_backend("aoti", aoti_path=aoti_package)
    assert fresh.backend == "eager"


# ---- a loader that crashes (seen with every CUDA package on torch 2.11.0+cu130) -------------------


def test_probe_reports_a_loader_crash_instead_of_crashing(fresh, tmp_path, monkeypatch):
    """probe_load runs the load in a fresh interpreter: a SIGSEGV there is a reason string here, and a
    CUDA package whose load crashes is BackendUnavailable (this process and the agent keep working)."""
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(aoti, "_PROBE_SCRIPT", crash)
    path = fake_package(tmp_path / "p.pt2", {"format": aoti.INFO_FORMAT, "device": "cuda"})
    reason = aoti.probe_load(path)
    assert reason.startswith("loading it crashed a fresh process (SIGSEGV) in torch ")
    with pytest.raises(RuntimeError, match=r"does not load: loading it crashed a fresh process \(SIGSEGV\)"):
        aoti.load_package(path)  # CUDA record: probed by default
    monkeypatch.setattr(aoti, "_PROBE_SCRIPT", "raise SystemExit('no such kernel image')")
    assert aoti.probe_load(path) == "loading it failed in a fresh process: no such kernel image"

    monkeypatch.setattr(aoti, "_PROBE_SCRIPT", crash)
    fake_cuda = types.SimpleNamespace(type="cuda", index=0)
    backend = backends.backend_class("aoti")(fresh, aoti_path=path, check_weights=False)
    monkeypatch.setattr(fresh, "device", fake_cuda)  # only _install reads it; restored after the test
    with pytest.raises(BackendUnavailable, match=r"does not load here .*crashed a fresh process \(SIGSEGV\)"):
        backend._install()


def test_probe_loads_a_real_package(aoti_package):
    assert aoti.probe_load(aoti_package) is None
