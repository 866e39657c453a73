"""laya serve: routes, every documented status code, auth, Jev confidence and strict projection, health,
metrics and configuration. The Router serves the tiny checkpoint under custom names (nothing downloads)."""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2 for its test client; httpx still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from _slow_body import slow_body  # noqa: E402
from laya.router import Router  # noqa: E402
from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve import config as serve_config  # noqa: E402
from laya.serve.jev import jev_confidence, strict  # noqa: E402
from laya.serve.metrics import Metrics  # noqa: E402
from laya.serve.schema import MAX_BATCH_STATES, MAX_STATE_CHARS  # noqa: E402

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": None, "other": None}},
    "severity": {"type": "score", "instructions": "How severe is it?", "criteria": ["low", "medium", "high"]},
    "escalate": {"type": "noul", "instructions": "Should a human take over?"},
}
KEY = "s3cret-key"


@pytest.fixture(scope="module")
def router(tiny_checkpoint):
    # english/multilingual point at the tiny checkpoint too, so auto-routing stays offline
    return Router(models={"tiny": tiny_checkpoint, "english": tiny_checkpoint, "multilingual": tiny_checkpoint},
                  default="tiny", device="cpu", max_loaded=4)


def client_for(router, **cfg) -> TestClient:
    settings = dict(preload=True, models=("tiny",))
    settings.update(cfg)
    return TestClient(create_app(router, cfg=ServeConfig(**settings)))


@pytest.fixture(scope="module")
def client(router):
    with client_for(router) as c:
        yield c


def post(client, body, path="/v1/systemone", **kwargs):
    return client.post(path, json=body, **kwargs)


def without_jev(result: dict) -> dict:
    answers = {q: {k: v for k, v in a.items() if k != "x_jev_confidence"} for q, a in result["answers"].items()}
    return {**result, "answers": answers}


def served_shape(result: dict) -> dict:
    """A library result as the server shows it: a local checkpoint path in routing.repo becomes its name."""
    return {**result, "routing": {**result["routing"], "repo": result["routing"]["model"]}}


# ---- the happy path --------------------------------------------------------------------------------

def test_systemone_matches_router_predict_and_adds_jev_confidence(client, router):
    r = post(client, {"state": "I was charged twice for March", "questions": QUESTIONS, "model": "tiny"})
    assert r.status_code == 200
    body = r.json()
    assert list(body) == ["model", "answers", "usage", "routing"]
    expected = served_shape(json.loads(json.dumps(router.predict("I was charged twice for March", QUESTIONS,
                                                                 model="tiny"))))
    assert without_jev(body) == expected
    for qid, answer in body["answers"].items():
        if answer["type"] == "noul":
            assert "x_jev_confidence" not in answer
        else:
            assert answer["x_jev_confidence"] == jev_confidence(answer)
    inference = float(r.headers["x-inference-time-ms"])
    assert inference > 0
    assert r.headers["server-timing"].startswith(f"inference;dur={r.headers['x-inference-time-ms']}")


def test_batch_route_results_and_total_usage(client, router):
    states = ["short one", {"ticket": "the app crashes on login"}, ["hi", "I need a refund please"]]
    r = post(client, {"states": states, "questions": QUESTIONS, "model": "tiny", "batch_size": 2,
                      "sort_by_length": True, "min_confidence": 0.5}, "/v1/systemone/batch")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["results", "total_usage"]
    assert len(body["results"]) == 3
    for state, got in zip(states, body["results"]):
        want = served_shape(json.loads(json.dumps(router.predict(state, QUESTIONS, model="tiny",
                                                                 min_confidence=0.5))))
        assert without_jev(got) == want
        assert all("abstention" in a for a in got["answers"].values())
    assert body["total_usage"] == {k: sum(x["usage"][k] for x in body["results"])
                                   for k in ("input_tokens", "output_tokens")}


def test_model_field_ids(router):
    with client_for(router, models=("tiny", "english", "multilingual")) as client:  # serves the shipped names
        auto = post(client, {"state": "hello there", "questions": QUESTIONS, "model": "jev-1"}).json()
        assert not auto["routing"]["reason"].startswith("explicit model")
        bundle = post(client, {"state": "hello there", "questions": QUESTIONS, "model": "convaiinnovations/laya"})
        assert bundle.json()["routing"]["reason"] == auto["routing"]["reason"]
        multi = post(client, {"state": "hola", "questions": QUESTIONS,
                              "model": "convaiinnovations/laya-multilingual"}).json()
        assert multi["routing"]["model"] == "multilingual"
        alias = post(client, {"state": "hello", "questions": QUESTIONS, "model": "ML"}).json()
        assert alias["routing"]["model"] == "multilingual"
        english = post(client, {"state": "I was charged twice for my March invoice, please refund it.",
                                "questions": QUESTIONS}).json()
        assert english["routing"]["model"] == "english"  # auto-routing is the router's own here


def test_custom_only_server_answers_requests_without_model_with_its_checkpoint(tiny_checkpoint):
    """`laya serve --model support=DIR`: nothing shipped is served, so requests without `model` go to `support`
    (never to the Hub default), naming a shipped checkpoint is a 422, and /v1/models lists `support` only."""
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, device="cpu")  # default_model stays multilingual
    with TestClient(create_app(cfg=cfg)) as c:
        server = c.app.state.server
        assert server.served == ["support"] and server.custom_only and server.auto_default == "support"
        for state, routed in (("I was charged twice for my March invoice, please refund it.", "english"),
                              ("Hola, necesito ayuda con mi factura del mes pasado.", "multilingual"),
                              ("12345", "multilingual")):
            for extra in ({}, {"model": "jev-1"}, {"model": "auto"}):
                r = post(c, {"state": state, "questions": QUESTIONS, **extra})
                assert r.status_code == 200, r.text
                routing = r.json()["routing"]
                assert routing["model"] == "support" and routing["repo"] == "support"  # never the local path
                assert routing["reason"].startswith("served default 'support' (routing chose "
                                                    f"'{routed}'"), routing["reason"]
                assert routing["detection"] is not None
        batch = post(c, {"states": ["refund please", "bonjour"], "questions": QUESTIONS}, "/v1/systemone/batch")
        assert [r["routing"]["model"] for r in batch.json()["results"]] == ["support", "support"]
        assert post(c, {"state": "x", "questions": QUESTIONS, "model": "support"}).json()["routing"]["reason"] \
            == c.app.state.server.router.route("x", QUESTIONS, "support").reason
        for extra in ({"model": "english"}, {"model": "convaiinnovations/laya-multilingual"},
                      {"task": "typed-decisions"}):
            r = post(c, {"state": "x", "questions": QUESTIONS, **extra})
            assert r.status_code == 422 and "is not served here; this server answers with support" in r.json()["detail"]
        assert [(m["id"], m["loaded"], m["default"]) for m in c.get("/v1/models").json()["data"]] == \
            [("support", True, True)]
        assert c.get("/health").json()["loaded"] == ["support"]


def test_served_names():
    from laya.serve.app import served_names

    r = Router(models={"support": "/m/support"})
    assert served_names(ServeConfig(), r) == ["english", "multilingual", "typed-decisions", "support"]
    assert served_names(ServeConfig(extra_models={"support": "/m/support"}), r) == ["support"]
    assert served_names(ServeConfig(models=("ML", "support"), extra_models={"support": "/m"}), r) == \
        ["multilingual", "support"]
    with pytest.raises(ValueError, match="LAYA_MODELS/--models: unknown model 'nope'"):
        served_names(ServeConfig(models=("nope",)), r)


def test_models_route(client, router):
    data = client.get("/v1/models").json()  # serves tiny only (no shipped checkpoint): tiny is all it lists
    assert [(m["id"], m["object"], m["loaded"], m["default"]) for m in data["data"]] == [("tiny", "model", True, True)]
    with client_for(router, models=("tiny", "english")) as c:  # a shipped name served: every registered one
        data = c.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == list(router.models)
    assert next(m for m in data if m["id"] == "tiny")["default"] is True


def test_health_reports_loaded_device_backend_fallbacks(client, router):
    h = client.get("/health").json()
    assert h["loaded"] == list(router.agents())  # the router's own record, not a copy kept by the server
    assert h["status"] == "ok"
    assert "tiny" in h["loaded"]
    assert h["device"] == "cpu" and h["device_is_preference"] is False
    assert h["checkpoint_devices"]["tiny"] == "cpu"
    assert set(h) == {"status", "loaded", "revisions", "device", "device_is_preference", "checkpoint_devices",
                      "cpu_fallbacks"}  # the published payload, nothing more (the backend is in /v1/models)
    assert next(m for m in client.get("/v1/models").json()["data"] if m["id"] == "tiny")["backend"] == "eager"
    assert h["cpu_fallbacks"]["tiny"] == {"count": 0, "last_reason": None}
    assert h["revisions"]["tiny"] is None


def test_metrics_exposition(client):
    post(client, {"state": "metrics please", "questions": QUESTIONS, "model": "tiny"})
    text = client.get("/metrics").text
    for series in ("laya_requests_total", "laya_request_latency_seconds_bucket", "laya_batch_rows_bucket",
                   "laya_batch_items_bucket", "laya_queue_rows", "laya_input_tokens_total",
                   "laya_inference_seconds_count", "laya_inflight_requests"):
        assert series in text, series
    assert 'route="/v1/systemone",status="200"' in text


def test_metrics_fallback_without_prometheus_client():
    m = Metrics(use_prometheus=False)
    m.child(m.requests, "/v1/systemone", "200").inc()
    m.child(m.latency, "/v1/systemone").observe(0.003)
    m.child(m.queue_rows).set(7)
    body, content_type = m.render()
    text = body.decode()
    assert content_type.startswith("text/plain; version=0.0.4")
    assert 'laya_requests_total{route="/v1/systemone",status="200"} 1.0' in text
    assert 'laya_request_latency_seconds_bucket{route="/v1/systemone",le="0.0025"} 0' in text
    assert 'laya_request_latency_seconds_bucket{route="/v1/systemone",le="0.005"} 1' in text
    assert 'laya_request_latency_seconds_count{route="/v1/systemone"} 1' in text
    assert "laya_queue_rows 7.0" in text
    assert "# TYPE laya_request_latency_seconds histogram" in text


# ---- Jev confidence and the strict shape -----------------------------------------------------------

@pytest.mark.parametrize("answer, expected", [
    ({"type": "choice", "probabilities": {"a": 0.5, "b": 0.5}}, 0.0),
    ({"type": "choice", "probabilities": {"a": 1.0, "b": 0.0, "c": 0.0}}, 1.0),
    ({"type": "choice", "probabilities": {"a": 0.7, "b": 0.2, "c": 0.1}}, round((0.7 - 1 / 3) / (2 / 3), 4)),
    ({"type": "choice", "probabilities": {"a": 2.0, "b": 2.0, "c": 4.0}}, round((0.5 - 1 / 3) / (2 / 3), 4)),
    ({"type": "choice", "probabilities": {"only": 0.3}}, 1.0),
    ({"type": "score", "probabilities": {"0": 0.0, "1": 0.0, "2": 1.0}}, 1.0),
    ({"type": "score", "probabilities": {"0": 0.5, "1": 0.0, "2": 0.5}}, 0.0),
    # mode 1, spread 0.2*1 + 0.2*1 = 0.4; uniform spread around the centre of 3 levels = 2/3
    ({"type": "score", "probabilities": {"0": 0.2, "1": 0.6, "2": 0.2}}, round(1 - 0.4 / (2 / 3), 4)),
    ({"type": "noul", "noul": 0.9}, None),
    ({"type": "choice", "probabilities": {"a": -0.1, "b": 1.1}}, None),
    ({"type": "choice", "probabilities": {"a": True, "b": 0.0}}, None),
    ({"type": "choice", "probabilities": {"a": float("nan"), "b": 0.5}}, None),
])
def test_jev_confidence_formula(answer, expected):
    assert jev_confidence(answer) == expected


def test_strict_projection_is_the_exact_jev_shape(router):
    with client_for(router, jev_strict=True) as c:
        body = post(c, {"state": "strict please", "questions": QUESTIONS, "model": "tiny",
                        "min_confidence": 0.9}).json()
        batch = post(c, {"states": ["a", "b"], "questions": QUESTIONS, "model": "tiny"}, "/v1/systemone/batch")
    assert list(body) == ["model", "answers", "usage"]
    assert list(body["usage"]) == ["input_tokens", "output_tokens"]
    assert list(body["answers"]["intent"]) == ["type", "choice", "confidence", "probabilities"]
    assert list(body["answers"]["severity"]) == ["type", "score", "confidence", "probabilities", "legend"]
    assert list(body["answers"]["escalate"]) == ["type", "noul"]
    results = batch.json()["results"]
    assert all(list(r) == ["model", "answers", "usage"] for r in results)
    assert strict(strict(results[0])) == results[0]


# ---- status codes ----------------------------------------------------------------------------------

JSON_TEXT = "request body must be valid JSON"
SURROGATE_TEXT = "request body contains an unpaired surrogate escape; those cannot be encoded as UTF-8"
SINGLE_TEXT = "request body must be an object with a 'questions' field"
BATCH_TEXT = "request body must be an object with 'states' and 'questions' fields"
HOOKS_TEXT = ("run inside the server process and cannot be sent to this endpoint; install them where laya-serve "
              "runs, or drop them")


@pytest.mark.parametrize("raw, detail", [
    (b"{not json", JSON_TEXT),
    (b"", JSON_TEXT),
    (b"   ", JSON_TEXT),
    (b"[1, 2]", SINGLE_TEXT),
    (b"\xff\xfe{}", JSON_TEXT),
    (b'{"state": "\\ud800 lone", "questions": {}}', SURROGATE_TEXT),
    (b'{"state": "x", "questions": {"\\uDC00": {}}}', SURROGATE_TEXT),  # upper case, in a key
    (json.dumps({"state": "x"}).encode(), SINGLE_TEXT),
    (json.dumps({"state": "x", "questions": None}).encode(), SINGLE_TEXT),
    (json.dumps({"questions": QUESTIONS}).encode(), "'state' is required"),
    (json.dumps({"state": None, "questions": QUESTIONS}).encode(), "'state' is required"),
    (json.dumps({"state": "x", "questions": ["a"]}).encode(), "'questions' must be an object"),
])
def test_400_malformed(client, raw, detail):
    r = client.post("/v1/systemone", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"detail": detail}


@pytest.mark.parametrize("body, detail", [
    ({"questions": QUESTIONS}, BATCH_TEXT),
    ({"states": ["a"]}, BATCH_TEXT),
    ({"states": [], "questions": QUESTIONS}, "'states' must be a non-empty list"),
    ({"states": "one", "questions": QUESTIONS}, "'states' must be a non-empty list"),
    ({"states": ["a", None], "questions": QUESTIONS}, "'states[1]' is required"),
    ('{"states": ["\\ud800"], "questions": {"q": {"type": "noul", "instructions": "x"}}}', SURROGATE_TEXT),
])
def test_400_batch_malformed(client, body, detail):
    r = client.post("/v1/systemone/batch", content=body) if isinstance(body, str) else \
        post(client, body, "/v1/systemone/batch")
    assert r.status_code == 400
    assert r.json()["detail"] == detail


def big_choice(n: int) -> dict:
    return {"type": "choice", "instructions": "pick", "criteria": [f"o{i}" for i in range(n)]}


@pytest.mark.parametrize("body, detail", [
    ({"state": "x" * (MAX_STATE_CHARS + 1), "questions": QUESTIONS}, "state too large (50001 > 50000 chars)"),
    ({"state": "x", "questions": {f"q{i}": QUESTIONS["escalate"] for i in range(65)}}, "too many questions (65 > 64)"),
    ({"state": "x", "questions": {"q": big_choice(101)}}, "too many choice options for 'q' (101 > 100)"),
    ({"state": "x", "questions": {"q": {"type": "score", "instructions": "s", "criteria": list(range(33))}}},
     "too many score levels for 'q' (33 > 32)"),
    ({"state": "x", "questions": {f"q{i}": big_choice(100) for i in range(6)}},
     "too many answer options across questions (600 > 512)"),
])
def test_413_limits(client, body, detail):
    r = post(client, body)
    assert r.status_code == 413
    assert r.json()["detail"] == detail


def test_413_batch_states_and_body_size(router):
    with client_for(router, max_body_bytes=4096) as c:
        r = post(c, {"states": ["a"] * (MAX_BATCH_STATES + 1), "questions": QUESTIONS}, "/v1/systemone/batch")
        assert r.status_code == 413 and r.json()["detail"] == "too many states in batch (65 > 64)"
        r = post(c, {"state": "x" * 5000, "questions": QUESTIONS})
        assert r.status_code == 413 and r.json()["detail"] == "request body too large"


@pytest.mark.parametrize("extra, fragment", [
    ({"hooks": ["x"]}, "hooks " + HOOKS_TEXT),
    ({"on_predict_start": "f", "hooks_timeout": 1}, "hooks_timeout, on_predict_start " + HOOKS_TEXT),
    ({"max_len": 10 ** 6}, "max_len exceeds server limit (1000000 > 8192)"),
    ({"max_len": 0}, "max_len must be a positive integer"),
    ({"max_len": True}, "max_len must be an integer"),
    ({"head_max_len": "64"}, "head_max_len must be an integer"),
    ({"head_max_len": 9000}, "head_max_len exceeds server limit (9000 > 8192)"),
    ({"min_confidence": 2}, "min_confidence must be"),
    ({"min_confidence": {"choice:7": 0.5}}, "'choice:7'"),
    ({"lang": 5}, 'lang must be a language code string such as "de", or null'),
    ({"lang_guess": ["en"]}, 'lang_guess must be a language code string such as "de", or null'),
    ({"model": "/etc/models/x"}, "unknown model '/etc/models/x'"),
    ({"model": "someorg/somerepo"}, "unknown model 'someorg/somerepo'"),
    ({"model": 3}, "model must be a string"),
    ({"task": "nonexistent"}, "unknown model 'nonexistent'"),
    ({"lang": "e1"}, "e1"),
])
def test_422_invalid_values(client, extra, fragment):
    r = post(client, {"state": "hello", "questions": QUESTIONS, **extra})
    assert r.status_code == 422
    assert fragment in r.json()["detail"]
    if "model" in extra and isinstance(extra["model"], str):
        assert r.json()["detail"].endswith(", or omit model to let the router choose")


@pytest.mark.parametrize("questions, fragment", [
    ({"q": {"type": "bogus", "instructions": "x"}}, "question 'q': unknown type 'bogus'; use one of ['choice', 'noul', 'score']"),
    ({"q": {"type": "choice", "instructions": "x", "criteria": ["a", "a"]}}, "appears more than once"),
    ({"q": {"type": "noul", "instructions": "  "}}, "'instructions' must not be empty"),
    ({"q": {"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}}}, "'maybe' is not allowed"),
])
def test_422_question_validation_is_passed_through(client, questions, fragment):
    r = post(client, {"state": "hello", "questions": questions, "model": "tiny"})
    assert r.status_code == 422
    assert r.json()["detail"].startswith("question ") and fragment in r.json()["detail"]


@pytest.mark.parametrize("extra, fragment", [
    ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
    ({"batch_size": 1.5}, "batch_size must be an integer"),
    ({"sort_by_length": "yes"}, "sort_by_length must be a boolean"),
    ({"diagnostics": {}}, "diagnostics is filled in place for an in-process caller and cannot be returned over "
                          "HTTP; read the per-group report from the CLI or a local Router"),
])
def test_422_batch_controls(client, extra, fragment):
    r = post(client, {"states": ["a"], "questions": QUESTIONS, **extra}, "/v1/systemone/batch")
    assert r.status_code == 422
    assert fragment in r.json()["detail"]


def test_422_from_inside_the_library(client):
    """A ValueError raised while building rows (markers that do not fit) is a 422 with the library's text."""
    many = {"q": {"type": "choice", "instructions": "pick one", "criteria": [f"option {i}" for i in range(40)]}}
    r = post(client, {"state": "hello", "questions": many, "model": "tiny", "max_len": 48, "head_max_len": 40})
    assert r.status_code == 422
    assert "option markers fit in max_len=48" in r.json()["detail"]


def test_401_auth_and_hidden_docs(router):
    with client_for(router, api_key=KEY) as c:
        body = {"state": "hello", "questions": QUESTIONS, "model": "tiny"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"},
                        {"Authorization": KEY}):
            r = post(c, body, headers=headers)
            assert r.status_code == 401, headers
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json() == {"detail": "invalid or missing bearer token"} and KEY not in r.text
        good = {"Authorization": f"bearer {KEY}"}
        assert post(c, body, headers=good).status_code == 200
        assert post(c, {"states": ["a"], "questions": QUESTIONS}, "/v1/systemone/batch").status_code == 401
        assert c.get("/v1/models").status_code == 401
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers=good).status_code == 200
        assert c.get("/health").json() == {"status": "ok"}
        assert "loaded" in c.get("/health", headers=good).json()
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert c.get(path, headers=good).status_code == 404
    with client_for(router) as c:
        assert c.get("/openapi.json").status_code == 200


def test_503_when_the_queue_is_full(router):
    """Queue overflow is the published 503 + Retry-After (never 429, which the spec does not list)."""
    with client_for(router, max_queue_rows=2) as c:
        r = post(c, {"state": "hello", "questions": QUESTIONS, "model": "tiny"})
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert r.json() == {"detail": "server busy, try again later"}


def test_500_leaks_nothing(router, caplog):
    app = create_app(router, cfg=ServeConfig(preload=False))
    server = app.state.server

    def broken(name, states, questions, options):
        raise RuntimeError("secret internal detail at /opt/private/path")

    server.batcher.infer = broken
    with TestClient(app) as c:
        r = post(c, {"state": "hello", "questions": QUESTIONS, "model": "tiny"})
    assert r.status_code == 500
    assert r.json() == {"detail": "inference failed"}
    assert "secret" not in r.text
    assert "secret internal detail" in caplog.text  # the log keeps it


def test_408_slow_body_and_503_admission(router):
    """A body that trickles in past the read timeout is 408; while it holds the only admission slot,
    another request is 503 with Retry-After."""
    app = create_app(router, cfg=ServeConfig(preload=False, max_concurrent=1, body_read_timeout=0.5))
    payload = json.dumps({"state": "hello", "questions": QUESTIONS, "model": "tiny"}).encode()

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            slow = asyncio.create_task(c.post("/v1/systemone", content=slow_body(payload, 2.0)))
            await asyncio.sleep(0.2)
            busy = await c.post("/v1/systemone", content=payload)
            return await slow, busy

    try:
        slow, busy = asyncio.run(scenario())
    finally:
        app.state.server.stop()
    assert slow.status_code == 408
    assert slow.json() == {"detail": "request body was not received in time"}
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "1"
    assert busy.json() == {"detail": "server busy, try again later"}


def test_idle_unload(tiny_checkpoint):
    import time

    own = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")
    with client_for(own, idle_unload_seconds=0.3) as c:
        assert post(c, {"state": "hello", "questions": QUESTIONS, "model": "tiny"}).status_code == 200
        deadline = time.time() + 5
        while own.loaded and time.time() < deadline:
            time.sleep(0.1)
        health = c.get("/health").json()
        assert health["loaded"] == [] and health["idle_unload_seconds"] == 0.3 and health["idle_seconds"] >= 0.3
        assert post(c, {"state": "again", "questions": QUESTIONS, "model": "tiny"}).status_code == 200  # reloads


def test_unknown_route_is_jev_shaped(client):
    r = client.get("/v1/nothing")
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


# ---- configuration and entry points ----------------------------------------------------------------

def test_config_env_and_flags():
    env = {"LAYA_PORT": "9001", "LAYA_JEV_STRICT": "yes", "LAYA_BATCHING": "off", "LAYA_PRELOAD": " ",
           "LAYA_EXTRA_MODELS": '{"support": "/models/support"}', "LAYA_MODELS": "support, english",
           "LAYA_BATCH_WINDOW_MS": "5", "LAYA_API_KEY": KEY}
    cfg = serve_config.from_env(env)
    assert cfg.port == 9001 and cfg.jev_strict is True and cfg.batching is False and cfg.preload is True
    assert cfg.extra_models == {"support": "/models/support"} and cfg.models == ("support", "english")
    assert cfg.batch_window_ms == 5.0 and cfg.api_key == KEY
    cfg = serve_config.from_args(["--port", "9002", "--model", "other=/m/other", "--no-batching",
                                  "--batch-window-ms", "1.5", "--backend", "eager"], env)
    assert cfg.port == 9002 and cfg.batch_window_ms == 1.5 and cfg.backend == "eager"
    assert cfg.extra_models == {"support": "/models/support", "other": "/m/other"}
    with pytest.raises(ValueError, match="invalid LAYA_PORT 'eighty': must be an integer 1-65535"):
        serve_config.from_env({"LAYA_PORT": "eighty"})
    # admission: the spec's default of 16, raised by the variable or the flag (the flag wins)
    assert serve_config.from_env({}).max_concurrent == 16
    assert serve_config.from_env({"LAYA_MAX_CONCURRENT": "300"}).max_concurrent == 300
    assert serve_config.from_args(["--max-concurrent", "64"], {"LAYA_MAX_CONCURRENT": "300"}).max_concurrent == 64
    # access log off and GC freezing on unless asked otherwise
    cfg = serve_config.from_env({})
    assert cfg.access_log is False and cfg.gc_freeze is True
    cfg = serve_config.from_args(["--access-log", "--no-gc-freeze"], {})
    assert cfg.access_log is True and cfg.gc_freeze is False
    cfg = serve_config.from_env({"LAYA_ACCESS_LOG": "1", "LAYA_GC_FREEZE": "off"})
    assert cfg.access_log is True and cfg.gc_freeze is False
    assert serve_config.from_env({"LAYA_MAX_CONCURRENT": "0"}).max_concurrent == 16  # the published fallback
    with pytest.raises(ValueError, match="max_concurrent=0 must be a positive integer"):
        serve_config.from_args(["--max-concurrent", "0"], {})
    with pytest.raises(ValueError, match="NAME=SOURCE"):
        serve_config.from_args(["--model", "nosource"], {})


def test_laya_serve_subcommand_dispatches(monkeypatch):
    import laya.serve
    from laya import cli

    seen = []
    monkeypatch.setattr(laya.serve, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["serve", "--port", "9000"]) == 0
    assert seen == [["--port", "9000"]]


def test_serve_main_refuses_bad_settings(capsys):
    from laya.serve.main import main

    assert main(["--max-batch-rows", "0"]) == 2
    assert "max_batch_rows=0 must be a positive integer" in capsys.readouterr().err


def test_unknown_fields_are_ignored_on_both_routes(client):
    # a Jev client's extra fields are no error (R-HTTP-2 lists every refusal, and none is for them); diagnostics
    # is refused on the batch route only (R-HTTP-3)
    r = post(client, {"state": "x", "questions": QUESTIONS, "temperature": 1, "diagnostics": {}})
    assert r.status_code == 200 and set(r.json()["answers"]) == set(QUESTIONS)
    r = post(client, {"states": ["x"], "questions": QUESTIONS, "unknown": 1}, "/v1/systemone/batch")
    assert r.status_code == 200 and len(r.json()["results"]) == 1
