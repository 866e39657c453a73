"""`laya-mcp-server`: laya's decision tools over the Model Context Protocol (stdio).

    laya-mcp-server                                   # local: checkpoints load on first use
    LAYA_EXTRA_MODELS='{"support": "/models/support-v2"}' LAYA_DEFAULT_MODEL=support laya-mcp-server
    LAYA_BASE_URL=http://gpu-box:8000 LAYA_API_KEY=... laya-mcp-server   # forward to a running `laya serve`

The tool logic lives in `laya.mcp.tools` (no `mcp` import); this module registers those methods as MCP tools
with the official SDK (`mcp` >= 2: `MCPServer`; 1.x: `FastMCP`) and runs the stdio transport. stdout carries
the protocol, so logging goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from .tools import TOOL_NAMES, LayaTools

INSTALL_HINT = "pip install 'laya[mcp]'"
INSTRUCTIONS = (
    "laya answers typed questions about a state (a JSON object) in one encoder forward pass: choice (pick one "
    "label), score (a level on a scale) and noul (yes/no probability), each with calibrated confidence. Start with "
    "laya_predict (or laya_preset for ready-made question sets, laya_decide to fill a JSON schema). Every tool "
    "returns JSON; failures are {\"error\": {\"code\", \"message\"}}.")


def _server_class() -> Any:
    """The SDK's high-level server class; ImportError naming the extra when the SDK is missing."""
    try:
        from mcp.server.mcpserver import MCPServer  # mcp >= 2

        return MCPServer
    except ImportError:
        pass
    try:
        from mcp.server.fastmcp import FastMCP  # mcp 1.x

        return FastMCP
    except ImportError as e:
        raise ImportError(f"laya-mcp-server needs the MCP Python SDK ({e}); install it with: {INSTALL_HINT}") from None


def build_server(tools: LayaTools | None = None, name: str = "laya") -> Any:
    """An MCP server with every laya tool registered (plain-text JSON results)."""
    server_cls = _server_class()
    tools = tools if tools is not None else LayaTools()
    server = server_cls(name, instructions=INSTRUCTIONS)
    for tool_name in TOOL_NAMES:
        fn = getattr(tools, tool_name)
        server.add_tool(fn, name=tool_name, description=(fn.__doc__ or "").strip() or None,
                        structured_output=False)
    return server


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    parser = argparse.ArgumentParser(
        prog="laya-mcp-server",
        description="laya's decision tools over MCP (stdio). Configured by LAYA_* variables as `laya serve` "
                    "(LAYA_DEVICE, LAYA_MODELS, LAYA_EXTRA_MODELS, LAYA_DEFAULT_MODEL, ...); LAYA_BASE_URL forwards "
                    "to a running laya serve (LAYA_REMOTE_TIMEOUT seconds, LAYA_API_KEY as bearer).")
    parser.add_argument("--log-level", default=None, help="stderr log level (default: LAYA_LOG_LEVEL or info)")
    args = parser.parse_args(argv)
    level = (args.log_level or os.environ.get("LAYA_LOG_LEVEL") or "info").upper()
    logging.basicConfig(level=level if level in logging._nameToLevel else "INFO", stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        tools = LayaTools()
    except ValueError as e:
        print(f"laya-mcp-server: error: {e}", file=sys.stderr)
        return 2
    try:
        server = build_server(tools)
    except ImportError as e:
        print(f"laya-mcp-server: error: {e}", file=sys.stderr)
        return 2
    server.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
