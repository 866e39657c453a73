"""What `/health`, `/v1/models` and answers show about the router: resident checkpoints, their real devices,
and checkpoint names in place of the server's local paths."""

from __future__ import annotations

import logging
import os
from typing import Any

from .limits import LIVENESS_ONLY

log = logging.getLogger("laya.serve")


def report_failure(failing: set, key: str, message: str) -> None:
    """Log `message` with the exception being handled, once per run of failures of `key`: `failing` holds the
    keys failing now (the caller discards a key when it succeeds again)."""
    if key not in failing:
        log.exception(message)
    failing.add(key)


def _read(router: Any, name: str, shape: Any, failing: set | None = None, args: tuple = ()) -> Any:
    """`shape(router.<name>)` (an attribute, or a method called with `args`), else `shape(None)`; a read or shape
    that raises is logged (`report_failure`) and reads as `shape(None)`."""
    failing = set() if failing is None else failing
    try:
        value = getattr(router, name, None)
        value = shape(value(*args) if callable(value) else value)
    except Exception:  # noqa: BLE001 - an injected router's failing introspection must not take the app down
        report_failure(failing, name, f"laya serve: reading the router's {name!r} failed; going on without it")
        return shape(None)
    failing.discard(name)
    return value


def _names(value: Any) -> list[str]:
    return [str(name) for name in value or ()]


def _mapping(value: Any) -> dict:
    return dict(value or {})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _texts(value: Any) -> dict:
    return {str(key): _text(text) for key, text in dict(value or {}).items()}


def known_names(router: Any, failing: set | None = None) -> list[str]:
    """Every checkpoint name the router knows (built-ins and registrations), in its order."""
    models = getattr(router, "models", None)
    if isinstance(models, dict):
        return list(models)
    return _read(router, "registered", _names, failing)


def resident_names(router: Any, failing: set | None = None) -> list[str]:
    """The names of the resident checkpoints (`loaded`, an attribute or a method; none when absent or failing)."""
    return _read(router, "loaded", _names, failing)


def resident_agents(router: Any, failing: set | None = None) -> dict:
    """{name: agent} of the resident checkpoints (`agents()`; none when absent or failing)."""
    return _read(router, "agents", _mapping, failing)


def description(router: Any, name: str, failing: set | None = None) -> str | None:
    descriptions = getattr(router, "descriptions", None)
    if isinstance(descriptions, dict):
        return descriptions.get(name)
    return _read(router, "describe", _text, failing, (name,))


def _is_auto(value: Any) -> bool:
    return not value or str(value).strip().lower() in ("", "auto")


def _preferred_device(resolve_device: Any, preference: Any) -> str:
    """resolve_device(preference), "auto" (any case, flag or LAYA_DEVICE) meaning the detected device; a
    LAYA_DEVICE torch refuses is shown as set (startup refuses it for a Router)."""
    from ..mcp.device import _detected, _lower_type, _torch

    raw = os.environ.get("LAYA_DEVICE", "").strip()
    if not _is_auto(preference):
        return resolve_device(_lower_type(str(preference).strip()))
    if raw and _is_auto(raw):
        return _detected(_torch())
    try:
        return resolve_device(None)
    except ValueError:
        return raw


def health(router: Any, preference: Any = None, failing: set | None = None) -> dict:
    """The full payload: loaded names, revisions, the first resident checkpoint's device type (else the
    preference), per-checkpoint devices and CPU fallbacks. Loads nothing and leaves the LRU order alone."""
    from ..mcp.device import agent_device, resolve_device, router_agent

    loaded = resident_names(router, failing)
    agents = {name: router_agent(router, name) for name in loaded}
    devices = {name: agent_device(agent) for name, agent in agents.items()}
    first = next(iter(devices.values()), None)
    revisions = _read(router, "loaded_revisions", _texts, failing)
    return {**LIVENESS_ONLY, "loaded": loaded, "revisions": revisions,
            "device": first if devices else _preferred_device(resolve_device, preference),
            "device_is_preference": not devices, "checkpoint_devices": devices,
            "cpu_fallbacks": {name: {"count": int(getattr(agent, "cpu_fallback_count", 0) or 0),
                                     "last_reason": getattr(agent, "last_fallback_reason", None)}
                              for name, agent in agents.items()}}


def is_local_path(source: Any) -> bool:
    """Whether a checkpoint source is a place on this machine (not a Hub id)."""
    if not isinstance(source, str):
        return False
    expanded = os.path.expanduser(source)
    return os.path.isabs(expanded) or source.startswith((".", "~")) or "\\" in source or os.path.exists(source)


class PublicRepo:
    """`routing.repo` as a client may see it: the Hub id, or the checkpoint's name when it is a local path."""

    def __init__(self):
        self._seen: dict[tuple, str] = {}

    def __call__(self, routing: Any) -> Any:
        if not isinstance(routing, dict) or not isinstance(routing.get("repo"), str):
            return routing
        key = (routing.get("model"), routing["repo"])
        shown = self._seen.get(key)
        if shown is None:
            shown = str(key[0]) if is_local_path(key[1]) and key[0] is not None else key[1]
            if len(self._seen) < 1024:
                self._seen[key] = shown
        return routing if shown == routing["repo"] else {**routing, "repo": shown}


def missing_local_sources(sources: dict) -> list[str]:
    """`name -> path` lines for configured local checkpoints that are not on disk."""
    out = []
    for name, source in sources.items():
        if not isinstance(source, str) or not is_local_path(source):
            continue
        path = os.path.expanduser(source)
        if not os.path.exists(path):
            out.append(f"{name} -> {source}")
        elif os.path.isdir(path) and not os.path.isfile(os.path.join(path, "rl_agent_config.json")):
            out.append(f"{name} -> {source} (a directory without rl_agent_config.json)")  # --no-preload: 500s later
    return out
