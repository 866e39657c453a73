"""Backend names, the `auto` policy and installation. Adding a backend = one file + one REGISTRY line."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import warnings
from typing import Any

from .base import Backend, BackendUnavailable, bucket_shape, pad_batch

__all__ = ["AUTO", "NAMES", "Backend", "BackendUnavailable", "auto_policy", "bucket_shape", "install", "is_modernbert",
           "make_backend", "normalise", "pad_batch", "tilelang_available", "warn_fallback"]

REGISTRY = {  # name -> "module:class"
    "eager": "laya.backends.eager:EagerBackend",
    "compile": "laya.backends.compile:CompileBackend",
    "tilelang": "laya.backends.tilelang:TileLangBackend",
    "aoti": "laya.backends.aoti:AOTIBackend",  # needs aoti_path=...; `auto` never picks it
}
NAMES = ("auto", "eager", "compile", "tilelang", "onnx")  # the published table (spec §5.1), exactly
AUTO = "auto"
EXTRA_NAMES = ("aoti",)  # accepted everywhere (normalise, set_backend, load) but not in the published table
ALIASES = {"fast": "tilelang", "torch": "eager", "torch.compile": "compile", "inductor": "compile"}


def known_names() -> tuple[str, ...]:
    return ("auto", *REGISTRY, "onnx")


def normalise(name: Any) -> str:
    if name is None:
        return "eager"
    key = str(name).strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key not in known_names():
        raise ValueError(f"unknown backend {name!r}; use one of {', '.join(known_names())} "
                         f"(aliases: {', '.join(sorted(ALIASES))})")
    return key


def tilelang_available() -> bool:
    """tilelang imports and this build has the fused forward (laya.fast) that uses it."""
    if importlib.util.find_spec("laya.fast") is None:
        return False
    try:
        importlib.import_module("tilelang")
    except Exception:  # noqa: BLE001 - any import failure means: not usable here
        return False
    return True


tilelang_importable = tilelang_available  # the earlier name


def is_modernbert(obj: Any) -> bool:
    """Whether an agent, a DecisionModel, an encoder or its config (object or dict) is ModernBERT."""
    for path in (("model", "encoder", "config"), ("encoder", "config"), ("config",), ()):
        target = obj
        for attr in path:
            target = getattr(target, attr, None)
        model_type = target.get("model_type") if isinstance(target, dict) else getattr(target, "model_type", None)
        if model_type is not None:
            return model_type == "modernbert"
    return False


def auto_policy(agent: Any) -> str:
    """TileLang on CUDA for ModernBERT in bf16/fp16 when tilelang imports; else compile on CUDA; else eager."""
    import torch

    if getattr(agent, "parallel_options", False) or agent.device.type != "cuda":
        return "eager"
    if is_modernbert(agent) and agent.dtype in (torch.bfloat16, torch.float16) and tilelang_available():
        return "tilelang"
    return "compile"


def warn_fallback(name: str, why: Any, stacklevel: int = 2) -> None:
    """The one RuntimeWarning of a backend that cannot run here (the eager forward takes over)."""
    warnings.warn(f"laya: backend '{name}' is unavailable ({why}); using the eager forward instead.",
                  RuntimeWarning, stacklevel=stacklevel + 1)


def backend_class(name: str) -> type[Backend]:
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def _resolved(name: str, agent: Any) -> str:
    name = normalise(name)
    return auto_policy(agent) if name == "auto" else name


def check_options(name: str, agent: Any, options: dict) -> None:
    """TypeError naming any option the backend `name` would refuse (checked before a working one is removed)."""
    name = _resolved(name, agent)
    if name == "onnx":
        return
    params = inspect.signature(backend_class(name).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    allowed = [k for k, p in params.items() if k not in ("self", "agent") and p.kind is not p.VAR_POSITIONAL]
    unknown = sorted(k for k in options if k not in allowed)
    if unknown:
        raise TypeError(f"backend {name!r} takes no option {', '.join(map(repr, unknown))}; its options: "
                        f"{', '.join(allowed) or 'none'}")


def make_backend(name: str, agent: Any, **options: Any) -> Backend:
    name = _resolved(name, agent)
    if getattr(agent, "parallel_options", False) and name != "eager":
        raise BackendUnavailable("the checkpoint uses the parallel option layout, which only the eager backend runs")
    if name == "onnx":
        raise BackendUnavailable("onnx runs as its own agent class, not as a forward; "
                                 "use laya.load(..., backend='onnx', onnx_path=...)")
    check_options(name, agent, options)
    return backend_class(name)(agent, **options)


def install(agent: Any, name: str, strict: bool = False, **options: Any) -> Backend:
    """Build and install a backend on the agent's model; unavailable -> one warning and eager (or raise)."""
    try:
        backend = make_backend(name, agent, **options)
        backend.strict = strict
        backend.install()
    except BackendUnavailable as e:
        if strict:
            raise
        resolved = normalise(name)
        resolved = auto_policy(agent) if resolved == "auto" else resolved
        warn_fallback(resolved, e, stacklevel=3)
        backend = backend_class("eager")(agent).install()
    return backend
