"""compat-0.4.15 §7 R-Q-1: the question check shared by Agent, ONNXAgent, serve and training."""

import pytest

from laya.questions import check_question, check_questions

TYPES = "use one of ['choice', 'noul', 'score']"


@pytest.mark.parametrize("bad", [[], {}, ["choice"], {"choice": 1}, set(), None, 0, True, "Choice", "yesno"])
def test_unknown_or_unhashable_type_is_a_value_error_naming_the_question(bad):
    with pytest.raises(ValueError) as err:
        check_question("refund", {"type": bad, "instructions": "x", "criteria": ["a"]})
    assert str(err.value) == f"question 'refund': unknown type {bad!r}; {TYPES}"


def test_the_published_example():
    with pytest.raises(ValueError) as err:
        check_questions({"refund": {"type": [], "instructions": "Refund?"}})
    assert str(err.value) == "question 'refund': unknown type []; use one of ['choice', 'noul', 'score']"


@pytest.mark.parametrize("qid, text", [
    (None, "question id must not be None"),
    ("", "question id must be a non-empty string, got ''"),
    ("  ", "question id must be a non-empty string, got '  '"),
    (True, "question id must be a non-empty string, got True"),
    (1.5, "question id must be a non-empty string, got 1.5"),
])
def test_question_id_texts(qid, text):
    with pytest.raises(ValueError) as err:
        check_questions({qid: {"type": "noul", "instructions": "x"}})
    assert str(err.value) == text


@pytest.mark.parametrize("definition, text", [
    (["noul"], "question 'q': definition must be a dict, got list"),
    ("noul", "question 'q': definition must be a dict, got str"),
    ({"type": "noul"}, "question 'q': no 'instructions'; add the text the model should answer"),
    ({"type": "noul", "instructions": None},
     "question 'q': 'instructions' must not be None; add the text the model should answer"),
    ({"type": "noul", "instructions": ""},
     "question 'q': 'instructions' must not be empty; add the text the model should answer"),
    ({"type": "noul", "instructions": " \n "},
     "question 'q': 'instructions' must not be empty; add the text the model should answer"),
    ({"type": "noul", "instructions": []},
     "question 'q': 'instructions' must not be empty; add the text the model should answer"),
])
def test_definition_and_instructions_texts(definition, text):
    with pytest.raises(ValueError) as err:
        check_question("q", definition)
    assert str(err.value) == text


def test_int_ids_are_still_tolerated():
    assert check_questions({7: {"type": "noul", "instructions": "x"}})[0].qid == 7


def test_serve_answers_422_with_the_same_detail():
    pytest.importorskip("fastapi")
    from laya.serve import schema

    with pytest.raises(schema.ApiError) as err:
        schema.parse_single({"state": "x", "questions": {"refund": {"type": {}, "instructions": "x"}}},
                            ["tiny"], lambda n: n, 8192)
    assert err.value.status == 422
    assert err.value.detail == "question 'refund': unknown type {}; use one of ['choice', 'noul', 'score']"


# ---- R-Q-2: laya.load(..., lang_temperatures=...) texts ----------------------------------------------

@pytest.mark.parametrize("table, text", [
    ({1: {}}, "Language override keys must be strings, got 1"),
    ({"de": []}, "Language override 'de' must be a mapping, got list"),
    ({"de": {"temperature": [1.0, 2.0]}}, "Language override 'de' temperature must be a list of 3 floats, got 2"),
    ({"de": {"temperature_by_options": []}},
     "Language override 'de' temperature_by_options must be a mapping of bucket -> float, got list"),
])
def test_lang_override_texts(tiny_checkpoint, table, text):
    import laya

    with pytest.raises(ValueError) as err:
        laya.load(tiny_checkpoint, device="cpu", lang_temperatures=table)
    assert str(err.value) == text


def test_lang_override_none_inherits_and_keys_reduce_to_the_primary_subtag(agent):
    from laya.answers import resolve_lang_temperatures

    table = resolve_lang_temperatures({"de-AT": None, "PT_br": {"temperature": None}}, [1.5, 2.0, 2.5])
    same = {"temperature": [1.5, 2.0, 2.5], "temperature_by_options": {}}
    assert table == {"de": same, "pt": same}


def test_lang_override_replacement_warns_in_the_published_words():
    from laya.answers import resolve_lang_temperatures

    with pytest.warns(RuntimeWarning) as record:
        table = resolve_lang_temperatures({"de": {"temperature": [1.0, 9.0, 1.0]}}, [1.0, 1.0, 1.0])
    assert table["de"]["temperature"] == [1.0, 5.0, 1.0]
    assert len(record) == 1
    assert str(record[0].message).startswith(
        "laya: language override 'de' ships invalid temperatures or values outside [0.5, 5]; using ")


def test_agent_lang_temperatures_has_the_published_shape(tiny_checkpoint):
    # §1.3 public attribute, R-P2-1's shape: {lang: {"temperature", "temperature_by_options"}}
    import laya

    agent = laya.load(tiny_checkpoint, device="cpu", lang_temperatures={"de-AT": {"temperature": [1.0, 2.0, 3.0]}})
    assert agent.lang_temperatures == {"de": {"temperature": [1.0, 2.0, 3.0], "temperature_by_options": {}}}
