"""The router the MCP server answers with: built once from the `LAYA_*` environment (local `Router`, or
`RemoteRouter` when `LAYA_BASE_URL` is set); a failed construction is retried on the next call."""

from __future__ import annotations

import os
import threading
from typing import Any

from .validate import ToolError

DEFAULT_MCP_MODELS = ("english", "multilingual")

_LOCK = threading.Lock()
_SHARED: dict[str, Any] = {}


def _base_url(env: dict) -> str | None:
    raw = (env.get("LAYA_BASE_URL") or "").strip()
    if not raw:
        return None
    return raw if "://" in raw else f"http://{raw}"


def preload_wanted(env: dict) -> bool:
    from ..serve.config import ServeConfig, env_changes

    return env_changes(env, ("LAYA_PRELOAD",)).get("preload", ServeConfig.preload)


def _settings(env: dict) -> Any:
    from dataclasses import replace

    from ..serve.config import ROUTER_ONLY, ServeConfig, env_changes

    # the router's own variables only: a serve-only one (LAYA_PORT, LAYA_LOG_LEVEL, ...) never stops the MCP router
    return replace(ServeConfig(), **env_changes(env, ROUTER_ONLY + ("LAYA_DEVICE", "LAYA_BACKEND")))


def _local_router(env: dict) -> Any:
    from ..router import Router

    cfg = _settings(env)
    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    device = cfg.device
    if env is os.environ:
        from .device import env_device

        device = env_device()
    router = Router(models=dict(cfg.extra_models), device=device, max_loaded=cfg.max_loaded,
                    default=cfg.default_model, auto_task_detection=cfg.auto_task,
                    agent_kwargs={"backend": cfg.backend} if cfg.backend and cfg.backend != "auto" else None)
    names = cfg.models or tuple(cfg.extra_models) or DEFAULT_MCP_MODELS
    wanted = list(dict.fromkeys(router.resolve(n) for n in names))
    if cfg.preload:
        router.preload(wanted)
    return router


def build_router(env: dict | None = None) -> Any:
    """A Router (or RemoteRouter for `LAYA_BASE_URL`, scheme-less values read as http://) from `env`."""
    env = os.environ if env is None else env
    base_url = _base_url(env)
    if base_url is None:
        return _local_router(env)
    from .remote import RemoteRouter

    cfg = _settings(env)
    raw = (env.get("LAYA_REMOTE_TIMEOUT") or "").strip()
    timeout = None
    if raw and env is not os.environ:  # RemoteRouter reads os.environ itself
        try:
            timeout = float(raw)
        except ValueError:
            raise ValueError(f"LAYA_REMOTE_TIMEOUT={raw!r} is not a number of seconds") from None
    return RemoteRouter(base_url, api_key=(env.get("LAYA_API_KEY") or "").strip() or None, timeout=timeout,
                        default=cfg.default_model, auto_task_detection=cfg.auto_task,
                        models=dict(cfg.extra_models))


def shared_router() -> Any:
    """The process-wide router of the MCP server (built on first use; a failure is retried next call)."""
    with _LOCK:
        router = _SHARED.get("router")
        if router is None:
            try:
                router = build_router()
            except ToolError:
                raise
            except Exception as e:  # noqa: BLE001 - reported to the client, retried on the next call
                raise ToolError("internal_error", f"router construction failed: {type(e).__name__}: {e}") from None
            _SHARED["router"] = router
        return router


def reset_shared_router() -> None:
    """Forget the process-wide router (tests; a changed environment)."""
    with _LOCK:
        _SHARED.pop("router", None)
