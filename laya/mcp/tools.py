"""Tool logic of the laya MCP server: plain methods that take JSON-ready arguments and return JSON strings.

No `mcp` import here (and no torch import until a checkpoint is needed), so the tools are testable and usable
without the MCP SDK; `laya.mcp.server` registers the methods named in `TOOL_NAMES` as MCP tools.

Two modes:
- local (default): a laya `Router` built from the same `LAYA_*` variables as `laya serve` (LAYA_DEVICE,
  LAYA_BACKEND, LAYA_MODELS, LAYA_EXTRA_MODELS, LAYA_DEFAULT_MODEL, LAYA_MAX_LOADED, LAYA_AUTO_TASK, LAYA_THREADS,
  LAYA_MAX_TOKEN_BUDGET); checkpoints load lazily on first use. `LayaTools(runner)` may instead wrap a Router,
  an Agent, or a zero-argument factory returning either (called on first use).
- remote: `LAYA_BASE_URL` points the tools at a running `laya serve` (stdlib HTTP, timeout
  `LAYA_REMOTE_TIMEOUT` seconds, `Authorization: Bearer $LAYA_API_KEY` when set). predict, predict_batch, status
  (GET /health), preset, decide and tournament (both built on the System One routes) work remotely; route,
  route_batch, shortlist and predict_long need the checkpoint in-process and answer `unsupported_remote`.

Every tool returns a JSON string: the result object, or `{"error": {"code": ..., "message": ...}}`. Validation
failures carry the library's own message under an `invalid_*` code; anything unexpected is `internal_error`
with a generic message (the traceback goes to the `laya.mcp` logger only).
"""

import functools
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
import warnings
from typing import Annotated, Any, Callable, Optional, Union

from ..questions import check_questions, render_state
from ..serve.config import ServeConfig, from_env
from ..serve.schema import (MAX_BATCH_STATES, MAX_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS_TOURNAMENT, MAX_QUESTIONS,
                            MAX_STATE_CHARS, MAX_TOTAL_OPTIONS, ApiError, limit_breach,
                            model_field)

log = logging.getLogger("laya.mcp")

TOOL_NAMES = ("laya_status", "laya_route", "laya_route_batch", "laya_predict", "laya_predict_batch",
              "laya_shortlist", "laya_tournament", "laya_preset", "laya_decide", "laya_predict_long")
REMOTE_TOOLS = ("laya_status", "laya_predict", "laya_predict_batch", "laya_preset", "laya_decide",
                "laya_tournament")
DEFAULT_REMOTE_TIMEOUT = 60.0  # seconds; a remote server may load a checkpoint on the first request
MAX_LONG_STATE_CHARS = 1_000_000  # laya_predict_long exists for long states: a wider cap than MAX_STATE_CHARS
MAX_SHORTLIST_OPTIONS = 4096  # options per choice question before shortlisting
MAX_REQUESTS = MAX_BATCH_STATES  # requests per laya_predict_batch / laya_route_batch call
REQUEST_KEYS = ("state", "questions", "model", "task", "lang", "lang_guess", "max_len", "head_max_len")
Json = Optional[Union[float, dict]]


def _loose(schema: dict, fallback: Any) -> Any:
    """An annotation whose JSON schema says `schema` to MCP clients while any value reaches the tool, so a wrong
    type gets this module's structured error instead of the SDK's validation message (needs pydantic, which
    the `mcp` SDK brings; without it the plain annotation stands)."""
    try:
        from pydantic import WithJsonSchema
    except ImportError:
        return fallback
    return Annotated[Any, WithJsonSchema(schema)]


Obj = _loose({"type": "object", "additionalProperties": True}, dict)
OptObj = _loose({"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}], "default": None},
                Optional[dict])
Objs = _loose({"type": "array", "items": {"type": "object", "additionalProperties": True}}, list[dict])


class ToolError(Exception):
    """A failure the caller can act on: a stable `code` and a message that says what to change."""

    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra

    def payload(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def _jsonable(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=_jsonable)


def _library_error(e: Exception) -> ToolError:
    """A ValueError/TypeError raised by laya's validation, as a structured error with its own message."""
    from ..structured import SchemaError

    message = str(e) or type(e).__name__
    if isinstance(e, SchemaError):
        return ToolError("invalid_schema", message)
    if message.startswith("question "):
        return ToolError("invalid_questions", message)
    if message.startswith("unknown model") or message.startswith("model "):
        return ToolError("invalid_model", message)
    if "min_confidence" in message:
        return ToolError("invalid_min_confidence", message)
    return ToolError("invalid_argument", message)


def tool(fn: Callable) -> Callable:
    """Run a tool method and turn its outcome into a JSON string (errors included)."""

    @functools.wraps(fn)
    def run(self: "LayaTools", *args: Any, **kwargs: Any) -> str:
        try:
            return dumps(fn(self, *args, **kwargs))
        except ToolError as e:
            return dumps(e.payload())
        except (ValueError, TypeError) as e:
            return dumps(_library_error(e).payload())
        except NotImplementedError as e:
            return dumps(ToolError("not_implemented", str(e) or "not available in this build").payload())
        except Exception:  # noqa: BLE001 - never leak internals to the client
            log.exception("laya mcp: %s failed", fn.__name__)
            return dumps(ToolError("internal_error", f"{fn.__name__} failed unexpectedly; the server log has the "
                                                     "details").payload())

    return run


# ---- argument checks ---------------------------------------------------------------------------------

def _state(state: Any, where: str = "state", limit: int = MAX_STATE_CHARS) -> dict:
    if not isinstance(state, dict):
        raise ToolError("invalid_state", f"'{where}' must be a JSON object such as {{\"message\": \"...\"}}, got "
                                         f"{'null' if state is None else type(state).__name__}")
    try:
        size = len(render_state(state))
    except (TypeError, ValueError) as e:
        raise ToolError("invalid_state", f"'{where}': {e}") from None
    if size > limit:
        raise ToolError("limit_exceeded", f"'{where}' is {size} characters as JSON; the limit is {limit}: shorten "
                                          "it" + ("" if limit > MAX_STATE_CHARS else " or use laya_predict_long"))
    return state


def _questions(questions: Any, max_choice: int = MAX_CHOICE_OPTIONS, max_total: int | None = MAX_TOTAL_OPTIONS,
               where: str = "questions") -> dict:
    if not isinstance(questions, dict) or not questions:
        raise ToolError("invalid_questions", f"'{where}' must be a non-empty JSON object {{question_id: "
                                             "{\"type\": \"choice\"|\"score\"|\"noul\", \"instructions\": ..., "
                                             "\"criteria\": ...}}, got "
                                             f"{questions if isinstance(questions, dict) else type(questions).__name__}")
    if len(questions) > MAX_QUESTIONS:
        raise ToolError("limit_exceeded", f"{len(questions)} questions in one call; the limit is {MAX_QUESTIONS}")
    try:
        qs = check_questions(questions)
    except (ValueError, TypeError) as e:
        raise ToolError("invalid_questions", str(e)) from None
    breach = limit_breach(qs, max_choice, max_total)
    if breach is None:
        return questions
    what, q, count, limit = breach
    if what == "options":
        hint = "; use laya_tournament or laya_shortlist for long option lists" if max_choice == MAX_CHOICE_OPTIONS else ""
        raise ToolError("limit_exceeded", f"question '{q.qid}' has {count} options; the limit here is {limit}{hint}")
    if what == "levels":
        raise ToolError("limit_exceeded", f"question '{q.qid}' has {count} levels; the limit is {limit}")
    raise ToolError("limit_exceeded", f"the questions have {count} options in all; the limit is {limit}")


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError("invalid_argument", f"{name} must be a string or null, got {type(value).__name__}")
    return value if value.strip() else None


def _positive(value: Any, name: str, limit: int | None = None) -> int | None:
    """A positive integer, or None for null/0 (unset)."""
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (limit is not None and value > limit):
        bound = f" <= {limit}" if limit is not None else ""
        raise ToolError("invalid_argument", f"{name} must be a positive integer{bound} (0 or null = unset), got "
                                            f"{value!r}")
    return value


def _seconds(value: Any, name: str) -> float | None:
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ToolError("invalid_argument", f"{name} must be a number of seconds > 0 (0 = unset), got {value!r}")
    return float(value)


def _min_confidence(value: Any) -> Any:
    from ..answers import check_min_confidence

    try:
        return check_min_confidence(value)
    except (ValueError, TypeError) as e:
        raise ToolError("invalid_min_confidence", str(e)) from None


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 2)


def _effective_lang(lang: str | None, decision: dict) -> str | None:
    return lang if lang is not None else (decision.get("detection") or {}).get("language")


class _Runner:
    """`predict` / `predict_batch` over the tools' own routed path (what laya.structured and the tournament
    call): routing and validation stay the tools', local or remote."""

    def __init__(self, tools: "LayaTools", routing: dict):
        self.tools, self.routing = tools, routing
        self.last: dict = {}

    def predict(self, state: Any, questions: dict, **kwargs: Any) -> dict:
        return self.predict_batch([state], questions, **kwargs)[0]

    def predict_batch(self, states: list, questions: dict, **kwargs: Any) -> list[dict]:
        options = {**self.routing, **kwargs}
        results, self.last = self.tools._answer(list(states), questions, options)
        return results


class LayaTools:
    """The MCP tools as methods returning JSON strings.

    `runner`: None (build a Router from the LAYA_* settings in `env`, as `laya serve` does), a laya Router, an
    Agent (served as the only checkpoint, named 'local'), or a zero-argument callable returning either (called
    once, on first use). `env`: the environment to read (default `os.environ`); `LAYA_BASE_URL` there switches
    every tool to a remote `laya serve`.
    """

    def __init__(self, runner: Any = None, env: dict | None = None):
        self.env = dict(os.environ if env is None else env)
        self.cfg: ServeConfig = from_env(self.env)
        base = (self.env.get("LAYA_BASE_URL") or "").strip().rstrip("/")
        if base and not base.startswith(("http://", "https://")):
            raise ValueError(f"LAYA_BASE_URL={base!r} must start with http:// or https://")
        self.base_url = base or None
        raw = (self.env.get("LAYA_REMOTE_TIMEOUT") or "").strip()
        try:
            self.remote_timeout = float(raw) if raw else DEFAULT_REMOTE_TIMEOUT
        except ValueError:
            raise ValueError(f"LAYA_REMOTE_TIMEOUT={raw!r} is not a number of seconds") from None
        if not (self.remote_timeout > 0 and math.isfinite(self.remote_timeout)):
            raise ValueError(f"LAYA_REMOTE_TIMEOUT={raw!r} must be a positive number of seconds")
        self._runner = runner
        self._router: Any = None
        self._served: list[str] = []
        self._custom_only = False
        self._auto_default: str | None = None
        self._setup_lock = threading.Lock()
        self._infer_lock = threading.Lock()  # one inference at a time, as laya serve's single worker
        self._embed_fns: dict[int, tuple[Any, Any]] = {}

    @property
    def remote(self) -> bool:
        return self.base_url is not None

    # ---- local runner --------------------------------------------------------------------------------

    def _build_router(self) -> Any:
        from ..router import Router

        cfg = self.cfg
        if cfg.threads:
            import torch

            torch.set_num_threads(cfg.threads)
        router = Router(models=dict(cfg.extra_models), device=cfg.device, max_loaded=cfg.max_loaded,
                        default=cfg.default_model, auto_task_detection=cfg.auto_task,
                        agent_kwargs={"backend": cfg.backend} if cfg.backend else None)
        names = cfg.models or tuple(cfg.extra_models) or tuple(router.registered)
        try:
            served = list(dict.fromkeys(router.resolve(n) for n in names))
        except ValueError as e:
            raise ValueError(f"LAYA_MODELS: {e}") from None
        return router, served

    def _wrap_agent(self, agent: Any) -> tuple[Any, list[str]]:
        from ..router import Router

        source = getattr(agent, "model_id_or_path", None) or "local"
        sub = getattr(agent, "subfolder", None)
        router = Router(models={"local": (str(source), sub) if sub else str(source)}, default="local")
        router.attach("local", agent)
        return router, ["local"]

    def router(self, build: bool = True) -> Any:
        """The local Router (built or obtained on first use); None when not built yet and `build` is False."""
        if self._router is not None or not build:
            return self._router
        with self._setup_lock:
            if self._router is not None:
                return self._router
            runner = self._runner
            if runner is None:
                router, served = self._build_router()
                custom = {router.resolve(n) for n in self.cfg.extra_models}
                from ..registry import DEFAULT_MODELS

                custom_only = not any(n in DEFAULT_MODELS and n not in custom for n in served)
            else:
                if callable(runner) and not callable(getattr(runner, "predict", None)):
                    try:
                        runner = runner()
                    except Exception as e:  # noqa: BLE001 - a factory that cannot load = models not ready
                        log.exception("laya mcp: the runner factory failed")
                        raise ToolError("models_not_ready", f"the model could not be loaded ({type(e).__name__}: "
                                                            f"{str(e)[:300]})") from None
                if callable(getattr(runner, "route", None)) and callable(getattr(runner, "resolve", None)):
                    router, served, custom_only = runner, list(runner.registered), False
                elif callable(getattr(runner, "predict_batch", None)):
                    (router, served), custom_only = self._wrap_agent(runner), True
                else:
                    raise TypeError(f"LayaTools needs a laya Router, an Agent or a factory of one, got "
                                    f"{type(runner).__name__}")
            self._served, self._custom_only = served, custom_only
            self._auto_default = router.default if router.default in served else served[0]
            self._router = router
            return router

    def _model(self, model: Any) -> str | None:
        router = self.router()
        if model is not None and not isinstance(model, str):
            raise ToolError("invalid_model", f"model must be a checkpoint name or 'auto', got {type(model).__name__}")
        try:
            return model_field(model, router.registered, router.resolve)
        except ApiError as e:
            raise ToolError("invalid_model", e.detail) from None

    def _route(self, state: Any, questions: Any, model: Any, task: Any, lang: Any, lang_guess: Any,
               hooks_timeout: float | None = None) -> dict:
        """The router's decision, kept to the served checkpoints (as laya serve does)."""
        router = self.router()
        name = self._model(model)
        task, lang, lang_guess = _text(task, "task"), _text(lang, "lang"), _text(lang_guess, "lang_guess")
        try:
            decision = router.route(state, questions, name, task, lang, lang_guess, hooks_timeout=hooks_timeout)
        except (ValueError, TypeError) as e:
            message = str(e)
            code = "invalid_model" if message.startswith("unknown model") else "invalid_argument"
            raise ToolError(code, message) from None
        if not self._custom_only or decision.model in self._served:
            return dict(decision)
        if name is not None or task is not None:
            raise ToolError("model_not_served", f"model {decision.model!r} is not served here; this server answers "
                                                f"with {', '.join(self._served)} (or send no model to use "
                                                f"{self._auto_default!r})")
        chosen = router.route(state, questions, self._auto_default)
        reason = (f"served default {self._auto_default!r} (routing chose {decision.model!r}, which this server does "
                  f"not serve: {decision.reason})")
        return {**chosen, "reason": reason, "detection": decision.detection, "workflow": decision.workflow}

    def _agent(self, name: str) -> Any:
        router = self.router()
        try:
            return router.load(name)
        except Exception as e:  # noqa: BLE001 - a checkpoint that cannot load is reported, not raised
            log.exception("laya mcp: loading %r failed", name)
            raise ToolError("models_not_ready", f"checkpoint {name!r} could not be loaded ({type(e).__name__}: "
                                                f"{str(e).splitlines()[0][:300] if str(e) else ''}); check "
                                                "LAYA_EXTRA_MODELS / network access to the Hub, or call laya_status",
                            model=name) from None

    @staticmethod
    def _device(agent: Any) -> str:
        return str(getattr(agent, "device", "cpu"))

    # ---- remote ------------------------------------------------------------------------------------

    def _http(self, method: str, path: str, body: Any = None) -> tuple[Any, Any]:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Accept": "application/json"})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.cfg.api_key:
            request.add_header("Authorization", f"Bearer {self.cfg.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.remote_timeout) as response:
                payload, headers = response.read(), response.headers  # case-insensitive .get
        except urllib.error.HTTPError as e:
            try:
                detail = json.loads(e.read().decode("utf-8")).get("detail")
            except Exception:  # noqa: BLE001 - any non-JSON error body
                detail = None
            detail = str(detail) if detail else f"HTTP {e.code} {e.reason}"
            code = {400: "invalid_request", 401: "unauthorized", 408: "remote_timeout", 413: "limit_exceeded",
                    429: "remote_busy", 503: "remote_busy"}.get(e.code, "remote_error")
            if e.code == 422:
                code = "invalid_questions" if detail.startswith("question ") else "invalid_request"
            raise ToolError(code, f"laya server at {self.base_url}: {detail}", status=e.code) from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise ToolError("remote_unavailable", f"cannot reach the laya server at {self.base_url} ({reason}); "
                                                  "check LAYA_BASE_URL and that `laya serve` is running") from None
        try:
            return json.loads(payload.decode("utf-8")), headers
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ToolError("remote_error", f"the laya server at {self.base_url} did not answer with JSON") from None

    def _unsupported_remote(self, name: str) -> None:
        if self.remote:
            raise ToolError("unsupported_remote", f"{name} needs the checkpoint in this process and is not available "
                                                  f"against a remote laya serve (LAYA_BASE_URL={self.base_url}); "
                                                  f"remote tools: {', '.join(REMOTE_TOOLS)}")

    def _remote_answer(self, states: list, questions: dict, options: dict) -> tuple[list[dict], dict]:
        body = {k: v for k, v in options.items() if v is not None and k in
                ("model", "task", "lang", "lang_guess", "max_len", "head_max_len", "min_confidence")}
        if len(states) == 1 and not options.get("batch_size") and not options.get("sort_by_length"):
            result, headers = self._http("POST", "/v1/systemone", {"state": states[0], "questions": questions,
                                                                   **body})
            info: dict = {"device": "remote"}
            try:
                info["inference_ms"] = float(headers.get("X-Inference-Time-Ms"))
            except (TypeError, ValueError):
                pass
            return [result], info
        extra = {k: options[k] for k in ("batch_size", "sort_by_length") if options.get(k)}
        out: list[dict] = []
        for start in range(0, len(states), MAX_BATCH_STATES):
            chunk = states[start:start + MAX_BATCH_STATES]
            data, _ = self._http("POST", "/v1/systemone/batch", {"states": chunk, "questions": questions, **body,
                                                                 **extra})
            results = data.get("results") if isinstance(data, dict) else None
            if not isinstance(results, list) or len(results) != len(chunk):
                raise ToolError("remote_error", f"the laya server at {self.base_url} answered the batch without "
                                                "one result per state")
            out.extend(results)
        return out, {"device": "remote"}

    # ---- shared answering path ---------------------------------------------------------------------

    def _answer(self, states: list, questions: dict, options: dict) -> tuple[list[dict], dict]:
        """Answer one question set for several states with the same routing controls (local or remote).
        Returns (results with routing, info {"device"})."""
        if self.remote:
            return self._remote_answer(states, questions, options)
        decisions = [self._route(s, questions, options.get("model"), options.get("task"), options.get("lang"),
                                 options.get("lang_guess")) for s in states]
        requests = [{"state": s, "questions": questions, "model": d["model"],
                     "lang": _effective_lang(options.get("lang"), d), "max_len": options.get("max_len"),
                     "head_max_len": options.get("head_max_len")} for s, d in zip(states, decisions)]
        agents = {d["model"]: self._agent(d["model"]) for d in decisions}
        with self._infer_lock:
            results = self.router().predict_batch(requests, batch_size=options.get("batch_size"),
                                                  min_confidence=options.get("min_confidence"),
                                                  sort_by_length=bool(options.get("sort_by_length")))
        out = [{**r, "routing": d} for r, d in zip(results, decisions)]
        devices = sorted({self._device(a) for a in agents.values()})
        return out, {"device": devices[0] if len(devices) == 1 else devices}

    def _controls(self, model: Any, task: Any, lang: Any, lang_guess: Any, max_len: Any = None,
                  head_max_len: Any = None, min_confidence: Any = None) -> dict:
        budget = self.cfg.max_token_budget
        return {"model": model, "task": _text(task, "task"), "lang": _text(lang, "lang"),
                "lang_guess": _text(lang_guess, "lang_guess"), "max_len": _positive(max_len, "max_len", budget),
                "head_max_len": _positive(head_max_len, "head_max_len", budget),
                "min_confidence": _min_confidence(min_confidence)}

    # ---- tools -------------------------------------------------------------------------------------

    @tool
    def laya_status(self) -> dict:
        """Server status: mode (local/remote), checkpoints registered, served and loaded, devices, settings."""
        from .. import __version__

        if self.remote:
            health, _ = self._http("GET", "/health")
            return {"status": health.get("status", "unknown") if isinstance(health, dict) else "unknown",
                    "mode": "remote", "base_url": self.base_url, "version": __version__, "server": health,
                    "tools": list(REMOTE_TOOLS)}
        factory = callable(self._runner) and not callable(getattr(self._runner, "predict", None))
        router = self.router(build=not factory)  # a factory may load a model: status never calls it
        out = {"status": "ok", "mode": "local", "version": __version__, "tools": list(TOOL_NAMES)}
        if router is None:
            return {**out, "ready": False, "loaded": [], "note": "the model loads on the first tool call"}
        agents = router.agents()
        devices = {name: self._device(a) for name, a in agents.items()}
        return {**out, "ready": bool(agents), "registered": router.registered, "served": self._served,
                "default": self._auto_default, "loaded": list(agents), "revisions": router.loaded_revisions,
                "device": next(iter(devices.values())) if devices else str(self.cfg.device or "auto"),
                "device_is_preference": not devices, "checkpoint_devices": devices,
                "backends": {name: getattr(a, "backend", None) for name, a in agents.items()},
                "cpu_fallbacks": {name: {"count": int(getattr(a, "cpu_fallback_count", 0) or 0),
                                         "last_reason": getattr(a, "last_fallback_reason", None)}
                                  for name, a in agents.items()},
                "auto_task": bool(getattr(router, "auto_task_detection", False)),
                "max_token_budget": self.cfg.max_token_budget}

    @tool
    def laya_route(self, state: Obj, questions: OptObj = None, model: Optional[str] = None,
                   task: Optional[str] = None, lang: Optional[str] = None, lang_guess: Optional[str] = None) -> dict:
        """Which checkpoint would answer this state (model, repo, reason, language detection)? Loads nothing."""
        self._unsupported_remote("laya_route")
        _state(state)
        if questions is not None and not isinstance(questions, dict):
            raise ToolError("invalid_questions", f"questions must be a JSON object or null, got "
                                                 f"{type(questions).__name__}")
        return self._route(state, questions, model, task, lang, lang_guess)

    def _requests(self, requests: Any) -> list[dict]:
        if not isinstance(requests, list) or not requests:
            raise ToolError("invalid_requests", "requests must be a non-empty list of objects {\"state\": {...}, "
                                                "\"questions\": {...}} (optional: " + ", ".join(REQUEST_KEYS[2:]) + ")")
        if len(requests) > MAX_REQUESTS:
            raise ToolError("limit_exceeded", f"{len(requests)} requests in one call; the limit is {MAX_REQUESTS}: "
                                              "split them")
        for i, r in enumerate(requests):
            if not isinstance(r, dict):
                raise ToolError("invalid_requests", f"requests[{i}] must be an object with 'state' and 'questions', "
                                                    f"got {type(r).__name__}")
            unknown = [k for k in r if k not in REQUEST_KEYS]
            if unknown:
                raise ToolError("invalid_requests", f"requests[{i}] has unknown keys {unknown}; allowed: "
                                                    f"{', '.join(REQUEST_KEYS)}")
        return requests

    @tool
    def laya_route_batch(self, requests: Objs, hooks_timeout: float = 0) -> dict:
        """Routing for several requests ({state, questions?, model?, task?, lang?, lang_guess?}); loads nothing."""
        self._unsupported_remote("laya_route_batch")
        timeout = _seconds(hooks_timeout, "hooks_timeout")
        routes = []
        for i, r in enumerate(self._requests(requests)):
            _state(r.get("state"), f"requests[{i}].state")
            questions = r.get("questions")
            if questions is not None and not isinstance(questions, dict):
                raise ToolError("invalid_questions", f"requests[{i}].questions must be a JSON object or null")
            routes.append(self._route(r["state"], questions, r.get("model"), r.get("task"), r.get("lang"),
                                      r.get("lang_guess"), hooks_timeout=timeout))
        return {"routes": routes}

    @tool
    def laya_predict(self, state: Obj, questions: Obj, model: Optional[str] = None, task: Optional[str] = None,
                     lang: Optional[str] = None, lang_guess: Optional[str] = None, max_len: Optional[int] = None,
                     head_max_len: Optional[int] = None, min_confidence: Json = None) -> dict:
        """Answer typed questions (choice / score / noul = yes-no) about a state in one forward pass."""
        started = time.perf_counter()
        _state(state)
        _questions(questions)
        options = self._controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence)
        results, info = self._answer([state], questions, options)
        return {**results[0], **info, "latency_ms": _ms(started)}

    @tool
    def laya_predict_batch(self, requests: Objs, batch_size: int = 0, hooks_timeout: float = 0,
                           min_confidence: Json = None, sort_by_length: bool = False) -> dict:
        """Answer many requests ({state, questions, model?, task?, lang?, lang_guess?, max_len?, head_max_len?});
        results in input order. batch_size / hooks_timeout: 0 = unset."""
        started = time.perf_counter()
        requests = self._requests(requests)
        size = _positive(batch_size, "batch_size")
        timeout = _seconds(hooks_timeout, "hooks_timeout")
        if not isinstance(sort_by_length, bool):
            raise ToolError("invalid_argument", f"sort_by_length must be true or false, got {sort_by_length!r}")
        threshold = _min_confidence(min_confidence)
        budget = self.cfg.max_token_budget
        checked = []
        for i, r in enumerate(requests):
            if "state" not in r or "questions" not in r:
                raise ToolError("invalid_requests", f"requests[{i}] needs 'state' and 'questions'")
            _state(r["state"], f"requests[{i}].state")
            try:
                _questions(r["questions"], where=f"requests[{i}].questions")
            except ToolError as e:  # the library's message does not say which request it is about
                if not e.message.startswith(f"requests[{i}]"):
                    e = ToolError(e.code, f"requests[{i}]: {e.message}", **e.extra)
                raise e from None
            checked.append({**r, "task": _text(r.get("task"), "task"), "lang": _text(r.get("lang"), "lang"),
                            "lang_guess": _text(r.get("lang_guess"), "lang_guess"),
                            "max_len": _positive(r.get("max_len"), f"requests[{i}].max_len", budget),
                            "head_max_len": _positive(r.get("head_max_len"), f"requests[{i}].head_max_len", budget)})
        if self.remote:
            if timeout is not None:
                raise ToolError("unsupported_remote", "hooks_timeout cannot be set against a remote laya serve "
                                                      "(hooks run only in-process); use 0")
            results: list = [None] * len(checked)
            groups: dict[str, list[int]] = {}
            for i, r in enumerate(checked):
                key = json.dumps([r["questions"], *[r.get(k) for k in REQUEST_KEYS[2:]]], ensure_ascii=False)
                groups.setdefault(key, []).append(i)
            for members in groups.values():
                first = checked[members[0]]
                options = {k: first.get(k) for k in REQUEST_KEYS[2:]}
                options.update(min_confidence=threshold, batch_size=size, sort_by_length=sort_by_length)
                answered, _ = self._remote_answer([checked[i]["state"] for i in members], first["questions"],
                                                  options)
                for i, result in zip(members, answered):
                    results[i] = result
            devices: Any = "remote"
        else:
            decisions = [self._route(r["state"], r["questions"], r.get("model"), r.get("task"), r.get("lang"),
                                     r.get("lang_guess"), hooks_timeout=timeout) for r in checked]
            agents = {d["model"]: self._agent(d["model"]) for d in decisions}
            routed = [{"state": r["state"], "questions": r["questions"], "model": d["model"],
                       "lang": _effective_lang(r.get("lang"), d), "max_len": r.get("max_len"),
                       "head_max_len": r.get("head_max_len")} for r, d in zip(checked, decisions)]
            with self._infer_lock:
                answered = self.router().predict_batch(routed, batch_size=size, hooks_timeout=timeout,
                                                       min_confidence=threshold, sort_by_length=sort_by_length)
            results = [{**r, "routing": d, "device": self._device(agents[d["model"]])}
                       for r, d in zip(answered, decisions)]
            found = sorted({self._device(a) for a in agents.values()})
            devices = found[0] if len(found) == 1 else found
        total = {k: sum((r.get("usage") or {}).get(k, 0) for r in results) for k in ("input_tokens", "output_tokens")}
        return {"results": results, "total_usage": total, "device": devices, "latency_ms": _ms(started)}

    def _embed_fn(self, agent: Any) -> Any:
        from ..shortlist import cached_embed_fn, embed_fn_from_agent

        # keep only agents the router still holds: an evicted agent (and its embedding cache) is let go
        router = self.router(build=False)
        loaded = {id(a) for a in router.agents().values()} if router is not None and hasattr(router, "agents") \
            else set()
        for key in [k for k, (a, _) in self._embed_fns.items() if k not in loaded and a is not agent]:
            del self._embed_fns[key]
        held = self._embed_fns.get(id(agent))
        if held is None or held[0] is not agent:
            held = self._embed_fns[id(agent)] = (agent, cached_embed_fn(embed_fn_from_agent(agent)))
        return held[1]

    @tool
    def laya_shortlist(self, state: Obj, questions: Obj, model: Optional[str] = None, k: int = 20,
                       task: Optional[str] = None, lang: Optional[str] = None, lang_guess: Optional[str] = None,
                       max_len: Optional[int] = None, head_max_len: Optional[int] = None,
                       min_confidence: Json = None) -> dict:
        """Like laya_predict, but each choice question with more than k options is first narrowed to its k
        options most similar to the state (the checkpoint's own encoder embeddings); result has `shortlist`."""
        self._unsupported_remote("laya_shortlist")
        started = time.perf_counter()
        _state(state)
        _questions(questions, max_choice=MAX_SHORTLIST_OPTIONS, max_total=None)
        k = _positive(k, "k", MAX_CHOICE_OPTIONS)
        if k is None:
            raise ToolError("invalid_argument", "k must be a positive integer")
        options = self._controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence)
        decision = self._route(state, questions, options["model"], options["task"], options["lang"],
                               options["lang_guess"])
        agent = self._agent(decision["model"])
        from ..shortlist import predict_shortlist

        with self._infer_lock:
            embed = self._embed_fn(agent)
            result = predict_shortlist(agent, state, questions, embed, k, lang=_effective_lang(options["lang"], decision),
                                       max_len=options["max_len"], head_max_len=options["head_max_len"],
                                       min_confidence=options["min_confidence"])
        return {**result, "routing": decision, "device": self._device(agent), "latency_ms": _ms(started)}

    @tool
    def laya_tournament(self, state: Obj, questions: Obj, model: Optional[str] = None, group_size: int = 16,
                        task: Optional[str] = None, lang: Optional[str] = None, lang_guess: Optional[str] = None,
                        max_len: Optional[int] = None, head_max_len: Optional[int] = None,
                        min_confidence: Json = None) -> dict:
        """Like laya_predict for choice questions with many options (up to 255): options are narrowed in rounds
        of group_size per forward; result has a `tournament` block per narrowed question."""
        from ..shortlist import check_group_size, predict_tournament

        started = time.perf_counter()
        _state(state)
        _questions(questions, max_choice=MAX_CHOICE_OPTIONS_TOURNAMENT, max_total=None)
        try:
            group_size = check_group_size(group_size)
        except (ValueError, TypeError) as e:
            raise ToolError("invalid_argument", str(e)) from None
        options = self._controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence)
        if self.remote:
            runner = _Runner(self, {k: options[k] for k in ("model", "task", "lang", "lang_guess")})
            result = predict_tournament(runner, state, questions, group_size, max_len=options["max_len"],
                                        head_max_len=options["head_max_len"],
                                        min_confidence=options["min_confidence"])
            return {**result, "device": "remote", "latency_ms": _ms(started)}
        decision = self._route(state, questions, options["model"], options["task"], options["lang"],
                               options["lang_guess"])
        agent = self._agent(decision["model"])
        with self._infer_lock:
            result = predict_tournament(agent, state, questions, group_size,
                                        lang=_effective_lang(options["lang"], decision), max_len=options["max_len"],
                                        head_max_len=options["head_max_len"],
                                        min_confidence=options["min_confidence"])
        return {**result, "routing": decision, "device": self._device(agent), "latency_ms": _ms(started)}

    @tool
    def laya_preset(self, preset: str, state: Obj, model: Optional[str] = None, task: Optional[str] = None,
                    lang: Optional[str] = None, lang_guess: Optional[str] = None,
                    categories: Optional[list[str]] = None, min_confidence: Json = None) -> dict:
        """Run a ready-made question set: triage (state key `message`), email (`body`; optional categories),
        guard (`prompt`), moderation (`post`), router (`request`)."""
        from ..presets import PRESET_STATE_KEYS, PRESETS

        started = time.perf_counter()
        name = preset.strip().lower() if isinstance(preset, str) else preset
        if name not in PRESETS:
            raise ToolError("unknown_preset", f"unknown preset {preset!r}; use one of {', '.join(sorted(PRESETS))}")
        if categories is not None:
            if name != "email":
                raise ToolError("invalid_argument", "categories applies to the email preset only")
            if not isinstance(categories, list) or not categories or not all(
                    isinstance(c, str) and c.strip() for c in categories):
                raise ToolError("invalid_argument", "categories must be a non-empty list of category names")
        _state(state)
        questions = PRESETS[name](categories) if name == "email" else PRESETS[name]()
        _questions(questions)
        options = self._controls(model, task, lang, lang_guess, min_confidence=min_confidence)
        results, info = self._answer([state], questions, options)
        key = PRESET_STATE_KEYS[name]
        out = {**results[0], **info, "preset": name, "state_key": key, "latency_ms": _ms(started)}
        if key not in state:
            out["note"] = f"the {name} preset reads the state key {key!r}, which this state does not have"
        return out

    @tool
    def laya_decide(self, state: Obj, schema: Obj, model: Optional[str] = None,
                    min_confidence: Json = None) -> dict:
        """Fill a JSON schema (object of enum / boolean / bounded integer properties) from the state: `values`
        plus per-field confidence and probabilities (a field below min_confidence is null)."""
        from ..structured import decide, plan_from_json_schema

        started = time.perf_counter()
        _state(state)
        if not isinstance(schema, dict):
            raise ToolError("invalid_schema", f"schema must be a JSON schema object, got {type(schema).__name__}")
        try:
            questions = plan_from_json_schema(schema).questions
        except (ValueError, TypeError) as e:
            raise ToolError("invalid_schema", str(e)) from None
        _questions(questions)
        options = self._controls(model, None, None, None, min_confidence=min_confidence)
        runner = _Runner(self, {"model": options["model"]})
        details = decide(runner, state, schema, return_details=True, min_confidence=options["min_confidence"])
        return {"values": details.values, "confidence": details.confidence, "probabilities": details.probabilities,
                "answer_confidence": details.answer_confidence, "answers": details.answers, "usage": details.usage,
                "routing": details.routing, **runner.last, "latency_ms": _ms(started)}

    @tool
    def laya_predict_long(self, state: Obj, questions: Obj, model: str = "auto", window: Optional[int] = None,
                          stride: Optional[int] = None, task: Optional[str] = None,
                          lang: Optional[str] = None) -> dict:
        """Answer questions about a state longer than the model's window: overlapping token windows are scored
        and each answer comes from its most telling window (answers gain a `window` block)."""
        self._unsupported_remote("laya_predict_long")
        started = time.perf_counter()
        _state(state, limit=MAX_LONG_STATE_CHARS)
        _questions(questions)
        window, stride = _positive(window, "window"), _positive(stride, "stride")
        options = self._controls(model, task, lang, None)
        decision = self._route(state, questions, options["model"], options["task"], options["lang"], None)
        agent = self._agent(decision["model"])
        kwargs = {k: v for k, v in (("window", window), ("stride", stride)) if v is not None}
        with self._infer_lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = self.router().predict_long(state, questions, model=decision["model"],
                                                lang=_effective_lang(options["lang"], decision), **kwargs)
        out = {**result, "routing": decision, "device": self._device(agent), "latency_ms": _ms(started)}
        notes = [str(w.message) for w in caught if issubclass(w.category, (RuntimeWarning, UserWarning))]
        if notes:
            out["warnings"] = notes
        return out

    def call(self, name: str, arguments: dict | None = None) -> str:
        """Call a tool by name with a dict of arguments (what an MCP client sends)."""
        if name not in TOOL_NAMES:
            return dumps(ToolError("unknown_tool", f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}").payload())
        try:
            return getattr(self, name)(**(arguments or {}))
        except TypeError as e:  # wrong argument names
            return dumps(ToolError("invalid_argument", str(e)).payload())
