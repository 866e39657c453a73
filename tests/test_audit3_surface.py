"""Third audit of compat 0.4.15 §1, §12-§16, §18: evals on type-less answers, `laya-evals run --min-confidence`
range errors, and the MCP router's environment."""

from __future__ import annotations

import json

import pytest

from laya.evals import (ChoiceAccuracy, Dataset, Example, MeanConfidence, NoulAccuracy, ScoreMAE, ScoreWithin,
                        evaluate)

QUESTIONS = {"topic": {"type": "choice", "instructions": "Topic?", "criteria": {"a": "A", "b": "B"}},
             "urgent": {"type": "noul", "instructions": "Urgent?"},
             "severity": {"type": "score", "instructions": "Severity?", "criteria": ["low", "mid", "high"]}}


# ---- R-EV-2: an answer without `type` is scored by its value key ----------------------------------------

def test_r_ev_2_evaluators_score_answers_that_carry_no_type():
    assert ChoiceAccuracy().score({"choice": "a", "confidence": 0.9}, "a") == 1.0
    assert ChoiceAccuracy().score({"choice": "b"}, "a") == 0.0
    assert NoulAccuracy().score({"noul": 0.5}, True) == 1.0
    assert NoulAccuracy().score({"noul": 0.2}, True) == 0.0
    assert ScoreMAE().score({"score": 2}, 1) == 1.0
    assert ScoreWithin(0.5).score({"score": 1.25}, 1) == 1.0
    assert MeanConfidence().score({"noul": 0.2}, None) == pytest.approx(0.8)
    # a typed answer of another kind still does not apply
    assert ChoiceAccuracy().score({"type": "noul", "noul": 0.9}, "a") is None


class TypelessRunner:
    """A stub runner whose answers hold only the value and a confidence."""

    def predict(self, state, questions):
        return {"answers": {"topic": {"choice": "a", "confidence": 0.9}, "urgent": {"noul": 0.8, "confidence": 0.8},
                            "severity": {"score": 2.0, "confidence": 0.7}}}


def test_r_ev_4_evaluate_counts_correctness_of_type_less_answers():
    dataset = Dataset([Example("s0", QUESTIONS, {"topic": "a", "urgent": True, "severity": 2}),
                       Example("s1", QUESTIONS, {"topic": "b", "urgent": False, "severity": 0})])
    report = evaluate(TypelessRunner(), dataset)
    overall = report.overall
    assert overall["choice_accuracy"] == 0.5 and overall["noul_accuracy"] == 0.5 and overall["score_mae"] == 1.0
    assert [c["correct"] for c in report.cases if c["qid"] == "topic"] == [True, False]
    assert overall["ece"] is not None and overall["brier"] is not None


# ---- R-EV-9: an out-of-range --min-confidence is an EvalError (laya-evals: ..., exit 2) ---------------------

@pytest.mark.parametrize("raw, shown", [("2", "2.0"), ("-0.1", "-0.1"), ("nan", "nan"), ("abc", "'abc'")])
def test_r_ev_9_run_min_confidence_out_of_range_is_an_eval_error(tmp_path, capsys, raw, shown):
    from laya.evals_cli import main

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"state": "x", "questions": QUESTIONS, "expected": {"topic": "a"}}) + "\n")
    assert main(["run", str(data), "--min-confidence", raw]) == 2
    assert capsys.readouterr().err == f"laya-evals: min_confidence must be a float in [0.0, 1.0], got {shown}\n"


# ---- R-MCP-5: the MCP router reads its own variables, not every laya serve one -------------------------------

@pytest.fixture
def serve_only_env(monkeypatch):
    monkeypatch.setenv("LAYA_PORT", "not-a-port")
    monkeypatch.setenv("LAYA_LOG_LEVEL", "verbose")  # laya-mcp-server's main() takes it as info
    monkeypatch.setenv("LAYA_MAX_CONCURRENT", "0")
    monkeypatch.setenv("LAYA_PRELOAD", "0")
    monkeypatch.setenv("LAYA_DEFAULT_MODEL", "ml")
    for name in ("LAYA_BASE_URL", "LAYA_DEVICE", "LAYA_MODELS", "LAYA_EXTRA_MODELS", "LAYA_REMOTE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def test_r_mcp_5_local_router_ignores_malformed_serve_only_settings(serve_only_env):
    from laya.mcp.runtime import build_router
    from laya.router import Router

    router = build_router()
    assert type(router) is Router and router.default == "multilingual"


def test_r_mcp_5_a_malformed_router_variable_still_fails(serve_only_env, monkeypatch):
    from laya.mcp.runtime import build_router

    monkeypatch.setenv("LAYA_EXTRA_MODELS", "[")
    with pytest.raises(ValueError, match="LAYA_EXTRA_MODELS"):
        build_router()


def test_r_mcp_5_remote_router_ignores_malformed_serve_only_settings(serve_only_env, monkeypatch):
    from laya.mcp.remote import RemoteRouter
    from laya.mcp.runtime import build_router

    monkeypatch.setenv("LAYA_BASE_URL", "localhost:9")
    router = build_router()
    assert isinstance(router, RemoteRouter) and router.base_url == "http://localhost:9"
    assert router.default == "multilingual"
