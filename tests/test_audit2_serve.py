"""Second audit of compat 0.4.15 §1 (R-SRV-*) and §15 (R-HTTP-*): details the first pass left open."""

from __future__ import annotations

import logging
import time
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from laya.serve import create_app  # noqa: E402

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is it urgent?"}}
from _serve_env import clean_env  # noqa: E402,F401 (an autouse fixture: the host's serve settings stay out)


class MethodRouter:
    """Not a laya Router: `loaded` and `loaded_revisions` are methods (R-SRV-9 allows either form)."""

    def __init__(self):
        self.unloads = 0
        self.resident = ["fake"]

    def loaded(self):
        return list(self.resident)

    def loaded_revisions(self):
        return {name: None for name in self.resident}

    def unload(self, name=None):
        self.unloads += 1
        self.resident = []

    def predict(self, state, questions, **kwargs):
        return {"model": "fake", "answers": {"urgent": {"type": "noul", "noul": 0.5, "confidence": 0.5}},
                "usage": {"input_tokens": 3, "output_tokens": 0}}


def test_r_srv_6_malformed_token_budget_warns_on_every_request(monkeypatch, caplog):
    # R-SRV-6: LAYA_MAX_TOKEN_BUDGET is read on each request; a malformed value falls back to 8192 with a warning
    with TestClient(create_app(MethodRouter())) as c:
        monkeypatch.setenv("LAYA_MAX_TOKEN_BUDGET", "audit2-not-a-number")
        for _ in range(2):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="laya.serve"):
                r = c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "max_len": 9000})
            assert r.status_code == 422 and r.json() == {"detail": "max_len exceeds server limit (9000 > 8192)"}
            assert "LAYA_MAX_TOKEN_BUDGET" in caplog.text
        monkeypatch.setenv("LAYA_MAX_TOKEN_BUDGET", "100")  # a valid value: no warning, and it applies
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="laya.serve"):
            r = c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "max_len": 200})
        assert r.json() == {"detail": "max_len exceeds server limit (200 > 100)"}
        assert "LAYA_MAX_TOKEN_BUDGET" not in caplog.text


def test_r_srv_6_root_path_sets_app_root_path_without_a_warning(monkeypatch):
    # R-SRV-6: LAYA_ROOT_PATH sets app.root_path (OpenAPI `servers`); building the app warns about nothing
    monkeypatch.setenv("LAYA_ROOT_PATH", "/laya")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app = create_app(MethodRouter())
    assert app.root_path == "/laya"
    with TestClient(app) as c:
        assert c.get("/openapi.json").json()["servers"] == [{"url": "/laya"}]
    monkeypatch.delenv("LAYA_ROOT_PATH")
    assert create_app(MethodRouter()).root_path == ""


def test_r_srv_9_idle_unload_works_for_an_injected_router_with_method_loaded(monkeypatch):
    # R-SRV-9 with R-SRV-6's LAYA_IDLE_UNLOAD_SECONDS: an injected router whose `loaded` is a method is unloaded
    monkeypatch.setenv("LAYA_IDLE_UNLOAD_SECONDS", "0.05")
    router = MethodRouter()
    with TestClient(create_app(router)) as c:
        assert c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200
        deadline = time.monotonic() + 5.0
        while router.unloads == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert router.unloads == 1
        health = c.get("/health").json()
        assert health["loaded"] == [] and health["idle_unload_seconds"] == 0.05


def test_r_srv_9_idle_unload_leaves_a_router_without_unload_alone(monkeypatch):
    # R-SRV-9: a router offering only predict and loaded still answers while idle unloading is on
    class NoUnload(MethodRouter):
        unload = None

    monkeypatch.setenv("LAYA_IDLE_UNLOAD_SECONDS", "0.05")
    with TestClient(create_app(NoUnload())) as c:
        time.sleep(0.2)
        assert c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200
        assert c.get("/health").json()["loaded"] == ["fake"]


def test_r_srv_9_idle_unload_goes_on_after_a_failed_unload(monkeypatch, caplog):
    # an injected router whose unload() raises once: logged, and the next idle check unloads it
    class FailsOnce(MethodRouter):
        def unload(self):
            if not getattr(self, "failed", False):
                self.failed = True
                raise RuntimeError("busy")
            super().unload()

    monkeypatch.setenv("LAYA_IDLE_UNLOAD_SECONDS", "0.05")
    router = FailsOnce()
    with caplog.at_level(logging.ERROR, logger="laya.serve"), TestClient(create_app(router)) as c:
        assert c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200
        deadline = time.monotonic() + 5.0
        while router.unloads == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert router.failed and router.unloads == 1
    assert "idle unloading failed" in caplog.text
