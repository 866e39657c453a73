"""Script and language evidence (laya.lang): the fields the Router decides on (rules of compat-0.4.15 §4)."""

import pytest

from laya import lang
from laya.lang import analyse, detect_script, is_english

KEYS = {"script", "script_profile", "language", "is_english", "language_undecided", "diacritic_rate",
        "non_latin_fraction", "mixed_segment"}


@pytest.mark.parametrize("state,script,language,english,undecided", [
    ("I was charged twice for my March invoice, please refund it.", "latin", "en", True, False),
    ("Hola, necesito ayuda con mi factura del mes pasado.", "latin", "es", False, False),
    ("Bonjour, pouvez-vous m'aider avec ma facture?", "latin", "fr", False, False),
    ("Ich möchte mein Abonnement kündigen, bitte.", "latin", "de", False, False),
    # Non-Latin scripts name no language: the script alone decides the checkpoint.
    ("मुझे मेरे बिल के बारे में मदद चाहिए", "devanagari", None, False, True),
    ("我的账单有问题，请帮我退款。", "han", None, False, True),
    ("こんにちは、請求書について質問があります", "kana", None, False, True),
    ("أريد استرداد أموالي من فضلك", "arabic", None, False, True),
    ("Здравствуйте, у меня проблема со счётом", "cyrillic", None, False, True),
    ("안녕하세요 환불해 주세요", "hangul", None, False, True),
    # No letters, or too few words without foreign markers: undecided but safe for English.
    ("12345 !!! ???", "unknown", None, True, True),
    ("", "unknown", None, True, True),
    ("Hello", "latin", None, True, True),
])
def test_language_table(state, script, language, english, undecided):
    r = analyse(state)
    assert set(r) == KEYS
    assert (r["script"], r["language"], r["is_english"], r["language_undecided"]) == (script, language, english,
                                                                                      undecided)
    assert detect_script(state) == script and is_english(state) is english


def test_detect_language_is_analyse_and_explain_adds_a_diagnostic():
    assert lang.detect_language is analyse
    r = analyse("Necesito ayuda con mi factura", explain=True)
    assert r["diagnostic"] == {"stage": "whole_state", "reason": "language_evidence", "source": None}
    assert "diagnostic" not in analyse("x")


def test_diacritic_threshold_and_english_rescue():
    # Two English-only words, one accented word and a rate (1/34) below 0.06: rescued as English.
    rescued = analyse("Please refund the café order today")
    assert rescued["is_english"] and 0.02 <= rescued["diacritic_rate"] < 0.06
    # Two accented words: no rescue, and no other language named.
    r = analyse("Please refund the café order from José today")
    assert not r["is_english"] and r["language_undecided"]
    # Above 0.06 the accents win even against English stop words.
    heavy = analyse("The café in Zürich was where I met my fiancée")
    assert heavy["diacritic_rate"] >= 0.06 and not heavy["is_english"]
    assert not analyse("café crème brûlée")["is_english"]


def test_non_latin_fraction_thresholds():
    # 5 Han letters among ~40 Latin ones: under 0.2 and fewer than 10 non-Latin letters -> still English.
    few = analyse("Please refund the order you sent 你好吗你好 to me today, thanks")
    assert few["is_english"] and 0 < few["non_latin_fraction"] < 0.2
    # 12 Han letters among ~100 Latin ones: >= 0.1 with >= 10 non-Latin letters -> promoted to han.
    many = analyse("Please refund the order that you sent to me last week because it was broken when it "
                   "arrived at the door " + "你好吗你好吗你好吗你好吗")
    assert 0.1 <= many["non_latin_fraction"] < 0.2 and many["script"] == "han" and not many["is_english"]


def test_a_foreign_line_or_field_marks_the_state_mixed():
    text = ("Hi team, the customer below wrote in yesterday about the invoice and we need to reply today.\n"
            "Necesito ayuda con mi factura.")
    r = analyse(text, explain=True)
    assert not r["is_english"] and r["language"] == "es" and r["mixed_segment"] == "Necesito ayuda con mi factura."
    assert r["diagnostic"]["source"] == {"leaf_index": 0, "path": [], "line": 2}
    state = {"subject": "Invoice", "body": "Please check the invoice I sent you. It is wrong.",
             "note": "Ça ne va pas du tout avec la facture"}
    r = analyse(state, explain=True)
    assert r["language"] == "fr" and r["diagnostic"]["source"]["path"] == ["note"]
    # A name with an accent is not a foreign field.
    assert analyse({"message": "I was charged twice for the order", "customer": "José"})["mixed_segment"] is None


def test_json_states_use_string_values_not_keys():
    assert analyse({"nachricht": "I was charged twice for my order", "id": 3})["is_english"]
    assert analyse([{"role": "user", "content": "Je veux annuler mon abonnement"}])["language"] == "fr"
    assert analyse({"n": 1, "ok": True})["language_undecided"]


def test_only_the_first_4000_characters_are_scanned():
    head = ("the order was late and I want a refund for it " * 100)[:lang.SCAN_CHARS]
    assert analyse(head + "\n" + "请帮我退款" * 200)["is_english"]
    assert analyse("请帮我退款" * 200 + "\n" + head)["script"] == "han"


def test_decomposed_accents_are_combining_marks_not_diacritic_letters():
    composed, decomposed = "café crème", "cafe\u0301 cre\u0300me"
    assert analyse(composed)["diacritic_rate"] > 0 and analyse(decomposed)["diacritic_rate"] == 0.0


def test_none_state_is_the_no_letters_result():
    assert analyse(None)["script"] == "unknown" and analyse(None)["is_english"] is True
