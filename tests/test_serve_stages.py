"""Where a request's time goes: the per-stage timing of laya serve (queue, prep, forward, decode, wakeup, http)
in /metrics (laya_request_stage_seconds) and in each answer's Server-Timing header, and the predictor's
stage clock behind it."""

from __future__ import annotations

import re
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2 for its test client; httpx still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya import stage_clock  # noqa: E402
from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve.metrics import STAGES, Metrics  # noqa: E402

QUESTIONS = {"intent": {"type": "choice", "instructions": "What is it about?", "criteria": ["billing", "bug"]},
             "escalate": {"type": "noul", "instructions": "Should a human take over?"}}


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    cfg = ServeConfig(device="cpu", extra_models={"tiny": tiny_checkpoint}, default_model="tiny", models=("tiny",))
    with TestClient(create_app(cfg=cfg)) as c:
        yield c


def stage_counts(client) -> dict[str, float]:
    text = client.get("/metrics").text
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'^laya_request_stage_seconds_count\{stage="(\w+)"\} ([0-9.e+]+)$', text, re.M)}


def timing(header: str) -> dict[str, float]:
    return {name: float(dur) for name, dur in re.findall(r"(\w+);dur=([0-9.]+)", header)}


def test_metrics_count_every_stage_of_each_answered_request(client):
    before = stage_counts(client)
    assert set(before) == set(STAGES)  # the series exist from the start
    r = client.post("/v1/systemone", json={"state": "I was charged twice", "questions": QUESTIONS})
    assert r.status_code == 200
    after = stage_counts(client)
    assert all(after[s] == before[s] + 1 for s in STAGES), (before, after)
    r = client.post("/v1/systemone/batch", json={"states": ["a", "b", "c"], "questions": QUESTIONS})
    assert r.status_code == 200
    assert all(stage_counts(client)[s] == after[s] + 1 for s in STAGES)  # one request, one observation
    assert client.post("/v1/systemone", json={"state": None, "questions": QUESTIONS}).status_code == 400
    assert stage_counts(client)["http"] == after["http"] + 1  # a refused request has no stages
    text = client.get("/metrics").text
    assert "# TYPE laya_request_stage_seconds histogram" in text
    assert 'laya_request_stage_seconds_bucket{le="0.0001",stage="forward"}' in text


def test_server_timing_stages_add_up_to_the_total(client):
    r = client.post("/v1/systemone", json={"state": "the app crashes on start", "questions": QUESTIONS})
    t = timing(r.headers["server-timing"])
    assert set(t) == {"inference", *STAGES, "total"}
    assert t["forward"] > 0 and t["prep"] > 0 and t["http"] > 0
    assert t["prep"] + t["forward"] + t["decode"] == pytest.approx(t["inference"], abs=0.02)  # 2-decimal rounding
    parts = sum(t[s] for s in STAGES)
    assert parts <= t["total"] + 0.05 and parts >= 0.9 * t["total"], t  # one forward: the stages are the whole


def test_stage_clock_laps_a_predict_call_on_its_thread_only(agent):
    clock = stage_clock.StageClock()
    stage_clock.install(clock)
    try:
        clock.reset()
        agent.predict_batch(["one state", "another state"], QUESTIONS)
        assert clock.prep > 0 and clock.forward > 0 and clock.decode > 0
        first = (clock.prep, clock.forward)
        agent.predict_batch(["a third"], QUESTIONS)  # no reset: the laps add up
        assert clock.prep > first[0] and clock.forward > first[1]
    finally:
        stage_clock.install(None)
    assert stage_clock.current() is stage_clock.OFF
    frozen = (clock.prep, clock.forward, clock.decode)
    agent.predict_batch(["not timed"], QUESTIONS)
    assert (clock.prep, clock.forward, clock.decode) == frozen


def test_stage_histogram_in_the_fallback_exposition():
    m = Metrics(use_prometheus=False)
    m.child(m.stages, "queue").observe(0.0003)
    text = m.render()[0].decode()
    assert 'laya_request_stage_seconds_bucket{stage="queue",le="0.00025"} 0' in text
    assert 'laya_request_stage_seconds_bucket{stage="queue",le="0.0005"} 1' in text
    assert 'laya_request_stage_seconds_count{stage="queue"} 1' in text
