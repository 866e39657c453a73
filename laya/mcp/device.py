"""Which device the MCP tools (and `laya serve`) run on: `LAYA_DEVICE`, the detected accelerator, a resident
agent's real device. Importing this module imports neither torch nor the `mcp` SDK; torch is read on call."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["env_device", "resolve_device", "device_report", "agent_device", "router_agent"]

DEVICE_HINT = "use a device such as 'cpu', 'cuda', 'cuda:0' or 'mps'"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _lower_type(value: str) -> str:
    """`CUDA:0` -> `cuda:0`: the device type lowercased, the index kept as written."""
    kind, sep, index = value.partition(":")
    return kind.lower() + sep + index


def env_device() -> str | None:
    """`LAYA_DEVICE` trimmed (blank or unset -> None), checked with `torch.device` when torch is importable."""
    raw = (os.environ.get("LAYA_DEVICE") or "").strip()
    if not raw:
        return None
    value = _lower_type(raw)
    torch = _torch()
    if torch is None:
        return value
    try:
        parsed = torch.device(value)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"LAYA_DEVICE={value!r} is not a torch device: {e} -- {DEVICE_HINT}") from None
    if str(parsed) != value:
        raise ValueError(f"LAYA_DEVICE={value!r} is not the device torch asks for: torch reads it as "
                         f"{str(parsed)!r} -- {DEVICE_HINT}")
    return value


def _detected(torch: Any) -> str:
    if torch is None:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    return "cpu"


def resolve_device(force: str | None = None) -> str:
    """`force` as given, else `LAYA_DEVICE`, else the first available of cuda / mps / xpu, else cpu."""
    if force:
        return force
    return env_device() or _detected(_torch())


def device_report() -> dict:
    """The device preference and what torch offers: `{"device", "torch_cuda", "torch_version"}`."""
    torch = _torch()
    return {"device": resolve_device(),
            "torch_cuda": bool(torch is not None and torch.cuda.is_available()),
            "torch_version": getattr(torch, "__version__", None)}


def agent_device(agent: Any) -> str | None:
    """The device type an agent really runs on (`cuda`, no index), the string when it keeps a str, else None."""
    device = getattr(agent, "device", None)
    if isinstance(device, str):
        return device
    kind = getattr(device, "type", None)
    return kind if isinstance(kind, str) else None


def _resident(router: Any) -> dict:
    agents = getattr(router, "agents", None)
    if callable(agents):
        try:
            return dict(agents())
        except Exception:  # noqa: BLE001 - a router-like object without a snapshot: read nothing
            return {}
    return dict(getattr(router, "_agents", None) or {})


def router_agent(router: Any, name: str) -> Any:
    """The resident agent for `name` (or its canonical built-in name); never loads or touches the LRU."""
    resident = _resident(router)
    if name in resident:
        return resident[name]
    canonical = None
    resolve = getattr(router, "resolve", None)
    if callable(resolve):
        try:
            canonical = resolve(name)
        except (ValueError, TypeError):
            canonical = None
    if canonical is None and isinstance(name, str):
        from ..registry import ALIASES

        key = name.strip().lower()
        canonical = ALIASES.get(key, key)
    return resident.get(canonical)
