"""The serve environment variables tests clear, so the host's settings never reach an app under test."""

from __future__ import annotations

import pytest

SERVE_ENV = ("LAYA_API_KEY", "LAYA_ROOT_PATH", "LAYA_MAX_CONCURRENT", "LAYA_BODY_READ_TIMEOUT",
             "LAYA_IDLE_UNLOAD_SECONDS", "LAYA_TOURNAMENT_GROUP", "LAYA_JEV_STRICT", "LAYA_MAX_TOKEN_BUDGET",
             "LAYA_MAX_BATCH_TOKENS", "LAYA_THREADS", "LAYA_DEVICE", "LAYA_MODELS", "LAYA_AUTO_TASK",
             "LAYA_MAX_LOADED", "LAYA_EXTRA_MODELS", "LAYA_DEFAULT_MODEL", "LAYA_PRELOAD", "LAYA_HOST", "LAYA_PORT",
             "LAYA_LOG_LEVEL", "LAYA_BACKEND")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in SERVE_ENV:
        monkeypatch.delenv(name, raising=False)
