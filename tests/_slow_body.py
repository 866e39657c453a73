"""A request body that arrives in two parts `pause` seconds apart (httpx async content)."""

from __future__ import annotations

import asyncio


def slow_body(payload: bytes, pause: float):
    async def chunks():
        yield payload[:10]
        await asyncio.sleep(pause)
        yield payload[10:]
    return chunks()
