"""Audit 3 of §2/§5/§6/§7: regression pins for Router behaviours the compat spec states and no other test
pins yet (fakes only, no checkpoint)."""

from __future__ import annotations

import threading
import time

import pytest

import laya.lang
import laya.router as router_pkg
from laya.router import Router

Q = {"q": {"type": "noul", "instructions": "x"}}


def _answer(conf: float) -> dict:
    return {"answers": {"q": {"type": "noul", "noul": 0.9, "confidence": conf, "answer_confidence": conf}}}


class _FailsOnSecondQuestionSet:
    """predict_batch answers the first sub-group and fails the second."""

    def __init__(self):
        self.calls = 0

    def predict_batch(self, states, questions, **kwargs):
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("second sub-group failed")
        return [_answer(0.3) for _ in states]


def test_r_gate_3_batch_failure_path_gates_results_already_produced():
    seen = {}

    class End:
        def on_predict_end(self, ctx):
            seen[ctx.states[0]] = ctx.results and ctx.results[0]["answers"]["q"]

    r = Router(hooks=[End()])
    r.attach("english", _FailsOnSecondQuestionSet())
    other = {"p": {"type": "noul", "instructions": "y"}}
    requests = [{"state": "a", "questions": Q, "model": "en"}, {"state": "b", "questions": other, "model": "en"}]
    with pytest.raises(RuntimeError, match="^second sub-group failed$"):
        r.predict_batch(requests, min_confidence=0.5)
    assert seen["a"]["abstention"] == "abstained" and seen["a"]["low_confidence"] is True
    assert seen["b"] is None


def test_r_rt_10_unregister_waits_for_a_running_build_then_evicts(monkeypatch):
    building = threading.Event()

    class SlowAgent:
        def __init__(self, *args, **kwargs):
            building.set()
            time.sleep(0.3)

    monkeypatch.setattr(router_pkg, "Agent", SlowAgent, raising=False)
    events = []

    class Lifecycle:
        def on_load(self, ctx):
            events.append(("load", ctx.model))

        def on_evict(self, ctx):
            events.append(("evict", ctx.model))

    r = Router(models={"x": "/x"}, hooks=[Lifecycle()])
    builder = threading.Thread(target=r.load, args=("x",))
    builder.start()
    assert building.wait(5)
    r.unregister("x")
    builder.join()
    assert "x" not in r.models and r.loaded == []
    assert ("evict", "x") in events


def test_r_rt_4_abstaining_hint_called_once_and_detection_once(monkeypatch):
    hint_calls, analyse_calls = [], []
    real = laya.lang.analyse

    def counting(*args, **kwargs):
        analyse_calls.append(kwargs.get("explain"))
        return real(*args, **kwargs)

    monkeypatch.setattr(laya.lang, "analyse", counting)
    decision = Router().route("Je voudrais annuler ma commande pour demain", None,
                              lang_guess=lambda s: hint_calls.append(s), explain=True)
    assert len(hint_calls) == 1 and analyse_calls == [True]
    assert decision["reason"] == "Latin script but language looks like 'fr', not English"
    assert "diagnostic" in decision["detection"]
