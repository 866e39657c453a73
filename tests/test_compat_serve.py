"""compat 0.4.15 §1 (R-SRV-1..9), §15 (R-HTTP-1..4), R-P2-3: the app factory reads LAYA_* like `laya serve`, the
bearer check, the zero-argument build_router, main()'s variables, injected non-Router routers, the constants."""

from __future__ import annotations

import inspect
import json
import logging
import subprocess
import sys
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

import laya.serve  # noqa: E402
from laya.serve import create_app  # noqa: E402

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is it urgent?"}}
KEY = "s3cret-key"
from _serve_env import clean_env  # noqa: E402,F401 (an autouse fixture: the host's serve settings stay out)


class FakeRouter:
    """Not a laya Router: only predict (and optionally predict_batch), loaded, loaded_revisions, resolve."""

    loaded = ["fake"]
    loaded_revisions = {"fake": None}

    def __init__(self, batch: bool = True):
        self.calls = []
        if not batch:
            self.predict_batch = None

    def resolve(self, name):
        if name != "fake":
            raise ValueError(f"unknown model {name!r}")
        return name

    def _result(self, state):
        return {"model": "fake", "answers": {"urgent": {"type": "noul", "noul": 0.25, "confidence": 0.5}},
                "usage": {"input_tokens": 7, "output_tokens": 0},
                "routing": {"model": "fake", "repo": "/srv/private/fake", "reason": "fake"}}

    def predict(self, state, questions, **kwargs):
        self.calls.append(("predict", state, kwargs))
        return self._result(state)

    def predict_batch(self, requests, **kwargs):
        self.calls.append(("predict_batch", requests, kwargs))
        return [self._result(r["state"]) for r in requests]


def one(client, body=None, path="/v1/systemone", **kwargs):
    return client.post(path, json=body or {"state": "hello", "questions": QUESTIONS}, **kwargs)


# ---- R-SRV-1..4: the factory reads the environment; auth, docs, health ---------------------------------

def test_router_is_the_positional_argument_and_cfg_is_keyword_only():
    params = inspect.signature(create_app).parameters
    assert list(params)[0] == "router" and params["cfg"].kind is inspect.Parameter.KEYWORD_ONLY
    with TestClient(create_app(FakeRouter())) as c:
        assert one(c).status_code == 200


def test_api_key_from_the_environment_is_enforced(monkeypatch):
    monkeypatch.setenv("LAYA_API_KEY", KEY)
    router = FakeRouter()
    with TestClient(create_app(router)) as c:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            r = one(c, headers=headers)
            assert r.status_code == 401 and r.json() == {"detail": "invalid or missing bearer token"}
        assert router.calls == []
        assert one(c, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert c.get("/metrics").status_code == 401 and c.get("/v1/models").status_code == 401


@pytest.mark.parametrize("header", [b"Bearer \xc3\xa9t\xc3\xa9", b"Bearer \xff\xfe", "Bearer s3cret-kéy".encode()])
def test_non_ascii_authorization_is_401_not_500(monkeypatch, header):
    monkeypatch.setenv("LAYA_API_KEY", KEY)
    with TestClient(create_app(FakeRouter())) as c:
        r = one(c, headers={"Authorization": header})
        assert r.status_code == 401
        assert c.get("/metrics", headers={"Authorization": header}).status_code == 401
        assert c.get("/health", headers={"Authorization": header}).json() == {"status": "ok"}


def test_non_ascii_key_matches_its_utf8_bytes(monkeypatch):
    monkeypatch.setenv("LAYA_API_KEY", "kéy")
    with TestClient(create_app(FakeRouter())) as c:
        assert one(c, headers={"Authorization": "Bearer kéy".encode()}).status_code == 200


def test_docs_are_not_served_with_a_key_and_health_is_liveness_only(monkeypatch):
    monkeypatch.setenv("LAYA_API_KEY", KEY)
    with TestClient(create_app(FakeRouter())) as c:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert c.get(path).status_code == 404
            assert c.get(path, headers={"Authorization": f"Bearer {KEY}"}).status_code == 404
        assert c.get("/health").json() == {"status": "ok"}
        full = c.get("/health", headers={"Authorization": f"Bearer {KEY}"}).json()
        assert full["loaded"] == ["fake"] and full["revisions"] == {"fake": None}
    monkeypatch.setenv("LAYA_API_KEY", "")  # empty: no key
    with TestClient(create_app(FakeRouter())) as c:
        assert c.get("/openapi.json").status_code == 200 and "loaded" in c.get("/health").json()
        assert one(c).status_code == 200


def test_full_health_payload_for_an_injected_router(monkeypatch):
    with TestClient(create_app(FakeRouter())) as c:
        h = c.get("/health").json()
    assert set(h) == {"status", "loaded", "revisions", "device", "device_is_preference", "checkpoint_devices",
                      "cpu_fallbacks"}
    assert h["status"] == "ok" and h["device"] != "auto"


def test_root_path_and_app_time_settings(monkeypatch, caplog):
    monkeypatch.setenv("LAYA_ROOT_PATH", "/laya")
    monkeypatch.setenv("LAYA_MAX_CONCURRENT", "0")
    monkeypatch.setenv("LAYA_BODY_READ_TIMEOUT", "inf")
    monkeypatch.setenv("LAYA_IDLE_UNLOAD_SECONDS", "nan")
    monkeypatch.setenv("LAYA_TOURNAMENT_GROUP", "101")
    with caplog.at_level(logging.WARNING, logger="laya.serve"):
        app = create_app(FakeRouter())
    cfg = app.state.server.cfg
    assert app.root_path == "/laya"
    assert (cfg.max_concurrent, cfg.body_read_timeout, cfg.idle_unload_seconds, cfg.tournament_group) == \
        (16, 10.0, 0.0, 0)
    assert "LAYA_IDLE_UNLOAD_SECONDS" in caplog.text
    with TestClient(app) as c:
        assert c.get("/openapi.json").json()["servers"] == [{"url": "/laya"}]
    for raw, want in (("7", 7), ("-2", 16), ("x", 16)):
        monkeypatch.setenv("LAYA_MAX_CONCURRENT", raw)
        assert create_app(FakeRouter()).state.server.cfg.max_concurrent == want
    for raw, want in (("2.5", 2.5), ("0", 10.0), ("-1", 10.0), ("soon", 10.0)):
        monkeypatch.setenv("LAYA_BODY_READ_TIMEOUT", raw)
        assert create_app(FakeRouter()).state.server.cfg.body_read_timeout == want
    for raw, want in (("2", 2), ("100", 100), ("1", 0), ("eight", 0)):
        monkeypatch.setenv("LAYA_TOURNAMENT_GROUP", raw)
        assert create_app(FakeRouter()).state.server.cfg.tournament_group == want


def test_request_time_settings_are_read_on_each_request(monkeypatch, caplog):
    with TestClient(create_app(FakeRouter())) as c:
        assert "x_jev_confidence" not in one(c).json()["answers"]["urgent"]  # noul: never
        assert list(one(c).json()) == ["model", "answers", "usage", "routing"]
        monkeypatch.setenv("LAYA_JEV_STRICT", "yes")
        assert list(one(c).json()) == ["model", "answers", "usage"]
        monkeypatch.setenv("LAYA_MAX_TOKEN_BUDGET", "100")
        r = one(c, {"state": "x", "questions": QUESTIONS, "max_len": 200})
        assert r.status_code == 422 and r.json() == {"detail": "max_len exceeds server limit (200 > 100)"}
        monkeypatch.setenv("LAYA_MAX_TOKEN_BUDGET", "many")
        with caplog.at_level(logging.WARNING, logger="laya.serve"):
            r = one(c, {"state": "x", "questions": QUESTIONS, "max_len": 9000})
        assert r.json() == {"detail": "max_len exceeds server limit (9000 > 8192)"}
        assert "LAYA_MAX_TOKEN_BUDGET" in caplog.text


# ---- R-SRV-5, R-SRV-7: build_router() ------------------------------------------------------------------

class RecordingRouter:
    made: list = []

    def __init__(self, **kwargs):
        self.kwargs, self.preloaded = kwargs, []
        RecordingRouter.made.append(self)

    def preload(self, names=None):
        self.preloaded.append(names)
        return self


@pytest.fixture
def recording(monkeypatch):
    RecordingRouter.made = []
    monkeypatch.setattr(laya.serve, "Router", RecordingRouter, raising=False)
    return RecordingRouter


def test_build_router_takes_no_arguments_and_reads_the_environment(monkeypatch, recording):
    assert list(inspect.signature(laya.serve.build_router).parameters) == []
    monkeypatch.setenv("LAYA_EXTRA_MODELS", '{"support": "/models/support", "pair": ["org/repo", "sub"]}')
    monkeypatch.setenv("LAYA_DEFAULT_MODEL", "support")
    monkeypatch.setenv("LAYA_AUTO_TASK", " On ")
    monkeypatch.setenv("LAYA_MAX_LOADED", "3")
    monkeypatch.setenv("LAYA_MODELS", "support, english")
    router = laya.serve.build_router()
    assert router.kwargs["models"] == {"support": "/models/support", "pair": ("org/repo", "sub")}
    assert router.kwargs["default"] == "support" and router.kwargs["auto_task_detection"] is True
    assert router.kwargs["max_loaded"] == 3 and router.kwargs["device"] is None
    assert router.preloaded == [["support", "english"]]
    monkeypatch.setenv("LAYA_MAX_LOADED", "0")
    monkeypatch.setenv("LAYA_MODELS", "")
    monkeypatch.setenv("LAYA_AUTO_TASK", "maybe")
    router = laya.serve.build_router()
    assert "max_loaded" not in router.kwargs and router.kwargs["auto_task_detection"] is False
    assert router.preloaded == [None]  # every checkpoint with a source
    monkeypatch.setenv("LAYA_PRELOAD", "off")
    assert laya.serve.build_router().preloaded == []
    monkeypatch.setenv("LAYA_PRELOAD", "  ")  # blank: the default (preload)
    assert laya.serve.build_router().preloaded == [None]


def test_an_unknown_laya_models_name_stops_startup(monkeypatch):
    # R-SRV-7: malformed values stop startup with SystemExit, before anything is loaded
    monkeypatch.setenv("LAYA_MODELS", "nope, english")
    monkeypatch.setenv("LAYA_PRELOAD", "1")
    with pytest.raises(SystemExit) as e:
        laya.serve.build_router()
    assert str(e.value).startswith("invalid LAYA_MODELS: unknown model 'nope'")


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '{"a": 3}', '{"a": ["only-one"]}'])
def test_malformed_extra_models_stop_startup(monkeypatch, recording, raw):
    monkeypatch.setenv("LAYA_EXTRA_MODELS", raw)
    with pytest.raises(SystemExit) as e:
        laya.serve.build_router()
    assert str(e.value.code).startswith("invalid LAYA_EXTRA_MODELS:")


def test_default_model_must_be_known(monkeypatch, recording):
    monkeypatch.setenv("LAYA_DEFAULT_MODEL", "nope")
    with pytest.raises(SystemExit) as e:
        laya.serve.build_router()
    assert str(e.value.code).startswith("invalid LAYA_DEFAULT_MODEL 'nope':")
    for ok in ("ML", "english", "typed"):
        monkeypatch.setenv("LAYA_DEFAULT_MODEL", ok)
        assert laya.serve.build_router().kwargs["default"] == ok


def test_router_errors_become_system_exit(monkeypatch):
    class Refusing:
        def __init__(self, **kwargs):
            raise ValueError("invalid checkpoint name 'Bad/Name': use lowercase letters")

    monkeypatch.setattr(laya.serve, "Router", Refusing, raising=False)
    with pytest.raises(SystemExit) as e:
        laya.serve.build_router()
    assert e.value.code == "invalid checkpoint name 'Bad/Name': use lowercase letters"


def test_create_app_without_a_router_builds_one_through_build_router(monkeypatch):
    built = []
    monkeypatch.setattr(laya.serve, "build_router", lambda: built.append(1) or FakeRouter())
    with TestClient(create_app()) as c:
        assert one(c).status_code == 200
    assert built == [1]


def test_real_router_from_the_environment(monkeypatch, tiny_checkpoint):
    monkeypatch.setenv("LAYA_EXTRA_MODELS", json.dumps({"support": tiny_checkpoint}))
    monkeypatch.setenv("LAYA_MODELS", "support")
    monkeypatch.setenv("LAYA_DEFAULT_MODEL", "support")
    monkeypatch.setenv("LAYA_DEVICE", "cpu")
    with TestClient(create_app()) as c:
        r = one(c)
        assert r.status_code == 200 and r.json()["routing"]["model"] == "support"
        assert c.get("/health").json()["device"] == "cpu"


def test_an_injected_router_is_not_preloaded(tiny_checkpoint):
    from laya.router import Router

    router = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")
    with TestClient(create_app(router)) as c:
        assert router.loaded == [] and c.get("/health").json()["device_is_preference"] is True
        r = one(c, {"state": "hello", "questions": QUESTIONS, "model": "tiny"})
        assert r.status_code == 200 and router.loaded == ["tiny"]


def test_port_flag_out_of_range_is_refused_before_loading():
    from laya.serve.config import from_args

    with pytest.raises(ValueError, match="port=70000 must be an integer 1-65535"):
        from_args(["--port", "70000"], {})


# ---- R-SRV-8: main() ------------------------------------------------------------------------------------

@pytest.fixture
def no_server(monkeypatch):
    import uvicorn

    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append(kw))
    monkeypatch.setattr(laya.serve, "create_app", lambda *a, **kw: object())
    return runs


@pytest.mark.parametrize("raw", ["eighty", "0", "65536", "-1", "8.5"])
def test_main_refuses_a_bad_port(monkeypatch, no_server, raw):
    monkeypatch.setenv("LAYA_PORT", raw)
    with pytest.raises(SystemExit) as e:
        laya.serve.main([])
    assert e.value.code == f"invalid LAYA_PORT '{raw}': must be an integer 1-65535"
    assert no_server == []


def test_main_refuses_a_bad_log_level(monkeypatch, no_server):
    monkeypatch.setenv("LAYA_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit) as e:
        laya.serve.main([])
    assert str(e.value.code).startswith("invalid LAYA_LOG_LEVEL 'loud': must be one of ")


def test_main_defaults_and_env(monkeypatch, no_server):
    monkeypatch.setenv("LAYA_PORT", " ")
    monkeypatch.setenv("LAYA_LOG_LEVEL", "")
    assert laya.serve.main([]) == 0
    assert (no_server[-1]["host"], no_server[-1]["port"], no_server[-1]["log_level"]) == ("0.0.0.0", 8000, "info")
    monkeypatch.setenv("LAYA_PORT", "9001")
    monkeypatch.setenv("LAYA_HOST", "127.0.0.1")
    monkeypatch.setenv("LAYA_LOG_LEVEL", "DEBUG")
    assert laya.serve.main([]) == 0
    assert (no_server[-1]["host"], no_server[-1]["port"], no_server[-1]["log_level"]) == ("127.0.0.1", 9001, "debug")


def test_main_called_from_code_reads_only_the_environment(monkeypatch, no_server):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/pytest", "-q", "-k", "x", "tests/some_test.py"])
    monkeypatch.setenv("LAYA_PORT", "bad")
    with pytest.raises(SystemExit) as e:
        laya.serve.main()
    assert e.value.code == "invalid LAYA_PORT 'bad': must be an integer 1-65535"
    monkeypatch.setenv("LAYA_PORT", "9003")
    assert laya.serve.main() == 0 and no_server[-1]["port"] == 9003
    monkeypatch.setattr(sys, "argv", ["/venv/bin/laya-serve", "--port", "9004"])  # the console script
    assert laya.serve.main() == 0 and no_server[-1]["port"] == 9004


def test_create_app_ignores_mains_variables(monkeypatch):
    monkeypatch.setenv("LAYA_PORT", "eighty")  # main()'s to refuse; the app factory does not read it
    assert create_app(FakeRouter()).state.server.cfg.max_concurrent == 16


# ---- R-SRV-9: injected routers that are not a laya Router ----------------------------------------------

def test_injected_router_gets_only_the_controls_sent():
    router = FakeRouter()
    with TestClient(create_app(router)) as c:
        r = one(c)
        assert r.status_code == 200 and r.json()["routing"]["repo"] == "fake"  # never the local path
        one(c, {"state": "x", "questions": QUESTIONS, "model": "fake", "max_len": 64, "lang": "de",
                "min_confidence": 0.5})
        one(c, {"state": "x", "questions": QUESTIONS, "model": "jev-1", "lang": None})
        b = one(c, {"states": ["a", "b"], "questions": QUESTIONS, "batch_size": 2, "sort_by_length": False,
                    "head_max_len": 32}, "/v1/systemone/batch")
        assert b.status_code == 200 and b.json()["total_usage"] == {"input_tokens": 14, "output_tokens": 0}
    assert router.calls[0] == ("predict", "hello", {"model": None})
    assert router.calls[1] == ("predict", "x", {"model": "fake", "max_len": 64, "lang": "de", "min_confidence": 0.5})
    assert router.calls[2] == ("predict", "x", {"model": None})
    kind, requests, kwargs = router.calls[3]
    assert kind == "predict_batch" and kwargs == {"batch_size": 2}  # sort_by_length false forwards nothing
    assert requests == [{"state": s, "questions": QUESTIONS, "model": None, "head_max_len": 32} for s in "ab"]


def test_injected_router_without_predict_batch_gets_one_predict_per_state():
    router = FakeRouter(batch=False)
    with TestClient(create_app(router)) as c:
        r = one(c, {"states": ["a", "b"], "questions": QUESTIONS, "min_confidence": 0.2}, "/v1/systemone/batch")
    assert r.status_code == 200 and len(r.json()["results"]) == 2
    assert router.calls == [("predict", s, {"model": None, "min_confidence": 0.2}) for s in "ab"]


def test_injected_router_results_without_usage():
    class Bare(FakeRouter):
        def predict_batch(self, requests, **kwargs):
            return [{"model": "fake", "answers": {}} for _ in requests]

    with TestClient(create_app(Bare())) as c:
        r = one(c, {"states": ["a"], "questions": QUESTIONS}, "/v1/systemone/batch")
    assert r.status_code == 200 and r.json()["total_usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_injected_router_errors():
    class Broken(FakeRouter):
        def predict(self, state, questions, **kwargs):
            if state == "bad":
                raise ValueError("question 'urgent': nope")
            raise RuntimeError("secret /srv/detail")

    with TestClient(create_app(Broken())) as c:
        assert one(c, {"state": "bad", "questions": QUESTIONS}).json() == {"detail": "question 'urgent': nope"}
        r = one(c)
        assert r.status_code == 500 and r.json() == {"detail": "inference failed"}


# ---- R-P2-3: constants without FastAPI ----------------------------------------------------------------

def test_constants_import_without_fastapi():
    code = ("import sys, laya.serve as s; assert 'fastapi' not in sys.modules and 'torch' not in sys.modules; "
            "print(s.MAX_BODY_BYTES, s.DEFAULT_PORT, callable(s.create_app), callable(s.main), "
            "callable(s.build_router))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2097152", "8000", "True", "True", "True"]


def test_constant_values():
    s = laya.serve
    assert (s.MAX_QUESTIONS, s.MAX_STATE_CHARS, s.MAX_BATCH_STATES, s.MAX_BODY_BYTES, s.MAX_CHOICE_OPTIONS,
            s.MAX_TOURNAMENT_CHOICE_OPTIONS, s.MAX_SCORE_LEVELS, s.MAX_TOTAL_OPTIONS) == \
        (64, 50000, 64, 2097152, 100, 255, 32, 512)
    assert (s.DEFAULT_BODY_READ_TIMEOUT, s.DEFAULT_MAX_BATCH_TOKENS, s.DEFAULT_MAX_CONCURRENT, s.DEFAULT_PORT,
            s.DEFAULT_LOG_LEVEL, s.DEFAULT_MAX_TOKEN_BUDGET) == (10.0, 131072, 16, 8000, "info", 8192)
    assert s.LIVENESS_ONLY == {"status": "ok"}
    assert s.BODY_CONTROLS == ("model", "max_len", "head_max_len", "task", "lang", "lang_guess", "min_confidence")
    assert s.BODY_REFUSALS == ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
    assert s.BATCH_BODY_CALL_CONTROLS == ("batch_size", "min_confidence", "sort_by_length")
    assert s.BATCH_BODY_ITEM_CONTROLS == ("max_len", "head_max_len", "task", "lang", "lang_guess")
    assert s.BATCH_BODY_OUT_PARAMETERS == ("diagnostics",)


def test_body_groups_cover_router_parameters():
    from laya.router import Router

    single = set(inspect.signature(Router.predict).parameters) - {"self", "state", "questions"}
    assert single == set(laya.serve.BODY_CONTROLS) | set(laya.serve.BODY_REFUSALS)
    batch = set(inspect.signature(Router.predict_batch).parameters) - {"self", "requests"}
    covered = {*laya.serve.BATCH_BODY_CALL_CONTROLS, "hooks_timeout", *laya.serve.BATCH_BODY_OUT_PARAMETERS,
               "hooks", "on_predict_start", "on_predict_end", "hooks_raise"}
    assert covered <= batch and batch - covered <= {"explain"}


# ---- review fixes: NaN/Infinity bodies, injected routers and build_router's variables, /health device -----

def test_infinity_and_nan_reach_the_library_checks():
    with TestClient(create_app(FakeRouter())) as c:
        for literal, shown in (("Infinity", "inf"), ("-Infinity", "-inf"), ("NaN", "nan"), ("1e999", "inf")):
            body = '{"state": "x", "questions": {"urgent": {"type": "noul", "instructions": "x"}}, ' \
                   f'"min_confidence": {literal}}}'
            r = c.post("/v1/systemone", content=body)
            assert r.status_code == 422
            assert r.json() == {"detail": f"min_confidence must be a float in [0.0, 1.0], got {shown}"}
        r = c.post("/v1/systemone", content='{"state": "x", "questions": {}, "max_len": NaN}')
        assert r.status_code == 422 and r.json() == {"detail": "max_len must be an integer"}
        r = c.post("/v1/systemone/batch", content='{"states": ["x"], "questions": {"urgent": {"type": "noul", '
                                                  '"instructions": "x"}}, "min_confidence": Infinity}')
        assert r.status_code == 422 and r.json()["detail"].endswith("got inf")


@pytest.mark.parametrize("env", [{"LAYA_MODELS": "nope"}, {"LAYA_EXTRA_MODELS": '{"x": "/nonexistent/ckpt"}'},
                                 {"LAYA_EXTRA_MODELS": "{not json"}, {"LAYA_DEFAULT_MODEL": "gpt4"}])
def test_an_injected_router_ignores_build_routers_variables(monkeypatch, tiny_checkpoint, env):
    from laya.router import Router

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    router = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")
    with TestClient(create_app(router)) as c:
        r = one(c, {"state": "hello", "questions": QUESTIONS, "model": "tiny"})
        assert r.status_code == 200 and r.json()["routing"]["model"] == "tiny"
    with TestClient(create_app(FakeRouter())) as c:
        assert one(c).status_code == 200


def test_health_device_without_a_resident_checkpoint_is_resolve_device(monkeypatch):
    from laya.mcp.device import resolve_device
    from laya.router import Router

    class Empty:
        def predict(self, state, questions, **kwargs):
            return {"answers": {}}

    monkeypatch.setenv("LAYA_DEVICE", "CPU")
    with TestClient(create_app(Empty())) as c:
        h = c.get("/health").json()
    assert h["device"] == "cpu" and h["device_is_preference"] is True and h["checkpoint_devices"] == {}
    monkeypatch.delenv("LAYA_DEVICE")
    with TestClient(create_app(Router(device="cuda:1"))) as c:  # the router's own preference is not it
        assert c.get("/health").json()["device"] == resolve_device()


def test_main_without_flags_serves_the_env_read_app(monkeypatch):
    import uvicorn

    app, runs = object(), []
    monkeypatch.setattr(uvicorn, "run", lambda served, **kw: runs.append((served, kw)))
    monkeypatch.setattr(laya.serve, "create_app", lambda: app)  # the published factory takes no settings
    monkeypatch.setenv("LAYA_PORT", "8123")
    assert laya.serve.main([]) == 0
    assert runs[-1][0] is app and (runs[-1][1]["host"], runs[-1][1]["port"]) == ("0.0.0.0", 8123)


def test_env_read_app_names_an_unservable_model_with_the_routers_text(monkeypatch, tiny_checkpoint):
    from laya.router import Router

    monkeypatch.setenv("LAYA_EXTRA_MODELS", json.dumps({"support": tiny_checkpoint}))
    monkeypatch.setenv("LAYA_PRELOAD", "0")
    monkeypatch.setenv("LAYA_DEVICE", "cpu")
    with TestClient(create_app()) as c:
        router = c.app.state.server.router
        for model in ("/srv/elsewhere", "someorg/somerepo"):
            with pytest.raises(ValueError) as e:
                router.resolve(model)
            r = one(c, {"state": "hello", "questions": QUESTIONS, "model": model})
            assert r.status_code == 422
            assert r.json() == {"detail": f"{e.value}, or omit model to let the router choose"}
    assert isinstance(router, Router)


class IgnoresThreshold:
    """An attached agent that answers confidently whatever min_confidence says (it takes and drops it)."""

    def predict_batch(self, states, questions, **kwargs):
        return [{"answers": {"urgent": {"type": "noul", "noul": 0.9, "confidence": 0.3}},
                 "usage": {"input_tokens": 1, "output_tokens": 0}} for _ in states]


class OlderAgent(IgnoresThreshold):
    """An attached agent whose predict_batch has no min_confidence, sort_by_length or budget keywords."""

    def predict_batch(self, states, questions, batch_size=None, lang=None):
        return super().predict_batch(states, questions)


@pytest.mark.parametrize("agent", [IgnoresThreshold(), OlderAgent()])
def test_served_router_gates_what_an_attached_agent_returns(agent):
    from laya.router import Router

    router = Router()
    router.attach("stub", agent)
    with TestClient(create_app(router)) as c:
        body = {"state": "hi", "questions": QUESTIONS, "model": "stub", "min_confidence": 0.5}
        single = one(c, body)
        batch = one(c, {"states": ["a", "b"], "questions": QUESTIONS, "model": "stub", "min_confidence": 0.5},
                    path="/v1/systemone/batch")
        plain = one(c, {"state": "hi", "questions": QUESTIONS, "model": "stub"})
    assert single.status_code == 200 and batch.status_code == 200 and plain.status_code == 200
    for answer in [single.json()["answers"]["urgent"]] + [r["answers"]["urgent"] for r in batch.json()["results"]]:
        assert (answer["low_confidence"], answer["abstention"], answer["abstention_threshold"]) == \
            (True, "abstained", 0.5)
    assert "abstention" not in plain.json()["answers"]["urgent"]


@pytest.mark.parametrize("preference", ["auto", "AUTO", " Auto "])
def test_health_never_shows_auto(monkeypatch, preference):
    # R-HTTP-1: "Our device: 'auto' goes" -- an automatic preference (flag or LAYA_DEVICE) shows the detected device
    from laya.mcp.device import resolve_device
    from laya.serve import ServeConfig

    class Empty:
        def predict(self, state, questions, **kwargs):
            return {"answers": {}}

    monkeypatch.delenv("LAYA_DEVICE", raising=False)
    detected = resolve_device()
    with TestClient(create_app(Empty(), cfg=ServeConfig(device=preference))) as c:
        assert c.get("/health").json()["device"] == detected
    monkeypatch.setenv("LAYA_DEVICE", preference)
    with TestClient(create_app(Empty())) as c:
        assert c.get("/health").json()["device"] == detected
    with TestClient(create_app(Empty(), cfg=ServeConfig(device=" CPU "))) as c:
        assert c.get("/health").json()["device"] == "cpu"
    monkeypatch.setattr("laya.mcp.device._torch", lambda: None)  # without torch LAYA_DEVICE is not parsed
    with TestClient(create_app(Empty())) as c:
        assert c.get("/health").json()["device"] == "cpu"
