"""`LayaTools`: the MCP tools as methods returning JSON text, over one runner of its own (kept from earlier
releases; the logic is the module functions of `laya.mcp.tools`)."""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import Any, Callable

from . import tools as tool_fns
from .errors import ToolError
from .wire import outcome, to_text

def _serving(agent: Any) -> Any:
    """A Router that answers every checkpoint name with this one agent (nothing else loads)."""
    from ..registry import DEFAULT_MODELS
    from ..router import Router

    source = getattr(agent, "model_id_or_path", None) or "local"
    router = Router(models={"local": str(source)}, default="local")
    for name in dict.fromkeys([*DEFAULT_MODELS, *router.registered]):
        router.attach(name, agent)  # attach raises max_loaded: every name stays resident
    return router


def _method(name: str) -> Callable:
    fn = getattr(tool_fns, name)

    @functools.wraps(fn)
    def call(self: "LayaTools", *args: Any, **kwargs: Any) -> str:
        return self._run(fn, args, kwargs)

    return call


class LayaTools:
    """The MCP tools as methods returning JSON strings (errors: `{"error": code, "message": ...}`).

    `runner`: None (a Router built from the LAYA_* settings in `env`, a RemoteRouter with LAYA_BASE_URL), a
    laya Router, an Agent (answering under every checkpoint name), or a zero-argument factory of either
    (called once, on first use). `env`: the environment to read (default `os.environ`).
    """

    def __init__(self, runner: Any = None, env: dict | None = None):
        self.env = dict(os.environ if env is None else env)
        self._runner = runner
        self._router: Any = None
        self._lock = threading.Lock()

    @property
    def remote(self) -> bool:
        return bool(getattr(self._router, "is_remote", False)) or (
            self._runner is None and bool((self.env.get("LAYA_BASE_URL") or "").strip()))

    def _build(self) -> Any:
        runner = self._runner
        if runner is None:
            from .runtime import build_router

            return build_router(self.env)
        if callable(runner) and not callable(getattr(runner, "predict", None)):
            try:
                runner = runner()
            except Exception as e:  # noqa: BLE001 - a factory that cannot load = models not ready
                raise ToolError("models_not_ready", f"the model could not be loaded ({type(e).__name__}: "
                                                    f"{str(e)[:300]})") from None
        if callable(getattr(runner, "route", None)) and callable(getattr(runner, "resolve", None)):
            return runner
        if callable(getattr(runner, "predict_batch", None)):
            return _serving(runner)
        raise ToolError("internal_error", f"LayaTools needs a laya Router, an Agent or a factory of one, got "
                                          f"{type(runner).__name__}")

    def router(self, build: bool = True) -> Any:
        """The runner's Router (built on first use); None when not built yet and `build` is False."""
        if self._router is not None or not build:
            return self._router
        with self._lock:
            if self._router is None:
                try:
                    self._router = self._build()
                except ToolError:
                    raise
                except Exception as e:  # noqa: BLE001 - reported to the client, retried on the next call
                    raise ToolError("internal_error", f"router construction failed: {type(e).__name__}: "
                                                      f"{e}") from None
            return self._router

    def _run(self, fn: Callable, args: tuple, kwargs: dict) -> str:
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:  # wrong argument names or count
            return to_text(ToolError("invalid_request", f"{fn.__name__}: {e}").payload())
        if fn is tool_fns.laya_status:
            factory = callable(self._runner) and not callable(getattr(self._runner, "predict", None))
            kwargs.setdefault("router", self.router(build=not factory))  # status never calls a factory
            return outcome(lambda **kw: fn(*args, **kw), **kwargs)[1]
        try:
            kwargs.setdefault("router", self.router())
        except ToolError as e:
            return to_text(e.payload())
        return outcome(lambda **kw: fn(*args, **kw), **kwargs)[1]

    def call(self, name: str, arguments: dict | None = None) -> str:
        """Call a tool by name with a dict of arguments (what an MCP client sends)."""
        if name not in tool_fns.TOOL_NAMES:
            return to_text(ToolError("unknown_tool", f"unknown tool {name!r}; tools: "
                                                     f"{', '.join(tool_fns.TOOL_NAMES)}").payload())
        try:
            return getattr(self, name)(**(arguments or {}))
        except TypeError as e:  # wrong argument names
            return to_text(ToolError("invalid_request", str(e)).payload())


for _name in tool_fns.TOOL_NAMES:
    setattr(LayaTools, _name, _method(_name))
