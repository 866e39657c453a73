"""Tournament mode: `laya.shortlist.predict_tournament` (rounds, finalists, one predict call per round, all-label
probabilities) and the server's LAYA_TOURNAMENT_GROUP (255-option limit, `x_tournament`, strict shape)."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from laya.shortlist import predict_tournament, predict_tournament_batch

NOUL = {"type": "noul", "instructions": "Is it urgent?"}


def many(n: int, **extra) -> dict:
    return {"type": "choice", "instructions": "Which intent?", "criteria": {f"o{i}": f"intent number {i}"
                                                                          for i in range(n)}, **extra}


class ScoringAgent:
    """A stand-in agent: a choice's probabilities are a softmax of -|index - target| over the options asked,
    the target being the state's number; records every predict_batch call."""

    def __init__(self):
        self.calls = []

    def predict_batch(self, states, questions, min_confidence=None, **kwargs):
        self.calls.append({"states": list(states), "questions": questions, "min_confidence": min_confidence,
                           **kwargs})
        out = []
        for state in states:
            answers = {}
            for qid, d in questions.items():
                if d["type"] != "choice":
                    answers[qid] = {"type": "noul", "noul": 0.5, "confidence": 0.5, "answer_confidence": 0.5}
                    continue
                labels = list(d["criteria"])
                weights = [math.exp(-abs(int(str(label)[1:]) - int(state)) / 3) for label in labels]
                p = {label: round(w / sum(weights), 4) for label, w in zip(labels, weights)}
                answers[qid] = {"type": "choice", "choice": max(p, key=p.get), "probabilities": p,
                                "confidence": 0.5, "answer_confidence": max(p.values())}
            out.append({"model": "fake", "answers": answers,
                        "usage": {"input_tokens": 10 * len(questions), "output_tokens": 0}})
        return out


@pytest.mark.parametrize("n, rounds, finalists", [(100, 2, 14), (255, 2, 16), (300, 3, 16), (17, 2, 16)])
def test_rounds_and_finalists(n, rounds, finalists):
    agent = ScoringAgent()
    target = n * 3 // 7
    result = predict_tournament(agent, str(target), {"intent": many(n), "urgent": NOUL}, group_size=16,
                                lang="en", max_len=128, min_confidence=0.3)
    block = result["tournament"]["intent"]
    assert block["rounds"] == rounds and len(block["finalists"]) == finalists and block["options"] == n
    assert "option_order_dropped" not in block
    assert len(agent.calls) == rounds  # one predict call per round, every group of the round in it
    assert all(len(q["criteria"]) <= 16 for c in agent.calls for q in c["questions"].values() if q["type"] == "choice")
    answer = result["answers"]["intent"]
    assert answer["choice"] == f"o{target}" and f"o{target}" in block["finalists"]
    assert list(answer["probabilities"]) == [f"o{i}" for i in range(n)]  # every label, the caller's order
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    assert all(answer["probabilities"][label] == 0.0 for label in answer["probabilities"]
               if label not in block["finalists"])
    final = agent.calls[-1]
    assert list(final["questions"]) == ["intent", "urgent"] and final["questions"]["urgent"] == NOUL
    assert list(final["questions"]["intent"]["criteria"]) == block["finalists"]  # finalists in caller order
    assert final["min_confidence"] == 0.3 and all(c["min_confidence"] is None for c in agent.calls[:-1])
    assert all(c["lang"] == "en" and c["max_len"] == 128 for c in agent.calls)
    asked = sum(10 * len(c["questions"]) for c in agent.calls)
    assert result["usage"]["input_tokens"] == asked and list(result["answers"]) == ["intent", "urgent"]


def test_small_questions_are_one_plain_call_and_option_order_is_dropped():
    agent = ScoringAgent()
    plain = {"intent": many(16), "urgent": NOUL}
    result = predict_tournament(agent, "3", plain, group_size=16)
    assert result["tournament"] == {} and len(agent.calls) == 1 and agent.calls[0]["questions"] is plain
    ordered = many(40, option_order=list(reversed(range(40))))
    result = predict_tournament(ScoringAgent(), "3", {"intent": ordered}, group_size=16)
    assert result["tournament"]["intent"]["option_order_dropped"] is True


def test_batch_groups_states_by_their_survivors():
    """Round one is shared by every state; later rounds group the states whose survivors are equal."""
    agent = ScoringAgent()
    states = ["5", "250", "5", "120"]
    questions = {"intent": many(300)}
    results = predict_tournament_batch(agent, states, questions, 16)
    assert len(agent.calls[0]["states"]) == 4  # the shared first round: one call
    assert sorted(len(c["states"]) for c in agent.calls[1:]) == [1, 1, 1, 1, 2, 2]  # "5" twice, together
    for state, result in zip(states, results):
        assert result == predict_tournament(ScoringAgent(), state, questions, 16)
        assert result["answers"]["intent"]["choice"] == f"o{state}"


@pytest.mark.parametrize("bad", [0, 1, True, 2.5, "8"])
def test_group_size_is_checked(bad):
    with pytest.raises(ValueError, match="group_size must be an integer >= 2"):
        predict_tournament(ScoringAgent(), "1", {"intent": many(40)}, group_size=bad)


def test_invalid_questions_fail_with_the_library_text():
    with pytest.raises(ValueError, match="question 'q': unknown type 'nope'"):
        predict_tournament(ScoringAgent(), "1", {"q": {"type": "nope", "instructions": "x"}})


def test_on_the_tiny_checkpoint(agent):
    questions = {"intent": many(40), "urgent": NOUL}
    result = predict_tournament(agent, "I was charged twice for March", questions, group_size=8)
    block = result["tournament"]["intent"]
    assert block["rounds"] == 2 and len(block["finalists"]) == 5 * 1  # 5 groups of 8, the best 1 of each
    answer = result["answers"]["intent"]
    assert answer["choice"] in block["finalists"] and len(answer["probabilities"]) == 40
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    small = {"intent": many(8), "urgent": NOUL}
    assert predict_tournament(agent, "hello", small, group_size=8) == \
        {**agent.predict("hello", small), "tournament": {}}


# ---- the server --------------------------------------------------------------------------------------

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya.router import Router  # noqa: E402
from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve import config as serve_config  # noqa: E402
from laya.serve.jev import jev_confidence  # noqa: E402


@pytest.fixture(scope="module")
def router(tiny_checkpoint):
    return Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")


def client(router, **cfg) -> TestClient:
    return TestClient(create_app(router, cfg=ServeConfig(preload=True, models=("tiny",), **cfg)))


def test_tournament_mode_answers_with_x_tournament(router, agent):
    questions = {"intent": many(150), "urgent": NOUL}
    state = "I was charged twice for March"
    with client(router, tournament_group=8) as c:
        r = c.post("/v1/systemone", json={"state": state, "questions": questions, "min_confidence": 0.2})
        batch = c.post("/v1/systemone/batch", json={"states": [state, "the app crashes", state],
                                                    "questions": questions})
        plain = c.post("/v1/systemone", json={"state": state, "questions": {"urgent": NOUL}})
        too_many = c.post("/v1/systemone", json={"state": state, "questions": {"intent": many(256)}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["model", "answers", "usage", "routing"]  # the block moved onto the answer
    answer = body["answers"]["intent"]
    # 150 options in groups of 8: 19 groups (best 1 each), then 3 groups (best 2 each), then the final
    assert answer["x_tournament"] == {"finalists": answer["x_tournament"]["finalists"], "rounds": 3}  # §20: no options
    assert len(answer["x_tournament"]["finalists"]) == 6 and answer["choice"] in answer["x_tournament"]["finalists"]
    assert len(answer["probabilities"]) == 150 and answer["x_jev_confidence"] == jev_confidence(answer)
    assert "abstention" in answer and "x_tournament" not in body["answers"]["urgent"]
    want = predict_tournament(router.load("tiny"), state, questions, 8, min_confidence=0.2)
    assert answer["choice"] == want["answers"]["intent"]["choice"]
    assert answer["x_tournament"] == {k: v for k, v in want["tournament"]["intent"].items() if k != "options"}
    assert body["usage"]["input_tokens"] == want["usage"]["input_tokens"]
    results = batch.json()["results"]
    assert results[0]["answers"]["intent"]["x_tournament"] == results[2]["answers"]["intent"]["x_tournament"]
    for s, got in zip([state, "the app crashes"], results):
        expected = json.loads(json.dumps(predict_tournament(router.load("tiny"), s, questions, 8)))
        assert got["answers"]["intent"]["probabilities"] == expected["answers"]["intent"]["probabilities"]
    assert "x_tournament" not in plain.json()["answers"]["urgent"] and "tournament" not in plain.json()
    assert too_many.status_code == 413 and too_many.json()["detail"] == "too many choice options for 'intent' (256 > 255)"


def test_without_tournament_mode_the_limit_is_100(router):
    with client(router) as c:
        r = c.post("/v1/systemone", json={"state": "x", "questions": {"intent": many(101)}})
    assert r.status_code == 413
    assert r.json()["detail"] == "too many choice options for 'intent' (101 > 100)"


def test_strict_tournament_keeps_the_jev_shape(router):
    with client(router, tournament_group=16, jev_strict=True) as c:
        body = c.post("/v1/systemone", json={"state": "x", "questions": {"intent": many(40)}}).json()
    assert list(body) == ["model", "answers", "usage"]
    assert list(body["answers"]["intent"]) == ["type", "choice", "confidence", "probabilities"]
    assert len(body["answers"]["intent"]["probabilities"]) == 40


def test_tournament_group_setting():
    assert serve_config.from_env({"LAYA_TOURNAMENT_GROUP": "16"}).tournament_group == 16
    assert serve_config.from_env({"LAYA_TOURNAMENT_GROUP": ""}).tournament_group == 0
    assert serve_config.from_args(["--tournament-group", "8"], {}).tournament_group == 8
    for raw in ("1", "101", "-3", "eight"):  # the published rule: an int in 2..100, else off
        assert serve_config.from_env({"LAYA_TOURNAMENT_GROUP": raw}).tournament_group == 0
    assert serve_config.from_env({"LAYA_TOURNAMENT_GROUP": "100"}).tournament_group == 100
    with pytest.raises(ValueError, match="tournament_group=1 must be 0 \\(off\\) or an integer in 2..100"):
        serve_config.from_args(["--tournament-group", "1"], {})


def test_final_answer_is_gated_on_every_option():
    """Spec §2.4 reads an answer's bucket from len(probabilities): the widened answer (30 labels) is gated as
    choice:11+, not as the 4-finalist question the final asked, and re-gating the result changes nothing."""
    import copy

    from laya.confidence import apply_confidence_gate

    class GatingAgent(ScoringAgent):
        def predict_batch(self, states, questions, min_confidence=None, **kwargs):
            results = super().predict_batch(states, questions, min_confidence=min_confidence, **kwargs)
            apply_confidence_gate(results, min_confidence)  # in place (compat-0.4.15 R-CONF-1)
            return results

    gate = {"choice:3-5": 0.0, "choice:11+": 0.99}
    result = predict_tournament(GatingAgent(), "7", {"intent": many(30), "urgent": NOUL}, group_size=4,
                                min_confidence=gate)
    answer = result["answers"]["intent"]
    assert len(result["tournament"]["intent"]["finalists"]) == 4 and len(answer["probabilities"]) == 30
    assert answer["abstention"] == "abstained" and answer["abstention_threshold"] == 0.99
    assert answer["low_confidence"] is True
    regated = copy.deepcopy(result)
    apply_confidence_gate([regated], gate)
    assert regated == result
    loose = predict_tournament(GatingAgent(), "7", {"intent": many(30)}, group_size=4,
                               min_confidence={"choice:3-5": 0.99, "choice:11+": 0.0})
    assert loose["answers"]["intent"]["abstention"] == "passed" and "low_confidence" not in loose["answers"]["intent"]
