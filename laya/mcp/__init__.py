"""laya over the Model Context Protocol: `laya.mcp.tools` (the tool functions, plus the `LayaTools` class),
`laya.mcp.device`, `laya.mcp.remote` (`RemoteRouter` through a running laya serve) and `laya.mcp.server`
(`laya-mcp-server`, stdio; importing it needs the extra: pip install 'laya[mcp]'). Importing this package
imports neither the `mcp` SDK nor torch."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["device", "remote", "server", "tools"]

_SUBMODULES = ("device", "remote", "server", "tools")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("LayaTools", "TOOL_NAMES"):
        return getattr(importlib.import_module(f"{__name__}.tools"), name)
    if name == "main":
        return importlib.import_module(f"{__name__}.server").main
    raise AttributeError(f"module 'laya.mcp' has no attribute {name!r}")
