"""Edge leftovers: arguments nested past the recursion limit, hook removal forms, e-mail budget types."""

import re

import numpy as np
import pytest

from laya import hooks, shortlist, structured
from laya.confidence import apply_confidence_gate, check_min_confidence, check_min_confidence_map
from laya.email import clean_email_body, email_state
from laya.questions import check_questions
from laya.structured import SchemaError

TOO_DEEP = "is nested too deeply (past Python's recursion limit)"
NOUL = {"q": {"type": "noul", "instructions": "Is it urgent?"}}


def deep_list(n=10000):
    x = []
    for _ in range(n):
        x = [x]
    return x


def deep_dict(n=10000):
    x = {}
    for _ in range(n):
        x = {"a": x}
    return x


def embed(texts):
    return np.ones((len(texts), 2))


# ---- 1. nested past the recursion limit -----------------------------------------------------------

@pytest.mark.parametrize("prop", [{"enum": [deep_list(5000)]}, {"const": deep_dict(5000)}, {"$ref": deep_list(5000)},
                                  {"foo": deep_dict(5000)}])
def test_deep_json_schema_is_a_schema_error(prop):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "x": prop}}
    with pytest.raises(SchemaError, match="^" + re.escape(f"properties.x: the property {TOO_DEEP}; flatten the schema")
                       + "$") as e:
        structured.plan_from_json_schema(schema)
    assert e.value.path == "properties.x"


def test_deep_value_never_read_is_no_error():
    schema = {"type": "object", "properties": {"x": {"type": "string", "format": deep_list(5000)}}}
    with pytest.raises(SchemaError, match="a free string cannot be a fixed option set"):
        structured.plan_from_json_schema(schema)


def test_deep_pydantic_like_schema():
    class Deep:
        @classmethod
        def model_json_schema(cls):
            return {"type": "object", "properties": {"x": {"enum": [deep_list(5000)]}}}

    with pytest.raises(SchemaError, match=r"^properties\.x: the property is nested too deeply"):
        structured.questions_from_pydantic(Deep)
    with pytest.raises(TypeError, match=r"^schema is nested too deeply .*; pass a JSON-schema dict or a pydantic"):
        structured.plan_for(deep_list())


class Runner:
    def predict(self, state, questions, **kwargs):
        raise AssertionError("must refuse before predicting")


def test_deep_schema_and_min_confidence_in_decide():
    with pytest.raises(SchemaError, match="nested too deeply"):
        structured.decide(Runner(), "s", {"type": "object", "properties": {"x": {"enum": [deep_list()]}}})
    with pytest.raises(ValueError, match="^" + re.escape(f"min_confidence {TOO_DEEP}")):
        structured.decide(Runner(), "s", questions=NOUL, min_confidence=deep_list())


@pytest.mark.parametrize("value", [deep_list(), {"default": deep_list()}, {"noul:2": deep_dict()}])
def test_deep_min_confidence(value):
    message = "^min_confidence is nested too deeply .*; pass a float in \\[0.0, 1.0\\] or a bucket map of them$"
    with pytest.raises(ValueError, match=message):
        check_min_confidence(value)
    with pytest.raises(ValueError, match=message):
        apply_confidence_gate([{"answers": {}}], value)
    with pytest.raises(ValueError, match=message):
        check_min_confidence_map(value if isinstance(value, dict) else deep_list())


def test_deep_max_len(agent):
    with pytest.raises(ValueError, match="^max_len is nested too deeply .*; pass a positive integer$"):
        agent.predict("hello", NOUL, max_len=deep_list())
    with pytest.raises(ValueError, match="^head_max_len is nested too deeply"):
        agent.predict_batch(["hello"], NOUL, head_max_len=deep_dict())
    with pytest.raises(ValueError, match="max_len must be a positive integer, got 0"):  # the usual text stays
        agent.predict("hello", NOUL, max_len=0)


@pytest.mark.parametrize("criteria", [[deep_list(), "b"], ("a", deep_list())])
def test_deep_shortlist_options(criteria):
    with pytest.raises(ValueError, match="^shortlist_choice: the definition is nested too deeply .*; flatten it$"):
        shortlist.shortlist_choice("state", criteria, embed, k=1)


def test_deep_shortlist_k_and_plain_errors_unchanged():
    with pytest.raises(ValueError, match="^k is nested too deeply"):
        shortlist.shortlist_choice("state", ["a", "b"], embed, k=deep_list())
    with pytest.raises(ValueError, match=r"^shortlist_choice: option label \[1\] is not hashable"):
        shortlist.shortlist_choice("state", [[1], "b"], embed, k=1)
    assert shortlist.shortlist_choice("state", ["a", "b", "c"], embed, k=2) == ["a", "b"]


# ---- 2. remove_hook takes what add_hook takes ------------------------------------------------------

class Audit(hooks.BaseHook):
    def on_predict_end(self, ctx):
        pass


class Holder(hooks.HookRegistry):
    def __init__(self, **kwargs):
        self.hooks = hooks.normalise_hooks(**kwargs)


@pytest.mark.parametrize("form", [lambda h: h, lambda h: (h,), lambda h: [h]])
def test_remove_hook_takes_every_add_form(form):
    a, b = Audit(), Audit()
    holder = Holder()
    holder.add_hook(form(a))
    holder.add_hook(b)
    holder.remove_hook(form(a))
    assert holder.hooks == [b]


def test_remove_hook_several_unknown_and_adapters():
    a, b, c = Audit(), Audit(), Audit()
    holder = Holder()
    holder.add_hook((a, b, c))
    holder.remove_hook([a, c])
    assert holder.hooks == [b]
    holder.remove_hook(Audit())  # not installed: nothing happens
    holder.remove_hook((Audit(), None))
    holder.remove_hook(None)
    assert holder.hooks == [b]

    def on_end(ctx):
        pass

    holder = Holder(hooks=a, on_predict_end=on_end)
    holder.remove_hook((on_end,))  # a callable installed as on_predict_end= goes by its function too
    assert holder.hooks == [a]


# ---- 3. clean_email_body's budget is a slice index -------------------------------------------------

@pytest.mark.parametrize("budget", [2.0, 2.5, "3", None, float("nan")])
def test_email_budget_must_be_an_integer(budget):
    message = (f"max_chars must be an integer (a slice budget: text[:max_chars]), got {budget!r} "
               f"({type(budget).__name__}); pass an int such as 3000")
    with pytest.raises(TypeError) as e:
        clean_email_body("abc", budget)
    assert str(e.value) == message
    with pytest.raises(TypeError, match=r"^max_chars must be an integer"):
        email_state("s", "abc", max_chars=budget)


def test_email_budget_slice_semantics_kept():
    assert clean_email_body("abc", 2) == "ab"
    assert clean_email_body("abc", True) == "a"  # a slice takes a bool, so the published cleaner does too
    assert clean_email_body("abc", np.int64(2)) == "ab"
    assert clean_email_body("abcdefghijkl", -1) == "abcdefg"
    assert clean_email_body(None, 2.0) == ""  # None is "" before the budget is read
    with pytest.raises(TypeError, match="^max_chars is nested too deeply .*; pass an int such as 3000$"):
        clean_email_body("abc", deep_list())


@pytest.mark.parametrize("definition", [
    {"type": "choice", "instructions": "i", "criteria": [deep_list(), "b"]},
    {"type": "choice", "instructions": "i", "criteria": ["a", "b"], "option_order": deep_list()},
    {"type": deep_list()}])
def test_deep_question_definitions(definition):
    with pytest.raises(ValueError, match="^question 'q': the definition is nested too deeply .*; flatten it$"):
        check_questions({"q": definition})


def test_deep_sizes_are_named():
    from laya.answers import positive_int

    with pytest.raises(ValueError, match="^batch_size is nested too deeply .*; pass a positive integer$"):
        positive_int(deep_list(), "batch_size")
    with pytest.raises(ValueError, match="^group_size is nested too deeply .*; pass an integer >= 2$"):
        shortlist.check_group_size(deep_list())


def test_a_deep_question_id_and_overflowing_embeddings_are_named():
    x = ()
    for _ in range(5000):
        x = (x,)
    with pytest.raises(ValueError, match="^question id is nested too deeply .*; use a string$"):
        check_questions({x: {"type": "noul", "instructions": "x"}})
    with pytest.raises(ValueError, match="^embed_fn must return a numeric array"):
        shortlist.shortlist_choice("s", ["a", "b"], lambda t: [[10 ** 400, 1.0]] * len(t), k=1)


def test_a_deep_property_name_is_a_schema_error():
    x = ()
    for _ in range(5000):
        x = (x,)
    with pytest.raises(SchemaError, match="^a property name is nested too deeply .*; use string names$"):
        structured.plan_from_json_schema({"type": "object", "properties": {x: {"type": "boolean"}}})


def test_error_texts_name_a_number_too_large_to_print():
    # repr of an int past Python's digit limit raises its own ValueError; the check's own error must come out
    import fractions

    from laya.answers import positive_int
    from laya.confidence import check_min_confidence
    from laya.email import clean_email_body
    from laya.shortlist import check_group_size, check_k

    big = -(10 ** 5000)
    with pytest.raises(ValueError, match=r"^max_len must be a positive integer, got <int too large to print>$"):
        positive_int(big, "max_len")
    with pytest.raises(ValueError, match=r"^min_confidence must be a float in \[0\.0, 1\.0\], got <int too large"):
        check_min_confidence(-big)
    with pytest.raises(ValueError, match=r"^group_size must be an integer >= 2 .*, got <int too large to print>$"):
        check_group_size(big)
    with pytest.raises(ValueError, match=r"^k must be a positive integer .*, got <int too large to print>$"):
        check_k(big)
    with pytest.raises(TypeError, match=r"^max_chars must be an integer .*, got <Fraction too large to print> "):
        clean_email_body("abc", fractions.Fraction(10 ** 5000, 3))
    assert positive_int(3, "max_len") == 3  # ordinary values: unchanged
    with pytest.raises(ValueError, match=r"^max_len must be a positive integer, got -3$"):
        positive_int(-3, "max_len")
