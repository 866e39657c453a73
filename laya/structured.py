"""Structured decisions: a JSON schema (or a pydantic v2 model class) in, typed values out.

Torch-free. Each schema property becomes one question (enum -> choice, boolean -> noul, bounded
integer -> score); the answers are projected back onto the schema's values. Anything the model cannot
answer as one of those three types is refused with a `SchemaError` naming the property's path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_PROPERTIES = 32
MAX_OPTIONS = 32
MAX_SCORE_LEVELS = 10
# Routing/budget keys that belong to each request when the runner is a Router.
ROUTER_REQUEST_KEYS = ("model", "task", "lang", "lang_guess", "max_len", "head_max_len")


class SchemaError(ValueError):
    """A schema the decision model cannot answer; `path` points at the offending part."""

    def __init__(self, path: str, message: str):
        super().__init__(f"schema {path}: {message}")
        self.path = path


@dataclass
class FieldPlan:
    """How one property is asked and how its answer becomes a value."""

    name: str
    qtype: str  # choice | score | noul
    values: dict = field(default_factory=dict)  # choice: label -> original enum value
    minimum: int = 0  # score: value of level 0
    integer: bool = True  # score: int for "integer", float for "number"
    nullable: bool = False


@dataclass
class Plan:
    questions: dict
    fields: dict  # name -> FieldPlan
    model: Any = None  # the pydantic class, when the schema came from one


@dataclass
class DecisionResult:
    values: Any
    confidence: dict
    probabilities: dict
    answers: dict
    usage: dict | None = None
    routing: dict | None = None
    answer_confidence: dict = field(default_factory=dict)


# ---- schema -> questions ------------------------------------------------------------------------

def _ref_target(root: dict, ref: Any, path: str) -> dict:
    if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
        raise SchemaError(path, f"$ref {ref!r} is not supported; only local '#/$defs/...' or "
                                "'#/definitions/...' references are")
    section, _, name = ref[2:].partition("/")
    target = (root.get(section) or {}).get(name)
    if not isinstance(target, dict):
        raise SchemaError(path, f"$ref {ref!r} points at nothing; define {name!r} under {section!r}")
    return target


def _inline(root: dict, node: Any, path: str, seen: tuple = ()) -> tuple[dict, bool]:
    """(node with $ref / single allOf / Optional anyOf resolved, nullable)."""
    if not isinstance(node, dict):
        raise SchemaError(path, f"must be a JSON-schema object, got {type(node).__name__}")
    nullable = False
    while True:
        if "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise SchemaError(path, f"$ref {ref!r} is circular; flatten the definition")
            seen = (*seen, ref)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**_ref_target(root, ref, path), **siblings}  # a sibling description wins
            continue
        if "allOf" in node:
            branches = node["allOf"]
            if not isinstance(branches, list) or len(branches) != 1:
                raise SchemaError(path, "allOf is supported only with a single branch; merge the branches")
            siblings = {k: v for k, v in node.items() if k != "allOf"}
            node = {**branches[0], **siblings} if isinstance(branches[0], dict) else branches[0]
            if not isinstance(node, dict):
                raise SchemaError(path, "the allOf branch must be a JSON-schema object")
            continue
        for key in ("anyOf", "oneOf"):
            if key in node:
                branches = node[key]
                real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")] \
                    if isinstance(branches, list) else None
                if real is None or len(real) != 1 or len(real) == len(branches):
                    raise SchemaError(path, f"{key} is supported only as Optional (one branch plus "
                                            "{'type': 'null'}); split the property")
                siblings = {k: v for k, v in node.items() if k != key}
                node = {**real[0], **siblings} if isinstance(real[0], dict) else real[0]
                nullable = True
                break
        else:
            break
    kind = node.get("type")
    if isinstance(kind, list):
        real = [t for t in kind if t != "null"]
        if len(real) != 1:
            raise SchemaError(path, f"type {kind!r} is supported only as [X, 'null']")
        nullable = nullable or len(real) < len(kind)
        node = {**node, "type": real[0]}
    return node, nullable


def _integral(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _property_question(root: dict, name: str, node: Any, path: str) -> tuple[dict, FieldPlan]:
    node, nullable = _inline(root, node, path)
    description = node.get("description")
    instructions = description if isinstance(description, str) and description.strip() else None
    if "const" in node and "enum" not in node:
        node = {**node, "enum": [node["const"]]}
    if "enum" in node:
        enum = node["enum"]
        if not isinstance(enum, list) or not enum:
            raise SchemaError(f"{path}/enum", "must be a non-empty list of values")
        if len(enum) == 2 and all(isinstance(v, bool) for v in enum) and enum[0] != enum[1]:
            plan = FieldPlan(name, "noul", nullable=nullable)
            return {"type": "noul", "instructions": instructions or f"Is `{name}` true?"}, plan
        if len(enum) > MAX_OPTIONS:
            raise SchemaError(f"{path}/enum", f"has {len(enum)} values; at most {MAX_OPTIONS} are supported")
        values: dict = {}
        for v in enum:
            if isinstance(v, (dict, list)):
                raise SchemaError(f"{path}/enum", f"value {v!r} is not a scalar; use strings, numbers or booleans")
            label = "null" if v is None else str(v)
            if label in values:
                raise SchemaError(f"{path}/enum", f"values {values[label]!r} and {v!r} both read as {label!r}; "
                                                  "make the labels distinct")
            values[label] = v
        question = {"type": "choice", "instructions": instructions or f"What is `{name}`?",
                    "criteria": {label: None for label in values}}
        return question, FieldPlan(name, "choice", values=values, nullable=nullable)
    kind = node.get("type")
    if kind == "boolean":
        return ({"type": "noul", "instructions": instructions or f"Is `{name}` true?"},
                FieldPlan(name, "noul", nullable=nullable))
    if kind in ("integer", "number"):
        lo, hi = _integral(node.get("minimum")), _integral(node.get("maximum"))
        if lo is None and _integral(node.get("exclusiveMinimum")) is not None:
            lo = _integral(node["exclusiveMinimum"]) + 1
        if hi is None and _integral(node.get("exclusiveMaximum")) is not None:
            hi = _integral(node["exclusiveMaximum"]) - 1
        if lo is None or hi is None:
            raise SchemaError(path, f"{kind} needs integer 'minimum' and 'maximum' (at most {MAX_SCORE_LEVELS} "
                                    "levels) to become a score question")
        if not 1 <= hi - lo + 1 <= MAX_SCORE_LEVELS:
            raise SchemaError(path, f"range {lo}..{hi} gives {hi - lo + 1} levels; use 1 to {MAX_SCORE_LEVELS}")
        question = {"type": "score", "instructions": instructions or f"Score `{name}` from {lo} to {hi}",
                    "criteria": [str(v) for v in range(lo, hi + 1)]}
        return question, FieldPlan(name, "score", minimum=lo, integer=kind == "integer", nullable=nullable)
    if kind in ("string", "array", "object"):
        raise SchemaError(path, f"type {kind!r} cannot be answered by a decision model; use an enum, a boolean "
                                "or a bounded integer")
    raise SchemaError(path, f"needs an enum, a boolean or a bounded integer, got {json.dumps(node)[:120]}")


def plan_from_json_schema(schema: Any) -> Plan:
    """The questions for a JSON schema and how to turn the answers back into values."""
    if not isinstance(schema, dict):
        raise SchemaError("#", f"must be a JSON-schema dict, got {type(schema).__name__}")
    top, _ = _inline(schema, schema, "#")
    if top.get("type", "object") != "object":
        raise SchemaError("#", f"top level must be an object, got type {top.get('type')!r}")
    props = top.get("properties")
    if not isinstance(props, dict) or not props:
        raise SchemaError("#/properties", "must be a non-empty object of properties")
    if len(props) > MAX_PROPERTIES:
        raise SchemaError("#/properties", f"has {len(props)} properties; at most {MAX_PROPERTIES} are supported")
    questions, fields = {}, {}
    for name, node in props.items():
        questions[name], fields[name] = _property_question(schema, name, node, f"#/properties/{name}")
    return Plan(questions, fields)


def questions_from_json_schema(schema: Any) -> dict:
    return plan_from_json_schema(schema).questions


def _pydantic_schema(model: Any) -> dict:
    schema_fn = getattr(model, "model_json_schema", None)
    if not isinstance(model, type) or not callable(schema_fn):
        raise TypeError(f"expected a pydantic v2 model class, got {model!r}; pass a JSON-schema dict instead")
    return schema_fn()


def plan_from_pydantic(model: Any) -> Plan:
    plan = plan_from_json_schema(_pydantic_schema(model))
    plan.model = model
    return plan


def questions_from_pydantic(model: Any) -> dict:
    return plan_from_pydantic(model).questions


def plan_for(schema: Any) -> Plan:
    """A plan from a JSON-schema dict or a pydantic model class."""
    return plan_from_json_schema(schema) if isinstance(schema, dict) else plan_from_pydantic(schema)


# ---- answers -> values --------------------------------------------------------------------------

def _value(plan: FieldPlan, answer: dict) -> Any:
    if answer.get("low_confidence"):
        return None  # abstained: the caller asked for no guess below min_confidence
    if plan.qtype == "noul":
        return answer["noul"] >= 0.5
    if plan.qtype == "score":
        probs = answer["probabilities"]
        best = max(range(len(probs)), key=lambda i: probs[str(i)])  # the most likely level, not the mean
        value = plan.minimum + best
        return value if plan.integer else float(value)
    return plan.values[str(answer["choice"])]


def _probabilities(plan: FieldPlan, answer: dict) -> dict:
    if plan.qtype == "noul":
        p = answer["noul"]
        return {"false": round(1.0 - p, 4), "true": p}
    if plan.qtype == "score":
        return {str(plan.minimum + int(i)): p for i, p in answer["probabilities"].items()}
    return {str(label): p for label, p in answer["probabilities"].items()}


def answers_to_json(answers: dict, schema: Any) -> dict:
    """{property: value} from the answers of a schema's questions (a Plan, JSON schema or pydantic class)."""
    plan = schema if isinstance(schema, Plan) else plan_for(schema)
    missing = [name for name in plan.fields if name not in answers]
    if missing:
        raise ValueError(f"answers lack the schema properties {missing}; were they asked with this schema?")
    return {name: _value(fp, answers[name]) for name, fp in plan.fields.items()}


def answer_to_pydantic(answers: dict, model: Any) -> Any:
    """A validated instance of `model` from the answers (abstained fields must allow None)."""
    values = answers_to_json(answers, plan_from_pydantic(model) if not isinstance(model, Plan) else model)
    cls = model.model if isinstance(model, Plan) else model
    abstained = [k for k, v in values.items() if v is None]
    try:
        return cls.model_validate(values)
    except Exception as e:  # pydantic.ValidationError; pydantic stays an optional dependency
        if abstained:
            raise ValueError(f"fields {abstained} abstained (below min_confidence) but {cls.__name__} does not "
                             "allow None there; make them Optional, or use return_details=True") from e
        raise


def _project(plan: Plan | None, result: dict, return_details: bool) -> Any:
    answers = result["answers"]
    if plan is None:
        values = answers
    elif plan.model is not None and not return_details:
        return answer_to_pydantic(answers, plan)
    else:
        values = answers_to_json(answers, plan)
    if not return_details:
        return values
    probabilities = {}
    if plan is not None:
        probabilities = {name: _probabilities(fp, answers[name]) for name, fp in plan.fields.items()}
    else:
        probabilities = {qid: ({"false": round(1.0 - a["noul"], 4), "true": a["noul"]} if a["type"] == "noul"
                               else dict(a["probabilities"])) for qid, a in answers.items()}
    return DecisionResult(values=values, confidence={k: a["confidence"] for k, a in answers.items()},
                          probabilities=probabilities, answers=answers, usage=result.get("usage"),
                          routing=result.get("routing"),
                          answer_confidence={k: a.get("answer_confidence") for k, a in answers.items()})


def _prepare(runner: Any, schema: Any, questions: Any, method: str) -> tuple[Plan | None, dict]:
    if not callable(getattr(runner, method, None)):
        raise TypeError(f"runner must have a {method}() method (an Agent, ONNXAgent or Router), "
                        f"got {type(runner).__name__}")
    if (schema is None) == (questions is None):
        raise ValueError("pass exactly one of schema= (JSON schema or pydantic class) or questions= (a question dict)")
    if questions is not None:
        if not isinstance(questions, dict):
            raise TypeError(f"questions must be a dict {{id: definition}}, got {type(questions).__name__}")
        return None, questions
    plan = plan_for(schema)
    return plan, plan.questions


def decide(runner: Any, state: Any, schema: Any = None, *, questions: dict | None = None,
           return_details: bool = False, min_confidence: Any = None, **predict_kwargs: Any) -> Any:
    """Values for `schema` about one state (or the raw answers with questions=)."""
    plan, qs = _prepare(runner, schema, questions, "predict")
    if min_confidence is not None:
        predict_kwargs["min_confidence"] = min_confidence
    return _project(plan, runner.predict(state, qs, **predict_kwargs), return_details)


def decide_batch(runner: Any, states: Any, schema: Any = None, *, questions: dict | None = None,
                 return_details: bool = False, min_confidence: Any = None, **predict_kwargs: Any) -> list:
    """`decide` for many states in one batched call; results in input order."""
    plan, qs = _prepare(runner, schema, questions, "predict_batch")
    if isinstance(states, (str, bytes, dict)) or not hasattr(states, "__iter__"):
        raise TypeError(f"states must be a list of states, got {type(states).__name__}; use decide() for one")
    if min_confidence is not None:
        predict_kwargs["min_confidence"] = min_confidence
    if callable(getattr(runner, "route", None)):  # a Router takes requests, with routing keys per request
        per_request = {k: predict_kwargs.pop(k) for k in ROUTER_REQUEST_KEYS if k in predict_kwargs}
        requests = [{"state": s, "questions": qs, **per_request} for s in states]
        results = runner.predict_batch(requests, **predict_kwargs)
    else:
        results = runner.predict_batch(list(states), qs, **predict_kwargs)
    return [_project(plan, r, return_details) for r in results]


class StructuredDecisions:
    """`decide` / `decide_batch` as methods (Agent, ONNXAgent and Router share these): the object runs the
    predict calls, laya.structured builds the questions and projects the answers."""

    def decide(self, state: Any, schema: Any = None, *, questions: dict | None = None, return_details: bool = False,
               min_confidence: Any = None, **predict_kwargs: Any) -> Any:
        """Values for a JSON schema / pydantic class about one state; see laya.structured.decide."""
        return decide(self, state, schema, questions=questions, return_details=return_details,
                      min_confidence=min_confidence, **predict_kwargs)

    def decide_batch(self, states: Any, schema: Any = None, *, questions: dict | None = None,
                     return_details: bool = False, min_confidence: Any = None, **predict_kwargs: Any) -> list:
        """`decide` for many states in one batched call; see laya.structured.decide_batch."""
        return decide_batch(self, states, schema, questions=questions, return_details=return_details,
                            min_confidence=min_confidence, **predict_kwargs)
