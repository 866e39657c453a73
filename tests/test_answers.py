"""Decoding, calibration and abstention: exact keys, rounding and warning texts."""

import math
import warnings

import numpy as np
import pytest

from laya.answers import (Calibration, answer_confidence, apply_binning_map, apply_min_confidence,
                          check_min_confidence, clamp_temperature, clamp_temperatures, confidence_from_probs,
                          decode_answer, resolve_lang_temperatures, temp_bucket)
from laya.questions import check_question

PLAIN = Calibration([1.0, 1.0, 1.0], {}, {})


def softmax(z):
    e = np.exp(np.asarray(z, dtype=np.float64) - max(z))
    return e / e.sum()


def test_clamp_warning_text_is_exact():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        temps, by_options = clamp_temperatures([1.6369, 1.2514, 1.9834],
                                               {"choice:3-5": 1.7602, "choice:11+": 0.10058280825614929})
    assert len(caught) == 1 and caught[0].category is RuntimeWarning
    assert str(caught[0].message) == (
        "laya: the checkpoint ships invalid or out-of-range temperatures (allowed range [0.5, 5]); replaced "
        "choice:11+=0.10058280825614929 -> 0.5. Treat confidences from the affected buckets as uncalibrated.")
    assert temps == [1.6369, 1.2514, 1.9834] and by_options == {"choice:3-5": 1.7602, "choice:11+": 0.5}


def test_clamp_lists_every_replacement_in_one_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        temps, _ = clamp_temperatures([True, float("nan"), 9], {"noul:2": "x"})
    assert temps == [1.0, 1.0, 5.0]
    assert len(caught) == 1
    assert "temperature[0]=True -> 1, temperature[1]=nan -> 1, temperature[2]=9 -> 5, noul:2='x' -> 1" in str(caught[0].message)


def test_no_warning_for_valid_values():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clamp_temperatures([0.5, 5.0, 1], {})


@pytest.mark.parametrize("raw,applied", [(0.1, 0.5), (7, 5.0), (False, 1.0), (None, 1.0), (math.inf, 1.0), (2.5, 2.5)])
def test_clamp_temperature(raw, applied):
    assert clamp_temperature(raw) == applied


@pytest.mark.parametrize("qtype,k,bucket", [("choice", 1, "choice:2"), ("choice", 2, "choice:2"), ("score", 3, "score:3-5"),
                                            ("score", 5, "score:3-5"), ("choice", 6, "choice:6-10"),
                                            ("choice", 11, "choice:11+"), (2, 2, "noul:2")])
def test_temp_bucket(qtype, k, bucket):
    assert temp_bucket(qtype, k) == bucket


def test_choice_answer_keys_order_and_rounding():
    q = check_question("team", {"type": "choice", "instructions": "Which?", "criteria": {"b": None, 1: "one", 2.5: None}})
    z = [1.234567, 0.5, -2.0]
    ans = decode_answer(q, np.array(z + [-1e4]), 0.123456789, PLAIN)
    p = softmax(z)
    assert list(ans) == ["type", "choice", "probabilities", "confidence", "answer_confidence", "action"]
    assert ans["choice"] == "b"
    assert list(ans["probabilities"]) == ["b", 1, 2.5]  # original label objects, caller's order
    assert ans["probabilities"]["b"] == round(p[0], 4)
    entropy = -(p * np.log(p)).sum()
    assert ans["confidence"] == round(1 - entropy / math.log(3), 4)
    assert ans["answer_confidence"] == round(p.max(), 4)
    assert ans["action"] == {"act_probability": 0.1235}


def test_score_answer_is_expected_level():
    q = check_question("s", {"type": "score", "instructions": "How?", "criteria": ["low", {"x": 1}, 3]})
    z = [0.1, 0.7, -0.3]
    ans = decode_answer(q, np.array(z), 0.5, PLAIN)
    p = softmax(z)
    assert list(ans) == ["type", "score", "legend", "probabilities", "confidence", "answer_confidence", "action"]
    assert ans["score"] == round(float(p[1] + 2 * p[2]), 4)
    assert ans["legend"] == {"0": "low", "1": '{"x": 1}', "2": "3"}
    assert list(ans["probabilities"]) == ["0", "1", "2"]


def test_noul_answer_is_p_true():
    q = check_question("n", {"type": "noul", "instructions": "Is it?"})
    ans = decode_answer(q, np.array([0.2, 1.1]), 0.9, PLAIN)
    p_true = softmax([0.2, 1.1])[1]
    assert list(ans) == ["type", "noul", "confidence", "answer_confidence", "action"]
    assert ans["noul"] == round(p_true, 4)
    assert ans["confidence"] == round(max(p_true, 1 - p_true), 4)


def test_option_order_is_undone():
    plain = check_question("q", {"type": "choice", "instructions": "?", "criteria": ["a", "b", "c"]})
    shuffled = check_question("q", {"type": "choice", "instructions": "?", "criteria": ["a", "b", "c"],
                                    "option_order": [2, 0, 1]})
    z = np.array([0.3, -1.0, 2.0])
    # slot s showed option order[s]: slot 0 = c, slot 1 = a, slot 2 = b
    assert decode_answer(shuffled, z[[2, 0, 1]], 0.5, PLAIN) == decode_answer(plain, z, 0.5, PLAIN)


def test_temperature_by_bucket_then_type_then_language():
    cal = Calibration([2.0, 1.0, 1.0], {"choice:2": 4.0}, resolve_lang_temperatures({"de-AT": {"temperature": [0.5, 1, 1]}}, [2.0, 1.0, 1.0]))
    assert cal.temperature_for(0, 2, None) == (4.0, False)
    assert cal.temperature_for(0, 3, None) == (2.0, False)
    assert cal.temperature_for(0, 3, "DE") == (0.5, True)
    assert cal.temperature_for(0, 3, "fr") == (2.0, False)


def test_confidence_helpers():
    assert confidence_from_probs(np.array([1.0]), 1) == 1.0
    assert confidence_from_probs(np.array([0.5, 0.5]), 2) == pytest.approx(0.0, abs=1e-12)
    assert answer_confidence(np.array([0.2, 0.7, 0.1]), 2) == 0.7
    assert answer_confidence(np.array([]), 0) == 1.0


def test_binning_map_applies_and_passes_unknown_buckets():
    bm = {"choice:3-5": {"bins": 4, "values": [0.1, 0.2, 0.3, 0.9]}}
    assert apply_binning_map(0.8, "choice:3-5", bm) == 0.9
    assert apply_binning_map(1.0, "choice:3-5", bm) == 0.9
    assert apply_binning_map(0.8, "noul:2", bm) == 0.8


def test_min_confidence_fields():
    ans = {"type": "choice", "probabilities": {"a": 0.6, "b": 0.4}, "confidence": 0.03, "answer_confidence": 0.6}
    apply_min_confidence(ans, 0.7)
    assert (ans["abstention"], ans["abstention_threshold"], ans["low_confidence"]) == ("abstained", 0.7, True)
    ok = {"type": "noul", "noul": 0.9, "confidence": 0.9, "answer_confidence": 0.9}
    apply_min_confidence(ok, {"noul:2": 0.8, "default": 0.99})
    assert ok["abstention"] == "passed" and ok["abstention_threshold"] == 0.8 and "low_confidence" not in ok
    other = {"type": "score", "probabilities": {"0": 0.5, "1": 0.5}, "confidence": 0.0, "answer_confidence": 0.5}
    apply_min_confidence(other, {"noul:2": 0.8})
    assert other["abstention_threshold"] == 0.0 and other["abstention"] == "passed"


@pytest.mark.parametrize("bad", [True, float("nan"), math.inf, -0.1, 1.5, "0.5", {"choice:12": 0.5}, {"default": 2}])
def test_min_confidence_rejects(bad):
    with pytest.raises(ValueError, match="min_confidence"):
        check_min_confidence(bad)
