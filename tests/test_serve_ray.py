"""Ray Serve for real: the laya app in two CPU replicas on a local Ray cluster (started once for this module),
through Ray's HTTP proxy. Requests spread over both replicas (each answer names its replica in X-Laya-Replica),
one replica is killed mid-load and the rest are still answered, and every answer is the one the single-process
server gives (batch_invariant on both sides, so batching company changes no bit). Skipped without Ray Serve."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("ray.serve")

with warnings.catch_warnings():  # newer Starlette suggests httpx2 for its test client; httpx still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya.serve import create_app  # noqa: E402
from laya.serve.config import ServeConfig  # noqa: E402
from laya.serve.ray import deployment_options  # noqa: E402

QUESTIONS = {"escalate": {"type": "noul", "instructions": "Should a human take over?"},
             "intent": {"type": "choice", "instructions": "What is it about?", "criteria": ["billing", "bug"]}}
STATES = [f"Ticket {i}: " + ("I was charged twice", "the app crashes on start", "cancel my plan")[i % 3] + "." * i
          for i in range(12)]
KEY = "k"
AUTH = {"Authorization": f"Bearer {KEY}"}
CLIENTS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port: int, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict, str | None]:
    """(status, JSON body or {}, X-Laya-Replica); status 0 when the connection itself failed."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read()), r.headers.get("x-laya-replica")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            payload = json.loads(raw)
        except ValueError:  # Ray's proxy answers a dead replica's request with plain text
            payload = {"text": raw.decode("utf-8", "replace")}
        return e.code, payload, e.headers.get("x-laya-replica")
    except OSError as e:
        return 0, {"error": repr(e)}, None


def decide(port: int, i: int) -> tuple[int, dict, str | None]:
    return call(port, "/v1/systemone", {"state": STATES[i % len(STATES)], "questions": QUESTIONS}, AUTH)


def serve_config(checkpoint: str, **changes) -> ServeConfig:
    # english/multilingual point at the tiny checkpoint too, so auto-routing stays offline
    models = {"tiny": checkpoint, "english": checkpoint, "multilingual": checkpoint}
    settings = dict(device="cpu", extra_models=models, default_model="tiny", models=("tiny",), api_key=KEY,
                    batch_invariant=True)
    return ServeConfig(**{**settings, **changes})


def replica_states() -> dict:
    from ray import serve

    return dict(serve.status().applications["laya"].deployments["laya"].replica_states)


def replica_actors() -> dict[str, dict]:
    """{replica id: named-actor entry} of the laya deployment's live replicas."""
    import ray

    return {a["name"].rsplit("#", 1)[1]: a for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("SERVE_REPLICA::laya#")}


@pytest.fixture(scope="module")
def want(tiny_checkpoint) -> list[dict]:
    """The single-process server's answers on the replicas' settings (one torch thread, as each replica has:
    the same kernels, so the same bits); the test process gets its thread count back afterwards."""
    import torch

    threads, out = torch.get_num_threads(), []
    try:
        with TestClient(create_app(cfg=serve_config(tiny_checkpoint, threads=1))) as local:
            for state in STATES:
                r = local.post("/v1/systemone", json={"state": state, "questions": QUESTIONS}, headers=AUTH)
                assert r.status_code == 200, r.text
                assert "x-laya-replica" not in r.headers  # only a Ray replica names itself
                out.append(r.json())
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="module")
def cluster(tiny_checkpoint):
    """A local Ray cluster (2 CPUs, a small object store, no dashboard) serving two CPU replicas."""
    import ray
    from ray import serve

    from laya.serve.ray import _runtime_env, application

    began = time.monotonic()
    ray.init(num_cpus=2, object_store_memory=200 * 2**20, include_dashboard=False, runtime_env=_runtime_env(),
             log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(application(serve_config(tiny_checkpoint, replicas=2, threads=1)), name="laya", route_prefix="/")
        print(f"\nRay cluster and two replicas up in {time.monotonic() - began:.1f} s")
        yield port
    finally:
        serve.shutdown()
        ray.shutdown()


def load(port: int, requests: int, during=None, after_s: float = 0.0) -> list[tuple]:
    """CLIENTS threads send at least `requests` decisions; `during()` runs once a quarter of them are answered,
    and sending goes on until `after_s` seconds past it (at most 60 s in all).
    Returns (start time, request index, status, body, replica) per request."""
    out: list = []
    quarter = threading.Event()
    lock = threading.Lock()
    done_at: list[float] = []  # when during() returned
    give_up = time.monotonic() + 60

    def more(i: int) -> bool:
        if time.monotonic() > give_up:
            return False
        if i < requests:
            return True
        return during is not None and (not done_at or time.monotonic() < done_at[0] + after_s)

    def client(k: int) -> None:
        i = k
        while more(i):
            began = time.monotonic()
            status, body, replica = decide(port, i)
            with lock:
                out.append((began, i, status, body, replica))
                if len(out) >= requests // 4:
                    quarter.set()
            i += CLIENTS

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    if during is not None:
        assert quarter.wait(60), "the replicas answered too few requests"
        during()
        done_at.append(time.monotonic())
    for t in threads:
        t.join(120)
    assert len(out) >= requests
    return out


def test_deployment_options():
    fixed = deployment_options(ServeConfig(device="cpu", replicas=3))
    assert fixed["num_replicas"] == 3 and fixed["ray_actor_options"] == {"num_cpus": 1}
    scaled = deployment_options(ServeConfig(device="cuda:1", replicas=1, max_replicas=4, max_concurrent=64))
    assert "num_replicas" not in scaled and scaled["ray_actor_options"] == {"num_gpus": 1}
    assert scaled["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 32}


def test_two_replicas_answer_as_one_process(cluster, want):
    port = cluster
    assert replica_states().get("RUNNING") == 2
    for i, expected in enumerate(want):
        status, body, replica = decide(port, i)
        assert status == 200, body
        assert replica in replica_actors()
        assert body == expected  # every key and bit, routing and usage included
    assert "x_jev_confidence" in want[0]["answers"]["intent"]
    status, batch, _ = call(port, "/v1/systemone/batch", {"states": STATES[:3], "questions": QUESTIONS}, AUTH)
    assert status == 200 and batch["results"] == want[:3]
    assert call(port, "/v1/systemone", {"state": "x", "questions": QUESTIONS})[0] == 401
    status, _, replica = call(port, "/v1/systemone", {"state": None, "questions": QUESTIONS}, AUTH)
    assert status == 400 and replica in replica_actors()  # refusals name their replica too
    status, health, _ = call(port, "/health", headers=AUTH)
    assert status == 200 and "tiny" in health["loaded"] and health["device"] == "cpu"


def test_load_spreads_over_both_replicas(cluster, want):
    answered = load(cluster, 48)
    assert len(answered) == 48 and {status for _, _, status, _, _ in answered} == {200}
    by_replica: dict = {}
    for _, i, _, body, replica in answered:
        assert body == want[i % len(want)]
        by_replica[replica] = by_replica.get(replica, 0) + 1
    assert set(by_replica) == set(replica_actors()) and len(by_replica) == 2, by_replica


def test_replica_killed_mid_load_the_rest_is_answered(cluster, want):
    import ray

    port = cluster
    before = replica_actors()
    victim = sorted(before)[0]
    killed_at: list[float] = []

    def kill() -> None:
        actor = before[victim]
        ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)
        killed_at.append(time.monotonic())

    answered = load(port, 96, during=kill, after_s=3.0)
    (t_kill,) = killed_at
    failed = [(began - t_kill, status, body) for began, _, status, body, _ in answered if status != 200]
    # only requests in flight on the dying replica may fail (at most one per client, all started around the kill)
    assert len(failed) <= CLIENTS and all(-5.0 < dt < 1.0 for dt, _, _ in failed), failed
    survivor = next(r for r in before if r != victim)
    late = [(replica, status) for began, _, status, _, replica in answered if began > t_kill + 1.0]
    assert late and all(status == 200 and replica != victim for replica, status in late), late
    for _, i, status, body, replica in answered:
        if status == 200:
            assert body == want[i % len(want)]
    assert any(replica == survivor for replica, _ in late)
    # Ray replaces the killed replica; the new one answers, the same way
    def replaced() -> bool:
        actors = replica_actors()
        return replica_states().get("RUNNING") == 2 and victim not in actors and len(actors) == 2

    # serve.status() can still count the dead replica as RUNNING for a moment: wait for 2 s of agreement
    deadline, steady_since = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        if not replaced():
            steady_since = None
        elif steady_since is None:
            steady_since = time.monotonic()
        elif time.monotonic() - steady_since >= 2.0:
            break
        time.sleep(0.25)
    fresh = set(replica_actors()) - set(before)
    print(f"\nkilled {victim} mid-load: {len(failed)} of {len(answered)} requests failed (in flight on it), "
          f"replacement up {(steady_since or time.monotonic()) - t_kill:.1f} s after the kill")
    assert replica_states().get("RUNNING") == 2 and len(fresh) == 1, (replica_states(), replica_actors())
    seen = set()
    for i in range(40):
        status, body, replica = decide(port, i)
        assert status == 200 and body == want[i % len(want)]
        seen.add(replica)
        if fresh <= seen:
            break
    assert fresh <= seen, seen
