"""The two failures the MCP tools report: `ToolError` (a tool's argument or outcome) and `RemoteError` (a call
to a remote `laya serve`); both carry a stable `code` and a message that says what to change."""

from __future__ import annotations

__all__ = ["RemoteError", "ToolError"]


class ToolError(Exception):
    """A failure the caller can act on: a stable `code` and a message that says what to change."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    def payload(self) -> dict:
        return {"error": self.code, "message": self.message}


class RemoteError(RuntimeError):
    """A remote call that failed: a stable `code` (`unauthorized`, `invalid_request`, `busy`, `timeout`,
    `unreachable`, `upstream_error`, `unsupported_remote`) and a message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message
