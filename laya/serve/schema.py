"""Request parsing for the System One routes: JSON, shapes, hard limits and the library's own validation.

Everything here runs before a request may enter a batch. Each failure is an `ApiError` whose status
follows the published table (400 malformed, 413 over a limit, 422 invalid value) and whose message
names the bad value and what to send instead; the body is Jev-shaped: `{"detail": message}`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..answers import check_min_confidence
from ..questions import Question, check_questions, render_state
from ..router import STANDALONE_MODELS

MAX_QUESTIONS = 64
MAX_STATE_CHARS = 50000
MAX_BATCH_STATES = 64
MAX_CHOICE_OPTIONS = 100
MAX_CHOICE_OPTIONS_TOURNAMENT = 255  # with tournament mode (LAYA_TOURNAMENT_GROUP > 0)
MAX_SCORE_LEVELS = 32
MAX_TOTAL_OPTIONS = 512
ASSUMED_ROW_WIDTH = 512  # row width for the pass-size cap when the body gives no max_len

AUTO_MODEL_IDS = ("", "auto", "jev-1", "convaiinnovations/laya")
REFUSED_KEYS = ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
ITEM_KEYS = ("model", "max_len", "head_max_len", "task", "lang", "lang_guess", "min_confidence")
SINGLE_KEYS = ("state", "questions", *ITEM_KEYS)
BATCH_KEYS = ("states", "questions", *ITEM_KEYS, "batch_size", "sort_by_length")
# A surrogate can only enter the parsed body through a \uD800-\uDFFF escape (strict UTF-8 bytes carry none), so a
# body without one needs no walk over its strings.
# Question sets that passed validation, by their exact JSON text (and the choice-option limit): clients tend to
# send the same few sets, and the text is needed anyway as the batcher's group key. Failures are never kept.
_VALIDATED: dict[tuple[str, int], int] = {}
_VALIDATED_MAX, _VALIDATED_MAX_CHARS = 256, 16384
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


class ApiError(Exception):
    """An HTTP error with a user-facing message (never internals)."""

    def __init__(self, status: int, detail: str, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


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

    @property
    def row_width(self) -> int:
        return self.max_len or ASSUMED_ROW_WIDTH


def parse_json(body: bytes) -> Any:
    """The body as JSON; 400 for anything that is not strict JSON in valid Unicode."""
    if not body.strip():
        raise ApiError(400, "the request body is empty; send a JSON object with 'state' and 'questions'")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the request body is not valid UTF-8 (byte {e.start}); send UTF-8 encoded JSON") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ApiError(400, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    where = _lone_surrogate(data, "body") if _SURROGATE_ESCAPE.search(body) else None
    if where is not None:
        raise ApiError(400, f"{where} contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape); "
                            "send valid Unicode text")
    return data


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON; use a number or null", name, 0)


def _lone_surrogate(value: Any, where: str) -> str | None:
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _encodable(key):
                    return f"{path} key"
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_keys(data: dict, allowed: tuple[str, ...], refused: tuple[str, ...]) -> None:
    bad = [k for k in refused if data.get(k) is not None]
    if bad:
        raise ApiError(422, f"{', '.join(map(repr, bad))} cannot be set over HTTP; remove "
                            f"{'it' if len(bad) == 1 else 'them'} (hooks run only in-process)")
    unknown = [k for k in data if k not in allowed and k not in refused]
    if unknown:
        raise ApiError(422, f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}")


def _token_count(body: dict, name: str, budget: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > budget:
        raise ApiError(422, f"{name} must be a positive integer <= {budget} (the server's token budget), "
                            f"got {value!r}")
    return value


def _optional_text(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, f"{name} must be a string or null, got {type(value).__name__} {value!r}")
    return value


def model_field(value: Any, registered: list[str], resolve: Any) -> str | None:
    """The `model` field: a served name, a published standalone id, or None (route automatically)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(422, f"model must be a string (a served checkpoint name or 'auto'), got {value!r}")
    text = value.strip()
    if text.lower() in AUTO_MODEL_IDS:
        return None
    try:
        return resolve(text)
    except ValueError:
        pass
    standalone = {repo.lower(): name for name, repo in STANDALONE_MODELS.items()}
    name = standalone.get(text.lower())
    if name is not None and name in registered:
        return name
    if "/" in text or "\\" in text or text.startswith((".", "~")):
        raise ApiError(422, f"model {value!r} is not served here (paths and Hub ids are not loaded on request); "
                            f"use one of {', '.join(registered)} or 'auto'")
    return None  # any other id (e.g. 'jev-1') means: route automatically


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


def check_limits(qs: list[Question], max_choice_options: int = MAX_CHOICE_OPTIONS) -> None:
    breach = limit_breach(qs, max_choice_options)
    if breach is None:
        return
    what, q, count, limit = breach
    if what == "options":
        hint = "" if max_choice_options > MAX_CHOICE_OPTIONS else \
            f", or {MAX_CHOICE_OPTIONS_TOURNAMENT} on a server in tournament mode (LAYA_TOURNAMENT_GROUP)"
        raise ApiError(413, f"question '{q.qid}' has {count} options; the limit is {limit} per "
                            f"choice question{hint}: split it or shortlist the options first")
    if what == "levels":
        raise ApiError(413, f"question '{q.qid}' has {count} levels; the limit is {limit} per score question")
    raise ApiError(413, f"the questions have {count} options in all; the limit is {limit} per request")


def check_state(state: Any, where: str) -> int:
    """The rendered state's length, once it is known to be within the limit."""
    if state is None:
        raise ApiError(400, f"'{where}' is null; send a string, a JSON object or a list of turns")
    try:
        text = render_state(state)
    except TypeError as e:
        raise ApiError(422, f"'{where}': {e}") from None
    if len(text) > MAX_STATE_CHARS:
        raise ApiError(413, f"'{where}' is {len(text)} characters; the limit is {MAX_STATE_CHARS} per state: "
                            "shorten it or split it into several requests")
    return len(text)


def _questions(body: dict, max_choice_options: int) -> tuple[dict, int, str]:
    if "questions" not in body or body["questions"] is None:
        raise ApiError(400, "'questions' is missing; send a JSON object {question_id: definition}")
    questions = body["questions"]
    if not isinstance(questions, dict):
        raise ApiError(400, f"'questions' must be a JSON object {{question_id: definition}}, "
                            f"not {type(questions).__name__}")
    if len(questions) > MAX_QUESTIONS:
        raise ApiError(413, f"{len(questions)} questions in one request; the limit is {MAX_QUESTIONS}")
    key = json.dumps(questions, ensure_ascii=False)
    n = _VALIDATED.get((key, max_choice_options))
    if n is not None:
        return questions, n, key
    try:
        qs = check_questions(questions)
    except (ValueError, TypeError) as e:
        raise ApiError(422, str(e)) from None
    check_limits(qs, max_choice_options)
    if len(key) <= _VALIDATED_MAX_CHARS:
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        _VALIDATED[(key, max_choice_options)] = len(qs)
    return questions, len(qs), key


def _controls(body: dict, registered: list[str], resolve: Any, budget: int) -> dict:
    try:
        min_confidence = check_min_confidence(body.get("min_confidence"))
    except ValueError as e:
        raise ApiError(422, str(e)) from None
    return {"model": model_field(body.get("model"), registered, resolve), "task": _optional_text(body, "task"),
            "lang": _optional_text(body, "lang"), "lang_guess": _optional_text(body, "lang_guess"),
            "max_len": _token_count(body, "max_len", budget),
            "head_max_len": _token_count(body, "head_max_len", budget), "min_confidence": min_confidence}


def _object(data: Any, what: str) -> dict:
    if not isinstance(data, dict):
        raise ApiError(400, f"the body must be a JSON object with {what}, not {type(data).__name__}")
    return data


def parse_single(data: Any, registered: list[str], resolve: Any, budget: int,
                 max_choice_options: int = MAX_CHOICE_OPTIONS) -> Decision:
    body = _object(data, "'state' and 'questions'")
    _check_keys(body, SINGLE_KEYS, REFUSED_KEYS)
    if "state" not in body:
        raise ApiError(400, "'state' is missing; send the text (or JSON data) to decide about")
    chars = check_state(body["state"], "state")
    questions, n, key = _questions(body, max_choice_options)
    return Decision(body["state"], questions, n, **_controls(body, registered, resolve, budget), chars=chars,
                    questions_key=key)


def parse_batch(data: Any, registered: list[str], resolve: Any, budget: int,
                max_choice_options: int = MAX_CHOICE_OPTIONS) -> list[Decision]:
    body = _object(data, "'states' and 'questions'")
    _check_keys(body, BATCH_KEYS, (*REFUSED_KEYS, "diagnostics"))
    states = body.get("states")
    if states is None:
        raise ApiError(400, "'states' is missing; send a non-empty list of states")
    if not isinstance(states, list) or not states:
        raise ApiError(400, f"'states' must be a non-empty list, got {states!r:.80}")
    if len(states) > MAX_BATCH_STATES:
        raise ApiError(413, f"{len(states)} states in one batch; the limit is {MAX_BATCH_STATES}: split the batch")
    chars = [check_state(state, f"states[{i}]") for i, state in enumerate(states)]
    questions, n, key = _questions(body, max_choice_options)
    controls = _controls(body, registered, resolve, budget)
    batch_size = body.get("batch_size")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ApiError(422, f"batch_size must be an integer >= 1, got {batch_size!r}")
    sort_by_length = body.get("sort_by_length", False)
    if sort_by_length is None:
        sort_by_length = False
    if not isinstance(sort_by_length, bool):
        raise ApiError(422, f"sort_by_length must be true or false, got {sort_by_length!r}")
    return [Decision(state, questions, n, **controls, batch_size=batch_size, sort_by_length=sort_by_length,
                     chars=c, questions_key=key) for state, c in zip(states, chars)]
