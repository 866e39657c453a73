"""The laya MCP server (`laya-mcp-server`, stdio; needs the `mcp` extra: pip install 'laya[mcp]').

`laya.mcp.tools.LayaTools` holds the tool logic as plain methods that return JSON strings (importable and
testable without the `mcp` package); `laya.mcp.server` only registers them as MCP tools and runs stdio.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LayaTools", "TOOL_NAMES", "main"]


def __getattr__(name: str) -> Any:
    if name in ("LayaTools", "TOOL_NAMES"):
        from . import tools

        return getattr(tools, name)
    if name == "main":
        from .server import main

        return main
    raise AttributeError(f"module 'laya.mcp' has no attribute {name!r}")
