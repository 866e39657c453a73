"""The text an integration screens or routes: from a string, a dict, chat messages or content blocks
(LangChain, Agno, CrewAI and LlamaIndex objects alike, read by attribute, no framework import)."""

from __future__ import annotations

from typing import Any

TEXT_KEYS = ("input", "text", "query", "prompt", "message", "body", "content")


def content_text(content: Any) -> Any:
    """A message's content as text: a string as is, content blocks (`{"type": "text", "text": ...}` or str
    items) joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(getattr(block, "text", None), str):
                parts.append(block.text)
        return "\n".join(parts)
    return content


def message_text(message: Any) -> Any:
    """A message object's (or message dict's) text; anything else unchanged."""
    if isinstance(message, dict) and "content" in message and ("role" in message or "type" in message):
        return content_text(message["content"])
    content = getattr(message, "content", None)
    if content is not None and not isinstance(message, (str, dict, list, tuple)):
        return content_text(content)
    return message


def _messages_text(messages: list) -> Any:
    """The newest message's text (what a chat turn asks)."""
    return message_text(messages[-1]) if messages else ""


def extract_text(value: Any, state_key: Any = None) -> Any:
    """What to send as the laya state: a callable `state_key` applied to the input; a str key picks that field
    of a dict input; a str as is; a dict's first text field, else its `messages`, else the dict itself."""
    if callable(state_key):
        return message_text(state_key(value))
    if isinstance(state_key, str) and isinstance(value, dict) and state_key in value:
        return message_text(content_text(value[state_key]))
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in TEXT_KEYS:
            if key in value and value[key] is not None:
                return message_text(content_text(value[key]))
        if isinstance(value.get("messages"), (list, tuple)):
            return _messages_text(list(value["messages"]))
        return value
    if isinstance(value, (list, tuple)) and value and all(not isinstance(v, (str, int, float)) for v in value):
        return _messages_text(list(value))
    query = getattr(value, "query_str", None)  # LlamaIndex QueryBundle
    if isinstance(query, str):
        return query
    return message_text(value)
