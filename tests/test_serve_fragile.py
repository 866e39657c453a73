"""Issue #25's fragile list, end to end on the CPU: a 64-state x 64-question batch does not hold up a 1-question
request, SIGTERM under load exits by its drain deadline (the request cut off gets a 503), and unknown keys inside a
question definition are 422."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2 for its test client; httpx still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve.limits import MAX_BATCH_STATES, MAX_QUESTIONS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG_QUESTIONS = {f"q{i}": {"type": "noul", "instructions": f"Is point {i} of the policy met by this ticket?"}
                 for i in range(MAX_QUESTIONS)}
BIG = {"states": [f"Ticket {i}: a long story about billing, refunds and a broken blender. " * 3
                  for i in range(MAX_BATCH_STATES)], "questions": BIG_QUESTIONS}
# four times BIG's tokens: the batch must outlast the signal's 1.5 s and the 1 s deadline on a fast CPU too
LONG = {"states": [f"Ticket {i}: a long story about billing, refunds and a broken blender. " * 12
                   for i in range(MAX_BATCH_STATES)], "questions": BIG_QUESTIONS}
SMALL = {"state": "where is my parcel?", "questions": {"late": {"type": "noul", "instructions": "Is it late?"}}}


@pytest.fixture(scope="module")
def served(tiny_checkpoint):
    cfg = ServeConfig(device="cpu", extra_models={"tiny": tiny_checkpoint}, default_model="tiny", models=("tiny",))
    app = create_app(cfg=cfg)
    with TestClient(app) as client:
        yield client, app.state.server


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# ---- head-of-line blocking ----------------------------------------------------------------------------

def test_a_one_question_request_is_not_held_behind_a_64_by_64_batch(served):
    client, server = served
    big: dict = {}

    def send_big() -> None:
        began = time.monotonic()
        r = client.post("/v1/systemone/batch", json=BIG)
        big.update(status=r.status_code, seconds=time.monotonic() - began, done=time.monotonic())

    forwards = server.batcher.forwards
    thread = threading.Thread(target=send_big)
    thread.start()
    try:
        assert wait_for(lambda: server.batcher.forwards > forwards, 60), "the large batch never started"
        began = time.monotonic()
        r = client.post("/v1/systemone", json=SMALL)
        small_done = time.monotonic()
        assert r.status_code == 200, r.text
        assert "done" not in big, "the large batch finished first: nothing was interleaved"
    finally:
        thread.join(120)
    assert big["status"] == 200
    # the small request is answered between two passes of the large one (4,096 rows in passes of max_batch_rows)
    assert small_done - began < 2.0 and small_done < big["done"], (small_done - began, big)
    print(f"\n64x64 batch {big['seconds']:.2f} s; 1-question request sent during it answered in "
          f"{small_done - began:.3f} s")


# ---- unknown keys inside a question definition -----------------------------------------------------------

@pytest.mark.parametrize("definition, names", [
    ({"type": "noul", "instructions": "Urgent?", "lables": {"false": "no", "true": "yes"}}, "'lables'"),
    ({"type": "choice", "instructions": "Topic?", "criteria": ["a", "b"], "criterias": ["c"]}, "'criterias'"),
    ({"type": "score", "instructions": "How bad?", "criteria": ["low", "high"], "weight": 2, "colour": "red"},
     "'weight', 'colour'"),
])
def test_an_unknown_key_in_a_question_definition_is_422(served, definition, names):
    client, _ = served
    for path, body in (("/v1/systemone", {"state": "x", "questions": {"q": definition}}),
                       ("/v1/systemone/batch", {"states": ["x", "y"], "questions": {"q": definition}})):
        r = client.post(path, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith(f"question 'q': unknown key(s) {names} in its definition; a question "
                                             "takes 'type', 'instructions', 'criteria', 'labels', 'option_order'")


def test_every_known_question_key_is_still_accepted_and_library_texts_come_first(served):
    client, _ = served
    full = {"type": "choice", "instructions": "Topic?", "criteria": {"a": "one", "b": None}, "option_order": [1, 0]}
    noul = {"type": "noul", "instructions": "Urgent?", "labels": {"false": "later", "true": "now"}}
    assert client.post("/v1/systemone", json={"state": "x", "questions": {"c": full, "n": noul}}).status_code == 200
    r = client.post("/v1/systemone", json={"state": "x", "questions": {"q": {"type": "noul", "instruction": "x"}}})
    assert r.status_code == 422 and r.json()["detail"] == ("question 'q': no 'instructions'; add the text the model "
                                                           "should answer")


# ---- SIGTERM under load: the drain deadline ---------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_under_load_exits_by_the_drain_deadline(tiny_checkpoint):
    pytest.importorskip("uvicorn")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "laya.serve", "--port", str(port), "--host", "127.0.0.1",
                             "--device", "cpu", "--model", f"s={tiny_checkpoint}", "--shutdown-timeout", "1",
                             "--max-batch-rows", "64", "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    outcome: dict = {}
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: proc.poll() is not None or _up(base), 120) and proc.poll() is None, "no server"

        def send_big() -> None:  # 4,096 long rows in passes of 64: far longer than the 1 s deadline
            request = urllib.request.Request(f"{base}/v1/systemone/batch", data=json.dumps(LONG).encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=120) as r:
                    outcome["status"] = r.status
            except urllib.error.HTTPError as e:  # cut off at the drain deadline, as it should be
                outcome.update(refused=e.code, retry_after=e.headers.get("retry-after"),
                               detail=json.loads(e.read())["detail"])
            except OSError as e:
                outcome["error"] = repr(e)

        thread = threading.Thread(target=send_big)
        thread.start()
        time.sleep(1.5)  # well inside the batch's forwards
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        exited = time.monotonic() - sent
        thread.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "status" not in outcome, outcome  # the batch did not run to its end first
    # the request still running at the deadline is told so (503, Retry-After), not uvicorn's bare 500
    assert outcome.get("refused") == 503 and outcome["retry_after"], outcome
    assert outcome["detail"].startswith("the server is shutting down and stopped this request at its drain deadline")
    print(f"\nSIGTERM during a 64x64 batch: exited {exited:.2f} s later ({outcome})")
    assert exited < 6.0, exited  # 1 s deadline, then the forward in progress and the worker's stop


def _up(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_the_cpu_default_pass_is_64_rows_and_an_explicit_one_is_kept(served, tiny_checkpoint):
    from laya.serve.config import CPU_BATCH_ROWS, GPU_BATCH_ROWS

    _, server = served  # device cpu, --max-batch-rows not given
    assert ServeConfig().max_batch_rows is None and server.batcher.max_rows == CPU_BATCH_ROWS == 64
    assert GPU_BATCH_ROWS == 256
    cfg = ServeConfig(device="cpu", extra_models={"tiny": tiny_checkpoint}, default_model="tiny", models=("tiny",),
                      max_batch_rows=256)
    app = create_app(cfg=cfg)
    with TestClient(app):
        assert app.state.server.batcher.max_rows == 256
