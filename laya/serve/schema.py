"""Request parsing for the System One routes: shapes, hard limits and the library's own validation, in the
published order (object -> limits -> refused controls -> lone surrogates -> model -> budgets -> task ->
lang -> min_confidence -> questions).

Everything here runs before a request may enter a batch. Each failure is an `ApiError` from the table in
`errors.py` (400 malformed, 413 over a limit, 422 invalid value).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..answers import check_min_confidence
from ..questions import Question, check_questions, located, state_text
from ..router import STANDALONE_MODELS
from ..router.policy import TYPED
from .body import has_lone_surrogate, parse_json  # noqa: F401 - parse_json re-exported for callers
from .errors import ApiError, fail, library
from .limits import (BATCH_BODY_CALL_CONTROLS, BATCH_BODY_OUT_PARAMETERS, BODY_CONTROLS, BODY_REFUSALS,
                     DEFAULT_MAX_TOKEN_BUDGET, MAX_BATCH_STATES, MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_SCORE_LEVELS,
                     MAX_STATE_CHARS, MAX_TOTAL_OPTIONS, MAX_TOURNAMENT_CHOICE_OPTIONS)

__all__ = ["ApiError", "Decision", "Limits", "MAX_BATCH_STATES", "MAX_CHOICE_OPTIONS", "MAX_CHOICE_OPTIONS_TOURNAMENT",
           "MAX_QUESTIONS", "MAX_SCORE_LEVELS", "MAX_STATE_CHARS", "MAX_TOTAL_OPTIONS", "check_limits",
           "limit_breach", "model_field", "parse_batch", "parse_json", "parse_single"]

MAX_CHOICE_OPTIONS_TOURNAMENT = MAX_TOURNAMENT_CHOICE_OPTIONS  # the older name (laya.mcp.tools reads it)
ASSUMED_ROW_WIDTH = 512  # row width for the pass-size cap when the body gives no max_len
AUTO_MODEL_IDS = ("", "auto", "jev-1", "convaiinnovations/laya")
log = logging.getLogger("laya.serve")
REFUSED_KEYS = BODY_REFUSALS
SINGLE_KEYS = ("state", "questions", *BODY_CONTROLS)
BATCH_KEYS = tuple(dict.fromkeys(("states", "questions", *BODY_CONTROLS, *BATCH_BODY_CALL_CONTROLS)))  # each once
# Question sets that passed validation, by their exact JSON text: clients tend to send the same few sets, and
# the text is needed anyway as the batcher's group key. Failures are never kept.
_VALIDATED: dict[str, int] = {}
_VALIDATED_MAX, _VALIDATED_MAX_CHARS = 256, 16384


@dataclass
class Limits:
    """What parsing needs to know about the server: its names, budget and choice limits."""

    registered: list
    resolve: Callable[[str], str]
    budget: int = DEFAULT_MAX_TOKEN_BUDGET
    max_choice_options: int = MAX_CHOICE_OPTIONS
    tournament_group: int = 0
    surrogates: bool = True  # False when the raw body holds no surrogate escape (nothing to walk)
    unknown_model: Callable[[str, str], str] | None = None  # (value, resolve's text) -> the 422's first half


@dataclass
class Decision:
    """One validated request for one state: what the batcher needs besides routing."""

    state: Any
    questions: dict
    n_questions: int
    model: str | None  # a registered name, or None = route automatically
    task: str | None
    lang: str | None
    lang_guess: str | None
    max_len: int | None
    head_max_len: int | None
    min_confidence: Any
    batch_size: int | None = None
    sort_by_length: bool = False
    chars: int = 0  # rendered state length (what routing's language detection reads)
    questions_key: str = ""  # the question set's exact JSON text (the batcher groups by it)
    narrow: bool = False  # tournament mode narrows this request's large choice questions
    sent: dict = field(default_factory=dict)  # the controls the body set (non-null), for an injected router

    @property
    def row_width(self) -> int:
        return self.max_len or ASSUMED_ROW_WIDTH


# ---- limits ----------------------------------------------------------------------------------------

def limit_breach(qs: list[Question], max_choice_options: int = MAX_CHOICE_OPTIONS,
                 max_total: int | None = MAX_TOTAL_OPTIONS) -> tuple[str, Question | None, int, int] | None:
    """The first size limit these questions break, as (what, question, count, limit) with what one of
    "options" (a choice question), "levels" (a score question), "total" (question None); None if none.
    The HTTP server and the MCP tools word their own errors from it."""
    total = 0
    for q in qs:
        if q.qtype == "choice" and q.k > max_choice_options:
            return "options", q, q.k, max_choice_options
        if q.qtype == "score" and q.k > MAX_SCORE_LEVELS:
            return "levels", q, q.k, MAX_SCORE_LEVELS
        total += q.k
    if max_total is not None and total > max_total:
        return "total", None, total, max_total
    return None


def _raw_kind(definition: Any) -> tuple[str | None, int]:
    """(type, option count) of a question definition as sent, before validation (0 when it has no count)."""
    if not isinstance(definition, dict):
        return None, 0
    qtype = definition.get("type")
    qtype = qtype.strip().lower() if isinstance(qtype, str) else None
    criteria = definition.get("criteria")
    if qtype == "noul":
        return qtype, 2
    return qtype, len(criteria) if isinstance(criteria, (list, dict)) else 0


def check_limits(questions: dict, max_choice_options: int = MAX_CHOICE_OPTIONS) -> None:
    """413 for a question set over a count limit, read from the definitions as sent."""
    if len(questions) > MAX_QUESTIONS:
        raise fail("too_many_questions", count=len(questions), limit=MAX_QUESTIONS)
    total = 0
    for qid, definition in questions.items():
        qtype, k = _raw_kind(definition)
        if qtype == "choice" and k > max_choice_options:
            raise fail("too_many_options", qid=qid, count=k, limit=max_choice_options)
        if qtype == "score" and k > MAX_SCORE_LEVELS:
            raise fail("too_many_levels", qid=qid, count=k, limit=MAX_SCORE_LEVELS)
        total += k
    if total > MAX_TOTAL_OPTIONS:
        raise fail("too_many_total", count=total, limit=MAX_TOTAL_OPTIONS)


def check_state(state: Any, where: str | None = None) -> str:
    """The rendered state, once it is known to be within the limit; `where` names a batch item in a type error."""
    try:
        text = state_text(state)  # a lone surrogate is answered later, with the published 400
    except TypeError as e:
        raise library(located(e, where) if where else e) from None
    except (ValueError, RecursionError):
        raise fail("state_not_serializable") from None
    if len(text) > MAX_STATE_CHARS:
        raise fail("state_too_large", count=len(text), limit=MAX_STATE_CHARS)
    return text


def _may_be_non_finite(state: Any, text: str) -> bool:
    """Whether a state may hold NaN/Infinity: json renders them as these words, so most states skip the walk."""
    return not isinstance(state, str) and ("Infinity" in text or "NaN" in text)


def _path_text(path: list) -> str:
    text = "".join(f"[{json.dumps(k, ensure_ascii=False) if isinstance(k, str) else k}]" for k in path)
    return text if len(text) <= 300 else "..." + text[-297:]  # a long key or deep path stays readable


def _finite_state(state: Any, where: str) -> None:
    """422 for NaN/Infinity (or a literal past 1.8e308) inside a state: the model would read 'Infinity'."""
    path = _non_finite_at(state)
    if path is not None:
        raise fail("non_finite_state", where=where, path=_path_text(path))


# ---- controls --------------------------------------------------------------------------------------

def _check_keys(data: dict, allowed: tuple[str, ...], out_parameters: tuple[str, ...] = ()) -> None:
    refused = sorted(k for k in REFUSED_KEYS if data.get(k) is not None)
    if refused:
        raise fail("refused_hooks", names=", ".join(refused))
    if any(data.get(k) is not None for k in out_parameters):
        raise fail("refused_diagnostics")
    # Other fields are ignored, as the published Jev-compatible server does (R-HTTP-2 lists no refusal for them)
    unknown = [k for k in data if k not in allowed and k not in REFUSED_KEYS and k not in out_parameters]
    if unknown:
        log.debug("laya serve: ignoring unknown request field(s) %s", ", ".join(map(repr, unknown)))


def _token_count(body: dict, name: str, budget: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail("budget_not_int", name=name)
    if value < 1:
        raise fail("budget_not_positive", name=name)
    if value > budget:
        raise fail("budget_over_limit", name=name, value=value, limit=budget)
    return value


def _lang(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise fail("lang_not_text", name=name)
    return value


def _task(body: dict, limits: Limits, model: str | None) -> str | None:
    """The `task` field; one that names no checkpoint is refused naming `task` (an explicit model overrides it)."""
    value = body.get("task")
    if value is not None and not isinstance(value, str):
        raise fail("task_not_text", kind=type(value).__name__, value=value)
    key = (value or "").strip().lower()
    if model is None and key and key.replace("_", "-") != TYPED:
        try:
            limits.resolve(key)
        except ValueError as e:
            text = limits.unknown_model(key, str(e)) if limits.unknown_model else str(e)
            raise fail("task_unknown", value=value, unknown=text) from None
    return value


def _looks_like_location(text: str) -> bool:
    return "/" in text or "\\" in text or text.startswith((".", "~"))


def model_field(value: Any, registered: list, resolve: Any,
                unknown_model: Callable[[str, str], str] | None = None) -> str | None:
    """The `model` field: a served name, a published standalone id, or None (route automatically)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise fail("model_not_text", value=value)
    text = value.strip()
    if text.lower() in AUTO_MODEL_IDS:
        return None
    try:
        return resolve(text)
    except ValueError as e:
        unknown = str(e)
    standalone = {repo.lower(): name for name, repo in STANDALONE_MODELS.items()}
    name = standalone.get(text.lower())
    if name is not None and name in registered:
        return name
    if _looks_like_location(text):  # paths and Hub ids are never loaded on request
        raise fail("model_unservable", unknown=unknown_model(text, unknown) if unknown_model else unknown)
    return None  # any other id (e.g. 'jev-1') means: route automatically


def _controls(body: dict, limits: Limits) -> dict:
    if limits.surrogates and has_lone_surrogate(body):
        raise fail("lone_surrogate")
    model = model_field(body.get("model"), limits.registered, limits.resolve, limits.unknown_model)
    max_len = _token_count(body, "max_len", limits.budget)
    head_max_len = _token_count(body, "head_max_len", limits.budget)
    task = _task(body, limits, model)
    lang, lang_guess = _lang(body, "lang"), _lang(body, "lang_guess")
    try:
        min_confidence = check_min_confidence(body.get("min_confidence"))
    except (ValueError, TypeError) as e:
        raise library(e) from None
    return {"model": model, "task": task, "lang": lang, "lang_guess": lang_guess, "max_len": max_len,
            "head_max_len": head_max_len, "min_confidence": min_confidence}


# ---- questions -------------------------------------------------------------------------------------

def _null_score_level(questions: dict) -> None:
    for qid, definition in questions.items():
        if _raw_kind(definition)[0] == "score" and isinstance(definition.get("criteria"), list):
            for index, level in enumerate(definition["criteria"]):
                if level is None:
                    raise fail("null_score_level", qid=qid, index=index)


def _non_finite_at(value: Any) -> list | None:
    """The key/index path to the first NaN or infinite float inside `value` (1e309 reads as inf); None if none."""
    stack: list = [(value, None)]  # (item, (key, parent's link)): the path is only built for a hit
    while stack:
        item, link = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                path = []
                while link is not None:
                    key, link = link
                    path.append(key)
                return path[::-1]
        elif isinstance(item, dict):
            stack.extend((v, (k, link)) for k, v in reversed(item.items()))  # reversed: pops in document order
        elif isinstance(item, list):
            stack.extend((item[i], (i, link)) for i in range(len(item) - 1, -1, -1))
    return None


def _text_values(definition: dict) -> list[tuple[str, Any]]:
    """(what, value) for every part of a definition that the model reads as text."""
    out = [("'instructions'", definition.get("instructions"))]
    criteria = definition.get("criteria")
    if isinstance(criteria, dict):
        out += [(f"the description of option {label!r}", desc) for label, desc in criteria.items()]
    elif isinstance(criteria, list) and _raw_kind(definition)[0] == "score":
        out += [(f"score level {i}", level) for i, level in enumerate(criteria)]
    return out


def _non_finite(questions: dict) -> None:
    """422 for NaN/Infinity (or a literal past 1.8e308) where the model is shown text: it would read 'Infinity'."""
    for qid, definition in questions.items():
        if not isinstance(definition, dict):
            continue
        for what, value in _text_values(definition):
            if _non_finite_at(value) is not None:
                raise fail("non_finite", qid=qid, what=what)


QUESTION_KEYS = ("type", "instructions", "criteria", "labels", "option_order")  # what check_question reads


def _unknown_question_keys(questions: dict) -> None:
    """422 for a key no question definition has (a typo such as 'lables' would otherwise be ignored)."""
    for qid, definition in questions.items():
        unknown = [k for k in definition if k not in QUESTION_KEYS]
        if unknown:
            raise fail("question_unknown_keys", qid=qid, names=", ".join(map(repr, unknown)),
                       allowed=", ".join(map(repr, QUESTION_KEYS)))


def _validated(questions: dict) -> tuple[list[Question] | None, int, str]:
    key = json.dumps(questions, ensure_ascii=False)
    n = _VALIDATED.get(key)
    if n is not None:
        return None, n, key
    _null_score_level(questions)
    _non_finite(questions)
    try:
        qs = check_questions(questions)
    except (ValueError, TypeError) as e:
        raise library(e) from None
    _unknown_question_keys(questions)  # after the library's own checks: their published texts come first
    if len(key) <= _VALIDATED_MAX_CHARS:
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        _VALIDATED[key] = len(qs)
    return qs, len(qs), key


def narrows(questions: dict, group: int) -> bool:
    """Tournament mode's rule: narrow when a choice has more than `group` options, unless such a choice has
    non-string labels or an option_order (then one pass); past 100 options always (string labels needed)."""
    if not group:
        return False
    sizes = {qid: _raw_kind(d) for qid, d in questions.items()}
    big = {qid: k for qid, (qtype, k) in sizes.items() if qtype == "choice" and k > group}
    if not big:
        return False
    odd_labels = {qid: not all(isinstance(label, str) for label in questions[qid]["criteria"]) for qid in big}
    if max(big.values()) > MAX_CHOICE_OPTIONS:
        for qid, odd in odd_labels.items():
            if odd:
                raise fail("tournament_labels", qid=qid)
        return True
    return not any(odd_labels[qid] or questions[qid].get("option_order") is not None for qid in big)


def _questions(questions: dict, limits: Limits) -> tuple[int, str, bool]:
    _, n, key = _validated(questions)
    return n, key, narrows(questions, limits.tournament_group)


def _sent(body: dict, names: tuple[str, ...]) -> dict:
    return {k: body[k] for k in names if body.get(k) is not None}


# ---- the two routes --------------------------------------------------------------------------------

def as_limits(limits: Any, resolve: Any = None, budget: int = DEFAULT_MAX_TOKEN_BUDGET,
              max_choice_options: int = MAX_CHOICE_OPTIONS) -> Limits:
    """A `Limits`, also from the older positional form (registered names, resolve, budget, choice limit)."""
    if isinstance(limits, Limits):
        return limits
    return Limits(list(limits or ()), resolve or (lambda name: name), budget, max_choice_options)


def parse_single(data: Any, limits: Any, *args: Any) -> Decision:
    limits = as_limits(limits, *args)
    if not isinstance(data, dict) or data.get("questions") is None:
        raise fail("not_single")
    if data.get("state") is None:
        raise fail("state_required")
    questions = data["questions"]
    if not isinstance(questions, dict):
        raise fail("questions_not_object")
    text = check_state(data["state"])
    check_limits(questions, limits.max_choice_options)
    _check_keys(data, SINGLE_KEYS)
    controls = _controls(data, limits)
    n, key, narrow = _questions(questions, limits)
    if _may_be_non_finite(data["state"], text):
        _finite_state(data["state"], "'state'")  # last: after every published check, as the library's would be
    return Decision(data["state"], questions, n, **controls, chars=len(text), questions_key=key, narrow=narrow,
                    sent=_sent(data, BODY_CONTROLS))


def _batch_call_controls(data: dict) -> tuple[int | None, bool]:
    batch_size = data.get("batch_size")
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise fail("batch_size_not_int")
        if batch_size < 1:
            raise fail("batch_size_not_positive", value=batch_size)
    sort_by_length = data.get("sort_by_length")
    if sort_by_length is not None and not isinstance(sort_by_length, bool):
        raise fail("sort_not_bool")
    return batch_size, bool(sort_by_length)


def parse_batch(data: Any, limits: Any, *args: Any) -> list[Decision]:
    limits = as_limits(limits, *args)
    if not isinstance(data, dict) or data.get("questions") is None or "states" not in data:
        raise fail("not_batch")
    states = data["states"]
    if not isinstance(states, list) or not states:
        raise fail("states_not_list")
    for index, state in enumerate(states):
        if state is None:
            raise fail("batch_state_required", index=index)
    questions = data["questions"]
    if not isinstance(questions, dict):
        raise fail("questions_not_object")
    if len(states) > MAX_BATCH_STATES:
        raise fail("too_many_states", count=len(states), limit=MAX_BATCH_STATES)
    chars, suspects = [], []
    for index, state in enumerate(states):
        text = check_state(state, f"states[{index}]")
        chars.append(len(text))
        if _may_be_non_finite(state, text):
            suspects.append(index)
    check_limits(questions, limits.max_choice_options)
    _check_keys(data, BATCH_KEYS, BATCH_BODY_OUT_PARAMETERS)
    controls = _controls(data, limits)
    batch_size, sort_by_length = _batch_call_controls(data)
    n, key, narrow = _questions(questions, limits)
    for index in suspects:
        _finite_state(states[index], f"'states[{index}]'")
    sent = _sent(data, (*BODY_CONTROLS, *BATCH_BODY_CALL_CONTROLS))
    if not sort_by_length:
        sent.pop("sort_by_length", None)  # false forwards nothing
    return [Decision(state, questions, n, **controls, batch_size=batch_size, sort_by_length=sort_by_length,
                     chars=c, questions_key=key, narrow=narrow, sent=sent) for state, c in zip(states, chars)]
