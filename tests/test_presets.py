"""Presets: the five question sets, their state keys, and that each is valid for the model."""

import pytest

import laya
from laya.presets import DEFAULT_EMAIL_CATEGORIES, PRESET_STATE_KEYS, PRESETS, state_field
from laya.questions import check_questions

SHAPES = {
    "triage": {"intent": "choice", "is_urgent": "noul", "frustration": "score", "refund_requested": "noul",
               "churn_risk": "noul"},
    "email": {"category": "choice", "is_spam": "noul", "is_phishing": "noul", "urgency": "score",
              "needs_reply": "noul"},
    "guard": {"jailbreak": "noul", "prompt_injection": "noul", "sensitive_data": "noul", "harm_severity": "score",
              "topic": "choice"},
    "moderation": {"toxic": "noul", "harassment": "noul", "threat": "noul", "spam": "noul", "severity": "score"},
    "router": {"difficulty": "score", "domain": "choice", "needs_tools": "noul", "is_sensitive": "noul"},
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_shape_state_key_and_validity(name):
    qs = PRESETS[name]()
    assert {qid: q["type"] for qid, q in qs.items()} == SHAPES[name]
    assert list(qs) == list(SHAPES[name])  # order = answer order
    assert state_field(qs) == PRESET_STATE_KEYS[name]
    assert len(check_questions(qs)) == len(qs)
    assert getattr(laya, f"{name}_questions") is PRESETS[name]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_call_returns_a_fresh_dict(name):
    a = PRESETS[name]()
    a[next(iter(a))]["instructions"] = "changed"
    assert PRESETS[name]()[next(iter(a))]["instructions"] != "changed"


def test_preset_details_from_the_spec():
    intent = laya.triage_questions()["intent"]["criteria"]
    assert list(intent) == ["refund", "technical_help", "billing_question", "information", "cancellation", "other"]
    assert all(isinstance(d, str) and d for d in intent.values())
    assert len(laya.triage_questions()["frustration"]["criteria"]) == 4
    email = laya.email_questions()
    assert email["category"]["criteria"] == list(DEFAULT_EMAIL_CATEGORIES)
    assert set(email["is_phishing"]["criteria"]) == {"true", "false"}
    assert len(email["urgency"]["criteria"]) == 3
    assert laya.email_questions(["a", "b"])["category"]["criteria"] == ["a", "b"]
    guard = laya.guard_questions()
    assert guard["topic"]["criteria"] == ["product_support", "coding", "general_knowledge", "personal_advice",
                                          "security_testing", "other"]
    assert len(guard["harm_severity"]["criteria"]) == 4


def test_state_field_needs_exactly_one_name():
    assert state_field({"a": {"type": "noul", "instructions": "Is `x` or `y` true?"}}) is None
    assert state_field({"a": {"type": "noul", "instructions": "No key here"}}) is None
    assert state_field({"a": {"type": "noul", "instructions": {"json": "`x`"}}}) is None
