"""What a tool call becomes on the wire: a success is the tool's dict as JSON text (indent 2, non-ASCII kept);
a failure is `{"error": "<code>", "message": "<message>"}` flagged as an error result."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from .errors import RemoteError, ToolError

log = logging.getLogger("laya.mcp")


def _jsonable(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


def to_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=_jsonable)


def failure(error: BaseException, tool: str = "tool") -> dict:
    """The error payload of any exception a tool raised."""
    if isinstance(error, (ToolError, RemoteError)):
        return {"error": error.code, "message": error.message}
    log.error("laya mcp: %s failed", tool, exc_info=error)
    return {"error": "internal_error", "message": f"{type(error).__name__}: {error}"}


def outcome(fn: Callable, **kwargs: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    try:
        return False, to_text(fn(**kwargs))
    except Exception as e:  # noqa: BLE001 - every failure becomes an error result
        return True, to_text(failure(e, getattr(fn, "__name__", "tool")))
