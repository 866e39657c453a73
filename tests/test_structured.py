"""Structured decisions: schema -> question mapping, SchemaError paths, answer projection, decide/decide_batch."""

import enum
from typing import Literal, Optional

import pytest

from laya.structured import (MAX_OPTIONS, MAX_PROPERTIES, DecisionResult, SchemaError, answers_to_json, decide,
                             decide_batch, plan_from_json_schema, questions_from_json_schema)


def obj(**props):
    return {"type": "object", "properties": props}


# ---- mapping ------------------------------------------------------------------------------------

def test_mapping_of_each_property_kind():
    qs = questions_from_json_schema(obj(
        team={"enum": ["billing", "tech", 3, None], "description": "Which team handles `body`?"},
        only={"const": "x"},
        flag={"enum": [True, False]},
        urgent={"type": "boolean"},
        stars={"type": "integer", "minimum": 1, "maximum": 5},
        level={"type": "number", "minimum": 0.0, "maximum": 2.0},
        strict={"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
    ))
    assert qs["team"] == {"type": "choice", "instructions": "Which team handles `body`?",
                          "criteria": {"billing": None, "tech": None, "3": None, "null": None}}
    assert qs["only"] == {"type": "choice", "instructions": "What is `only`?", "criteria": {"x": None}}
    assert qs["flag"] == {"type": "noul", "instructions": "Is `flag` true?"}
    assert qs["urgent"] == {"type": "noul", "instructions": "Is `urgent` true?"}
    assert qs["stars"] == {"type": "score", "instructions": "Score `stars` from 1 to 5",
                           "criteria": ["1", "2", "3", "4", "5"]}
    assert qs["level"]["criteria"] == ["0", "1", "2"] and qs["strict"]["criteria"] == ["1", "2", "3"]
    from laya.questions import check_questions
    assert len(check_questions(qs)) == 7  # every mapped question is valid for the model


def test_refs_allof_optional_and_nullable_types():
    schema = {"type": "object", "$defs": {"Team": {"enum": ["a", "b"], "description": "from defs"}},
              "definitions": {"Level": {"type": "integer", "minimum": 0, "maximum": 2}},
              "properties": {
                  "team": {"$ref": "#/$defs/Team", "description": "sibling wins"},
                  "level": {"allOf": [{"$ref": "#/definitions/Level"}]},
                  "maybe": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
                  "either": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/Team"}]},
                  "typed": {"type": ["boolean", "null"]}}}
    plan = plan_from_json_schema(schema)
    assert plan.questions["team"]["instructions"] == "sibling wins"
    assert plan.questions["level"]["type"] == "score" and plan.questions["either"]["type"] == "choice"
    assert plan.fields["maybe"].nullable and plan.fields["typed"].nullable and not plan.fields["team"].nullable


# compat-0.4.15 R-ST-2: paths are "properties.<name>" and the published texts (these replaced our older ones)
@pytest.mark.parametrize("schema,path,fragment", [
    ([], "", "expected a JSON schema object, got list"),
    ({"type": "array"}, "", "the top level must be an object with 'properties'"),
    ({"type": "object", "properties": {}}, "", "'properties' must be a non-empty object"),
    (obj(**{f"p{i}": {"type": "boolean"} for i in range(MAX_PROPERTIES + 1)}), "", "33 properties exceeds MAX_PROPERTIES=32"),
    (obj(name={"type": "string"}), "properties.name", "a free string cannot be a fixed option set"),
    (obj(tags={"type": "array"}), "properties.tags", "arrays are not supported; ask one field per element"),
    (obj(inner={"type": "object", "properties": {}}), "properties.inner", "nested objects are not supported"),
    (obj(n={"type": "integer"}), "properties.n", "a numeric field needs integer 'minimum' and 'maximum'"),
    (obj(n={"type": "integer", "minimum": 0, "maximum": 10}), "properties.n", "11 levels exceeds MAX_SCORE_LEVELS=10"),
    (obj(n={"type": "number", "minimum": 0.5, "maximum": 3}), "properties.n", "integer 'minimum' and 'maximum'"),
    (obj(e={"enum": []}), "properties.e", "'enum' must not be empty"),
    (obj(e={"enum": list(range(MAX_OPTIONS + 1))}), "properties.e", "33 options exceeds MAX_OPTIONS=32"),
    (obj(e={"enum": [1, "1"]}), "properties.e", "enum values produce duplicate choice labels"),
    (obj(r={"$ref": "#/$defs/Missing"}), "properties.r", "does not resolve to an entry"),
    (obj(r={"$ref": "http://x/y"}), "properties.r", "does not resolve to an entry"),
    ({"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
      "properties": {"a": {"$ref": "#/$defs/A"}}}, "properties.a", "is recursive; flatten the schema"),
    (obj(x={"allOf": [{"type": "boolean"}, {"description": "d"}]}), "properties.x", "single branch"),
    (obj(x={"anyOf": [{"type": "boolean"}, {"type": "integer"}]}), "properties.x", "Optional"),
    (obj(x={"type": ["boolean", "integer"]}), "properties.x", "multiple non-null types"),
    (obj(x={"description": "no type"}), "properties.x", "needs an 'enum'"),
])
def test_schema_errors_name_the_path(schema, path, fragment):
    with pytest.raises(SchemaError) as info:
        plan_from_json_schema(schema)
    assert info.value.path == path and isinstance(info.value, ValueError) and fragment in str(info.value)
    assert str(info.value).startswith(f"{path}: " if path else fragment)


# ---- projection with a fake runner (no model) ---------------------------------------------------

SCHEMA = obj(team={"enum": ["billing", 3, None]}, urgent={"type": "boolean"},
             stars={"type": "integer", "minimum": 1, "maximum": 3}, flag={"enum": [False, True]})


def fake_answers(low=()):
    answers = {
        "team": {"type": "choice", "choice": "3", "probabilities": {"billing": 0.2, "3": 0.7, "null": 0.1},
                 "confidence": 0.3, "answer_confidence": 0.7},
        "urgent": {"type": "noul", "noul": 0.5, "confidence": 0.5, "answer_confidence": 0.5},
        # the expected level 0.95 would round to level 1 (stars=2); the argmax is level 0 -> stars=1
        "stars": {"type": "score", "score": 0.95, "probabilities": {"0": 0.5, "1": 0.05, "2": 0.45},
                  "confidence": 0.2, "answer_confidence": 0.5},
        "flag": {"type": "noul", "noul": 0.2, "confidence": 0.8, "answer_confidence": 0.8},
    }
    for k in low:
        answers[k]["low_confidence"] = True
    return answers


class FakeRunner:
    def __init__(self, low=()):
        self.low, self.calls = low, []

    def predict(self, state, questions, **kw):
        self.calls.append(("predict", state, questions, kw))
        return {"model": "fake", "answers": fake_answers(self.low), "usage": {"input_tokens": 1}}

    def predict_batch(self, states, questions, **kw):
        self.calls.append(("predict_batch", states, questions, kw))
        return [{"model": "fake", "answers": fake_answers(self.low), "usage": {}} for _ in states]


class FakeRouterRunner(FakeRunner):
    def route_batch(self, *a, **kw):  # compat-0.4.15 R-ST-4: route_batch marks a runner as Router-like
        raise AssertionError("decide_batch must not route by itself")

    def predict_batch(self, requests, **kw):
        self.calls.append(("requests", requests, kw))
        return [{"model": "fake", "answers": fake_answers(), "usage": {}, "routing": {"model": "x"}}
                for _ in requests]


def test_projection_to_values():
    values = decide(FakeRunner(), "state", SCHEMA)
    assert values == {"team": 3, "urgent": True, "stars": 1, "flag": False}
    assert type(values["team"]) is int  # the original enum value, not its label


def test_low_confidence_answers_become_none_and_min_confidence_is_passed_on():
    runner = FakeRunner(low=("team", "stars"))
    values = decide(runner, "s", SCHEMA, min_confidence=0.6, max_len=64)
    # compat-0.4.15 R-GATE-1: decide gates the result itself (team 0.7 passes, urgent/stars 0.5 abstain)
    assert values == {"team": 3, "urgent": None, "stars": None, "flag": False}
    assert runner.calls[0][3] == {"min_confidence": 0.6, "max_len": 64}


def test_details():
    result = decide(FakeRunner(), "s", SCHEMA, return_details=True)
    assert isinstance(result, DecisionResult) and result.values["team"] == 3
    assert result.probabilities["urgent"] == {"false": 0.5, "true": 0.5}
    assert result.probabilities["flag"] == {"false": 0.8, "true": 0.2}
    assert result.probabilities["stars"] == {"1": 0.5, "2": 0.05, "3": 0.45}
    assert result.confidence["team"] == 0.3 and result.answer_confidence["team"] == 0.7
    assert result.usage == {"input_tokens": 1} and result.routing is None and result.answers["team"]["choice"] == "3"


def test_questions_mode_returns_raw_answers():
    qs = {"urgent": {"type": "noul", "instructions": "Urgent?"}}
    assert decide(FakeRunner(), "s", questions=qs) == fake_answers()
    assert decide(FakeRunner(), "s", questions=qs, return_details=True).probabilities["urgent"] == \
        {"false": 0.5, "true": 0.5}


def test_argument_errors():
    with pytest.raises(ValueError, match="^pass exactly one of schema= or questions=$"):
        decide(FakeRunner(), "s")
    with pytest.raises(ValueError, match="^pass exactly one of schema= or questions=$"):
        decide(FakeRunner(), "s", SCHEMA, questions={})
    with pytest.raises(TypeError, match="predict"):
        decide(object(), "s", SCHEMA)
    with pytest.raises(TypeError, match="pydantic"):
        decide(FakeRunner(), "s", int)
    with pytest.raises(TypeError, match="^states must be a sequence of states, not str$"):
        decide_batch(FakeRunner(), "one state", SCHEMA)
    with pytest.raises(ValueError, match="lack the schema properties"):
        answers_to_json({}, SCHEMA)


def test_decide_batch_for_agents_and_routers():
    runner = FakeRunner()
    out = decide_batch(runner, ["a", "b"], SCHEMA, batch_size=4)
    assert len(out) == 2 and out[0]["team"] == 3 and runner.calls[0][3] == {"batch_size": 4}
    router = FakeRouterRunner()
    details = decide_batch(router, ["a", "b"], SCHEMA, return_details=True, model="tiny", lang="es", batch_size=2)
    _, requests, kw = router.calls[0]
    assert [r["state"] for r in requests] == ["a", "b"] and all(r["model"] == "tiny" and r["lang"] == "es"
                                                                  for r in requests)
    assert kw == {"batch_size": 2} and details[1].routing == {"model": "x"}


# ---- pydantic v2 (skipped cleanly when pydantic is not installed) ---------------------------------

@pytest.fixture(scope="module")
def ticket_model():
    pydantic = pytest.importorskip("pydantic", minversion="2")

    class Team(enum.Enum):
        billing = "billing"
        three = 3

    class Ticket(pydantic.BaseModel):
        team: Optional[Team] = pydantic.Field(default=None, description="Which team handles `message`?")
        urgent: bool
        stars: int = pydantic.Field(ge=1, le=3)
        flag: Literal[False, True] = False

    return Team, Ticket


def test_pydantic_mapping_and_instance(ticket_model):
    from laya.structured import questions_from_pydantic

    Team, Ticket = ticket_model
    qs = questions_from_pydantic(Ticket)
    assert qs["team"] == {"type": "choice", "instructions": "Which team handles `message`?",
                          "criteria": {"billing": None, "3": None}}
    assert qs["stars"]["type"] == "score" and qs["flag"]["type"] == "noul" and qs["urgent"]["type"] == "noul"

    class Runner(FakeRunner):
        def predict(self, state, questions, **kw):
            answers = fake_answers()
            answers["team"] = {"type": "choice", "choice": "3", "probabilities": {"billing": 0.3, "3": 0.7},
                               "confidence": 0.1, "answer_confidence": 0.7}
            return {"model": "fake", "answers": answers, "usage": {}}

    ticket = decide(Runner(), "s", Ticket)
    assert ticket == Ticket(team=Team.three, urgent=True, stars=1, flag=False)


def test_pydantic_abstention_on_a_required_field_is_explained(ticket_model):
    _, Ticket = ticket_model

    class Runner(FakeRunner):
        def predict(self, state, questions, **kw):
            answers = fake_answers(low=("urgent",))
            answers["team"]["probabilities"] = {"billing": 0.3, "3": 0.7}
            return {"model": "fake", "answers": answers, "usage": {}}

    with pytest.raises(ValueError, match=r"\['urgent', 'stars'\] abstained .* make them Optional"):
        decide(Runner(), "s", Ticket, min_confidence=0.6)  # decide gates: urgent and stars (0.5) abstain
    assert decide(Runner(), "s", Ticket, return_details=True).values["urgent"] is None


def test_decide_on_the_tiny_agent(agent):
    values = agent.decide("I was charged twice", SCHEMA)
    assert set(values) == {"team", "urgent", "stars", "flag"} and values["stars"] in (1, 2, 3)
    assert values["team"] in ("billing", 3, None) and isinstance(values["urgent"], bool)
    batch = agent.decide_batch(["I was charged twice", "the app crashes"], SCHEMA, return_details=True,
                               min_confidence=0.0)
    assert [sorted(d.values) for d in batch] == [sorted(SCHEMA["properties"])] * 2
    assert all(isinstance(d, DecisionResult) for d in batch)


def test_both_bound_forms_take_the_tighter_one():
    from laya.structured import plan_from_json_schema

    for node, levels in (({"minimum": 0, "maximum": 3, "exclusiveMaximum": 3}, ["0", "1", "2"]),
                         ({"minimum": 0, "exclusiveMinimum": 1, "maximum": 3}, ["2", "3"]),
                         ({"minimum": 2, "exclusiveMinimum": 0, "maximum": 9, "exclusiveMaximum": 20}, list("23456789"))):
        (field,) = plan_from_json_schema({"properties": {"x": {"type": "integer", **node}}})
        assert field.question["criteria"] == levels and field.minimum == int(levels[0])


def test_a_runners_result_of_another_shape_is_named():
    import laya.structured as S

    schema = {"properties": {"dept": {"enum": ["sales", "tech"]}, "urgent": {"type": "boolean"},
                             "level": {"type": "integer", "minimum": 1, "maximum": 3}}}

    class Runner:
        def __init__(self, result=None, batch=None):
            self.result, self.batch = result, batch

        def predict(self, state, questions, **kwargs):
            return self.result

        def predict_batch(self, states, questions, **kwargs):
            return self.batch

    with pytest.raises(RuntimeError, match=r"^Runner.predict_batch returned 0 results for 1 states$"):
        S.decide_batch(Runner(batch=[]), ["hi"], schema)
    with pytest.raises(ValueError, match=r"^the runner returned None, not a result with an 'answers' dict$"):
        S.decide(Runner(result=None), "hi", schema)
    with pytest.raises(ValueError, match=r"^answers must be a dict of property -> answer, got NoneType$"):
        S.answers_to_json(None, schema)
    good = {"dept": {"type": "choice", "choice": "tech", "probabilities": {"sales": 0.2, "tech": 0.8}},
            "urgent": {"type": "noul", "noul": 0.7}, "level": {"type": "score", "probabilities": {"0": 0.1, "1": 0.8, "2": 0.1}}}
    assert S.answers_to_json(good, schema) == {"dept": "tech", "urgent": True, "level": 2}
    for name, bad in (("dept", None), ("dept", {}), ("dept", {"choice": "zzz"}), ("urgent", {"noul": "x"}),
                      ("level", {"probabilities": {"a": 1}}), ("level", {"probabilities": {}})):
        with pytest.raises(ValueError, match=rf"^the answer for '{name}' is not a \w+ answer this schema can read"):
            S.answers_to_json({**good, name: bad}, schema)
