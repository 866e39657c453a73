"""A deadline for a new connection's request headers: uvicorn never cuts a client that drips header bytes, so a
few such sockets could be held open for ever. The guard wraps uvicorn's own HTTP protocol class and closes a
connection whose first request headers are not complete in time (408, then close)."""

from __future__ import annotations

import asyncio
from typing import Any

_END = b"\r\n\r\n"
_LATE = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


def guarded_protocol(timeout: float, http: str = "auto") -> type:
    """uvicorn's `http` protocol class with a header deadline of `timeout` seconds on each new connection."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    base = import_from_string(HTTP_PROTOCOLS[http])

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._laya_tail = b""
            self._laya_transport = transport
            self._laya_timer = asyncio.get_running_loop().call_later(timeout, self._laya_late)

        def data_received(self, data: bytes) -> None:
            timer = self._laya_timer
            if timer is not None:
                seen = self._laya_tail + data
                if _END in seen:
                    timer.cancel()
                    self._laya_timer = None
                else:
                    self._laya_tail = seen[-3:]  # the end marker may be split across reads
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._laya_timer is not None:
                self._laya_timer.cancel()
                self._laya_timer = None
            super().connection_lost(exc)

        def _laya_late(self) -> None:
            self._laya_timer = None
            transport = self._laya_transport
            if not transport.is_closing():
                transport.write(_LATE)
                transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline
