"""Second audit pass over compat 0.4.15 §11 (CLI), §13 (MCP) and §14 (integrations): deviations it fixed."""

from __future__ import annotations

import laya.integrations as I

SCHEMA = {"type": "object", "properties": {"urgent": {"type": "boolean"}}}


class Recorder:
    """An Agent-like runner (predict takes lang/min_confidence/budgets, no routing hints) that records kwargs."""

    def __init__(self):
        self.calls: list = []

    def predict(self, state, questions, lang=None, max_len=None, head_max_len=None, min_confidence=None):
        self.calls.append({k: v for k, v in (("lang", lang), ("max_len", max_len), ("head_max_len", head_max_len),
                                             ("min_confidence", min_confidence)) if v is not None})
        return {"answers": {qid: {"type": "noul", "noul": 0.9, "confidence": 0.9} for qid in questions}}


def test_r_int_2_decision_has_no_lang_or_min_confidence_control():
    runner = Recorder()
    # extra keywords named like controls LayaDecision does not have are kept, never forwarded (R-INT-2)
    decision = I.LayaDecision(SCHEMA, agent=runner, max_len=64, lang="de", min_confidence=0.95)
    assert decision.invoke("HELP NOW") == {"urgent": True}
    assert runner.calls == [{"max_len": 64}]


def test_r_int_2_decision_forwards_its_own_controls_only_when_set():
    runner = Recorder()
    assert I.LayaDecision(SCHEMA, agent=runner).invoke("x") == {"urgent": True}
    assert runner.calls == [{}]
