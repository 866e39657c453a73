"""The request body as JSON in UTF-8 (Python's reading: NaN and Infinity parse, so a library check names them), nesting
and integer sizes bounded before anything recurses."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from .errors import fail
from .limits import MAX_JSON_DEPTH

# A surrogate can only enter the parsed body through a \uD800-\uDFFF escape (strict UTF-8 bytes carry none), so a
# body without one needs no walk over its strings.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_STRING_OR_BRACKET = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_OPEN = frozenset(b"[{")


def too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the body's arrays/objects nest deeper than `limit` (brackets inside strings do not count)."""
    if body.count(b"[") + body.count(b"{") <= limit:  # the common case: no scan at all
        return False
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(body):
        first = match.group()[0]
        if first in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif first != 0x22:  # a closing bracket
            depth -= 1
    return False


def parse_json(body: bytes) -> Any:
    """The body as JSON; 400 for anything that is not JSON in valid UTF-8, or nests or counts past the server's
    limits (never a RecursionError or a 500). NaN/Infinity are read as floats: `min_confidence: Infinity` is then
    the library's 422 `... got inf`, as published."""
    if not body.strip():
        raise fail("invalid_json")
    if too_deep(body):
        raise fail("too_deep")
    try:
        return json.loads(body.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise fail("invalid_json") from None
    except RecursionError:
        raise fail("too_deep") from None
    except ValueError:  # an integer literal past sys.get_int_max_str_digits()
        raise fail("huge_int", digits=_int_digit_limit()) from None


def _int_digit_limit() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 4300


def may_hold_surrogate(body: bytes) -> bool:
    return _SURROGATE_ESCAPE.search(body) is not None


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string (or key) in the parsed body holds an unpaired UTF-16 surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return True
        elif isinstance(item, dict):
            if not all(_encodable(key) for key in item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
