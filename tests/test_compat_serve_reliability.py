"""Issue 25 items 1-7 and compat §15 R-HTTP-2..4: nesting and integer limits are 400s, queue overflow is 503,
a client gone mid-body is neither an ERROR nor a 500, missing local checkpoints are refused at start, answers
never show the server's paths, and tournament mode follows the published narrowing rule."""

from __future__ import annotations

import asyncio
import json
import logging
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya.router import Router  # noqa: E402
from laya.serve import ServeConfig, create_app  # noqa: E402
from laya.serve.body import too_deep  # noqa: E402
from laya.serve.health import PublicRepo  # noqa: E402

NOUL = {"type": "noul", "instructions": "Is it urgent?"}
QUESTIONS = {"urgent": NOUL}
DEEP_TEXT = ("request body nests JSON deeper than 256 levels (the server's nesting limit); flatten the state or "
             "send it as text")


@pytest.fixture(scope="module")
def router(tiny_checkpoint):
    return Router(models={"support": tiny_checkpoint}, default="support", device="cpu")


@pytest.fixture(scope="module")
def client(router, tiny_checkpoint):
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, default_model="support", device="cpu")
    with TestClient(create_app(router, cfg=cfg)) as c:
        yield c


def nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def raw(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# ---- 1, 2: nesting and integer sizes -----------------------------------------------------------------------

@pytest.mark.parametrize("depth", [257, 400, 955, 1000, 5000, 100000])
@pytest.mark.parametrize("where", ["state", "criteria", "instructions", "unknown", "batch"])
def test_deep_nesting_is_a_400_naming_the_limit(client, depth, where):
    deep = raw(depth)
    path = "/v1/systemone"
    if where == "state":
        body = f'{{"state": {deep}, "questions": {{"q": {{"type": "noul", "instructions": "x"}}}}}}'
    elif where == "criteria":
        body = f'{{"state": "x", "questions": {{"q": {{"type": "score", "instructions": "x", "criteria": {deep}}}}}}}'
    elif where == "instructions":
        body = f'{{"state": "x", "questions": {{"q": {{"type": "noul", "instructions": {deep}}}}}}}'
    elif where == "unknown":
        body = f'{{"state": "x", "questions": {{}}, "extra": {deep}}}'
    else:
        path = "/v1/systemone/batch"
        body = f'{{"states": ["a", {deep}], "questions": {{"q": {{"type": "noul", "instructions": "x"}}}}}}'
    r = client.post(path, content=body)
    assert r.status_code == 400, r.text
    assert r.json() == {"detail": DEEP_TEXT}


def test_nesting_within_the_limit_and_brackets_in_strings_are_fine(client):
    r = client.post("/v1/systemone", json={"state": {"a": nested(200)}, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    r = client.post("/v1/systemone", json={"state": "[" * 3000 + "{" * 3000, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    assert not too_deep(json.dumps({"s": '"\\' + "[" * 999}).encode())
    assert too_deep(raw(257).encode()) and not too_deep(raw(256).encode())


@pytest.mark.parametrize("template", ['{{"state": {n}, "questions": {{}}}}',
                                      '{{"state": "x", "questions": {{}}, "max_len": {n}}}',
                                      '{{"states": ["x"], "questions": {{}}, "batch_size": {n}}}'])
def test_huge_integer_literal_is_a_400(client, template):
    body = template.format(n="9" * 5000)
    path = "/v1/systemone/batch" if "states" in template else "/v1/systemone"
    r = client.post(path, content=body)
    assert r.status_code == 400
    assert "integer literal over 4300 digits" in r.json()["detail"]


# ---- 3: queue overflow ------------------------------------------------------------------------------------

def test_queue_overflow_is_503_with_retry_after(router, tiny_checkpoint):
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, device="cpu", max_queue_rows=1)
    with TestClient(create_app(router, cfg=cfg)) as c:
        r = c.post("/v1/systemone", json={"state": "x", "questions": {**QUESTIONS, "b": NOUL}})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json() == {"detail": "server busy, try again later"}


# ---- 4: a client that leaves mid-body ---------------------------------------------------------------------

class Fake:
    loaded: list = []

    def predict(self, state, questions, **kwargs):
        return {"model": "fake", "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}


def test_client_gone_mid_body_is_not_an_error(caplog):
    app = create_app(Fake(), cfg=ServeConfig())
    sent = []

    async def call():
        messages = [{"type": "http.request", "body": b'{"state": "x", "que', "more_body": True},
                    {"type": "http.disconnect"}]

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/systemone", "raw_path": b"/v1/systemone", "query_string": b"",
                 "root_path": "", "headers": [(b"content-type", b"application/json")], "client": ("t", 1),
                 "server": ("t", 80)}
        await app(scope, receive, send)

    with caplog.at_level(logging.DEBUG, logger="laya.serve"):
        asyncio.run(call())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("closed the connection" in r.getMessage() for r in caplog.records)
    text = app.state.server.metrics.render()[0].decode()
    assert 'status="499"' in text and 'status="500"' not in text


# ---- 5: a local checkpoint that is not there ---------------------------------------------------------------

def test_missing_local_checkpoint_is_refused_at_start(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=f"no checkpoint at support -> {missing}"):
        create_app(cfg=ServeConfig(preload=False, extra_models={"support": missing}, device="cpu"))


def test_main_exits_2_with_one_line_for_a_missing_checkpoint(tmp_path, monkeypatch, capsys):
    import uvicorn

    from laya.serve import main

    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: runs.append(a))
    missing = str(tmp_path / "nowhere")
    assert main(["--no-preload", "--model", f"support={missing}", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"no checkpoint at support -> {missing}" in err and "Traceback" not in err and runs == []


# ---- 6, 7: nothing of the server's filesystem in answers or hints ----------------------------------------

def test_routing_repo_is_the_checkpoint_name_not_a_local_path(client, tiny_checkpoint):
    r = client.post("/v1/systemone", json={"state": "hello", "questions": QUESTIONS})
    assert r.status_code == 200 and r.json()["routing"]["repo"] == "support"
    batch = client.post("/v1/systemone/batch", json={"states": ["a", "b"], "questions": QUESTIONS}).json()
    assert [x["routing"]["repo"] for x in batch["results"]] == ["support", "support"]
    assert tiny_checkpoint not in r.text and tiny_checkpoint not in json.dumps(batch)


def test_hub_repo_ids_are_shown_as_they_are():
    shown = PublicRepo()
    hub = {"model": "english", "repo": "convaiinnovations/laya/english", "reason": "r"}
    assert shown(hub) == hub
    assert shown({"model": "x", "repo": "~/models/x"})["repo"] == "x"
    assert shown({"model": "x", "repo": "./x"})["repo"] == "x"


@pytest.mark.parametrize("model", ["/etc/passwd", "../secret", "someorg/somerepo", "~/x"])
def test_unservable_model_hint_lists_only_served_models(client, model):
    r = client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "model": model})
    assert r.status_code == 422
    assert r.json() == {"detail": f"unknown model {model!r}; choose one of ['support'], or omit model to let the "
                                  "router choose"}


# ---- R-HTTP-2, R-HTTP-3: texts and order --------------------------------------------------------------------

def test_a_lone_surrogate_quoted_in_an_error_is_escaped(client):
    criteria = json.dumps([f"o{i}" for i in range(101)])
    body = '{"state": "x", "questions": {"\\ud800": {"type": "choice", "instructions": "x", "criteria": %s}}}'
    r = client.post("/v1/systemone", content=body % criteria)
    assert r.status_code == 413 and r.json() == {"detail": "too many choice options for '\\ud800' (101 > 100)"}


def test_null_score_level_text(client):
    q = {"q": {"type": "score", "instructions": "how bad?", "criteria": ["low", None, "high"]}}
    r = client.post("/v1/systemone", json={"state": "x", "questions": q})
    assert r.status_code == 422
    assert r.json() == {"detail": "score question 'q' has a null level at index 1; give every level a description"}


def test_order_limits_then_refusals_then_surrogates_then_model(client):
    def detail(body: str, path="/v1/systemone"):
        return client.post(path, content=body).json()["detail"]

    big = json.dumps("x" * 50001)
    assert detail(f'{{"state": {big}, "questions": {{}}, "hooks": 1}}').startswith("state too large")
    assert detail('{"state": "\\ud800", "questions": {}, "hooks": 1}').startswith("hooks run inside")
    assert detail('{"state": "\\ud800", "questions": {}, "model": "/x"}').startswith("request body contains an")
    assert detail('{"state": "x", "questions": {}, "model": "/x", "max_len": 0}').startswith("unknown model")
    assert detail('{"state": "x", "questions": {}, "max_len": 0, "lang": 3}') == "max_len must be a positive integer"
    assert detail('{"states": ["x"], "questions": {}, "diagnostics": {}, "hooks": 1}',
                  "/v1/systemone/batch").startswith("hooks run inside")
    r = client.post("/v1/systemone/batch", json={"states": ["x"], "questions": QUESTIONS, "sort_by_length": False})
    assert r.status_code == 200


# ---- R-HTTP-4: tournament mode -------------------------------------------------------------------------------

def choice(n: int, labels=str, **extra) -> dict:
    return {"type": "choice", "instructions": "Which one?", "criteria": [labels(f"{i}") if labels is str else i
                                                                         for i in range(n)], **extra}


@pytest.fixture(scope="module")
def tournament(router, tiny_checkpoint):
    cfg = ServeConfig(extra_models={"support": tiny_checkpoint}, device="cpu", tournament_group=8)
    with TestClient(create_app(router, cfg=cfg)) as c:
        yield c


def answer_of(c, questions):
    r = c.post("/v1/systemone", json={"state": "I was charged twice", "questions": questions})
    assert r.status_code == 200, r.text
    return r.json()["answers"]["q"]


def test_tournament_narrows_large_choices(tournament):
    a = answer_of(tournament, {"q": choice(40)})
    assert set(a["x_tournament"]) == {"finalists", "rounds"} and len(a["probabilities"]) == 40


def test_tournament_one_pass_for_option_order_or_non_string_labels_up_to_100(tournament):
    a = answer_of(tournament, {"q": choice(40, option_order=list(reversed(range(40))))})
    assert "x_tournament" not in a and len(a["probabilities"]) == 40
    a = answer_of(tournament, {"q": choice(40, labels=int)})
    assert "x_tournament" not in a and len(a["probabilities"]) == 40


def test_tournament_always_narrows_past_100(tournament):
    a = answer_of(tournament, {"q": choice(120, option_order=list(reversed(range(120))))})
    assert a["x_tournament"]["option_order_dropped"] is True and len(a["probabilities"]) == 120
    r = tournament.post("/v1/systemone", json={"state": "x", "questions": {"q": choice(120, labels=int)}})
    assert r.status_code == 422
    assert r.json() == {"detail": "question 'q': a choice is narrowed by elimination once a request has one over "
                                  "100 options, and that needs every label to be a string"}
