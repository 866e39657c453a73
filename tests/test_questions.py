"""Question validation: every error is a ValueError starting "question '<id>': "."""

import pytest

from laya.questions import check_question, check_questions, keeps_tail, render_options, render_state


@pytest.mark.parametrize("definition,fragment", [
    ({"type": "pick", "instructions": "x"}, "unknown type 'pick'"),
    ({"type": "noul"}, "no 'instructions'"),
    ({"type": "noul", "instructions": "  "}, "'instructions' must not be empty"),
    ({"type": "choice", "instructions": "x"}, "criteria"),
    ({"type": "choice", "instructions": "x", "criteria": []}, "criteria"),
    ({"type": "choice", "instructions": "x", "criteria": [1, 1.0]}, "more than once"),
    ({"type": "choice", "instructions": "x", "criteria": [None, "a"]}, "None"),
    ({"type": "choice", "instructions": "x", "criteria": [["a"], "b"]}, "label"),
    ({"type": "score", "instructions": "x", "criteria": []}, "criteria"),
    ({"type": "score", "instructions": "x", "criteria": ["a", None]}, "None"),
    ({"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}}, "'maybe' is not allowed"),
    ({"type": "noul", "instructions": "x", "labels": {"false": "no"}}, "'labels'"),
    ({"type": "noul", "instructions": "x", "labels": {"false": "same", "true": "same"}}, "must differ"),
    ({"type": "choice", "instructions": "x", "criteria": ["a", "b"], "labels": {"false": "n", "true": "y"}}, "only for noul"),
    ({"type": "choice", "instructions": "x", "criteria": ["a", "b"], "option_order": [0, 0]}, "permutation"),
], ids=lambda v: str(v)[:40])
def test_validation_errors_name_the_question(definition, fragment):
    with pytest.raises(ValueError) as err:
        check_question("q1", definition)
    assert str(err.value).startswith("question 'q1': ")
    assert fragment.lower() in str(err.value).lower()


def test_question_ids():
    with pytest.raises(ValueError, match="None"):
        check_questions({None: {"type": "noul", "instructions": "x"}})
    assert check_questions({7: {"type": "noul", "instructions": "x"}})[0].qid == 7
    with pytest.raises(TypeError):
        check_questions([("q", {})])


def test_noul_bool_criteria_keys_and_rendering():
    q = check_question("n", {"type": "noul", "instructions": "x", "criteria": {True: "it holds", False: None},
                             "labels": {"false": "nope", "true": "yep"}})
    assert q.option_texts == ("nope: no, the statement does not hold", "yep: it holds")


def test_choice_rendering():
    assert render_options("choice", {"a": None, "b": "", "c": "desc", "d": {"k": [1, 2]}}) == \
        ["a", "b", "c: desc", 'd: {"k": [1, 2]}']
    assert check_question("c", {"type": "choice", "instructions": "x", "criteria": ["x", "y"]}).labels == ("x", "y")
    assert render_options("score", ["low", 2]) == ["level 0: low", "level 1: 2"]


def test_instructions_may_be_json():
    assert check_question("q", {"type": "noul", "instructions": {"ask": "ü"}}).instructions == '{"ask": "ü"}'


def test_states():
    assert render_state({"a": "ü"}) == '{"a": "ü"}'
    assert render_state(["x", {"y": 1}]) == '["x", {"y": 1}]'
    assert keeps_tail(["turn"]) and not keeps_tail("text") and not keeps_tail({"a": 1})
    for bad in (None, 3, b"bytes"):
        with pytest.raises(TypeError):
            render_state(bad)


@pytest.mark.parametrize("empty", [[], {}, "", "   "])
def test_empty_instructions_of_any_form_are_refused(empty):
    with pytest.raises(ValueError, match=r"^question 'q': 'instructions' must not be empty; add the text the model"):
        check_question("q", {"type": "noul", "instructions": empty})


def test_states_and_instructions_that_json_cannot_encode_are_named():
    import numpy as np

    from laya.questions import check_question, state_text

    circular: dict = {}
    circular["self"] = circular
    for state, cls, inner in (({"a": {1, 2}}, TypeError, "type set"), ({(1, 2): "a"}, TypeError, "not tuple"),
                              (circular, ValueError, "Circular reference"), ({"a": np.int64(3)}, TypeError, "int64")):
        with pytest.raises(cls) as e:
            state_text(state)
        assert str(e.value).startswith("state is not JSON data (") and inner in str(e.value)
    with pytest.raises(ValueError, match=r"^question 'q': 'instructions' is not JSON data \(Object of type set"):
        check_question("q", {"type": "choice", "instructions": {"a": {1}}, "criteria": ["a", "b"]})
