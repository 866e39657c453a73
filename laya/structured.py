"""Structured decisions: a JSON schema (or a pydantic v2 model class) in, typed values out.

Torch-free. Each schema property becomes one question (enum -> choice, boolean -> noul, bounded
integer -> score); the answers are projected back onto the schema's values. Anything the model cannot
answer as one of those three types is refused with a `SchemaError` naming the property ("properties.x").
`decide`/`decide_batch` apply the `min_confidence` gate to what the runner returned themselves, so an
answer below the threshold projects to None whatever the runner did with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .confidence import apply_confidence_gate, check_min_confidence
from .numeric import nesting_guard

MAX_PROPERTIES = 32
MAX_OPTIONS = 32
MAX_SCORE_LEVELS = 10
# Routing/budget keys that belong to each request when the runner is a Router.
ROUTER_REQUEST_KEYS = ("model", "task", "lang", "lang_guess", "max_len", "head_max_len")


class SchemaError(ValueError):
    """A schema the decision model cannot answer; `path` is "properties.<name>" ("" for the top level)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


@dataclass
class SchemaField:
    """One property: how it is asked (`question`) and how its answer becomes a value."""

    name: str
    kind: str  # choice | score | noul
    question: dict
    options: list = field(default_factory=list)  # choice: (label, original enum value) pairs
    minimum: int | None = None  # score: the value of level 0
    integer: bool = True  # score: int for "integer", float for "number"
    nullable: bool = False


class SchemaPlan(list):
    """The fields of a schema in property order (a list), plus the pydantic class it came from, if any."""

    model: Any = None

    @property
    def questions(self) -> dict:
        return {f.name: f.question for f in self}

    @property
    def fields(self) -> dict:
        return {f.name: f for f in self}


Plan = SchemaPlan  # the name older callers used


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
    section, _, name = ref[2:].partition("/") if isinstance(ref, str) and ref.startswith("#/") else ("", "", "")
    defs = root.get(section) if section in ("$defs", "definitions") else None
    target = defs.get(name) if isinstance(defs, dict) and "/" not in name else None
    if not isinstance(target, dict):
        raise SchemaError(path, f"$ref {ref!r} does not resolve to an entry of this schema's '$defs' or 'definitions'")
    return {k: v for k, v in target.items() if k != "description"}  # the property's own text asks the question


def _optional_branch(node: dict, key: str, path: str) -> tuple[dict, bool]:
    """The one non-null branch of an anyOf/oneOf, and whether a null branch was there."""
    branches = node[key]
    if not isinstance(branches, list) or not branches:
        raise SchemaError(path, f"'{key}' must be a non-empty array of schemas")
    real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(real) != 1:
        raise SchemaError(path, f"only 'Optional[...]' unions (one non-null branch) are supported, got {len(real)}")
    return real[0], len(real) < len(branches)


def _merged(branch: Any, node: dict, key: str, path: str) -> dict:
    if not isinstance(branch, dict):
        raise SchemaError(path, f"property must be an object, got {type(branch).__name__}")
    return {**branch, **{k: v for k, v in node.items() if k != key}}  # keys on the property win


def _inline(root: dict, node: Any, path: str) -> tuple[dict, bool]:
    """(node with $ref / single allOf / Optional anyOf resolved, nullable)."""
    if not isinstance(node, dict):
        raise SchemaError(path, f"property must be an object, got {type(node).__name__}")
    nullable, seen = False, ()
    while True:
        if "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise SchemaError(path, f"$ref {ref!r} is recursive; flatten the schema")
            seen = (*seen, ref)
            node = _merged(_ref_target(root, ref, path), node, "$ref", path)
        elif "allOf" in node:
            branches = node["allOf"]
            if not isinstance(branches, list) or len(branches) != 1:
                raise SchemaError(path, "'allOf' is supported only with a single branch; merge the branches")
            node = _merged(branches[0], node, "allOf", path)
        elif "anyOf" in node or "oneOf" in node:
            key = "anyOf" if "anyOf" in node else "oneOf"
            branch, has_null = _optional_branch(node, key, path)
            node, nullable = _merged(branch, node, key, path), nullable or has_null
        else:
            break
    kind = node.get("type")
    if isinstance(kind, list):
        real = [t for t in kind if t != "null"]
        if len(real) != 1:
            raise SchemaError(path, "'type' has multiple non-null types; unions are not supported")
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


def _instructions(node: dict) -> str | None:
    description = node.get("description")
    return description if isinstance(description, str) and description.strip() else None


def _enum_field(name: str, node: dict, path: str, nullable: bool) -> SchemaField:
    enum = node["enum"]
    if not isinstance(enum, list):
        raise SchemaError(path, f"'enum' must be an array of values, got {type(enum).__name__}")
    if not enum:
        raise SchemaError(path, "'enum' must not be empty")
    text = _instructions(node)
    if len(enum) == 2 and all(isinstance(v, bool) for v in enum) and enum[0] != enum[1]:
        return SchemaField(name, "noul", {"type": "noul", "instructions": text or f"Is `{name}` true?"},
                           nullable=nullable)
    if len(enum) > MAX_OPTIONS:
        raise SchemaError(path, f"{len(enum)} options exceeds MAX_OPTIONS={MAX_OPTIONS}")
    options = [("null" if v is None else str(v), v) for v in enum]
    if len({label for label, _ in options}) != len(options):
        raise SchemaError(path, "enum values produce duplicate choice labels")
    question = {"type": "choice", "instructions": text or f"What is `{name}`?",
                "criteria": {label: None for label, _ in options}}
    return SchemaField(name, "choice", question, options=options, nullable=nullable)


def _bound(node: dict, key: str, exclusive: str, step: int) -> int | None:
    """The inclusive integer bound; given both forms, the tighter one (step +1: a lower bound, -1: an upper)."""
    inclusive = _integral(node[key]) if key in node else None
    value = _integral(node.get(exclusive))
    strict = None if value is None else value + step
    if inclusive is None or strict is None:
        return strict if inclusive is None else inclusive
    return max(inclusive, strict) if step > 0 else min(inclusive, strict)


def _score_field(name: str, node: dict, path: str, nullable: bool) -> SchemaField:
    lo, hi = _bound(node, "minimum", "exclusiveMinimum", 1), _bound(node, "maximum", "exclusiveMaximum", -1)
    if lo is None or hi is None:
        raise SchemaError(path, "a numeric field needs integer 'minimum' and 'maximum' to become a score")
    if hi < lo:
        raise SchemaError(path, f"'maximum' {hi} is below 'minimum' {lo}")
    if hi - lo + 1 > MAX_SCORE_LEVELS:
        raise SchemaError(path, f"{hi - lo + 1} levels exceeds MAX_SCORE_LEVELS={MAX_SCORE_LEVELS}; "
                                "narrow the range or use an enum")
    question = {"type": "score", "instructions": _instructions(node) or f"Score `{name}` from {lo} to {hi}",
                "criteria": [str(v) for v in range(lo, hi + 1)]}
    return SchemaField(name, "score", question, minimum=lo, integer=node.get("type") == "integer",
                       nullable=nullable)


_REFUSED_TYPES = {
    "string": "a free string cannot be a fixed option set; use 'enum' or a boolean",
    "array": "arrays are not supported; ask one field per element",
    "object": "nested objects are not supported; flatten the schema",
}


def _property_field(root: dict, name: str, node: Any) -> SchemaField:
    path = f"properties.{name}"
    node, nullable = _inline(root, node, path)
    if "const" in node and "enum" not in node:
        node = {**node, "enum": [node["const"]]}
    if "enum" in node:
        return _enum_field(name, node, path, nullable)
    kind = node.get("type")
    if kind is None and "properties" in node:
        kind = "object"
    if kind == "boolean":
        text = _instructions(node) or f"Is `{name}` true?"
        return SchemaField(name, "noul", {"type": "noul", "instructions": text}, nullable=nullable)
    if kind in ("integer", "number"):
        return _score_field(name, node, path, nullable)
    if isinstance(kind, str) and kind in _REFUSED_TYPES:
        raise SchemaError(path, _REFUSED_TYPES[kind])
    shown = json.dumps(node, default=str)[:120]
    raise SchemaError(path, f"needs an 'enum', a boolean or a bounded integer, got {shown}")


def plan_from_json_schema(schema: Any) -> SchemaPlan:
    """The fields of a JSON schema, one per property in property order (`SchemaField`: name, kind,
    question, options, minimum); `len()` and iteration work like a list's."""
    if not isinstance(schema, dict):
        raise SchemaError("", f"expected a JSON schema object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object" or "properties" not in schema:
        raise SchemaError("", "the top level must be an object with 'properties'")
    props = schema["properties"]
    if not isinstance(props, dict) or not props:
        raise SchemaError("", "'properties' must be a non-empty object")
    if len(props) > MAX_PROPERTIES:
        raise SchemaError("", f"{len(props)} properties exceeds MAX_PROPERTIES={MAX_PROPERTIES}")
    return SchemaPlan(_guarded_field(schema, name, node) for name, node in props.items())


def _guarded_field(root: dict, name: str, node: Any) -> SchemaField:
    with nesting_guard("a property name", "use string names", lambda text: SchemaError("", text)):
        path = f"properties.{name}"
    with nesting_guard("the property", "flatten the schema", lambda text: SchemaError(path, text)):
        return _property_field(root, name, node)


def questions_from_json_schema(schema: Any) -> dict:
    return {f.name: f.question for f in plan_from_json_schema(schema)}


def _pydantic_schema(model: Any) -> dict:
    schema_fn = getattr(model, "model_json_schema", None)
    if not isinstance(model, type) or not callable(schema_fn):
        # (the repr of a deeply nested object recurses)
        with nesting_guard("schema", "pass a JSON-schema dict or a pydantic model class", TypeError):
            raise TypeError(f"expected a pydantic v2 model class, got {model!r}; pass a JSON-schema dict instead")
    try:
        return schema_fn()
    except AttributeError:  # pydantic's BaseModel itself: only its subclasses have a schema
        raise TypeError(f"expected a subclass of a pydantic model, got {model!r} itself; define your fields in a "
                        "subclass") from None


def plan_from_pydantic(model: Any) -> SchemaPlan:
    plan = plan_from_json_schema(_pydantic_schema(model))
    plan.model = model
    return plan


def questions_from_pydantic(model: Any) -> dict:
    return plan_from_pydantic(model).questions


def plan_for(schema: Any) -> SchemaPlan:
    """A plan from a JSON-schema dict or a pydantic model class (a plan or list of fields passes through)."""
    if isinstance(schema, SchemaPlan):
        return schema
    if isinstance(schema, list) and schema and all(isinstance(f, SchemaField) for f in schema):
        return SchemaPlan(schema)
    return plan_from_json_schema(schema) if isinstance(schema, dict) else plan_from_pydantic(schema)


# ---- answers -> values --------------------------------------------------------------------------

def _value(f: SchemaField, answer: Any) -> Any:
    """The property's value from its answer; an answer of another shape is a ValueError naming the property."""
    try:
        return _read_value(f, answer)
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ValueError(f"the answer for {f.name!r} is not a {f.kind} answer this schema can read "
                         f"({answer!r:.200}); was it produced for this schema?") from None


def _read_value(f: SchemaField, answer: dict) -> Any:
    if answer.get("low_confidence"):
        return None  # abstained: the caller asked for no guess below min_confidence
    if f.kind == "noul":
        return answer["noul"] >= 0.5
    if f.kind == "score":
        probs = answer["probabilities"]
        best = max(range(len(probs)), key=lambda i: probs[str(i)])  # the most likely level, not the mean
        value = f.minimum + best
        return value if f.integer else float(value)
    return dict(f.options)[str(answer["choice"])]


def _noul_probabilities(answer: dict) -> dict:
    p = answer["noul"]
    return {"false": round(1.0 - p, 4), "true": p}


def _probabilities(f: SchemaField, answer: dict) -> dict:
    if f.kind == "noul":
        return _noul_probabilities(answer)
    if f.kind == "score":
        return {str(f.minimum + int(i)): p for i, p in answer["probabilities"].items()}
    return {str(label): p for label, p in answer["probabilities"].items()}


def answers_to_json(answers: dict, schema: Any) -> dict:
    """{property: value} from the answers of a schema's questions (a plan, JSON schema or pydantic class)."""
    plan = plan_for(schema)
    if not isinstance(answers, dict):
        raise ValueError(f"answers must be a dict of property -> answer, got {type(answers).__name__}")
    missing = [f.name for f in plan if f.name not in answers]
    if missing:
        raise ValueError(f"answers lack the schema properties {missing}; were they asked with this schema?")
    return {f.name: _value(f, answers[f.name]) for f in plan}


def answer_to_pydantic(answers: dict, model: Any) -> Any:
    """A validated instance of `model` from the answers (abstained fields must allow None)."""
    plan = model if isinstance(model, SchemaPlan) else plan_from_pydantic(model)
    values = answers_to_json(answers, plan)
    cls = plan.model
    abstained = [k for k, v in values.items() if v is None]
    try:
        return cls.model_validate(values)
    except Exception as e:  # pydantic.ValidationError; pydantic stays an optional dependency
        if abstained:
            raise ValueError(f"fields {abstained} abstained (below min_confidence) but {cls.__name__} does not "
                             "allow None there; make them Optional, or use return_details=True") from e
        raise


def _project(plan: SchemaPlan | None, result: Any, return_details: bool) -> Any:
    answers = result.get("answers") if isinstance(result, dict) else None
    if not isinstance(answers, dict):
        raise ValueError(f"the runner returned {result!r:.200}, not a result with an 'answers' dict")
    if plan is None:
        values = answers
    elif plan.model is not None and not return_details:
        return answer_to_pydantic(answers, plan)
    else:
        values = answers_to_json(answers, plan)
    if not return_details:
        return values
    if plan is not None:
        probabilities = {f.name: _probabilities(f, answers[f.name]) for f in plan}
    else:
        probabilities = {qid: (_noul_probabilities(a) if a.get("type") == "noul" else dict(a.get("probabilities", {})))
                         for qid, a in answers.items()}
    return DecisionResult(values=values, confidence={k: a.get("confidence") for k, a in answers.items()},
                          probabilities=probabilities, answers=answers, usage=result.get("usage"),
                          routing=result.get("routing"),
                          answer_confidence={k: a.get("answer_confidence") for k, a in answers.items()})


# ---- decide / decide_batch ----------------------------------------------------------------------

def _plan_and_questions(schema: Any, questions: Any, min_confidence: Any) -> tuple[SchemaPlan | None, dict]:
    """The plan (None with questions=) and the questions to ask; min_confidence checked before anything runs."""
    if (schema is None) == (questions is None):
        raise ValueError("pass exactly one of schema= or questions=")
    if min_confidence is not None:
        check_min_confidence(min_confidence)
    if questions is not None:
        if not isinstance(questions, dict):
            raise TypeError(f"questions must be a dict of question id -> definition, got {type(questions).__name__}")
        return None, questions
    plan = plan_for(schema)
    return plan, plan.questions


def _predict_gated(runner: Any, state: Any, questions: dict, min_confidence: Any, predict_kwargs: dict) -> dict:
    """runner.predict with min_confidence offered (retried without it when the runner does not take it),
    then the gate applied here, so a runner that ignores the threshold still abstains."""
    if min_confidence is None:
        result = runner.predict(state, questions, **predict_kwargs)
    else:
        try:
            result = runner.predict(state, questions, min_confidence=min_confidence, **predict_kwargs)
        except TypeError as e:
            if "unexpected keyword argument 'min_confidence'" not in str(e):
                raise
            result = runner.predict(state, questions, **predict_kwargs)
    apply_confidence_gate([result], min_confidence)
    return result


def decide(runner: Any, state: Any, schema: Any = None, *, questions: dict | None = None,
           return_details: bool = False, min_confidence: Any = None, **predict_kwargs: Any) -> Any:
    """Values for `schema` about one state (or the raw answers with questions=); answers below
    `min_confidence` project to None whatever the runner did with the threshold."""
    if not callable(getattr(runner, "predict", None)):
        raise TypeError(f"runner must have a predict() method (an Agent, ONNXAgent or Router), "
                        f"got {type(runner).__name__}")
    plan, qs = _plan_and_questions(schema, questions, min_confidence)
    return _project(plan, _predict_gated(runner, state, qs, min_confidence, predict_kwargs), return_details)


def _predict_batch(runner: Any, states: list, questions: dict, predict_kwargs: dict) -> list:
    """One predict_batch call: a Router-like runner (it has route_batch) takes requests carrying the routing
    and budget keys; anything else takes (states, questions)."""
    if hasattr(runner, "route_batch"):
        per_request = {k: predict_kwargs.pop(k) for k in ROUTER_REQUEST_KEYS if k in predict_kwargs}
        requests = [{"state": s, "questions": questions, **per_request} for s in states]
        return runner.predict_batch(requests, **predict_kwargs)
    return runner.predict_batch(states, questions, **predict_kwargs)


def decide_batch(runner: Any, states: Any, schema: Any = None, *, questions: dict | None = None,
                 return_details: bool = False, min_confidence: Any = None, **predict_kwargs: Any) -> list:
    """`decide` for many states in one batched call; results in input order. min_confidence is not sent to
    predict_batch: the gate is applied here to every result."""
    if not callable(getattr(runner, "predict_batch", None)):
        raise TypeError(f"{type(runner).__name__} has no predict_batch; loop decide() over the states instead")
    if isinstance(states, (str, bytes)) or not isinstance(states, Sequence):
        raise TypeError(f"states must be a sequence of states, not {type(states).__name__}")
    plan, qs = _plan_and_questions(schema, questions, min_confidence)
    states = list(states)
    results = _predict_batch(runner, states, qs, predict_kwargs)
    if not isinstance(results, list) or len(results) != len(states):
        got = len(results) if isinstance(results, list) else type(results).__name__
        raise RuntimeError(f"{type(runner).__name__}.predict_batch returned {got} results for {len(states)} states")
    apply_confidence_gate(results, min_confidence)
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
