"""Ray Serve smoke test: the laya app in two CPU replicas on a local Ray cluster, through Ray's HTTP proxy.
Skipped cleanly when Ray Serve is not installed (it is not in requirements-dev.txt: CI skips it)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("ray.serve")

from laya.serve.config import ServeConfig  # noqa: E402
from laya.serve.ray import deployment_options  # noqa: E402

QUESTIONS = {"escalate": {"type": "noul", "instructions": "Should a human take over?"},
             "intent": {"type": "choice", "instructions": "What is it about?", "criteria": ["billing", "bug"]}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port: int, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_deployment_options():
    fixed = deployment_options(ServeConfig(device="cpu", replicas=3))
    assert fixed["num_replicas"] == 3 and fixed["ray_actor_options"] == {"num_cpus": 1}
    scaled = deployment_options(ServeConfig(device="cuda:1", replicas=1, max_replicas=4, max_concurrent=64))
    assert "num_replicas" not in scaled and scaled["ray_actor_options"] == {"num_gpus": 1}
    assert scaled["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 32}


def test_ray_serve_two_cpu_replicas(tiny_checkpoint):
    import ray
    from ray import serve

    from laya.serve.ray import _runtime_env, application
    from laya.router import Router

    port = free_port()
    ray.init(num_cpus=3, include_dashboard=False, runtime_env=_runtime_env(), log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # english/multilingual point at the tiny checkpoint too, so auto-routing stays offline
        models = {"tiny": tiny_checkpoint, "english": tiny_checkpoint, "multilingual": tiny_checkpoint}
        cfg = ServeConfig(device="cpu", replicas=2, extra_models=models, default_model="tiny", models=("tiny",),
                          api_key="k", threads=1)
        serve.run(application(cfg), name="laya", route_prefix="/")
        auth = {"Authorization": "Bearer k"}
        body = {"state": "I was charged twice", "questions": QUESTIONS, "model": "tiny"}
        status, body = call(port, "/v1/systemone", body, auth)
        assert status == 200, body
        local = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")
        want = local.predict("I was charged twice", QUESTIONS, model="tiny")
        assert body["answers"]["intent"]["choice"] == want["answers"]["intent"]["choice"]
        assert body["answers"]["escalate"]["noul"] == pytest.approx(want["answers"]["escalate"]["noul"], abs=2e-4)
        assert "x_jev_confidence" in body["answers"]["intent"]
        status, batch = call(port, "/v1/systemone/batch", {"states": ["a", "b", "c"], "questions": QUESTIONS}, auth)
        # custom checkpoints only (english/multilingual re-pointed, tiny served): requests without model go to tiny
        assert status == 200 and len(batch["results"]) == 3
        assert {r["routing"]["model"] for r in batch["results"]} == {"tiny"}
        assert call(port, "/v1/systemone", {"state": "x", "questions": QUESTIONS})[0] == 401
        assert call(port, "/v1/systemone", {"state": None, "questions": QUESTIONS}, auth)[0] == 400
        status, health = call(port, "/health", headers=auth)
        assert status == 200 and "tiny" in health["loaded"] and health["device"] == "cpu"
        replicas = serve.status().applications["laya"].deployments["laya"].replica_states
        assert replicas.get("RUNNING") == 2
    finally:
        serve.shutdown()
        ray.shutdown()
