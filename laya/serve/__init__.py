"""`laya serve`: the System One HTTP API (Jev-compatible) with dynamic batching; `laya.serve.ray` scales it out.

    laya serve --model support=/models/support-v2 --default-model support --port 8000
    LAYA_API_KEY=... LAYA_BATCH_WINDOW_MS=2 laya-serve
    uvicorn laya.serve:create_app --factory      # reads the LAYA_* variables itself
    laya serve --ray --replicas 4        # Ray Serve, one replica per GPU

Needs the `serve` extra (fastapi, uvicorn); `--ray` needs the `ray` extra. Importing this package imports
neither FastAPI nor torch: the limits below are plain constants.
"""

from __future__ import annotations

from typing import Any

from .config import ServeConfig, from_args, from_env
from .main import main  # eager and light: the submodule must not shadow the function
from .limits import (BATCH_BODY_CALL_CONTROLS, BATCH_BODY_ITEM_CONTROLS, BATCH_BODY_OUT_PARAMETERS, BODY_CONTROLS,
                     BODY_REFUSALS, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_LOG_LEVEL, DEFAULT_MAX_BATCH_TOKENS,
                     DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_TOKEN_BUDGET, DEFAULT_PORT, LIVENESS_ONLY, MAX_BATCH_STATES,
                     MAX_BODY_BYTES, MAX_CHOICE_OPTIONS, MAX_QUESTIONS, MAX_SCORE_LEVELS, MAX_STATE_CHARS,
                     MAX_TOTAL_OPTIONS, MAX_TOURNAMENT_CHOICE_OPTIONS)

__all__ = ["BATCH_BODY_CALL_CONTROLS", "BATCH_BODY_ITEM_CONTROLS", "BATCH_BODY_OUT_PARAMETERS", "BODY_CONTROLS",
           "BODY_REFUSALS", "DEFAULT_BODY_READ_TIMEOUT", "DEFAULT_LOG_LEVEL", "DEFAULT_MAX_BATCH_TOKENS",
           "DEFAULT_MAX_CONCURRENT", "DEFAULT_MAX_TOKEN_BUDGET", "DEFAULT_PORT", "LIVENESS_ONLY", "MAX_BATCH_STATES",
           "MAX_BODY_BYTES", "MAX_CHOICE_OPTIONS", "MAX_QUESTIONS", "MAX_SCORE_LEVELS", "MAX_STATE_CHARS",
           "MAX_TOTAL_OPTIONS", "MAX_TOURNAMENT_CHOICE_OPTIONS", "ServeConfig", "build_router", "create_app",
           "from_args", "from_env", "main"]


def create_app(router: Any = None, *, cfg: ServeConfig | None = None) -> Any:
    """The ASGI app. `router` (a laya Router, or any object with `predict`) replaces the one `build_router()`
    makes; without `cfg` every setting is read from the LAYA_* variables now (and three on each request)."""
    from .app import create_app as build

    return build(router, cfg=cfg)


def build_router() -> Any:
    """The Router the LAYA_* variables describe, preloaded unless LAYA_PRELOAD is false (SystemExit naming a
    malformed variable)."""
    from .router_env import build_router as build

    return build()


def __getattr__(name: str) -> Any:
    if name == "Router":  # looked up here at call time, so a caller may stand in its own class
        from ..router import Router

        return Router
    raise AttributeError(f"module 'laya.serve' has no attribute {name!r}")
