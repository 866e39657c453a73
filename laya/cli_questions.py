"""`laya --questions FILE`: a JSON object of questions, or a {"questions": {...}, "state_key": ...} wrapper."""

from __future__ import annotations

import json
import os
from typing import Any

DEFAULT_STATE_KEY = "request"
WRAPPER_KEYS = {"questions", "state_key"}


def is_wrapper(data: dict) -> bool:
    """Keys only questions/state_key, and state_key present, or the inner value not a non-empty dict, or
    every inner value a dict (else it is a question set with a question named 'questions')."""
    if not data or not set(data) <= WRAPPER_KEYS:
        return False
    inner = data.get("questions")
    if "state_key" in data or not isinstance(inner, dict) or not inner:
        return True
    return all(isinstance(v, dict) for v in inner.values())


def load_questions(path: str) -> tuple[dict, str]:
    """(questions, state key) from a --questions file; ValueError with the published texts."""
    if not os.path.isfile(path):
        raise ValueError(f"no such --questions file: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            data: Any = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # (RecursionError: too deep)
        raise ValueError(f"could not read --questions file {path} ({e})") from None
    if not isinstance(data, dict):
        raise ValueError("--questions file must be a JSON object of question id -> definition")
    state_key = DEFAULT_STATE_KEY
    if is_wrapper(data):
        questions = data.get("questions")
        if not isinstance(questions, dict):
            raise ValueError("the 'questions' field of the --questions file must be an object")
        if "state_key" in data:
            state_key = data["state_key"]
            if not isinstance(state_key, str) or not state_key.strip():
                raise ValueError(f"'state_key' must be a non-empty string, got {state_key!r}")
    else:
        questions = data
    if not questions:
        raise ValueError("--questions file holds no questions")
    for qid, definition in questions.items():
        if not isinstance(definition, dict):
            raise ValueError(f"question {qid!r} must map to an object, got {type(definition).__name__}")
    return questions, state_key
