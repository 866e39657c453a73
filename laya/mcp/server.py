"""`laya-mcp-server`: laya's decision tools over the Model Context Protocol (stdio; pip install 'laya[mcp]').

    laya-mcp-server                                   # local: checkpoints load on first use (or LAYA_PRELOAD)
    LAYA_BASE_URL=http://gpu-box:8000 LAYA_API_KEY=... laya-mcp-server   # answer through a running laya serve

Each `laya_<tool>_tool` wrapper calls the function of `laya.mcp.tools` with the process-wide router
(`laya.mcp.runtime`): a success is the tool's dict as JSON text, a failure an MCP error result whose text is
`{"error": "<code>", "message": "<message>"}`. stdout carries the protocol, so logging goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from typing import Annotated, Any

EXTRA_MESSAGE = "the laya[mcp] extra (mcp>=2.2.0) is required to run the MCP server: pip install 'laya[mcp]'"

try:
    from mcp.types import CallToolResult, TextContent
    from pydantic import WithJsonSchema
except ImportError as _missing:  # at import time, so a missing extra is found before any client connects
    raise ImportError(EXTRA_MESSAGE) from _missing

from . import tools
from .runtime import preload_wanted, shared_router
from .wire import failure, log, to_text

__all__ = ["server", "build_server", "main", *[f"{name}_tool" for name in tools.TOOL_NAMES]]

INSTRUCTIONS = (
    "laya answers typed questions about a state (a JSON object) in one encoder forward pass: choice (pick one "
    "label), score (a level on a scale) and noul (yes/no probability), each with calibrated confidence. Start with "
    "laya_predict (or laya_preset for ready-made question sets, laya_decide to fill a JSON schema). Every tool "
    "returns JSON; failures are error results {\"error\": \"<code>\", \"message\": \"...\"}.")

# Advertised as objects, but any value reaches the tool, so a wrong type gets the tool's own error code.
Obj = Annotated[Any, WithJsonSchema({"type": "object", "additionalProperties": True})]
Objs = Annotated[Any, WithJsonSchema({"type": "array", "items": {"type": "object", "additionalProperties": True}})]
Json = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "object"}, {"type": "null"}],
                                      "default": None})]
Str = Annotated[Any, WithJsonSchema({"type": "string"})]
OptStr = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None})]
Int = Annotated[Any, WithJsonSchema({"type": "integer"})]
OptInt = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None})]
Num = Annotated[Any, WithJsonSchema({"type": "number"})]
Bool = Annotated[Any, WithJsonSchema({"type": "boolean"})]


def server_version() -> str:
    """The installed laya distribution's version, else `laya.__version__` (never empty)."""
    try:
        version = importlib.metadata.version("laya")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    if not version:
        from .. import __version__

        version = __version__
    return version


def _result(is_error: bool, payload: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=to_text(payload))], isError=is_error)


def _run(fn: Any, **kwargs: Any) -> CallToolResult:
    """The tool builds the shared router itself, after checking its arguments."""
    try:
        return _result(False, fn(**kwargs))
    except Exception as e:  # noqa: BLE001 - every failure is an error result
        return _result(True, failure(e, fn.__name__))


def _unset(value: Any) -> Any:
    """0 means unset for the batch knobs (clients tend to send defaults)."""
    return None if value == 0 and not isinstance(value, bool) else value


def laya_status_tool() -> CallToolResult:
    """Devices, resident checkpoints and versions (remote: the laya serve /health)."""
    try:
        router = shared_router()
    except Exception as e:  # noqa: BLE001 - status still answers, saying the router is not ready
        router = None
        log.warning("laya mcp: %s", e)
    return _run(tools.laya_status, router=router, preload=preload_wanted(os.environ))


def laya_route_tool(state: Obj, questions: Obj, model: OptStr = None, task: OptStr = None,
                    lang: OptStr = None, lang_guess: OptStr = None) -> CallToolResult:
    """Which checkpoint would answer this state: {model, repo, reason}. Loads nothing."""
    return _run(tools.laya_route, state=state, questions=questions, model=model, task=task, lang=lang,
                lang_guess=lang_guess)


def laya_route_batch_tool(requests: Objs, hooks_timeout: Num = 0) -> CallToolResult:
    """Routing for several requests ({state, questions, model?, task?, lang?, lang_guess?}); loads nothing."""
    return _run(tools.laya_route_batch, requests=requests, hooks_timeout=_unset(hooks_timeout))


def laya_predict_tool(state: Obj, questions: Obj, model: Str = "auto", task: OptStr = None,
                      lang: OptStr = None, lang_guess: OptStr = None, max_len: OptInt = None,
                      head_max_len: OptInt = None, min_confidence: Json = None) -> CallToolResult:
    """Answer typed questions (choice / score / noul = yes-no) about a state in one forward pass."""
    return _run(tools.laya_predict, state=state, questions=questions, model=model, task=task, lang=lang,
                lang_guess=lang_guess, max_len=max_len, head_max_len=head_max_len, min_confidence=min_confidence)


def laya_predict_batch_tool(requests: Objs, batch_size: Int = 0, hooks_timeout: Num = 0,
                            min_confidence: Json = None, sort_by_length: Bool = False) -> CallToolResult:
    """Answer many requests in input order (batch_size / hooks_timeout: 0 = unset)."""
    return _run(tools.laya_predict_batch, requests=requests, batch_size=_unset(batch_size),
                hooks_timeout=_unset(hooks_timeout), min_confidence=min_confidence, sort_by_length=sort_by_length)


def laya_shortlist_tool(state: Obj, questions: Obj, model: Str = "auto", k: Int = 20, task: OptStr = None,
                        lang: OptStr = None, lang_guess: OptStr = None, max_len: OptInt = None,
                        head_max_len: OptInt = None, min_confidence: Json = None) -> CallToolResult:
    """Like laya_predict, each long choice first narrowed to its k options most similar to the state."""
    return _run(tools.laya_shortlist, state=state, questions=questions, model=model, k=k, task=task, lang=lang,
                lang_guess=lang_guess, max_len=max_len, head_max_len=head_max_len, min_confidence=min_confidence)


def laya_tournament_tool(state: Obj, questions: Obj, model: Str = "auto", group_size: Int = 16,
                         task: OptStr = None, lang: OptStr = None, lang_guess: OptStr = None,
                         max_len: OptInt = None, head_max_len: OptInt = None,
                         min_confidence: Json = None) -> CallToolResult:
    """Like laya_predict for choices with many options (up to 255), narrowed in rounds of group_size."""
    return _run(tools.laya_tournament, state=state, questions=questions, model=model, group_size=group_size,
                task=task, lang=lang, lang_guess=lang_guess, max_len=max_len, head_max_len=head_max_len,
                min_confidence=min_confidence)


def laya_preset_tool(preset: Str, state: Obj, task: OptStr = None, lang: OptStr = None,
                     lang_guess: OptStr = None, max_len: OptInt = None,
                     head_max_len: OptInt = None, min_confidence: Json = None) -> CallToolResult:
    """A ready-made question set: guard, moderation, triage, model_router (alias router) or email."""
    return _run(tools.laya_preset, preset=preset, state=state, task=task, lang=lang, lang_guess=lang_guess,
                max_len=max_len, head_max_len=head_max_len, min_confidence=min_confidence)


def laya_decide_tool(state: Obj, schema: Obj, model: Str = "auto", min_confidence: Json = None) -> CallToolResult:
    """Fill a JSON schema (enum / boolean / bounded integer properties) from the state."""
    return _run(tools.laya_decide, state=state, schema=schema, model=model, min_confidence=min_confidence)


def laya_predict_long_tool(state: Obj, questions: Obj, model: Str = "auto", window: OptInt = None,
                           stride: OptInt = None, task: OptStr = None,
                           lang: OptStr = None) -> CallToolResult:
    """Answer about a state longer than the model's window (overlapping token windows)."""
    return _run(tools.laya_predict_long, state=state, questions=questions, model=model, window=window,
                stride=stride, task=task, lang=lang)


def _server_class() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer  # mcp >= 2

        return MCPServer
    except ImportError:
        from mcp.server.fastmcp import FastMCP  # mcp 1.x

        return FastMCP


def build_server(name: str = "laya") -> Any:
    """The SDK server with every `laya_<tool>_tool` registered under the tool's name."""
    cls, version = _server_class(), server_version()
    try:
        built = cls(name, instructions=INSTRUCTIONS, version=version)
    except TypeError:
        built = cls(name, instructions=INSTRUCTIONS)
    low = getattr(built, "_mcp_server", None) or getattr(built, "_lowlevel_server", None)
    if low is not None and hasattr(low, "version"):
        low.version = version
    for tool_name in tools.TOOL_NAMES:
        fn = globals()[f"{tool_name}_tool"]
        try:
            built.add_tool(fn, name=tool_name, description=fn.__doc__, structured_output=False)
        except TypeError:
            built.add_tool(fn, name=tool_name, description=fn.__doc__)
    return built


server = build_server()


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    parser = argparse.ArgumentParser(
        prog="laya-mcp-server",
        description="laya's decision tools over MCP (stdio). Configured by LAYA_* variables (LAYA_DEVICE, "
                    "LAYA_MODELS, LAYA_DEFAULT_MODEL, LAYA_AUTO_TASK, LAYA_THREADS, LAYA_PRELOAD, ...); "
                    "LAYA_BASE_URL answers through a running laya serve (LAYA_REMOTE_TIMEOUT seconds, default "
                    "300; LAYA_API_KEY as bearer).")
    parser.add_argument("--log-level", default=None, help="stderr log level (default: LAYA_LOG_LEVEL or info)")
    args = parser.parse_args(argv)
    level = (args.log_level or os.environ.get("LAYA_LOG_LEVEL") or "info").upper()
    logging.basicConfig(level=level if level in logging.getLevelNamesMapping() else "INFO", stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
