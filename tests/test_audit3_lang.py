"""Audit 3 of compat-0.4.15 §3/§4: regression pins for rules the earlier suites leave implicit (all already held)."""

import pytest

from laya import lang
from laya.confidence import apply_confidence_gate, jev_confidence
from laya.lang import analyse

FRENCH = "Je voudrais annuler ma commande pour demain"


def diag(state):
    return analyse(state, explain=True)["diagnostic"]


@pytest.mark.parametrize("text,language", [
    ("jag kan inte logga in idag", "sv"),  # rule 2: first word jag, one English hit
    ("vi kan inte se the", "sv"),  # rule 2: first word vi
    ("de kan inte logga in", "en"),  # rule 2 needs kan/jag/vi first
    ("jag kan inte se the it", "en"),  # rule 2 needs en <= 1
])
def test_r_lang_13_swedish_rule_two(text, language):
    assert lang.guess_latin_language(text) == language


def test_r_lang_15_caps_filtered_keeps_the_original_rate_and_markers():
    r = analyse("el niño ESTÁ AQUÍ CON LOS", explain=True)  # blanking leaves two words: no language
    assert (r["language"], r["is_english"], r["diacritic_rate"]) == (None, False, 0.12)
    assert r["diagnostic"]["reason"] == "non_english_markers"


def test_r_lang_18_value_stage_runs_after_a_no_letters_whole_state():
    r = analyse({"n": "1234 " * 900, "b": FRENCH}, explain=True)  # the French leaf is past the 4000 characters
    assert (r["script"], r["language"], r["is_english"]) == ("unknown", "fr", False)
    assert r["diagnostic"] == {"stage": "value", "reason": "named_value",
                               "source": {"leaf_index": 1, "path": ["b"], "line": 1}}


def test_r_lang_10_non_latin_fraction_is_read_at_four_places():
    assert analyse("kalke\nlas 汉字?")["script"] == "han"  # 2 of 10 letters: 1 - 0.8 reads as 0.2


def test_r_conf_5_jev_reads_numeric_strings_and_score_levels_in_integer_order():
    assert jev_confidence({"type": "choice", "probabilities": {"a": "0.7", "b": "0.3"}}) == 0.4
    assert jev_confidence({"type": "score", "probabilities": {"2": 0.7, "0": 0.1, "1": 0.2}}) == 0.4
    assert jev_confidence({"type": "score", "probabilities": {"10": 0.7, "9": 0.2, "2": 0.1}}) == 0.4  # not "10" < "2"


def test_r_gate_4_nan_answer_confidence_falls_back_to_confidence():
    results = [{"answers": {"q": {"type": "noul", "answer_confidence": float("nan"), "confidence": 0.9,
                                  "low_confidence": True}}}]
    apply_confidence_gate(results, 0.7)
    assert results[0]["answers"]["q"] == {"type": "noul", "answer_confidence": pytest.approx(float("nan"),
                                                                                            nan_ok=True),
                                          "confidence": 0.9, "abstention": "passed", "abstention_threshold": 0.7}
