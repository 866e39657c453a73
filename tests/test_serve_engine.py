"""The engine process (`--engine-process on`): forwards run in a child interpreter and the server answers exactly
as the in-process one does (answers, refusals, /health, /v1/models); a dead child is replaced on the next
request; stop() leaves no child behind."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve.config import from_args  # noqa: E402
from laya.serve.engine import engine_wanted  # noqa: E402
from test_serve_batching import TRIAGE  # noqa: E402
BODIES = [
    ("/v1/systemone", {"state": "I was charged twice for my order, please refund", "questions": TRIAGE}),
    ("/v1/systemone", {"state": {"ticket": "login broken since the update", "id": 7}, "questions": TRIAGE,
                       "max_len": 64}),
    ("/v1/systemone/batch", {"states": [f"ticket {i}: crash on start" for i in range(5)], "questions": TRIAGE}),
    ("/v1/systemone", {"state": "x" * 50, "questions": TRIAGE, "max_len": 4}),  # the agent's ValueError, pickled
    ("/v1/systemone", {"state": "hello", "questions": {"q": {"type": "choice", "criteria": {}}}}),
]


def server_app(checkpoint: str, mode: str):
    cfg = ServeConfig(extra_models={"tiny": checkpoint}, default_model="tiny", device="cpu", engine_process=mode)
    app = create_app(cfg=cfg)
    app.state.server.start()
    return app


async def answers(app, bodies) -> list[tuple[int, dict]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as c:
        responses = await asyncio.gather(*(c.post(route, json=body) for route, body in bodies))
        health = await c.get("/health")
        models = await c.get("/v1/models")
    return [(r.status_code, r.json()) for r in responses] + [(health.status_code, health.json()),
                                                            (models.status_code, models.json())]


@pytest.fixture(scope="module")
def engine_app(tiny_checkpoint):
    app = server_app(tiny_checkpoint, "on")
    yield app
    app.state.server.stop()


def test_engine_answers_as_the_in_process_server(tiny_checkpoint, engine_app):
    local = server_app(tiny_checkpoint, "off")
    try:
        expected = asyncio.run(answers(local, BODIES))
    finally:
        local.state.server.stop()
    got = asyncio.run(answers(engine_app, BODIES))
    assert engine_app.state.server.engine is not None and local.state.server.engine is None
    assert [status for status, _ in got] == [status for status, _ in expected]
    assert got[0][0] == got[2][0] == 200 and got[3][0] == 422 and got[4][0] == 422
    assert got == expected  # the same floats: one process's forward, pickled, changes no bit


def test_engine_health_names_the_resident_checkpoint(engine_app):
    health = asyncio.run(answers(engine_app, []))[0][1]
    assert health["loaded"] == ["tiny"] and health["checkpoint_devices"] == {"tiny": "cpu"}


def test_a_killed_engine_is_replaced_on_the_next_request(engine_app):
    server = engine_app.state.server
    first = server.engine.pid
    os.kill(first, signal.SIGKILL)
    body = [("/v1/systemone", {"state": "my card was charged twice", "questions": TRIAGE})]
    failed = asyncio.run(answers(engine_app, body))[0]
    assert failed[0] == 500 and failed[1]["detail"] == "inference failed"
    again = asyncio.run(answers(engine_app, body))[0]
    assert again[0] == 200 and server.engine.pid not in (None, first)


def test_stop_leaves_no_engine_process(tiny_checkpoint):
    app = server_app(tiny_checkpoint, "on")
    proc = app.state.server.engine._proc
    app.state.server.stop()
    assert proc.poll() is not None and app.state.server.engine.pid is None


def test_engine_mode_setting():
    assert from_args([]).engine_process == "auto"
    assert from_args(["--engine-process", "on"]).engine_process == "on"
    assert from_args([], {"LAYA_ENGINE_PROCESS": "OFF"}).engine_process == "off"
    with pytest.raises(ValueError, match="LAYA_ENGINE_PROCESS='sometimes' must be one of auto, on, off"):
        from_args([], {"LAYA_ENGINE_PROCESS": "sometimes"})
    assert not engine_wanted(ServeConfig(device="cpu"))  # auto: the CPU keeps its forward in-process
    assert engine_wanted(ServeConfig(device="cpu", engine_process="on"))
    assert not engine_wanted(ServeConfig(engine_process="on", ray=True))  # a Ray replica is its own process
