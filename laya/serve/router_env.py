"""`laya.serve.build_router()`: the Router the LAYA_* variables describe (what `create_app()` serves)."""

from __future__ import annotations

import logging
import os
from typing import Any

from ..registry import ALIASES, DEFAULT_MODELS
from .config import ENV, SettingError, env_changes, parse_extra_models

log = logging.getLogger("laya.serve")


def _setting(name: str, default: Any = None) -> Any:
    """One LAYA_* value through the server's own parser (blank or unset -> default)."""
    return env_changes(os.environ, (name,)).get(ENV[name][0], default)


def _default_model(extra: dict) -> str | None:
    raw = os.environ.get("LAYA_DEFAULT_MODEL")
    if raw is None or not raw.strip():
        return None
    key = raw.strip().lower()
    if ALIASES.get(key, key) in DEFAULT_MODELS or key in {name.strip().lower() for name in extra}:
        return raw.strip()
    raise SystemExit(f"invalid LAYA_DEFAULT_MODEL '{raw}': use a built-in checkpoint ({', '.join(DEFAULT_MODELS)}), "
                     "one of its aliases, or a name registered by LAYA_EXTRA_MODELS")


def _positive_int(raw: str | None) -> int | None:
    try:
        value = int(raw) if raw is not None else 0
    except ValueError:
        return None
    return value if value > 0 else None


def _set_threads() -> None:
    threads = _positive_int(os.environ.get("LAYA_THREADS"))
    if threads:
        import torch

        torch.set_num_threads(threads)


def router_arguments() -> dict:
    """Router(...) keyword arguments from the environment; only the ones that are set, besides models/device."""
    from ..mcp.device import env_device

    raw_extra = os.environ.get("LAYA_EXTRA_MODELS")
    try:
        extra = parse_extra_models("LAYA_EXTRA_MODELS", raw_extra) if raw_extra and raw_extra.strip() else {}
        device = env_device()
    except (SettingError, ValueError) as e:
        raise SystemExit(str(e)) from None
    kwargs: dict[str, Any] = {"models": extra, "device": device,
                              "auto_task_detection": bool(_setting("LAYA_AUTO_TASK", False))}
    default = _default_model(extra)
    if default is not None:
        kwargs["default"] = default
    max_loaded = _positive_int(os.environ.get("LAYA_MAX_LOADED"))
    if max_loaded is not None:  # anything else leaves the Router default
        kwargs["max_loaded"] = max_loaded
    agent_kwargs = {}
    backend = _setting("LAYA_BACKEND")
    if backend:
        agent_kwargs["backend"] = backend
    if _setting("LAYA_BATCH_INVARIANT", False):
        agent_kwargs["batch_invariant"] = True
    if agent_kwargs:
        kwargs["agent_kwargs"] = agent_kwargs
    return kwargs


def build_router() -> Any:
    """Build (and unless LAYA_PRELOAD is false, preload) the Router; SystemExit for a malformed variable."""
    import laya.serve as package  # its `Router` attribute, so a caller may stand in its own class

    _set_threads()
    kwargs = router_arguments()
    try:
        router = package.Router(**kwargs)
    except (ValueError, TypeError) as e:
        raise SystemExit(str(e)) from None
    names = _setting("LAYA_MODELS", ())
    resolve = getattr(router, "resolve", None)  # (a stand-in Router class may have none)
    for name in names if callable(resolve) else ():  # an unknown name is malformed too: stop before any load
        try:
            resolve(name)
        except ValueError as e:
            raise SystemExit(f"invalid LAYA_MODELS: {e}") from None
    if _setting("LAYA_PRELOAD", True):
        router.preload(list(names) if names else None)
    return router
