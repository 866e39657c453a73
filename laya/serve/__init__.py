"""`laya serve`: the System One HTTP API (Jev-compatible) with dynamic batching; `laya.serve.ray` scales it out.

    laya serve --model support=/models/support-v2 --default-model support --port 8000
    LAYA_API_KEY=... LAYA_BATCH_WINDOW_MS=2 laya-serve
    laya serve --ray --replicas 4        # Ray Serve, one replica per GPU

Needs the `serve` extra (fastapi, uvicorn); `--ray` needs the `ray` extra.
"""

from __future__ import annotations

from typing import Any

from .config import ServeConfig, from_args, from_env

__all__ = ["ServeConfig", "create_app", "from_args", "from_env", "main"]


def create_app(cfg: ServeConfig | None = None, router: Any = None) -> Any:
    from .app import create_app as build

    return build(cfg, router)


def main(argv: list[str] | None = None) -> int:
    from .main import main as run

    return run(argv)
