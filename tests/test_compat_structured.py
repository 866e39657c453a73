"""compat-0.4.15 §2 R-GATE-1/2 (decide and decide_batch gate the results themselves) and §6 (R-ST-1..4)."""

import pytest

from laya.structured import SchemaError, decide, decide_batch, plan_from_json_schema, questions_from_json_schema

SCHEMA = {"type": "object", "properties": {"urgent": {"type": "boolean"}, "team": {"enum": ["a", "b"]}}}


def _answers():
    return {"urgent": {"type": "noul", "noul": 0.9, "confidence": 0.9, "answer_confidence": 0.9},
            "team": {"type": "choice", "choice": "a", "probabilities": {"a": 0.55, "b": 0.45},
                     "confidence": 0.01, "answer_confidence": 0.55}}


class IgnoringAgent:
    """Takes min_confidence but never gates (an older predict, a stub, an attached agent)."""

    def __init__(self):
        self.calls = []

    def predict(self, state, questions, **kw):
        self.calls.append(kw)
        return {"model": "m", "answers": _answers(), "usage": {}}

    def predict_batch(self, states, questions, **kw):
        self.calls.append(kw)
        return [{"model": "m", "answers": _answers(), "usage": {}} for _ in states]


class NoKeywordAgent(IgnoringAgent):
    def predict(self, state, questions, **kw):
        if "min_confidence" in kw:
            raise TypeError("predict() got an unexpected keyword argument 'min_confidence'")
        return super().predict(state, questions, **kw)


class BrokenAgent(IgnoringAgent):
    def predict(self, state, questions, **kw):
        raise TypeError("something else went wrong")


class RouterLike(IgnoringAgent):
    route_batch = None  # the attribute is what makes it Router-like

    def predict_batch(self, requests, **kw):
        self.calls.append((requests, kw))
        return [{"model": "m", "answers": _answers(), "usage": {}, "routing": {"model": "x"}} for _ in requests]


def test_decide_gates_what_the_runner_returned():
    runner = IgnoringAgent()
    details = decide(runner, "s", SCHEMA, min_confidence=0.6, return_details=True)
    assert runner.calls == [{"min_confidence": 0.6}]
    assert details.values == {"urgent": True, "team": None}
    team = details.answers["team"]
    assert (team["abstention"], team["abstention_threshold"], team["low_confidence"]) == ("abstained", 0.6, True)
    assert details.answers["urgent"]["abstention"] == "passed" and "low_confidence" not in details.answers["urgent"]


def test_decide_retries_without_min_confidence_and_still_gates():
    runner = NoKeywordAgent()
    assert decide(runner, "s", SCHEMA, min_confidence={"choice:2": 0.6}) == {"urgent": True, "team": None}
    assert runner.calls == [{}]
    with pytest.raises(TypeError, match="something else"):
        decide(BrokenAgent(), "s", SCHEMA, min_confidence=0.5)


def test_decide_without_a_threshold_writes_nothing():
    details = decide(IgnoringAgent(), "s", SCHEMA, return_details=True)
    assert details.answers == _answers() and details.values == {"urgent": True, "team": "a"}


def test_decide_questions_mode_returns_gated_raw_answers():
    qs = {"team": {"type": "choice", "instructions": "x", "criteria": ["a", "b"]}}
    answers = decide(IgnoringAgent(), "s", questions=qs, min_confidence=0.6)
    assert answers["team"]["low_confidence"] is True and answers["team"]["abstention"] == "abstained"


@pytest.mark.parametrize("bad", [1.5, -0.1, True, "0.5", float("nan"), {"choice:7": 0.5}, {}])
def test_bad_min_confidence_is_refused_before_anything_runs(bad):
    for call in (lambda r: decide(r, "s", SCHEMA, min_confidence=bad),
                 lambda r: decide_batch(r, ["s"], SCHEMA, min_confidence=bad)):
        runner = IgnoringAgent()
        with pytest.raises(ValueError):
            call(runner)
        assert runner.calls == []


def test_decide_batch_does_not_forward_min_confidence_and_gates_every_result():
    runner = IgnoringAgent()
    out = decide_batch(runner, ("a", "b"), SCHEMA, min_confidence=0.6, batch_size=2)
    assert runner.calls == [{"batch_size": 2}]
    assert out == [{"urgent": True, "team": None}] * 2
    router = RouterLike()
    details = decide_batch(router, ["a"], SCHEMA, min_confidence=0.6, model="en", return_details=True)
    requests, kw = router.calls[0]
    assert kw == {} and requests == [{"state": "a", "questions": questions_from_json_schema(SCHEMA), "model": "en"}]
    assert details[0].values["team"] is None and details[0].answers["team"]["abstention"] == "abstained"


def test_decide_batch_argument_errors():
    class NoBatch:
        def predict(self, *a, **k):
            return {}

    with pytest.raises(TypeError) as err:
        decide_batch(NoBatch(), ["s"], SCHEMA)
    assert str(err.value) == "NoBatch has no predict_batch; loop decide() over the states instead"
    for states, name in (("s", "str"), (b"s", "bytes"), ({"state": 1}, "dict"), (iter(["s"]), "list_iterator"), (3, "int")):
        with pytest.raises(TypeError) as err:
            decide_batch(IgnoringAgent(), states, SCHEMA)
        assert str(err.value) == f"states must be a sequence of states, not {name}"
    for kwargs in ({}, {"schema": SCHEMA, "questions": {}}):
        with pytest.raises(ValueError) as err:
            decide_batch(IgnoringAgent(), ["s"], **kwargs)
        assert str(err.value) == "pass exactly one of schema= or questions="


def test_plan_is_a_list_of_fields():
    schema = {"type": "object", "properties": {
        "team": {"enum": ["billing", 3, None]}, "urgent": {"type": "boolean"},
        "stars": {"type": "integer", "minimum": 1, "maximum": 3}}}
    plan = plan_from_json_schema(schema)
    assert isinstance(plan, list) and len(plan) == 3 and [f.name for f in plan] == ["team", "urgent", "stars"]
    team, urgent, stars = plan
    assert (team.kind, team.options, team.minimum) == ("choice", [("billing", "billing"), ("3", 3), ("null", None)], None)
    assert team.question == {"type": "choice", "instructions": "What is `team`?",
                             "criteria": {"billing": None, "3": None, "null": None}}
    assert (urgent.kind, urgent.minimum, urgent.question) == \
        ("noul", None, {"type": "noul", "instructions": "Is `urgent` true?"})
    assert (stars.kind, stars.minimum, stars.question["criteria"]) == ("score", 1, ["1", "2", "3"])
    assert questions_from_json_schema(schema) == {f.name: f.question for f in plan}


@pytest.mark.parametrize("prop, message", [
    ([], "properties.x: property must be an object, got list"),
    ({"enum": "abc"}, "properties.x: 'enum' must be an array of values, got str"),
    ({"enum": []}, "properties.x: 'enum' must not be empty"),
    ({"enum": list(range(40))}, "properties.x: 40 options exceeds MAX_OPTIONS=32"),
    ({"enum": [None, "null"]}, "properties.x: enum values produce duplicate choice labels"),
    ({"type": "integer", "minimum": True, "maximum": 3},
     "properties.x: a numeric field needs integer 'minimum' and 'maximum' to become a score"),
    ({"type": "number", "minimum": 0}, "properties.x: a numeric field needs integer 'minimum' and 'maximum' to become a score"),
    ({"type": "integer", "minimum": 3, "maximum": 1}, "properties.x: 'maximum' 1 is below 'minimum' 3"),
    ({"type": "integer", "minimum": 1, "maximum": 12},
     "properties.x: 12 levels exceeds MAX_SCORE_LEVELS=10; narrow the range or use an enum"),
    ({"type": "string"}, "properties.x: a free string cannot be a fixed option set; use 'enum' or a boolean"),
    ({"type": "array", "items": {"type": "boolean"}}, "properties.x: arrays are not supported; ask one field per element"),
    ({"type": "object"}, "properties.x: nested objects are not supported; flatten the schema"),
    ({"anyOf": [{"type": "boolean"}, {"type": "integer"}, {"type": "null"}]},
     "properties.x: only 'Optional[...]' unions (one non-null branch) are supported, got 2"),
    ({"type": ["boolean", "string", "null"]}, "properties.x: 'type' has multiple non-null types; unions are not supported"),
])
def test_property_error_texts(prop, message):
    with pytest.raises(SchemaError) as err:
        plan_from_json_schema({"type": "object", "properties": {"x": prop}})
    assert str(err.value) == message and err.value.path == "properties.x"


@pytest.mark.parametrize("schema, message", [
    ({"properties": {"a": {"$ref": "#/$defs/Nope"}}},
     "properties.a: $ref '#/$defs/Nope' does not resolve to an entry of this schema's '$defs' or 'definitions'"),
    ({"$defs": {}, "properties": {"a": {"$ref": "#/$defs/Nope"}}},
     "properties.a: $ref '#/$defs/Nope' does not resolve to an entry of this schema's '$defs' or 'definitions'"),
    ({"properties": {"a": {"$ref": "other.json#/$defs/X"}}},
     "properties.a: $ref 'other.json#/$defs/X' does not resolve to an entry of this schema's '$defs' or 'definitions'"),
    ({"$defs": {"Loop": {"$ref": "#/$defs/Loop"}}, "properties": {"a": {"$ref": "#/$defs/Loop"}}},
     "properties.a: $ref '#/$defs/Loop' is recursive; flatten the schema"),
    ({"$defs": {"Inner": {"type": "object", "properties": {"b": {"type": "boolean"}}}},
      "properties": {"a": {"$ref": "#/$defs/Inner"}}}, "properties.a: nested objects are not supported; flatten the schema"),
    ({"type": "object"}, "the top level must be an object with 'properties'"),
    ({"type": "array", "properties": {"a": {"type": "boolean"}}}, "the top level must be an object with 'properties'"),
    ({"properties": []}, "'properties' must be a non-empty object"),
    ({"properties": {f"p{i}": {"type": "boolean"} for i in range(33)}}, "33 properties exceeds MAX_PROPERTIES=32"),
    ("not a schema", "expected a JSON schema object, got str"),
])
def test_schema_error_texts(schema, message):
    with pytest.raises(SchemaError) as err:
        plan_from_json_schema(schema)
    assert str(err.value) == message


def test_ref_definition_description_is_dropped():
    defs = {"Dept": {"enum": ["sales", "it"], "description": "from the definition"}}
    qs = questions_from_json_schema({"$defs": defs, "properties": {
        "dept": {"$ref": "#/$defs/Dept"}, "other": {"$ref": "#/$defs/Dept", "description": "Which department?"},
        "wrapped": {"allOf": [{"$ref": "#/$defs/Dept"}]}}})
    assert qs["dept"]["instructions"] == "What is `dept`?"
    assert qs["other"]["instructions"] == "Which department?"
    assert qs["wrapped"]["instructions"] == "What is `wrapped`?"
    assert qs["dept"]["criteria"] == {"sales": None, "it": None}
