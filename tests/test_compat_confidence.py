"""compat-0.4.15 §2 R-GATE-4 and §3 (R-CONF-1..5): `laya.confidence` signatures, constants, texts, gate."""

import math
import subprocess
import sys
from fractions import Fraction

import pytest

import laya
from laya import confidence as c

SCALAR = "min_confidence must be a float in [0.0, 1.0], got "


def test_constants():
    assert (c.GATE_PASSED, c.GATE_ABSTAINED, c.GATE_UNEVALUATED) == ("passed", "abstained", "unevaluated")
    assert c.GATE_STATES == ("passed", "abstained", "unevaluated") and isinstance(c.GATE_STATES, tuple)
    assert c.BUCKET_QTYPES == ("choice", "score", "noul")
    assert c.BUCKET_SIZES == ("2", "3-5", "6-10", "11+")
    assert c.DEFAULT_BUCKET_KEY == "default"


def test_bucket_keys_is_a_fresh_set_of_twelve():
    keys = c.bucket_keys()
    assert isinstance(keys, set) and len(keys) == 12
    assert keys == {f"{t}:{s}" for t in ("choice", "score", "noul") for s in ("2", "3-5", "6-10", "11+")}
    keys.clear()
    assert len(c.bucket_keys()) == 12


@pytest.mark.parametrize("value, expected", [(0, 0.0), (1, 1.0), (0.25, 0.25), (Fraction(1, 2), 0.5)])
def test_check_min_confidence_scalars(value, expected):
    out = c.check_min_confidence(value)
    assert out == expected and type(out) is float


@pytest.mark.parametrize("value", [None, True, False, 1.5, -0.1, "0.5", float("nan"), math.inf, -math.inf, [0.5],
                                   10 ** 400, -10 ** 400])  # (ints too large for a float: no OverflowError)
def test_check_min_confidence_refuses_with_the_published_text(value):
    with pytest.raises(ValueError) as err:
        c.check_min_confidence(value)
    assert str(err.value) == SCALAR + repr(value)


def test_check_min_confidence_sends_a_dict_to_the_map_check():
    assert c.check_min_confidence({"noul:2": 1, "default": 0}) == {"noul:2": 1.0, "default": 0.0}
    with pytest.raises(ValueError, match=r"^a min_confidence map must be a non-empty dict of bucket -> float, got \{\}$"):
        c.check_min_confidence({})
    with pytest.raises(ValueError) as err:
        c.check_min_confidence({"choice:1": 0.5})
    assert str(err.value) == "min_confidence map keys must be a bucket like 'choice:3-5' or 'default', got 'choice:1'"
    with pytest.raises(ValueError) as err:
        c.check_min_confidence({"default": 2})
    assert str(err.value) == SCALAR + "2"


@pytest.mark.parametrize("answer, expected", [
    ({"answer_confidence": 0.7, "confidence": 0.1}, 0.7),
    ({"answer_confidence": 1}, 1.0),
    ({"answer_confidence": True, "confidence": 0.4}, None),  # no fallback to confidence
    ({"answer_confidence": None, "confidence": 0.4}, None),
    ({"answer_confidence": float("nan")}, None),
    ({"answer_confidence": "0.7"}, None),
    ({"confidence": 0.4}, None),
    (None, None),
])
def test_answer_confidence_value(answer, expected):
    assert c.answer_confidence_value(answer) == expected


@pytest.mark.parametrize("answer, bucket", [
    ({"type": "choice", "probabilities": {"a": 0.5, "b": 0.5}}, "choice:2"),
    ({"type": "choice", "probabilities": {str(i): 0.2 for i in range(5)}}, "choice:3-5"),
    ({"type": "score", "probabilities": {str(i): 0.1 for i in range(6)}}, "score:6-10"),
    ({"type": "score", "probabilities": {str(i): 0.1 for i in range(10)}}, "score:6-10"),
    ({"type": "choice", "probabilities": {str(i): 0.1 for i in range(11)}}, "choice:11+"),
    ({"type": "choice", "probabilities": {"a": 1.0}}, "choice:2"),
    ({"type": "noul", "noul": 0.9}, "noul:2"),
    ({"type": "noul", "probabilities": {"a": 0.2, "b": 0.3, "c": 0.5}}, "noul:3-5"),
    ({"type": "choice"}, None),
    ({"type": "choice", "probabilities": {}}, None),
    ({"type": "yesno", "probabilities": {"a": 1.0}}, None),
    ({"type": ["choice"]}, None),
])
def test_answer_bucket(answer, bucket):
    assert c.answer_bucket(answer) == bucket


def test_resolve_min_confidence_signature_and_fallbacks():
    m = {"choice:2": 0.6, "default": 0.3}
    assert c.resolve_min_confidence({"type": "choice", "probabilities": {"a": 1, "b": 0}}, m) == 0.6
    assert c.resolve_min_confidence({"type": "score", "probabilities": {"0": 1, "1": 0}}, m) == 0.3
    assert c.resolve_min_confidence({"type": "score"}, {"score:2": 0.9}) == 0.0
    assert c.resolve_min_confidence({"type": "score"}, {"score:2": 0.9}, default=0.25) == 0.25
    assert c.resolve_min_confidence({"type": "noul"}, {"noul:2": 0.8}, 0.1) == 0.8


def _result(**answers):
    return {"model": "m", "answers": answers}


def _gate(answer, threshold):
    c.apply_confidence_gate([_result(q=answer)], threshold)
    return answer


def test_gate_compares_answer_confidence_then_confidence():
    a = _gate({"type": "noul", "answer_confidence": 0.6, "confidence": 0.1}, 0.5)
    assert a == {"type": "noul", "answer_confidence": 0.6, "confidence": 0.1,
                 "abstention": "passed", "abstention_threshold": 0.5}
    b = _gate({"type": "noul", "answer_confidence": None, "confidence": 0.4}, 0.5)
    assert (b["abstention"], b["low_confidence"]) == ("abstained", True)
    at = _gate({"type": "noul", "answer_confidence": 0.5}, 0.5)  # at the threshold passes
    assert at["abstention"] == "passed" and "low_confidence" not in at


@pytest.mark.parametrize("answer", [
    {"type": "noul", "answer_confidence": True, "confidence": True, "low_confidence": True},
    {"type": "noul", "answer_confidence": float("nan"), "confidence": math.inf, "low_confidence": True},
    {"type": "noul", "answer_confidence": "0.9", "confidence": None, "low_confidence": False},
    {"type": "noul", "low_confidence": True},
])
def test_bool_or_unusable_confidences_are_unevaluated_never_passed(answer):
    _gate(answer, 0.5)
    assert answer["abstention"] == "unevaluated" and answer["abstention_threshold"] == 0.5
    assert "low_confidence" not in answer  # a leftover flag is removed


def test_bool_answer_confidence_falls_back_to_a_usable_confidence():
    answer = _gate({"type": "noul", "answer_confidence": True, "confidence": 0.2}, 0.5)
    assert answer["abstention"] == "abstained" and answer["low_confidence"] is True


def test_threshold_zero_clears_stale_flags_and_none_writes_nothing():
    stale = _gate({"type": "noul", "answer_confidence": 0.01, "low_confidence": True}, 0.0)
    assert stale == {"type": "noul", "answer_confidence": 0.01, "abstention": "passed", "abstention_threshold": 0.0}
    untouched = {"type": "noul", "answer_confidence": 0.01, "low_confidence": True}
    c.apply_confidence_gate([_result(q=untouched)])  # min_confidence defaults to None
    assert untouched == {"type": "noul", "answer_confidence": 0.01, "low_confidence": True}


def test_gate_threshold_of_a_bucket_map_is_per_answer():
    results = [_result(a={"type": "choice", "probabilities": {"x": 0.6, "y": 0.4}, "answer_confidence": 0.6},
                       b={"type": "noul", "answer_confidence": 0.6})]
    c.apply_confidence_gate(results, {"choice:2": 0.7, "default": 0.5})
    a, b = results[0]["answers"]["a"], results[0]["answers"]["b"]
    assert (a["abstention"], a["abstention_threshold"], a["low_confidence"]) == ("abstained", 0.7, True)
    assert (b["abstention"], b["abstention_threshold"]) == ("passed", 0.5) and "low_confidence" not in b
    assert isinstance(a["abstention_threshold"], float)
    ints = [_result(q={"type": "noul", "answer_confidence": 0.6})]
    c.apply_confidence_gate(ints, {"default": 1})
    assert type(ints[0]["answers"]["q"]["abstention_threshold"]) is float


def test_flag_low_confidence_writes_only_the_flag():
    results = [_result(lo={"type": "noul", "answer_confidence": 0.2},
                       hi={"type": "noul", "answer_confidence": 0.9, "low_confidence": True},
                       none={"type": "noul", "confidence": False, "low_confidence": True}), "skipped", None]
    assert c.flag_low_confidence(results, 0.5) is None
    answers = results[0]["answers"]
    assert answers == {"lo": {"type": "noul", "answer_confidence": 0.2, "low_confidence": True},
                       "hi": {"type": "noul", "answer_confidence": 0.9}, "none": {"type": "noul", "confidence": False}}
    c.flag_low_confidence(results, {"noul:2": 0.95})
    assert answers["hi"]["low_confidence"] is True


def test_gate_validates_the_threshold():
    for bad in (1.5, True, "0.5", {"bogus": 0.1}):
        with pytest.raises(ValueError):
            c.apply_confidence_gate([], bad)
        with pytest.raises(ValueError):
            c.flag_low_confidence([], bad)


def test_agent_decoder_gates_through_the_same_function():
    from laya import answers

    assert answers.check_min_confidence(None) is None
    with pytest.raises(ValueError, match=r"^min_confidence must be a float in \[0\.0, 1\.0\], got True$"):
        answers.check_min_confidence(True)
    answer = {"type": "noul", "answer_confidence": 0.4, "low_confidence": True}
    answers.apply_min_confidence(answer, 0.3)
    assert answer == {"type": "noul", "answer_confidence": 0.4, "abstention": "passed", "abstention_threshold": 0.3}


@pytest.mark.parametrize("answer, expected", [
    ({"type": "choice", "probabilities": {"a": "0.7", "b": "0.3"}}, 0.4),  # float() of each value
    ({"type": "choice", "probabilities": {"a": 0.7, "b": True}}, None),
    ({"type": "choice", "probabilities": {"a": 0, "b": 0, "c": 0}}, 0.0),  # zero sum -> uniform
    ({"type": "score", "probabilities": {"0": 0, "1": 0, "2": 0}}, 0.0),  # uniform: mode 0, spread 1 = D
    ({"type": "score", "probabilities": {"0": 0.1, "x": 0.9}}, None),  # a key that is not an integer
    ({"type": "score", "probabilities": {"2": 1.0, "10": 0.0, "1": 0.0}}, 1.0),
    ({"type": "score", "probabilities": {"0": -0.1, "1": 1.1}}, None),
    ({"type": "choice", "probabilities": ["0.5", "0.5"]}, None),
    ({"type": "noul", "noul": 0.9, "probabilities": {"a": 1.0}}, None),
    ({"type": "choice", "probabilities": {"only": "0"}}, 1.0),
])
def test_jev_confidence_rules(answer, expected):
    assert c.jev_confidence(answer) == expected


def test_top_level_names():
    for name in ("check_min_confidence", "check_min_confidence_map", "resolve_min_confidence", "flag_low_confidence",
                 "apply_confidence_gate", "GATE_STATES", "jev_confidence"):
        assert getattr(laya, name) is getattr(c, name) and name in laya.__all__


def test_confidence_stays_torch_free():
    probe = "import sys, laya.confidence; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_huge_numbers_read_as_unusable_or_scaled_never_raise():
    assert c.answer_confidence_value({"answer_confidence": 10 ** 400}) is None
    assert c.jev_confidence({"type": "choice", "probabilities": {"a": 10 ** 400, "b": 0.7}}) is None
    assert c.jev_confidence({"type": "score", "probabilities": {"0": 1e308, "1": 1e308}}) == 0.0  # uniform
    with pytest.raises(ValueError, match="min_confidence"):
        c.check_min_confidence({"default": -10 ** 400})
