"""Issue 25 items 8 and 10-13: lone surrogates and deep nesting are the library's ValueErrors naming the field,
`task` errors name `task`, compressed bodies are 415, start-up failures are one line and exit 2, and
`--no-batching` answers a batch request in one predict call."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings

import pytest

from laya.questions import check_questions, render_state

NOUL = {"type": "noul", "instructions": "Is it urgent?"}
QUESTIONS = {"urgent": NOUL}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# ---- 10: lone surrogates and deep nesting through the Python API ------------------------------------------

@pytest.mark.parametrize("state, position", [("abc\ud800", 3), ("\udfff", 0), ({"k\ud800": 1}, 3),
                                             (["ok", "x\udc00"], 9)])
def test_a_lone_surrogate_in_a_state_is_a_value_error_naming_it(state, position):
    with pytest.raises(ValueError, match=rf"^state contains a lone surrogate U\+D[89A-F][0-9A-F]{{2}} at position "
                                         rf"{position}; "):
        render_state(state)


def test_paired_surrogates_and_plain_text_render_as_before():
    assert render_state("a\U0001F600b") == "a\U0001F600b"
    assert render_state({"a": ["é"]}) == '{"a": ["é"]}'


@pytest.mark.parametrize("definition, field", [
    ({"type": "noul", "instructions": "I\ud800"}, "'instructions' contains a lone surrogate U+D800 at position 1"),
    ({"type": "noul", "instructions": {"k": "\ud800"}}, "'instructions' contains a lone surrogate U+D800"),
    ({"type": "choice", "instructions": "I", "criteria": ["a\udc00", "b"]}, "option 'a\\udc00' text"),
    ({"type": "choice", "instructions": "I", "criteria": {"a": "d\udc00", "b": None}}, "option 'a' text"),
    ({"type": "score", "instructions": "I", "criteria": ["lo", "hi\ud800"]}, "score level 1 text"),
    ({"type": "noul", "instructions": "I", "labels": {"false": "n\ud800", "true": "y"}}, "the 'false' option"),
    ({"type": "noul", "instructions": "I", "criteria": {"true": "\udbff"}}, "the 'true' option"),
])
def test_a_lone_surrogate_in_a_question_names_the_question_and_field(definition, field):
    with pytest.raises(ValueError) as e:
        check_questions({"q": definition})
    text = str(e.value)
    assert text.startswith("question 'q': ") and field in text and "lone surrogate" in text, text


@pytest.mark.parametrize("definition, field", [
    ({"type": "noul", "instructions": nested(5000)}, "'instructions'"),
    ({"type": "score", "instructions": "I", "criteria": ["a", nested(5000)]}, "score level 1"),
    ({"type": "choice", "instructions": "I", "criteria": {"a": nested(5000)}}, "an option description"),
])
def test_deep_question_values_are_value_errors(definition, field):
    with pytest.raises(ValueError, match=rf"^question 'q': {field} nests too deeply to render as JSON"):
        check_questions({"q": definition})


def test_a_state_nested_5000_deep_is_a_value_error():
    with pytest.raises(ValueError, match="^state nests too deeply to render as JSON"):
        render_state(nested(5000))
    with pytest.raises(ValueError, match="^state nests too deeply"):
        render_state({"a": nested(5000)})


@pytest.mark.parametrize("state, questions, match", [
    ("abc\ud800", QUESTIONS, "^state contains a lone surrogate U\\+D800 at position 3"),
    (nested(5000), QUESTIONS, "^state nests too deeply"),
    ("x", {"q": {"type": "noul", "instructions": "I\ud800"}}, "^question 'q': 'instructions' contains a lone"),
    ("x", {"q": {"type": "choice", "instructions": "I", "criteria": ["a\udc00", "b"]}}, "^question 'q': option"),
])
def test_agent_and_router_raise_the_value_error(agent, tiny_checkpoint, state, questions, match):
    from laya.router import Router

    with pytest.raises(ValueError, match=match):
        agent.predict(state, questions)
    with pytest.raises(ValueError, match=match):
        agent.predict_batch(["fine", state], questions)
    router = Router(models={"support": tiny_checkpoint}, default="support", device="cpu")
    with pytest.raises(ValueError, match=match):
        router.predict(state, questions)


# ---- the HTTP side of 10, and 11, 12 ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tiny_checkpoint):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from laya.router import Router
    from laya.serve import ServeConfig, create_app

    router = Router(models={"support": tiny_checkpoint}, default="support", device="cpu")
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, default_model="support", device="cpu")
    app = create_app(router, cfg=cfg)
    with TestClient(app) as c:
        yield c, app


SURROGATE = "request body contains an unpaired surrogate escape; those cannot be encoded as UTF-8"


@pytest.mark.parametrize("body", [
    '{"state": "abc\\ud800", "questions": {"q": {"type": "noul", "instructions": "x"}}}',
    '{"state": {"k\\udc00": 1}, "questions": {"q": {"type": "noul", "instructions": "x"}}}',
    '{"state": "a", "questions": {"q": {"type": "noul", "instructions": "I\\ud800"}}}',
    '{"state": "a", "questions": {"q": {"type": "choice", "instructions": "I", "criteria": ["a\\ud800", "b"]}}}',
])
def test_surrogates_over_http_stay_the_published_400(served, body):
    client, _ = served
    r = client.post("/v1/systemone", content=body)
    assert r.status_code == 400 and r.json() == {"detail": SURROGATE}, r.text


@pytest.mark.parametrize("task", ["../../etc/passwd", "/etc/passwd", "nosuchtask", "org/repo"])
def test_an_unknown_task_names_the_task_field(served, task):
    client, _ = served
    for path, body in (("/v1/systemone", {"state": "hello", "questions": QUESTIONS, "task": task}),
                       ("/v1/systemone/batch", {"states": ["hello"], "questions": QUESTIONS, "task": task})):
        r = client.post(path, json=body)
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert detail.startswith(f"task {task!r} names no task or checkpoint"), detail
        assert "'english'" not in detail and "'multilingual'" not in detail  # only what this server serves


def test_known_tasks_and_an_explicit_model_still_route(served):
    client, _ = served
    for extra in ({"task": "support"}, {"task": " Support "}, {"task": ""}, {"task": "x", "model": "support"}):
        r = client.post("/v1/systemone", json={"state": "hello", "questions": QUESTIONS, **extra})
        assert r.status_code == 200, (extra, r.text)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "GZIP", "gzip, identity", "x-custom"])
def test_a_compressed_body_is_415_unsupported_encoding(served, encoding):
    client, app = served
    payload = gzip.compress(json.dumps({"state": "hello", "questions": QUESTIONS}).encode())
    forwards = app.state.server.batcher.forwards
    for path in ("/v1/systemone", "/v1/systemone/batch"):
        r = client.post(path, content=payload, headers={"Content-Encoding": encoding})
        assert r.status_code == 415, r.text
        assert r.json()["detail"].startswith("unsupported encoding"), r.text
        assert repr(encoding) in r.json()["detail"]
    assert app.state.server.batcher.forwards == forwards


def test_identity_encoding_is_read_as_usual(served):
    client, _ = served
    body = json.dumps({"state": "hello", "questions": QUESTIONS})
    for encoding in ("identity", "Identity", ""):
        r = client.post("/v1/systemone", content=body, headers={"Content-Encoding": encoding})
        assert r.status_code == 200, r.text


# ---- 8: --no-batching answers a batch request in one call -------------------------------------------------

def test_no_batching_answers_a_64_state_batch_in_one_predict_batch(tiny_checkpoint):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from laya.router import Router
    from laya.serve import ServeConfig, create_app

    router = Router(models={"support": tiny_checkpoint}, default="support", device="cpu")
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, default_model="support", device="cpu",
                      batching=False)
    app = create_app(router, cfg=cfg)
    agent = router.load("support")
    calls = []
    original = agent.predict_batch

    def counted(states, *args, **kwargs):
        calls.append(len(states))
        return original(states, *args, **kwargs)

    agent.predict_batch = counted
    try:
        with TestClient(app) as client:
            states = [f"state number {i}" for i in range(64)]
            r = client.post("/v1/systemone/batch", json={"states": states, "questions": QUESTIONS})
            assert r.status_code == 200, r.text
            assert calls == [64] and app.state.server.batcher.forwards == 1
            expected = [original([s], QUESTIONS)[0]["answers"] for s in states[:3]]
            assert [res["answers"]["urgent"]["noul"] for res in r.json()["results"][:3]] == \
                   [e["urgent"]["noul"] for e in expected]
            calls.clear()
            for i in range(3):  # separate requests are still one forward each
                assert client.post("/v1/systemone", json={"state": f"s{i}", "questions": QUESTIONS}).status_code == 200
            assert calls == [1, 1, 1]
    finally:
        agent.predict_batch = original


def test_batcher_without_batching_keeps_one_submit_together():
    from laya.serve.batcher import Batcher, Item

    seen = []

    def infer(name, states, questions, options):
        seen.append(list(states))
        return [{"answers": {}, "state": s} for s in states]

    batcher = Batcher(infer, batching=False)
    try:
        first = batcher.submit([Item(("k",), "m", f"a{i}", {}, 1, 8, {}) for i in range(5)])
        second = batcher.submit([Item(("k",), "m", "b0", {}, 1, 8, {})])
        for f in first + second:
            f.result(timeout=10)
    finally:
        batcher.stop()
    assert seen == [["a0", "a1", "a2", "a3", "a4"], ["b0"]]


# ---- 13: start-up failures are one line and exit 2 --------------------------------------------------------

def _serve(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "laya.serve", "--port", "18531", "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def broken_dirs(tiny_checkpoint, tmp_path_factory):
    import shutil

    base = tmp_path_factory.mktemp("broken")
    empty = base / "empty"
    empty.mkdir()
    truncated = base / "truncated"
    shutil.copytree(tiny_checkpoint, truncated)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    return {"empty": str(empty), "truncated": str(truncated)}


@pytest.mark.parametrize("case", ["missing", "empty", "truncated", "backend", "hub_offline", "no_preload_backend"])
def test_start_up_failures_print_one_line_and_exit_2(case, broken_dirs, tiny_checkpoint, tmp_path):
    args, expect = {
        "missing": (["--model", f"s={tmp_path / 'nowhere'}"], "no checkpoint at s"),
        "empty": (["--model", f"s={broken_dirs['empty']}"], "rl_agent_config.json"),
        "truncated": (["--model", f"s={broken_dirs['truncated']}"], broken_dirs["truncated"]),
        "backend": (["--model", f"s={tiny_checkpoint}", "--backend", "bogus"], "unknown backend 'bogus'"),
        "hub_offline": (["--model", "s=someorg/no-such-laya-repo"], "someorg/no-such-laya-repo"),
        "no_preload_backend": (["--no-preload", "--model", f"s={tiny_checkpoint}", "--backend", "bogus"],
                               "unknown backend 'bogus'"),
    }[case]
    done = _serve(*args)
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("laya serve: error: ") and expect in lines[0], lines[0]
    assert "Traceback" not in done.stderr


def test_debug_log_level_adds_the_traceback(broken_dirs):
    done = _serve("--model", f"s={broken_dirs['truncated']}", "--log-level", "debug")
    assert done.returncode == 2
    assert "Traceback" in done.stderr and done.stderr.rstrip().splitlines()[-1].startswith("laya serve: error: ")


# ---- fragile: non-finite numbers where the model reads text -----------------------------------------------

@pytest.mark.parametrize("question, what", [
    ('{"type": "score", "instructions": "x", "criteria": ["low", 1e309]}', "score level 1"),
    ('{"type": "score", "instructions": "x", "criteria": ["low", {"n": -1e309}]}', "score level 1"),
    ('{"type": "noul", "instructions": 1e309}', "'instructions'"),
    ('{"type": "noul", "instructions": [1, NaN]}', "'instructions'"),
    ('{"type": "choice", "instructions": "x", "criteria": {"a": Infinity, "b": null}}',
     "the description of option 'a'"),
    ('{"type": "noul", "instructions": "x", "criteria": {"true": -Infinity}}', "the description of option 'true'"),
])
def test_a_non_finite_number_where_text_is_required_is_422(served, question, what):
    client, _ = served
    for path, states in (("/v1/systemone", '"state": "x"'), ("/v1/systemone/batch", '"states": ["x"]')):
        r = client.post(path, content=f'{{{states}, "questions": {{"q": {question}}}}}')
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith(f"question 'q': {what} holds a non-finite number"), r.text


def test_finite_numbers_in_question_texts_are_still_fine(served):
    client, _ = served
    body = '{"state": "x", "questions": {"q": {"type": "score", "instructions": 1.5, "criteria": [0, 2.5e10, 1e308]}}}'
    r = client.post("/v1/systemone", content=body)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("state, path", [
    ('{"order": {"lines": [{"sku": "a"}, {"price": 1e309}]}}', '["order"]["lines"][1]["price"]'),
    ('{"a": {"b": NaN}}', '["a"]["b"]'),
    ('[{"turn": "hi"}, {"scores": [1, -Infinity]}]', '[1]["scores"][1]'),
    ('{"first": [NaN, 1e309], "second": Infinity}', '["first"][0]'),
    ('{"note": "Infinity and NaN as words", "deep": ' + '[' * 200 + '-1e400' + ']' * 200 + '}',
     '["deep"]' + '[0]' * 199),
])
def test_a_non_finite_number_inside_a_state_is_422_naming_its_place(served, state, path):
    client, _ = served
    questions = json.dumps(QUESTIONS)
    for route, states, where in (("/v1/systemone", f'"state": {state}', "'state'"),
                                 ("/v1/systemone/batch", f'"states": ["x", {{"ok": 1.5}}, {state}]', "'states[2]'")):
        r = client.post(route, content=f'{{{states}, "questions": {questions}}}')
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        shown = path if len(path) <= 300 else "..." + path[-297:]
        assert detail.startswith(f"{where} holds a non-finite number at {shown} "), detail
        assert "send a finite number, or the value as a string" in detail, detail


@pytest.mark.parametrize("body", [
    '{"state": {"n": 1e308, "m": [-1.7976931348623157e308, 2.5e-320, 0]}, "questions": QS}',
    '{"state": {"note": "Infinity, NaN and 1e309 as words", "NaN": "key"}, "questions": QS}',
    '{"state": "the total was 1e309, NaN or -Infinity", "questions": QS}',
    '{"states": ["1e309", {"n": 1e308}, ["NaN"]], "questions": QS}',
])
def test_finite_numbers_and_such_words_in_a_state_are_still_answered(served, body):
    client, _ = served
    route = "/v1/systemone/batch" if body.startswith('{"states"') else "/v1/systemone"
    r = client.post(route, content=body.replace("QS", json.dumps(QUESTIONS)))
    assert r.status_code == 200, r.text


# ---- fragile: a drain deadline on SIGTERM -----------------------------------------------------------------

def test_shutdown_timeout_reaches_uvicorn(monkeypatch):
    pytest.importorskip("uvicorn")
    import uvicorn

    import laya.serve
    from laya.serve.config import from_args

    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append(kw))
    monkeypatch.setattr(laya.serve, "create_app", lambda *a, **kw: object())
    monkeypatch.delenv("LAYA_SHUTDOWN_TIMEOUT", raising=False)
    assert laya.serve.main(["--port", "9100"]) == 0 and runs[-1]["timeout_graceful_shutdown"] == 30.0
    assert laya.serve.main(["--shutdown-timeout", "2.5"]) == 0 and runs[-1]["timeout_graceful_shutdown"] == 2.5
    monkeypatch.setenv("LAYA_SHUTDOWN_TIMEOUT", "4")
    assert laya.serve.main(["--port", "9100"]) == 0 and runs[-1]["timeout_graceful_shutdown"] == 4.0
    with pytest.raises(ValueError, match="shutdown_timeout=0.0 must be a positive number of seconds"):
        from_args(["--shutdown-timeout", "0"])


# ---- fragile: work of a client that has gone is dropped before its forward --------------------------------

def test_batcher_drops_cancelled_items_before_their_forward():
    import threading

    from laya.serve.batcher import Batcher, Item

    seen, release = [], threading.Event()

    def infer(name, states, questions, options):
        seen.append(list(states))
        if states == ["first"]:
            release.wait(10)
        return [{"answers": {}} for _ in states]

    batcher = Batcher(infer, batching=False)
    try:
        (first,) = batcher.submit([Item(("k",), "m", "first", {}, 1, 8, {})])
        while not seen:
            threading.Event().wait(0.01)
        (gone,) = batcher.submit([Item(("k",), "m", "gone", {}, 1, 8, {})])
        (kept,) = batcher.submit([Item(("k",), "m", "kept", {}, 1, 8, {})])
        assert gone.cancel() and batcher.queued_rows == 2
        release.set()
        first.result(timeout=10), kept.result(timeout=10)
    finally:
        batcher.stop()
    assert seen == [["first"], ["kept"]] and batcher.abandoned == 1 and batcher.queued_rows == 0


def _asgi_post(app, body: bytes, gone):
    """One POST straight through the ASGI app; the client disconnects once `gone` is set."""
    sent, pending = [], [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if pending:
            return pending.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/systemone", "raw_path": b"/v1/systemone", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("test", 80)}
    return app(scope, receive, send), sent


def test_a_disconnected_client_is_499_and_its_queued_work_never_runs(tiny_checkpoint):
    pytest.importorskip("fastapi")
    import asyncio
    import threading

    from laya.router import Router
    from laya.serve import ServeConfig, create_app

    router = Router(models={"support": tiny_checkpoint}, default="support", device="cpu")
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, default_model="support", device="cpu",
                      batching=False)
    app = create_app(router, cfg=cfg)
    server = app.state.server
    server.start()
    agent = router.load("support")
    original, seen, release = agent.predict_batch, [], threading.Event()

    def slow(states, *args, **kwargs):
        seen.append(list(states))
        if states == ["slow one"]:
            release.wait(20)
        return original(states, *args, **kwargs)

    agent.predict_batch = slow

    async def scenario():
        never, gone = asyncio.Event(), asyncio.Event()
        first, first_sent = _asgi_post(app, json.dumps({"state": "slow one", "questions": QUESTIONS}).encode(), never)
        first = asyncio.ensure_future(first)
        while not seen:
            await asyncio.sleep(0.01)
        second, second_sent = _asgi_post(app, json.dumps({"state": "left", "questions": QUESTIONS}).encode(), gone)
        second = asyncio.ensure_future(second)
        while server.batcher.queued_rows == 0:
            await asyncio.sleep(0.01)
        gone.set()
        await asyncio.wait_for(second, 10)  # answered while the forward before it still runs
        release.set()
        await asyncio.wait_for(first, 20)
        for _ in range(500):  # the worker drops the abandoned item once it is free
            if server.batcher.abandoned:
                break
            await asyncio.sleep(0.01)
        return first_sent, second_sent

    try:
        first_sent, second_sent = asyncio.run(scenario())
    finally:
        release.set()
        agent.predict_batch = original
        server.stop()
    assert first_sent[0]["status"] == 200 and second_sent[0]["status"] == 499
    assert seen == [["slow one"]] and server.batcher.abandoned == 1 and server.batcher.queued_rows == 0
    text = server.metrics.render()[0].decode()
    assert 'status="499"' in text and 'status="500"' not in text


# ---- fragile: slow bodies are read outside the model slots (opt-in: the published order holds by default) -----

def _one_slot_app(checkpoint, body_read_timeout: float, max_body_reads: int):
    """(router, app) serving `checkpoint` with one model slot and `max_body_reads` body readers, started."""
    from laya.router import Router
    from laya.serve import ServeConfig, create_app

    router = Router(models={"support": checkpoint}, default="support", device="cpu")
    cfg = ServeConfig(extra_models={"support": checkpoint}, default_model="support", device="cpu",
                      max_concurrent=1, body_read_timeout=body_read_timeout, max_body_reads=max_body_reads)
    app = create_app(router, cfg=cfg)
    app.state.server.start()
    return router, app


def test_with_max_body_reads_a_slow_body_holds_no_model_slot(tiny_checkpoint):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    import asyncio

    from _slow_body import slow_body
    from laya.serve import ServeConfig
    from laya.serve.config import from_args

    _, app = _one_slot_app(tiny_checkpoint, body_read_timeout=0.5, max_body_reads=3)
    payload = json.dumps({"state": "hello", "questions": QUESTIONS}).encode()

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            slow = [asyncio.create_task(c.post("/v1/systemone", content=slow_body(payload, 2.0))) for _ in range(2)]
            await asyncio.sleep(0.2)
            fast = await c.post("/v1/systemone", content=payload)  # the only model slot is free: answered
            slow.append(asyncio.create_task(c.post("/v1/systemone", content=slow_body(payload, 2.0))))
            await asyncio.sleep(0.1)
            third = await c.post("/v1/systemone", content=payload)  # three bodies being read: no fourth reader
            return [await s for s in slow], fast, third

    try:
        slow, fast, third = asyncio.run(scenario())
    finally:
        app.state.server.stop()
    assert [s.status_code for s in slow] == [408, 408, 408]
    assert fast.status_code == 200, fast.text
    assert third.status_code == 503 and third.headers["retry-after"] == "1"
    assert from_args(["--max-body-reads", "8"]).max_body_reads == 8
    assert from_args([], {"LAYA_MAX_BODY_READS": "5"}).max_body_reads == 5
    assert ServeConfig().max_body_reads == 0  # default: read inside the admission slot (R-HTTP-3 order)


def test_with_max_body_reads_a_full_server_refuses_before_the_body(tiny_checkpoint):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    import asyncio
    import threading

    router, app = _one_slot_app(tiny_checkpoint, body_read_timeout=5, max_body_reads=4)
    server = app.state.server
    agent = router.load("support")
    original, release = agent.predict_batch, threading.Event()

    def slow(states, *args, **kwargs):
        release.wait(20)
        return original(states, *args, **kwargs)

    agent.predict_batch = slow
    payload = json.dumps({"state": "hello", "questions": QUESTIONS}).encode()

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            first = asyncio.create_task(c.post("/v1/systemone", content=payload))
            while server.admitted == 0:
                await asyncio.sleep(0.01)
            busy = await c.post("/v1/systemone", content=payload)
            release.set()
            return await first, busy

    try:
        first, busy = asyncio.run(scenario())
    finally:
        release.set()
        agent.predict_batch = original
        server.stop()
    assert first.status_code == 200 and busy.status_code == 503 and server.reads == 0


def test_no_preload_with_a_directory_that_is_no_checkpoint_is_refused_at_start(broken_dirs):
    done = _serve("--no-preload", "--model", f"s={broken_dirs['empty']}")
    assert done.returncode == 2
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == [f"laya serve: error: laya serve: no checkpoint at s -> {broken_dirs['empty']} (a directory "
                     "without rl_agent_config.json); fix the path in --model or LAYA_EXTRA_MODELS (a local checkpoint "
                     "directory or a Hub id)"], lines


# ---- fragile: a large batch request is cut into forwards that interleave with small requests --------------

def test_a_small_request_is_answered_between_the_passes_of_a_large_one():
    import threading

    from laya.serve.batcher import Batcher, Item

    seen, first_forward = [], threading.Event()
    release = threading.Event()

    def infer(name, states, questions, options):
        seen.append(list(states))
        first_forward.set()
        release.wait(10)
        return [{"answers": {}} for _ in states]

    batcher = Batcher(infer, window_ms=0, max_rows=256, max_batch_tokens=10**9)
    try:
        big = batcher.submit([Item(("big",), "m", f"b{i}", {}, 64, 8, {}) for i in range(16)])  # 4 forwards' worth
        first_forward.wait(10)
        small = batcher.submit([Item(("small",), "m", "s", {}, 1, 8, {})])
        release.set()
        for f in big + small:
            f.result(timeout=10)
    finally:
        release.set()
        batcher.stop()
    assert seen[0] == ["b0", "b1", "b2", "b3"]
    assert seen[1] == ["s"]  # the very next forward, not after the large request's last pass
    assert [s for part in seen for s in part if s != "s"] == [f"b{i}" for i in range(16)]  # order kept


def test_fair_queue_lets_partly_served_requests_progress_under_steady_fresh_load():
    from laya.serve.fair_queue import FairQueue

    queue, served = FairQueue(), []
    queue.add([("big", i) for i in range(6)])
    for turn in range(6):
        queue.add([("small", turn)])
        queue.begin()
        taken = [queue.pop(), queue.pop()]  # two items per forward
        queue.end()
        served.append(taken)
    bigs = [item for part in served for item in part if item[0] == "big"]
    smalls = [item for part in served for item in part if item[0] == "small"]
    assert len(bigs) >= 5 and len(smalls) >= 5  # neither side starves
    assert bigs == sorted(bigs) and smalls == sorted(smalls)
    assert sorted(list(queue.drain()) + bigs + smalls) == sorted([("big", i) for i in range(6)]
                                                                  + [("small", i) for i in range(6)])


# ---- fragile: a connection that drips its headers is cut --------------------------------------------------

def test_header_read_timeout_closes_a_dripping_connection(tiny_checkpoint):
    pytest.importorskip("uvicorn")
    import socket
    import time

    port = 18547
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "laya.serve", "--port", str(port), "--host", "127.0.0.1",
                             "--device", "cpu", "--model", f"s={tiny_checkpoint}", "--header-read-timeout", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    assert s.recv(100).startswith(b"HTTP/1.1 200")  # a whole request still answers
                break
            except (ConnectionRefusedError, OSError):
                assert proc.poll() is None and time.time() < deadline, "server did not start"
                time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\n")
            started, reply = time.time(), b""
            try:
                for _ in range(40):  # one header byte every 0.2 s: never complete
                    s.sendall(b"X")
                    time.sleep(0.2)
            except OSError:
                pass
            try:
                reply = s.recv(200)
            except OSError:
                pass
        assert reply.startswith(b"HTTP/1.1 408") or reply == b"", reply
        assert time.time() - started < 6
    finally:
        proc.terminate()
        proc.wait(30)


def test_header_read_timeout_setting_and_protocol(monkeypatch):
    pytest.importorskip("uvicorn")
    import uvicorn

    import laya.serve
    from laya.serve.config import from_args
    from laya.serve.header_timeout import guarded_protocol

    assert from_args([]).header_read_timeout == 10.0
    assert from_args(["--header-read-timeout", "3"]).header_read_timeout == 3.0
    assert from_args([], {"LAYA_HEADER_READ_TIMEOUT": "2.5"}).header_read_timeout == 2.5
    with pytest.raises(ValueError, match="header_read_timeout=-1.0 must be a positive number of seconds"):
        from_args(["--header-read-timeout", "-1"])
    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append(kw))
    monkeypatch.setattr(laya.serve, "create_app", lambda *a, **kw: object())
    assert laya.serve.main(["--port", "9100"]) == 0
    assert runs[-1]["http"].__name__.startswith("HeaderDeadline")
    assert issubclass(guarded_protocol(1.0, "h11"), __import__("uvicorn.protocols.http.h11_impl",
                                                                fromlist=["H11Protocol"]).H11Protocol)
