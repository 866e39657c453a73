"""Leftovers: an injected router whose introspection raises keeps the app up (R-SRV-9, R-HTTP-1); one strict JSON
reader in laya.evals (R-EV-9)."""

from __future__ import annotations

import logging
import time
import warnings

import pytest

from laya.evals import cli_files
from laya.evals.dataset import EvalError
from laya.evals.report import EvalReport

QUESTIONS = {"urgent": {"type": "noul", "instructions": "Is it urgent?"}}
from _serve_env import clean_env  # noqa: E402,F401 (an autouse fixture: the host's serve settings stay out)


class FailingRouter:
    """Not a laya Router: `loaded` and `loaded_revisions` are methods that raise while `broken` is set."""

    def __init__(self):
        self.broken, self.unloads = True, 0

    def loaded(self):
        if self.broken:
            raise RuntimeError("introspection is down")
        return ["fake"]

    def loaded_revisions(self):
        if self.broken:
            raise RuntimeError("introspection is down")
        return {"fake": "abc"}

    def unload(self, name=None):
        self.unloads += 1

    def predict(self, state, questions, **kwargs):
        return {"model": "fake", "answers": {"urgent": {"type": "noul", "noul": 0.5, "confidence": 0.5}},
                "usage": {"input_tokens": 3, "output_tokens": 0}}


def _client(app):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    return TestClient(app)


def test_a_raising_loaded_neither_stops_startup_nor_health_and_logs_one_traceback(monkeypatch, caplog):
    pytest.importorskip("fastapi")
    from laya.serve import create_app

    monkeypatch.setenv("LAYA_IDLE_UNLOAD_SECONDS", "0.05")
    router = FailingRouter()
    with caplog.at_level(logging.ERROR, logger="laya.serve"):
        app = create_app(router)  # read `loaded` here: it used to raise out of create_app
        with _client(app) as c:
            time.sleep(0.2)  # a few idle checks, each reading `loaded`
            for _ in range(3):
                health = c.get("/health")
                assert health.status_code == 200
                assert health.json()["loaded"] == [] and health.json()["revisions"] == {}
            assert c.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200
            assert c.get("/v1/models").status_code == 200
            assert router.unloads == 0  # nothing seen resident, nothing unloaded
            failures = [r for r in caplog.records if "reading the router's" in r.getMessage()]
            assert [r.getMessage() for r in failures] == [
                f"laya serve: reading the router's {name!r} failed; going on without it"
                for name in ("loaded", "loaded_revisions")]
            assert all(r.exc_info for r in failures)  # a traceback each, once per run of failures
            assert len(failures) == len([r for r in caplog.records if r.levelno >= logging.ERROR])  # nothing else
            router.broken = False  # introspection back: the payload is the router's again
            health = c.get("/health").json()
            assert health["loaded"] == ["fake"] and health["revisions"] == {"fake": "abc"}


class FailingListing(FailingRouter):
    """`agents()` and `describe()` raise while `broken` is set; `loaded` answers."""

    def loaded(self):
        return ["fake"]

    def agents(self):
        if self.broken:
            raise RuntimeError("listing is down")
        return {}

    def describe(self, name):
        if self.broken:
            raise RuntimeError("descriptions are down")
        return f"the {name} checkpoint"


def test_a_raising_agents_or_describe_is_no_500_on_models():
    pytest.importorskip("fastapi")
    from laya.serve import create_app

    router = FailingListing()
    with _client(create_app(router)) as c:
        listing = c.get("/v1/models")
        assert listing.status_code == 200
        assert [(m["id"], m["loaded"], m["description"]) for m in listing.json()["data"]] == [("fake", False, None)]
        router.broken = False
        assert c.get("/v1/models").json()["data"][0]["description"] == "the fake checkpoint"


class OddListings:
    """Introspection of the wrong shape: a non-mapping `agents()`, raising properties, junk revisions."""

    loaded = ("fake",)
    loaded_revisions = property(lambda self: {"fake": object()})
    describe = property(lambda self: 1 / 0)

    def agents(self):
        return ["laya-en"]

    def predict(self, state, questions, **kwargs):
        return FailingRouter().predict(state, questions)


def test_introspection_of_the_wrong_shape_is_no_500():
    pytest.importorskip("fastapi")
    from laya.serve import create_app

    with _client(create_app(OddListings())) as c:
        health = c.get("/health")
        assert health.status_code == 200 and health.json()["loaded"] == ["fake"]
        assert isinstance(health.json()["revisions"]["fake"], str)
        listing = c.get("/v1/models")
        assert listing.status_code == 200
        assert [(m["id"], m["loaded"], m["description"]) for m in listing.json()["data"]] == [("fake", False, None)]


# ---- one strict JSON reader ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, why", [("{nope", "is not valid JSON: "), ("[" * 100000, "is not valid JSON: "),
                                       (b"\xff", "cannot be read: ")])
def test_reports_and_strict_files_fail_alike(tmp_path, text, why):
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    errors = []
    for read in (cli_files.read_json_strict, EvalReport.load):
        with pytest.raises(EvalError) as caught:
            read(str(path))
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and errors[0].startswith(f"{path} {why}")
    with pytest.raises(EvalError, match="cannot be read"):
        EvalReport.load(str(tmp_path / "missing.json"))


def test_only_the_strict_reader_refuses_duplicate_keys(tmp_path):
    path = tmp_path / "twice.json"
    path.write_text('{"config": {}, "overall": {"x": 1.0}, "overall": {"x": 2.0}, "slices": {}, "cases": []}',
                    encoding="utf-8")
    assert EvalReport.load(str(path)).overall == {"x": 2.0}  # as published: the last one wins
    with pytest.raises(EvalError, match="has the key 'overall' twice in one object; keep one"):
        cli_files.read_json_strict(str(path))
