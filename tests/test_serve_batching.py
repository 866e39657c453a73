"""Dynamic batching: concurrent requests merge into few predict calls and answer as serial `Router.predict`
does (labels, keys and usage exact; floats to one unit of the 4th decimal, the project's batching
tolerance); validation failures never enter a batch; one bad request never fails the others."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from _compare import assert_same  # noqa: E402
from laya.router import Router  # noqa: E402
from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve.batcher import Batcher, Item  # noqa: E402

TRIAGE = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something is broken", "other": None}},
    "severity": {"type": "score", "instructions": "How severe is it?", "criteria": ["low", "medium", "high"]},
    "escalate": {"type": "noul", "instructions": "Should a human take over?"},
}
SPAM = {"spam": {"type": "noul", "instructions": "Is this spam?", "labels": {"false": "ham", "true": "spam"}}}
WORDS = "invoice refund crash login password charge twice urgent cancel thanks please broken".split()


def state_for(i: int):
    text = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3 + (i * 5) % 40))
    return text if i % 3 else {"ticket": text, "id": i}


def request_for(i: int) -> dict:
    body = {"state": state_for(i), "questions": TRIAGE if i % 4 else SPAM, "model": "tiny"}
    if i % 5 == 0:
        body["max_len"] = 128
    return body


@pytest.fixture(scope="module")
def router(tiny_checkpoint):
    return Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")


async def fire(app, bodies: list[dict], clients: int) -> list[httpx.Response]:
    """`clients` concurrent clients, each sending its share of `bodies` one after another."""
    transport = httpx.ASGITransport(app=app)
    out: list = [None] * len(bodies)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as c:
        async def client(k: int) -> None:
            for i in range(k, len(bodies), clients):
                out[i] = await c.post("/v1/systemone", json=bodies[i])
        await asyncio.gather(*(client(k) for k in range(clients)))
    return out


def without_jev(result: dict) -> dict:
    answers = {q: {k: v for k, v in a.items() if k != "x_jev_confidence"} for q, a in result["answers"].items()}
    return {**result, "answers": answers}


def served(result: dict) -> dict:
    """A library result as the server shows it: a local checkpoint path in routing.repo becomes its name."""
    return {**result, "routing": {**result["routing"], "repo": result["routing"]["model"]}}


def serve(router, **cfg):
    cfg = {"max_concurrent": 256, **cfg}  # the default 16 would refuse most of 32 concurrent clients
    app = create_app(router, cfg=ServeConfig(preload=True, models=("tiny",), **cfg))
    app.state.server.start()
    return app


def test_32_concurrent_clients_match_serial_predict(router):
    bodies = [request_for(i) for i in range(96)]
    serial = [json.loads(json.dumps(router.predict(b["state"], b["questions"], model="tiny",
                                                   max_len=b.get("max_len")))) for b in bodies]
    app = serve(router, batch_window_ms=5.0)
    try:
        responses = asyncio.run(fire(app, bodies, clients=32))
        server = app.state.server
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses if r.status_code != 200]
        for i, (r, want) in enumerate(zip(responses, serial)):
            assert_same(without_jev(r.json()), served(want))
        # three compatible groups at most per gathered batch: far fewer forwards than requests
        assert server.batcher.forwards < len(bodies) / 2, server.batcher.forwards
        assert 'laya_batch_items_bucket{le="1.0"}' in server.metrics.render()[0].decode()
    finally:
        app.state.server.stop()


def test_batching_off_runs_one_request_per_forward(router):
    bodies = [request_for(i) for i in range(12)]
    app = serve(router, batching=False)
    try:
        responses = asyncio.run(fire(app, bodies, clients=6))
        assert all(r.status_code == 200 for r in responses)
        assert app.state.server.batcher.forwards == len(bodies)
    finally:
        app.state.server.stop()


def test_one_bad_request_never_fails_the_others(router):
    """A grouped call that raises is retried member by member: only the bad one fails (500, no details);
    a request whose rows cannot be built (422) sits in its own group and fails alone too."""
    app = serve(router, batch_window_ms=20.0)
    server = app.state.server
    real = server.batcher.infer
    calls = []

    def flaky(name, states, questions, options):
        calls.append(len(states))
        if any(s == "boom" for s in states):
            raise RuntimeError("poisoned state")
        return real(name, states, questions, options)

    server.batcher.infer = flaky
    bodies = [request_for(i) for i in range(1, 24) if i % 4 and i % 5]  # one question set, one budget
    bodies.insert(7, {"state": "boom", "questions": TRIAGE, "model": "tiny"})
    many = {"q": {"type": "choice", "instructions": "pick", "criteria": [f"option {i}" for i in range(40)]}}
    bodies.insert(3, {"state": "tight", "questions": many, "model": "tiny", "max_len": 48, "head_max_len": 40})
    try:
        responses = asyncio.run(fire(app, bodies, clients=len(bodies)))
    finally:
        server.stop()
    by_state = {json.dumps(b["state"]): r for b, r in zip(bodies, responses)}
    assert by_state['"boom"'].status_code == 500 and by_state['"boom"'].json() == {"detail": "inference failed"}
    assert by_state['"tight"'].status_code == 422
    good = [(b, r) for b, r in zip(bodies, responses) if b["state"] not in ("boom", "tight")]
    assert all(r.status_code == 200 for _, r in good)
    for b, r in good:
        assert_same(without_jev(r.json()), served(json.loads(json.dumps(router.predict(b["state"], b["questions"],
                                                                                       model="tiny")))))
    assert max(calls) > 1 and calls.count(1) >= 2  # a grouped call happened, then members ran alone


def test_validation_failures_never_reach_the_worker(router):
    app = serve(router)
    server = app.state.server
    seen = []
    real = server.batcher.infer
    server.batcher.infer = lambda *a: seen.append(a) or real(*a)
    bad = [{"state": None, "questions": TRIAGE}, {"state": "x", "questions": {"q": {"type": "nope"}}},
           {"state": "x", "questions": TRIAGE, "max_len": -1}, {"state": "x", "questions": TRIAGE, "hooks": 1},
           {"state": "x", "questions": TRIAGE, "model": "/a/path"}, {"state": "x", "questions": TRIAGE,
                                                                      "task": "unknown-task"}]
    try:
        responses = asyncio.run(fire(app, bad, clients=len(bad)))
    finally:
        server.stop()
    assert [r.status_code for r in responses] == [400, 422, 422, 422, 422, 422]
    assert seen == [] and server.batcher.forwards == 0


# ---- the Batcher on its own ------------------------------------------------------------------------

def item(key: str, state: str, rows: int = 1, width: int = 100) -> Item:
    return Item((key,), "m", state, {"q": key}, rows, width, {})


def test_batcher_groups_by_key_and_caps_pass_tokens():
    calls = []
    gate = threading.Event()

    def infer(name, states, questions, options):
        gate.wait(5)
        calls.append((questions["q"], list(states)))
        return [f"{questions['q']}:{s}" for s in states]

    b = Batcher(infer, window_ms=50, max_rows=64, max_batch_tokens=250)
    try:
        first = b.submit([item("a", "0")])  # occupies the worker until the gate opens
        time.sleep(0.1)
        rest = b.submit([item("a", "1"), item("b", "2"), item("a", "3"), item("a", "4"), item("b", "5")])
        gate.set()
        results = [f.result(5)[0] for f in first + rest]
    finally:
        b.stop()
    assert results == ["a:0", "a:1", "b:2", "a:3", "a:4", "b:5"]
    # 'a' has 3 waiting items of 100 tokens with a cap of 250: passes of 2 and 1
    assert calls == [("a", ["0"]), ("a", ["1", "3"]), ("a", ["4"]), ("b", ["2", "5"])]


def test_batcher_retries_members_alone_and_reports_errors():
    def infer(name, states, questions, options):
        if "bad" in states:
            raise ValueError("state 'bad' is bad")
        return [s.upper() for s in states]

    b = Batcher(infer, window_ms=30, max_rows=64)
    try:
        futures = b.submit([item("a", "x"), item("a", "bad"), item("a", "y")])
        assert futures[0].result(5)[0] == "X" and futures[2].result(5)[0] == "Y"
        with pytest.raises(ValueError, match="state 'bad' is bad"):
            futures[1].result(5)
    finally:
        b.stop()


def test_batcher_does_not_wait_when_nobody_is_arriving():
    b = Batcher(lambda n, s, q, o: list(s), window_ms=2000, max_rows=64)
    try:
        start = time.perf_counter()
        b.submit([item("a", "x")])[0].result(5)
        assert time.perf_counter() - start < 1.0  # the 2 s window is skipped: no request is on its way
    finally:
        b.stop()


# ---- host-side settings --------------------------------------------------------------------------------

def test_gc_freeze_after_loading_and_restored_on_stop(router):
    import gc

    from laya.serve.app import GC_THRESHOLD

    before = gc.get_threshold()
    app = serve(router)
    server = app.state.server
    try:
        assert gc.get_threshold() == GC_THRESHOLD and gc.get_freeze_count() > 0
        assert server.heap._names == frozenset(router.loaded)
        server.router.unload()  # an eviction or idle unload: everything is unfrozen, collected, frozen again
        server.settle_gc()
        assert server.heap._names == frozenset() and gc.get_freeze_count() > 0
    finally:
        server.stop()
        router.preload(["tiny"])
    assert gc.get_threshold() == before
    gc.unfreeze()
    app = serve(router, gc_freeze=False)
    try:
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    finally:
        app.state.server.stop()


def test_on_route_hooks_never_run_on_the_event_loop(tiny_checkpoint):
    """Plain routing runs inline on the loop (cheaper than a thread hop); an on_route hook may block, so a
    router with one routes on a worker thread, and the answers are the same."""
    seen = []

    class Watch:
        def on_route(self, ctx):
            try:
                asyncio.get_running_loop()
                seen.append("loop")
            except RuntimeError:
                seen.append("thread")

    hooked = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu", hooks=[Watch()])
    bodies = [request_for(i) for i in range(6)]
    app = serve(hooked)
    try:
        responses = asyncio.run(fire(app, bodies, clients=3))
    finally:
        app.state.server.stop()
    assert all(r.status_code == 200 for r in responses) and seen == ["thread"] * len(bodies)
    for b, r in zip(bodies, responses):
        assert_same(without_jev(r.json()), served(json.loads(json.dumps(hooked.predict(
            b["state"], b["questions"], model="tiny", max_len=b.get("max_len"))))))


def test_question_sets_are_remembered_only_once_valid_and_per_option_limit():
    from laya.serve import schema

    many = {"q": {"type": "choice", "instructions": "pick", "criteria": [f"option {i}" for i in range(150)]}}
    body = {"state": "x", "questions": many}
    for _ in range(2):  # over the plain limit every time, before and after a tournament server accepted it
        with pytest.raises(schema.ApiError) as e:
            schema.parse_single(body, ["tiny"], lambda n: n, 8192)
        assert e.value.status == 413
        d = schema.parse_single(body, ["tiny"], lambda n: n, 8192, schema.MAX_CHOICE_OPTIONS_TOURNAMENT)
        assert d.n_questions == 1 and d.questions is many and d.questions_key == json.dumps(many, ensure_ascii=False)
    for _ in range(2):  # failures are never remembered
        with pytest.raises(schema.ApiError) as e:
            schema.parse_single({"state": "x", "questions": {"q": {"type": "nope"}}}, ["tiny"], lambda n: n, 8192)
        assert e.value.status == 422 and "unknown type 'nope'" in e.value.detail
    # remembered by exact JSON text: a set that differs in one character is its own entry
    a = {"q": {"type": "score", "instructions": "how much?", "criteria": ["low", "high"]}}
    b = {"q": {"type": "score", "instructions": "how much? ", "criteria": ["low", "high"]}}
    assert schema.parse_single({"state": "x", "questions": a}, [], None, 8192).questions_key != \
        schema.parse_single({"state": "x", "questions": b}, [], None, 8192).questions_key
