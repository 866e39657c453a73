"""Second audit of compat-0.4.15 §4 (laya.lang), §8 (laya.hooks) and §10 (laya.email): gaps left by the first pass."""

import pytest

from laya.email import clean_email_body
from laya.lang import analyse


# R-EM-1 step 1: None gives "" before the budget is used, so no budget refuses it
@pytest.mark.parametrize("budget", [2.5, None, "x", 0, -3])
def test_r_em_1_none_body_is_empty_whatever_the_budget(budget):
    assert clean_email_body(None, budget) == ""


def test_r_em_1_non_integer_budget_still_fails_like_a_slice():
    with pytest.raises(TypeError):
        clean_email_body("abc", 2.5)


# §4.11 [V] routes not pinned elsewhere (Router() with the stock default="multilingual")
ROUTES = [("blorp zyx wibble quork", "multilingual"), ("kan inte logga in", "multilingual"),
          ("LOS ANGELES EL PASO LAS VEGAS", "multilingual"), ("Our stores: LOS ANGELES EL PASO LAS VEGAS", "multilingual"),
          ("Game notes: MON DES EST LA QUE", "multilingual"),
          ("Visit example.com and acme.org or docs.acme.io", "multilingual"),
          ("Please email us at help@example.com about this order", "english"),
          ("Please check the logs in os.path and sys.argv for the job", "english"),
          ("Her name is pronounced [vlɐˈdʲimʲɪr] by the whole family here", "english"),
          ("tænd lyset i køkkenet nu", "multilingual"), ("Do more, do less, do it well", "english"),
          ("reduzieren der helligkeit der lichter", "multilingual"), ("ələ", "multilingual"),
          ("\U00011F05\U00011F06\U00011F07\U00011F08", "multilingual"), ("\U0002EBF0\U0002EBF1\U0002EBF2", "multilingual")]


@pytest.mark.parametrize("text,model", ROUTES)
def test_r_lang_examples_route(text, model):
    from laya import Router

    assert Router().route(text).model == model


def test_r_lang_insufficient_words_follow_the_router_default():
    from laya import Router

    assert Router(default="english").route("Cancel my order").model == "english"


# R-LANG-10 (b): 0.1 <= fraction < 0.2 promotes only with at least 10 non-Latin letters
@pytest.mark.parametrize("greek,script", [("αβγδεζηθικ", "greek"), ("αβγδεζηθι", "latin")])
def test_r_lang_10_moderate_fraction_needs_ten_letters(greek, script):
    text = "Please send the invoice to the accounting team before the end of this week " + greek
    assert 0.1 <= analyse(text)["non_latin_fraction"] < 0.2
    assert analyse(text)["script"] == script


def test_r_hk_3_a_timeout_too_big_for_a_float_is_the_value_error():
    from laya.hooks import validate_timeout

    with pytest.raises(ValueError, match=r"^hooks_timeout must be a positive finite number or None; got 1000"):
        validate_timeout(10 ** 400)
