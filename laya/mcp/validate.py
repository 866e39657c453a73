"""Argument checks of the MCP tools: each failure is a `ToolError` with a stable code and a message naming the
bad value. Question and min_confidence rules are the library's own (`laya.questions`, `laya.confidence`), the
size limits are `laya serve`'s (`laya.serve.schema.limit_breach`); this module only words them for MCP."""

from __future__ import annotations

import math
from typing import Any

from ..questions import QTYPES, check_questions
from ..serve.schema import MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_TOTAL_OPTIONS, limit_breach
from .errors import ToolError

__all__ = ["AUTO", "BATCH_ITEM_OVERRIDES", "VALID_TYPES", "ToolError", "batch_item_key_doc", "validate_batch_requests",
           "validate_budget", "validate_hooks_timeout", "validate_lang", "validate_lang_guess",
           "validate_min_confidence", "validate_model", "validate_positive", "validate_preset",
           "validate_questions", "validate_state", "validate_task"]

AUTO = "auto"
VALID_TYPES = tuple(QTYPES)
BATCH_ITEM_OVERRIDES = ("model", "task", "lang", "lang_guess", "max_len", "head_max_len")
BATCH_ITEM_DOCS = {"state": "state (object, required)", "questions": "questions (object, required)",
                   "model": "model (checkpoint name or 'auto')", "task": "task (routing hint)",
                   "lang": "lang (language code)", "lang_guess": "lang_guess (language code)",
                   "max_len": "max_len (tokens)", "head_max_len": "head_max_len (tokens)"}
PRESET_ALIASES = {"router": "model_router"}


def batch_item_key_doc(omit: tuple | list = ()) -> str:
    """The keys a batch item may carry, as one line for tool descriptions and error messages."""
    return ", ".join(doc for key, doc in BATCH_ITEM_DOCS.items() if key not in omit)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def validate_state(state: Any, where: str = "state") -> dict:
    if not isinstance(state, dict) or not state:
        raise ToolError("invalid_state", f"{where} must be a non-empty JSON object such as "
                                         f"{{\"message\": \"...\"}}, got {_kind(state)} {state!r}"[:300])
    return state


def _limits(questions: dict, max_choice: int | None) -> None:
    if max_choice is None:
        return
    if len(questions) > MAX_QUESTIONS:
        raise ToolError("invalid_questions", f"too many questions ({len(questions)} > {MAX_QUESTIONS})")
    breach = limit_breach(check_questions(questions), max_choice, MAX_TOTAL_OPTIONS)
    if breach is None:
        return
    what, q, count, limit = breach
    if what == "options":
        hint = "; use laya_tournament or laya_shortlist for long option lists" if limit == MAX_CHOICE_OPTIONS else ""
        raise ToolError("invalid_questions", f"too many choice options for '{q.qid}' ({count} > {limit}){hint}")
    if what == "levels":
        raise ToolError("invalid_questions", f"too many score levels for '{q.qid}' ({count} > {limit})")
    raise ToolError("invalid_questions", f"too many answer options across questions ({count} > {limit})")


def validate_questions(questions: Any, max_choice: int | None = MAX_CHOICE_OPTIONS,
                       where: str = "questions") -> dict:
    """A non-empty object of valid question definitions (the library's rules and texts), within the limits
    of `laya serve` unless `max_choice` is None (shortlist and tournament narrow long lists themselves)."""
    if not isinstance(questions, dict) or not questions:
        raise ToolError("invalid_questions", f"{where} must be a non-empty JSON object {{question_id: {{\"type\": "
                                             f"\"choice\"|\"score\"|\"noul\", \"instructions\": ..., \"criteria\": "
                                             f"...}}}}, got {_kind(questions)}")
    try:
        check_questions(questions)
        _limits(questions, max_choice)
    except (ValueError, TypeError) as e:
        raise ToolError("invalid_questions", str(e)) from None
    return questions


def validate_preset(preset: Any, known: Any) -> str:
    """The canonical preset name (trimmed, lowercased, `router` -> `model_router`)."""
    name = preset.strip().lower() if isinstance(preset, str) else None
    name = PRESET_ALIASES.get(name, name)
    if name not in known:
        raise ToolError("invalid_preset", f"unknown preset {preset!r}; use one of {', '.join(sorted(known))} "
                                          f"(alias: router)")
    return name


def validate_model(model: Any, router: Any = None) -> str:
    """The canonical checkpoint name, or `"auto"` for None, blank or 'auto'."""
    if model is None:
        return AUTO
    if not isinstance(model, str):
        raise ToolError("invalid_model", f"model must be a checkpoint name or 'auto', got {_kind(model)} {model!r}")
    text = model.strip()
    if not text or text.lower() == AUTO:
        return AUTO
    if router is None or not callable(getattr(router, "resolve", None)):
        from ..registry import ALIASES

        return ALIASES.get(text.lower(), text.lower())
    try:
        return router.resolve(text)
    except ValueError as e:
        raise ToolError("invalid_model", str(e)) from None


def _optional_text(value: Any, name: str, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"invalid_{name}", f"{name} must be {what}, or null; got {_kind(value)} {value!r}")
    return value.strip() or None


def validate_task(task: Any, model: str = AUTO, router: Any = None) -> str | None:
    """A routing task (a checkpoint name, or typed-decisions); refused beside a pinned model."""
    text = _optional_text(task, "task", "a task name string such as 'typed-decisions'")
    if text is not None and model != AUTO:
        raise ToolError("invalid_task", "task routes between checkpoints; with a pinned model there is nothing to "
                                        "route")
    key = (text or "").lower()
    if text is not None and key.replace("_", "-") != "typed-decisions" and callable(getattr(router, "resolve", None)):
        try:
            router.resolve(key)
        except ValueError as e:
            raise ToolError("invalid_task", f"task {text!r} names no checkpoint: {e}") from None
    return text


def validate_lang(lang: Any) -> str | None:
    return _optional_text(lang, "lang", "a language code string such as \"de\"")


def validate_lang_guess(lang_guess: Any) -> str | None:
    return _optional_text(lang_guess, "lang_guess", "a language code string such as \"de\"")


def validate_positive(value: Any, name: str, minimum: int = 1, code: str | None = None) -> int | None:
    """None, or a non-bool integer >= minimum."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ToolError(code or f"invalid_{name}", f"{name} must be an integer of at least {minimum}, got "
                                                   f"{value!r}")
    return value


def validate_budget(value: Any, name: str) -> int | None:
    """A token budget (`max_len`, `head_max_len`): None or a non-bool integer >= 1."""
    return validate_positive(value, name)


def validate_hooks_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ToolError("invalid_hooks_timeout", f"hooks_timeout must be a finite number of seconds > 0, got "
                                                 f"{value!r}")
    return float(value)


def validate_min_confidence(value: Any) -> Any:
    from ..confidence import check_min_confidence

    if value is None:
        return None
    try:
        return check_min_confidence(value)
    except (ValueError, TypeError) as e:
        raise ToolError("invalid_min_confidence", str(e)) from None


def _batch_item(i: int, item: Any, router: Any, max_choice: int | None) -> dict:
    where = f"requests[{i}]"
    if not isinstance(item, dict):
        raise ToolError("invalid_request", f"{where} must be an object with {batch_item_key_doc()}, got "
                                           f"{_kind(item)}")
    unknown = [k for k in item if k not in BATCH_ITEM_DOCS]
    if unknown:
        raise ToolError("invalid_request", f"{where} has unknown keys {unknown}; allowed: {batch_item_key_doc()}")
    try:
        model = validate_model(item.get("model"), router)
        out = {"state": validate_state(item.get("state"), f"{where}.state"),
               "questions": validate_questions(item.get("questions"), max_choice, f"{where}.questions"),
               "model": None if model == AUTO else model, "task": validate_task(item.get("task"), model, router),
               "lang": validate_lang(item.get("lang")), "lang_guess": validate_lang_guess(item.get("lang_guess")),
               "max_len": validate_budget(item.get("max_len"), "max_len"),
               "head_max_len": validate_budget(item.get("head_max_len"), "head_max_len")}
    except ToolError as e:
        prefix = "" if e.message.startswith(where) else f"{where}: "
        raise ToolError(e.code, prefix + e.message) from None
    return out


def validate_batch_requests(requests: Any, router: Any = None, max_choice: int | None = MAX_CHOICE_OPTIONS,
                            limit: int | None = None) -> list[dict]:
    """A non-empty list of request objects, each checked (overrides as for a single call)."""
    if not isinstance(requests, list) or not requests:
        raise ToolError("invalid_request", f"requests must be a non-empty list of objects with "
                                           f"{batch_item_key_doc()}; got {_kind(requests)}")
    if limit is not None and len(requests) > limit:
        raise ToolError("invalid_request", f"too many requests in one call ({len(requests)} > {limit}); split them")
    return [_batch_item(i, item, router, max_choice) for i, item in enumerate(requests)]
