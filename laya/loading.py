"""laya.load: an agent for a checkpoint; torch is imported only when a torch backend is asked for."""

from __future__ import annotations

from typing import Any

from .backends import normalise
from .registry import BUNDLE_REPO, looks_local, resolve_model_spec

# Agent(...)'s keyword parameters and laya.load's, for checks that must not import torch (the Router's
# agent_kwargs check); tests/test_onnx_start.py pins them against the real signatures.
AGENT_PARAMETERS = frozenset((
    "model_id_or_path", "device", "token", "subfolder", "fast", "compile", "revision", "expected_sha256",
    "lang_temperatures", "hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_concurrent",
    "hooks_timeout", "calibration", "backend", "compile_warmup", "compile_cache", "compile_mode", "aoti_path",
    "batch_invariant"))
LOAD_PARAMETERS = AGENT_PARAMETERS | {"onnx_path"}


def load(model_id_or_path: str = BUNDLE_REPO, device: Any = None, token: str | None = None,
         subfolder: str | None = None, fast: bool = False, compile: bool = False, revision: str | None = None,
         expected_sha256: dict | None = None, lang_temperatures: dict | None = None, hooks: Any = None,
         on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: bool = True,
         hooks_concurrent: bool = True, hooks_timeout: float | None = None, calibration: str | None = None,
         backend: str | None = None, onnx_path: str | None = None, compile_warmup: bool = True,
         compile_cache: bool = False, compile_mode: str = "default", aoti_path: str | None = None,
         batch_invariant: bool = False) -> Any:
    """An agent for a checkpoint: a local directory, a Hub id, or a registry name (english, multilingual, ...)."""
    if subfolder is None and not looks_local(str(model_id_or_path)):
        spec = resolve_model_spec(str(model_id_or_path))
        if spec is not None:
            model_id_or_path, subfolder = spec
    if backend is not None and normalise(backend) == "onnx":
        from .onnx_agent import ONNXAgent  # device/fast/compile do not apply to an exported graph

        return ONNXAgent(model_id_or_path, onnx_path=onnx_path or "laya.onnx", token=token, subfolder=subfolder,
                         revision=revision, expected_sha256=expected_sha256, lang_temperatures=lang_temperatures,
                         calibration=calibration, hooks=hooks, on_predict_start=on_predict_start,
                         on_predict_end=on_predict_end, hooks_raise=hooks_raise, hooks_concurrent=hooks_concurrent,
                         hooks_timeout=hooks_timeout,
                         **({} if batch_invariant is False else {"batch_invariant": batch_invariant}))
    # an explicit backend (and our aoti_path) only when given: an Agent-like class need not know them
    chosen = {k: v for k, v in (("backend", backend), ("aoti_path", aoti_path)) if v is not None}
    if batch_invariant is not False:
        chosen["batch_invariant"] = batch_invariant
    from . import agent  # (torch: only for the torch backends; laya.agent.Agent read at call time)

    return agent.Agent(model_id_or_path, device=device, token=token, subfolder=subfolder, fast=fast, compile=compile,
                       revision=revision, expected_sha256=expected_sha256, lang_temperatures=lang_temperatures,
                       hooks=hooks, on_predict_start=on_predict_start, on_predict_end=on_predict_end,
                       hooks_raise=hooks_raise, hooks_concurrent=hooks_concurrent, hooks_timeout=hooks_timeout,
                       calibration=calibration, compile_warmup=compile_warmup, compile_cache=compile_cache,
                       compile_mode=compile_mode, **chosen)
