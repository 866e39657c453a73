"""laya.lang against compat-0.4.15 §4: the [V] examples (checked on the published package) and the rules behind them."""

import copy
import json
import subprocess
import sys
import types
from collections import UserDict

import pytest

from laya import lang
from laya.lang import analyse

KEYS = ["script", "script_profile", "language", "is_english", "language_undecided", "diacritic_rate",
        "non_latin_fraction", "mixed_segment"]
NO_LETTERS = {"script": "unknown", "script_profile": {}, "language": None, "is_english": True,
              "language_undecided": True, "diacritic_rate": 0.0, "non_latin_fraction": 0.0, "mixed_segment": None}
E = "Thanks for getting back to me about the delivery that was scheduled for this week. "
GERMAN = "Ich kann mich nicht anmelden und brauche bitte Hilfe"
SPANISH = "La tarjeta fue rechazada por el banco, necesito ayuda"


def diag(state):
    return analyse(state, explain=True)["diagnostic"]


# ---- §4.11 whole-state examples [V] ---------------------------------------------------------------------------

WHOLE = [
    ("Cancel my order", "latin", None, True, True, "insufficient_words"),
    ("blorp zyx wibble quork", "latin", None, True, True, "no_language_evidence"),
    ("Could you please send me the invoice again", "latin", "en", True, False, "language_evidence"),
    ("Je voudrais annuler ma commande pour demain", "latin", "fr", False, False, "language_evidence"),
    ("hittar inte kvittot", "latin", "sv", False, False, "short_swedish"),
    ("kan inte logga in", "latin", "sv", False, False, "language_evidence"),
    ("LOS ANGELES EL PASO LAS VEGAS", "latin", None, True, True, "caps_veto"),
    ("Our stores: LOS ANGELES EL PASO LAS VEGAS", "latin", "es", False, False, "language_evidence"),
    ("Game notes: MON DES EST LA QUE", "latin", None, True, True, "caps_filtered"),
    ("ñandú ñandú ñu", "latin", None, False, True, "non_english_markers"),
    ("Заказ не пришёл", "cyrillic", None, False, True, "non_latin_script"),
    ("#4471-22", "unknown", None, True, True, "no_letters"),
    ("Visit example.com and acme.org or docs.acme.io", "latin", None, True, True, "insufficient_words"),
    ("Please email us at help@example.com about this order", "latin", "en", True, False, "language_evidence"),
    ("Please check the logs in os.path and sys.argv for the job", "latin", "en", True, False, "language_evidence"),
    ("Please forward this to Дмитрий Петров in accounting today", "latin", "en", True, False, "language_evidence"),
    ("Please ask γιώργος και μαρία about the invoice before Friday", "greek", None, False, True, "non_latin_script"),
    ("Her name is pronounced [vlɐˈdʲimʲɪr] by the whole family here", "latin", "en", True, False,
     "language_evidence"),
    ("Set α to 0.05 before the run", "latin", "en", True, False, "language_evidence"),
    ("Please refund the café order today", "latin", "en", True, False, "language_evidence"),
    ("Please refund the café order from José today", "latin", None, False, True, "non_english_markers"),
    ("tænd lyset i køkkenet nu", "latin", None, False, True, "non_english_markers"),
    ("Do more, do less, do it well", "latin", "en", True, False, "language_evidence"),
    ("reduzieren der helligkeit der lichter", "latin", "de", False, False, "language_evidence"),
    ("ələ", "latin", None, False, True, "non_english_markers"),
    ("\U00011F05\U00011F06\U00011F07\U00011F08", "other", None, False, True, "non_latin_script"),
    ("\U0002EBF0\U0002EBF1\U0002EBF2", "other", None, False, True, "non_latin_script"),
    ("東京駅の近くで財布を落としました", "kana", None, False, True, "non_latin_script"),
]


@pytest.mark.parametrize("text,script,language,english,undecided,reason", WHOLE)
def test_whole_state_examples(text, script, language, english, undecided, reason):
    r = analyse(text, explain=True)
    assert list(r) == KEYS + ["diagnostic"]
    assert (r["script"], r["language"], r["is_english"], r["language_undecided"]) == (script, language, english,
                                                                                      undecided)
    assert r["diagnostic"] == {"stage": "whole_state", "reason": reason, "source": None}
    assert r["mixed_segment"] is None


def test_example_numbers():
    assert analyse("Please forward this to Дмитрий Петров in accounting today")["non_latin_fraction"] == 0.2653
    assert analyse("ələ")["script_profile"] == {"latin": 1.0}
    assert analyse("Please refund the café order today")["diacritic_rate"] == round(1 / 34, 4)


# ---- §4.11 segment and value examples [V] ---------------------------------------------------------------------

def test_segment_examples():
    three = ("Support request form\nPlease describe the problem below and we will reply soon.\n"
             "O boleto venceu (ontem) e preciso de outro agora")
    r = analyse(three, explain=True)
    assert (r["language"], r["is_english"], r["language_undecided"]) == ("pt", False, False)
    assert r["mixed_segment"] == "O boleto venceu (ontem) e preciso de outro agora"
    assert r["diagnostic"] == {"stage": "segment", "reason": "named_segment",
                               "source": {"leaf_index": 0, "path": [], "line": 3}}
    r = analyse({"note": E, "body": SPANISH}, explain=True)
    assert (r["language"], r["mixed_segment"]) == ("es", SPANISH)
    assert r["diagnostic"] == {"stage": "segment", "reason": "named_segment",
                               "source": {"leaf_index": 1, "path": ["body"], "line": 1}}
    r = analyse({"note": E, "shout": "QUERO MEU DINHEIRO DE VOLTA AGORA"}, explain=True)
    assert r["language"] == "pt" and r["diagnostic"]["stage"] == "segment"
    assert r["diagnostic"]["reason"] == "named_segment"


@pytest.mark.parametrize("extra", [{"log": "if (x) { y = el.value; }"}, {"path": "path: C:\\Temp\\los\\archivos"},
                                   {"team": "Nav/Com and COM only"}, {"agent": "Дмитрий Петрович Савицкий"}])
def test_segment_examples_that_stay_english(extra):
    r = analyse({"note": E, **extra}, explain=True)
    assert (r["language"], r["is_english"], r["mixed_segment"]) == ("en", True, None)
    assert r["diagnostic"] == {"stage": "whole_state", "reason": "language_evidence", "source": None}


@pytest.mark.parametrize("state,language,undecided,reason,source", [
    ({"note": E * 60, "title": "WIE SPÄT IST ES IN KÖLN HEUTE"}, "de", False, "named_value",
     {"leaf_index": 1, "path": ["title"], "line": 1}),
    ({"note": E * 60, "title": "WIE SPÄT IST ES IN KÖLN"}, None, True, "diacritic_value",
     {"leaf_index": 1, "path": ["title"], "line": 1}),
    ({"note": E * 60, "title": "請幫我取消這個訂單並且退款給我謝謝"}, None, True, "non_latin_value",
     {"leaf_index": 1, "path": ["title"], "line": 1}),
    ({"note": E * 60, "a": "Ich kann mich nicht anmelden",
      "b": "Bonjour, je ne peux pas me connecter à mon compte depuis hier soir"}, "fr", False, "named_value",
     {"leaf_index": 2, "path": ["b"], "line": 1}),
    (UserDict({"note": E * 60, "msg": {"inner": [GERMAN]}}), "de", False, "named_value",
     {"leaf_index": 1, "path": ["msg", "inner", 0], "line": 1}),
    ({"note": E * 60, 2 ** 70: GERMAN}, "de", False, "named_value", {"leaf_index": 1, "path": None, "line": 1}),
])
def test_value_examples(state, language, undecided, reason, source):
    r = analyse(state, explain=True)
    assert (r["script"], r["language"], r["is_english"], r["language_undecided"]) == ("latin", language, False,
                                                                                      undecided)
    assert r["mixed_segment"] is None
    assert r["diagnostic"] == {"stage": "value", "reason": reason, "source": source}


@pytest.mark.parametrize("state", [{"note": E * 60, "x": "kort"}, {"note": E * 60 + GERMAN}])
def test_value_examples_that_stay_english(state):
    r = analyse(state, explain=True)
    assert (r["language"], r["is_english"]) == ("en", True)
    assert r["diagnostic"]["stage"] == "whole_state"


ROUTES = [("Cancel my order", "multilingual"), ("Could you please send me the invoice again", "english"),
          ("Je voudrais annuler ma commande pour demain", "multilingual"), ("hittar inte kvittot", "multilingual"),
          ("ñandú ñandú ñu", "multilingual"), ("Заказ не пришёл", "multilingual"), ("#4471-22", "multilingual"),
          ("Please forward this to Дмитрий Петров in accounting today", "english"),
          ("Please ask γιώργος και μαρία about the invoice before Friday", "multilingual"),
          ("Set α to 0.05 before the run", "english"), ("Please refund the café order today", "english"),
          ("Please refund the café order from José today", "multilingual"), ("東京駅の近くで財布を落としました", "multilingual")]


@pytest.mark.parametrize("text,model", ROUTES)
def test_routes_of_the_examples(text, model):
    from laya import Router

    assert Router().route(text).model == model


# ---- R-LANG-1 .. R-LANG-4: shape, no-letter inputs, diagnostic ---------------------------------------------------

@pytest.mark.parametrize("state", [None, b"\xff", 3, 2.5, True, "", [], {}, "   \n ", object()])
def test_inputs_without_letters_never_raise(state):
    assert analyse(state) == NO_LETTERS
    assert diag(state) == {"stage": "whole_state", "reason": "no_letters", "source": None}


def test_explain_keeps_every_other_key_and_runs_once(monkeypatch):
    for state in ("Necesito ayuda con mi factura", {"note": E, "body": SPANISH}, {"note": E * 60, "t": GERMAN}):
        plain, explained = analyse(state), analyse(state, explain=True)
        assert list(plain) == KEYS and {k: explained[k] for k in KEYS} == plain
        assert set(explained["diagnostic"]) == {"stage", "reason", "source"}
    calls = []
    original = lang._detect
    monkeypatch.setattr(lang, "_detect", lambda s: calls.append(s) or original(s))
    analyse({"note": E, "body": SPANISH}, explain=True)
    assert len(calls) == 1


def test_diagnostic_is_fresh_json_and_holds_no_text():
    state = {"note": E, "items": [{"body": SPANISH}]}
    before = copy.deepcopy(state)
    first = diag(state)
    assert json.loads(json.dumps(first)) == first
    assert "tarjeta" not in json.dumps(first) and "Thanks" not in json.dumps(first)
    first["source"]["path"].append("x")
    first["source"]["line"] = 99
    assert diag(state) == {"stage": "segment", "reason": "named_segment",
                           "source": {"leaf_index": 1, "path": ["items", 0, "body"], "line": 1}}
    assert state == before


@pytest.mark.parametrize("key,kept", [("k" * 128, True), ("k" * 129, False), (2 ** 63 - 1, True), (2 ** 63, False),
                                      (-5, True), (True, False), (1.5, False), (("a", 1), False)])
def test_path_keys(key, kept):
    state = {"note": E, key: {"inner": [SPANISH]}}
    source = diag(state)["source"]
    assert source["path"] == ([key, "inner", 0] if kept else None)


def test_leaf_index_skips_unreadable_bytes_and_reads_utf8_bytes():
    state = {"junk": b"\xff\xfe", "note": E, "n": 7, "body": SPANISH.encode("utf-8")}
    r = analyse(state, explain=True)
    assert r["language"] == "es" and r["diagnostic"]["source"] == {"leaf_index": 1, "path": ["body"], "line": 1}
    assert analyse(bytearray("Заказ не пришёл".encode()))["script"] == "cyrillic"


# ---- R-LANG-6 text extraction --------------------------------------------------------------------------------

def test_state_text_joins_leaves_and_ignores_keys():
    assert lang.state_text({"Necesito ayuda": "x", "b": ["y", 3, None, ("z", b"w")]}) == "x y z w"
    assert lang.state_text("abcdef", max_chars=3) == "abc"
    assert lang.state_text(None) == "" and lang.state_text(12) == ""
    assert len(lang.state_text(["a" * 3000, "b" * 3000])) == 4000
    assert analyse({"Necesito ayuda con mi factura por favor": 1}) == NO_LETTERS


def test_any_mapping_counts():
    proxy = types.MappingProxyType({"note": E, "body": SPANISH})
    assert analyse(proxy)["language"] == "es" and analyse(UserDict(note=E, body=SPANISH))["language"] == "es"
    assert analyse((E, SPANISH))["language"] == "es"


def test_nesting_depth_limit():
    deep = [[[[[SPANISH]]]]]  # the string sits at level 6 below the dict
    assert diag({"note": E, "deep": deep})["source"]["path"] == ["deep", 0, 0, 0, 0, 0]
    assert analyse({"note": E, "deep": [deep]})["language"] == "en"  # level 7 is not read


# ---- R-LANG-7 .. R-LANG-10 letters and scripts ------------------------------------------------------------------

@pytest.mark.parametrize("text,profile", [
    ("ＡＢＣ", {"latin": 1.0}), ("ɐə", {"latin": 1.0}), ("ⱥⱥ", {"other": 1.0}), ("\ua7cb\ua7cc", {"other": 1.0}),
    ("\u1c89\u1c8a", {"other": 1.0}), ("ｶﾀｶﾅ", {"other": 1.0}), ("𠀀𠀁", {"other": 1.0}),
    ("\ufb1d\ufb1f", {"other": 1.0}),
    ("\u0378\u0379", {}), ("1, 2; 3!", {}), ("αβ ab", {"latin": 0.5, "greek": 0.5}),
    ("ab αβγ абвгд", {"latin": 0.2, "greek": 0.3, "cyrillic": 0.5}),
])
def test_script_profile(text, profile):
    got = lang.script_profile(text)
    assert list(got) == list(profile) and got == pytest.approx(profile)


@pytest.mark.parametrize("text,script", [("abc αβγ", "greek"), ("αβγ abc", "greek"), ("абв αβγ", "cyrillic"),
                                         ("αβγ абв", "greek"), ("abcd αβγ", "latin"), ("123", "unknown"),
                                         ("漢字かな", "han"), ("かな漢字", "kana"), ("漢かなかな", "kana")])
def test_dominant_script_ties_and_no_kana_rule(text, script):
    assert lang.detect_script(text) == script


def test_detect_script_does_not_promote():
    text = "Please ask γιώργος και μαρία about the invoice before Friday"
    assert lang.detect_script(text) == "latin" and analyse(text)["script"] == "greek"


@pytest.mark.parametrize("text,script", [
    ("abcde " * 18 + "абвгдежзий", "cyrillic"),  # 0.1 with 10 non-Latin letters
    ("abcdefghi " * 9 + "абвгдежзи", "latin"),  # 0.1 with only 9
    ("abcd а\u0301б", "cyrillic"),  # a combining mark does not split the word
    ("abcd а б", "latin"),  # no two consecutive letters
    ("abcd Аб", "latin"),  # capitalised
    ("abcd ⱥⱥ", "latin"),  # 'other' letters make no word
    ("abcdefgh αβ ⱥⱥⱥ", "other"),  # promoted to the largest non-Latin entry
])
def test_promotion(text, script):
    assert analyse(text)["script"] == script


def test_decomposed_accents_are_not_diacritic_letters():
    assert lang.latin_profile("cafe\u0301 cre\u0300me")["diacritic_rate"] == 0.0
    assert lang.latin_profile("café crème")["diacritic_rate"] == pytest.approx(2 / 10)


# ---- R-LANG-11 .. R-LANG-14 the Latin guess --------------------------------------------------------------------

def test_latin_profile_shape_and_identifiers():
    assert lang.latin_profile("Check der.die.das.und and ich@mir.mich today") == {
        "language": None, "english_hits": 1, "diacritic_rate": 0.0, "looks_non_english": False}
    assert lang.guess_latin_language("Ich kann das nicht.") == "de"  # a sentence-final period is no identifier
    assert lang.latin_profile("THİS İNTO THİS İNTO")["english_hits"] == 4


def test_diacritic_rate_counts_every_character_of_the_lowered_text():
    assert lang.latin_profile("ñu ñu")["diacritic_rate"] == pytest.approx(2 / 5)
    assert lang.latin_profile("ÑU!!!")["diacritic_rate"] == pytest.approx(1 / 5)
    assert lang.latin_profile("ñ x.y")["diacritic_rate"] == pytest.approx(1 / 3)  # the identifier became one space


@pytest.mark.parametrize("text,language,hits,looks", [
    ("glömt lösenord", "sv", 0, True), ("kvittot", None, 0, False), ("hej tack", None, 0, True),
    ("hej the", None, 1, False), ("e e e e e", None, 0, False), ("bonjour merci gracias necesito", "fr", 0, False),
    ("gracias necesito bonjour merci", "fr", 0, False), ("the und der die", "de", 1, False),
    ("the it und der die", "en", 2, False), ("logga kan inte in", "en", 1, False),
    ("the it ich bin für das", "de", 2, True), ("the it ich bin fur das", "en", 2, False),
    ("the you brûlée ok", None, 2, True), ("the café order today", None, 1, True),
    ("was in was in", "en", 4, False),
])
def test_latin_guess_rules(text, language, hits, looks):
    got = lang.latin_profile(text)
    assert (got["language"], got["english_hits"], got["looks_non_english"]) == (language, hits, looks)
    assert lang.guess_latin_language(text) == language


def test_nordic_overlap_makes_short_text_non_english():
    r = analyse("hej tack", explain=True)
    assert (r["is_english"], r["language_undecided"], r["diagnostic"]["reason"]) == (False, True,
                                                                                     "non_english_markers")
    assert analyse("hej the")["is_english"]


# ---- R-LANG-15 all caps ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,language,reason", [
    ("WIE SPÄT IST ES IN KÖLN HEUTE", "de", "language_evidence"),  # long word + accents
    ("DAS IST NICHT JETZT GUT", "de", "language_evidence"),  # long word + a 4-letter stop word
    ("MON DES EST LA QUE", None, "caps_veto"),
    ("we saw them at the DER DIE DAS UND ICH MIT", "en", "caps_filtered"),
    ("we saw DER DIE DAS UND ICH", None, "caps_filtered"),
    ("MON DES EST LA QUE Дмитрий Петров", "fr", "language_evidence"),  # the non-Latin letters carry the text
])
def test_caps_handling(text, language, reason):
    r = analyse(text, explain=True)
    assert r["script"] == "latin" and r["language"] == language and r["diagnostic"]["reason"] == reason


# ---- R-LANG-17 segment stage ---------------------------------------------------------------------------------

def test_code_lines_are_not_prose():
    prose = "erro (500) e não consigo pagar a conta agora"
    r = analyse(E + "\n" + prose, explain=True)
    assert (r["language"], r["mixed_segment"], r["diagnostic"]["source"]) == ("pt", prose,
                                                                              {"leaf_index": 0, "path": [], "line": 2})
    assert analyse(E + "\n" + prose.replace("erro (500)", "erro(500)"))["language"] == "en"


@pytest.mark.parametrize("extra", ["los_archivos del_sistema por_favor con_ellos", "Team LA EL LOS LAS",
                                   "el el el el banco", "  \n\t"])
def test_segment_filters(extra):
    assert analyse({"note": E, "x": extra})["language"] == "en"


def test_segment_needs_several_leaves_or_lines_and_strips_the_line():
    assert analyse(E + SPANISH)["language"] == "en"
    r = analyse(E + "\n   " + SPANISH + "  ")
    assert (r["language"], r["mixed_segment"]) == ("es", SPANISH)
    assert analyse(E * 60 + "\n" + GERMAN)["language"] == "en"  # past the 4000-character budget
    r = analyse([E * 60, GERMAN], explain=True)  # the value stage reads each leaf on its own
    assert r["language"] == "de" and r["diagnostic"]["source"] == {"leaf_index": 1, "path": [1], "line": 1}


# ---- R-LANG-18 value stage -----------------------------------------------------------------------------------

def test_value_stage_line_choice_and_limits():
    two = "Ich kann mich nicht anmelden\nBonjour, je ne peux pas me connecter à mon compte depuis hier soir"
    r = analyse({"note": E * 60, "m": two}, explain=True)
    assert r["language"] == "fr" and r["diagnostic"]["source"] == {"leaf_index": 1, "path": ["m"], "line": 2}
    assert analyse({"note": E * 60, "t": "請幫我取消訂單"})["is_english"]  # fewer than 10 letters
    assert analyse({"note": E * 60, "t": "ñandú ñandú ñu"})["is_english"]  # fewer than 4 words
    r = analyse({"note": E * 60, "t": "請幫我取消這個訂單並且退款給我謝謝"})
    assert (r["script"], r["non_latin_fraction"]) == ("latin", 0.0)  # whole-state fields are kept


# ---- R-LANG-19 helpers and constants -------------------------------------------------------------------------

def test_constants_and_helpers():
    assert (lang.NON_EN_DIACRITIC_RATE, lang.ENGLISH_RESCUE_DIACRITIC_RATE, lang.NON_LATIN_FRACTION,
            lang.NON_LATIN_MIN_FRACTION, lang.NON_LATIN_MIN_LETTERS) == (0.02, 0.06, 0.2, 0.1, 10)
    assert lang.is_english("Cancel my order") is True and lang.is_english("Заказ не пришёл") is False
    assert lang.detect_language is analyse


def test_richer_evidence_is_opt_in_and_separate():
    ev = lang.evidence("Je voudrais annuler ma commande pour demain")
    assert ev["scores"]["fr"] == 3 and ev["evidenced"] == ["fr"]
    assert set(diag("Je voudrais annuler ma commande pour demain")) == {"stage", "reason", "source"}


def test_lang_is_torch_free():
    probe = "import sys, laya.lang; laya.lang.analyse('hola amigo'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_words_are_runs_of_letters_only():
    # R-LANG-11 / R-LANG-7: superscripts, fractions and Roman numerals are numerics, not letters, so they split words
    assert analyse("hola ² ³ ¹", explain=True)["diagnostic"]["reason"] == "insufficient_words"
    assert lang.latin_profile("the² the the thing")["english_hits"] == lang.latin_profile("the the the thing")["english_hits"]
    assert [w for w in lang._words_and_rate("x½y Ⅷ a_b c3d")[0]] == ["x", "y", "a", "b", "c", "d"]
