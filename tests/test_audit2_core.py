"""Second audit pass over compat §2 (caller's gate), §3 (laya.confidence), §6 (laya.structured), §7 (questions):
edge cases the rules state that other test files do not pin."""

from __future__ import annotations

import copy

import pytest

from laya import confidence as C
from laya import structured as S
from laya.questions import check_questions


def _results(**answers):
    return [{"model": "m", "answers": answers}]


def test_r_gate_4_unusable_numbers_fall_back_or_clear():
    # a numeric string or bool is no number: fall back to `confidence`; none usable -> unevaluated, stale flag gone
    res = _results(a={"type": "noul", "answer_confidence": "0.9", "confidence": 0.3},
                   b={"type": "noul", "answer_confidence": True, "confidence": float("nan"), "low_confidence": True},
                   c="not a dict")
    C.apply_confidence_gate(res + ["not a result", {"answers": None}], 0.5)
    a, b = res[0]["answers"]["a"], res[0]["answers"]["b"]
    assert (a["abstention"], a["low_confidence"], a["abstention_threshold"]) == ("abstained", True, 0.5)
    assert b["abstention"] == "unevaluated" and "low_confidence" not in b
    assert res[0]["answers"]["c"] == "not a dict"


def test_r_gate_4_zero_threshold_clears_and_none_writes_nothing():
    res = _results(d={"type": "noul", "answer_confidence": 0.2, "low_confidence": True})
    C.apply_confidence_gate(res, None)
    assert res[0]["answers"]["d"] == {"type": "noul", "answer_confidence": 0.2, "low_confidence": True}
    C.apply_confidence_gate(res, 0.0)
    assert res[0]["answers"]["d"] == {"type": "noul", "answer_confidence": 0.2, "abstention": "passed",
                                      "abstention_threshold": 0.0}


def test_r_conf_4_buckets_resolve_map_entries():
    th = {"choice:2": .1, "choice:3-5": .2, "choice:6-10": .3, "choice:11+": .4, "noul:2": .5, "default": .9}

    def answer(kind, k=0):
        return {"type": kind, **({"probabilities": {str(i): 1 / k for i in range(k)}} if k else {})}

    assert [C.resolve_min_confidence(answer("choice", k), th) for k in (1, 2, 5, 6, 10, 11)] == [.1, .1, .2, .3, .3, .4]
    assert C.resolve_min_confidence(answer("noul"), th) == .5
    assert C.resolve_min_confidence(answer("choice"), th) == .9  # no probabilities: no bucket -> the map's default
    assert C.resolve_min_confidence(answer("score", 2), {"noul:2": .5}, default=0.3) == 0.3


def test_r_conf_1_none_refused_and_answer_confidence_value_has_no_fallback():
    with pytest.raises(ValueError, match=r"^min_confidence must be a float in \[0.0, 1.0\], got None$"):
        C.check_min_confidence(None)
    assert C.answer_confidence_value({"confidence": 0.9}) is None
    assert C.answer_confidence_value({"answer_confidence": True}) is None


class _Stub:
    """A runner that ignores min_confidence (or rejects it) and records its keyword arguments."""

    def __init__(self, answers, accept=True):
        self.answers, self.accept, self.calls = answers, accept, []

    def predict(self, state, questions, **kwargs):
        if "min_confidence" in kwargs and not self.accept:
            raise TypeError("predict() got an unexpected keyword argument 'min_confidence'")
        self.calls.append(kwargs)
        return {"model": "stub", "answers": copy.deepcopy(self.answers)}

    def predict_batch(self, states, questions, **kwargs):
        self.calls.append(kwargs)
        return [{"model": "stub", "answers": copy.deepcopy(self.answers)} for _ in states]


_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "dept": {"enum": ["a", "b"]}}}
_ANSWERS = {"ok": {"type": "noul", "noul": 0.9, "confidence": 0.9, "answer_confidence": 0.9},
            "dept": {"type": "choice", "choice": "b", "probabilities": {"a": 0.45, "b": 0.55}, "confidence": 0.01,
                     "answer_confidence": 0.55}}


@pytest.mark.parametrize("bad", [1.5, -0.1, True, "0.5"])
def test_r_gate_1_bad_threshold_raises_before_the_runner_runs(bad):
    stub = _Stub(_ANSWERS)
    with pytest.raises(ValueError, match=r"^min_confidence must be a float in \[0.0, 1.0\], got "):
        S.decide(stub, "s", _SCHEMA, min_confidence=bad)
    with pytest.raises(ValueError):
        S.decide_batch(stub, ["s"], _SCHEMA, min_confidence=bad)
    assert stub.calls == []


def test_r_gate_1_runner_without_the_keyword_is_retried_and_still_gated():
    stub = _Stub(_ANSWERS, accept=False)
    details = S.decide(stub, "s", _SCHEMA, min_confidence=0.6, return_details=True)
    assert stub.calls == [{}]
    assert details.values == {"ok": True, "dept": None}
    assert details.answers["dept"]["low_confidence"] is True and details.answers["dept"]["abstention"] == "abstained"


def test_r_gate_2_and_r_st_4_router_like_requests_carry_routing_keys():
    class RouterLike(_Stub):
        route_batch = None

        def predict_batch(self, requests, **kwargs):
            self.requests = requests
            return super().predict_batch(requests, None, **kwargs)

    stub = RouterLike(_ANSWERS)
    out = S.decide_batch(stub, ["a", "b"], _SCHEMA, min_confidence=0.6, model="english", task="t", lang="de",
                         lang_guess=True, max_len=128, head_max_len=64, batch_size=2)
    assert stub.calls == [{"batch_size": 2}]  # min_confidence is not forwarded; the routing keys moved
    assert stub.requests[0] == {"state": "a", "questions": S.questions_from_json_schema(_SCHEMA), "model": "english",
                                "task": "t", "lang": "de", "lang_guess": True, "max_len": 128, "head_max_len": 64}
    assert out == [{"ok": True, "dept": None}] * 2


@pytest.mark.parametrize("states, name", [("abc", "str"), (b"abc", "bytes"), (5, "int"), ({"a": 1}, "dict")])
def test_r_st_4_states_must_be_a_sequence(states, name):
    with pytest.raises(TypeError, match=f"^states must be a sequence of states, not {name}$"):
        S.decide_batch(_Stub(_ANSWERS), states, _SCHEMA)


def test_r_st_2_ref_texts():
    def plan(props, **defs):
        return S.plan_from_json_schema({"type": "object", "properties": props, **defs})

    with pytest.raises(S.SchemaError, match=r"^properties\.a: \$ref '#/\$defs/Loop' is recursive; flatten the schema$"):
        plan({"a": {"$ref": "#/$defs/Loop"}}, **{"$defs": {"Loop": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/Loop"}}})
    with pytest.raises(S.SchemaError, match=r"^properties\.x: nested objects are not supported; flatten the schema$"):
        plan({"x": {"$ref": "#/$defs/O"}}, **{"$defs": {"O": {"properties": {"a": {"type": "boolean"}}}}})
    with pytest.raises(S.SchemaError, match=r"^properties\.x: a numeric field needs integer 'minimum' and 'maximum'"):
        plan({"x": {"type": "integer", "minimum": False, "maximum": True}})


@pytest.mark.parametrize("kind", [[], {}, set()])
def test_r_q_1_unhashable_type_is_a_value_error(kind):
    with pytest.raises(ValueError, match=r"^question 'refund': unknown type .*; use one of \['choice', 'noul', 'score'\]$"):
        check_questions({"refund": {"type": kind, "instructions": "x"}})


def test_r_q_1_through_the_agent(agent):
    expected = "question 'refund': unknown type {}; use one of ['choice', 'noul', 'score']"
    with pytest.raises(ValueError) as e:
        agent.predict("hello", {"refund": {"type": {}, "instructions": "x"}})
    assert str(e.value) == expected
    with pytest.raises(ValueError) as e:
        agent.predict_long("hello", {"refund": {"type": {}, "instructions": "x"}})
    assert str(e.value) == expected


def test_r_q_2_override_keys_and_inheritance(tiny_checkpoint):
    import laya

    with pytest.raises(ValueError, match="^Language override 'DE-at' must be a mapping, got int$"):
        laya.load(tiny_checkpoint, device="cpu", lang_temperatures={"DE-at": 5})
    agent = laya.load(tiny_checkpoint, device="cpu", lang_temperatures={"FR-ca": None, "es": {"temperature": None}})
    assert set(agent.lang_temperatures) == {"fr", "es"}
    assert agent.lang_temperatures["fr"]["temperature"] == agent.temperature
    assert agent.lang_temperatures["es"]["temperature"] == agent.temperature


def test_pydantic_basemodel_itself_is_a_named_type_error():
    pydantic = pytest.importorskip("pydantic")
    from laya.structured import questions_from_pydantic

    with pytest.raises(TypeError, match="expected a subclass of a pydantic model"):
        questions_from_pydantic(pydantic.BaseModel)


def test_predict_long_returns_a_hooks_non_dict_answer_as_given(agent):
    # a start hook's ctx.skip answers with anything: predict returns it as given, and so does predict_long
    q = {"u": {"type": "noul", "instructions": "Is it urgent?"}}
    for state in ("short", "word " * 2000):
        assert agent.predict_long(state, q, on_predict_start=lambda ctx: ctx.skip([5])) == 5
