"""The MCP tools as plain functions: JSON-ready arguments in, a dict out, `ToolError(code, message)` on failure.

No `mcp` import and no torch import here (torch loads with the first checkpoint). The runner is injected by
keyword: `router=` (a laya `Router`, or a `RemoteRouter` answering through `laya serve`) and/or `agent=` (one
Agent); with neither, the server's process-wide router (`laya.mcp.runtime.shared_router`) answers.
`laya.mcp.server` registers these functions; `LayaTools` (at the end) wraps them as methods returning JSON text.
"""

from __future__ import annotations

import importlib.metadata
import time
from typing import Any, Callable

from .errors import RemoteError
from .device import agent_device, device_report, router_agent
from .validate import (AUTO, BATCH_ITEM_OVERRIDES, VALID_TYPES, ToolError, batch_item_key_doc,
                       validate_batch_requests, validate_budget, validate_hooks_timeout, validate_lang,
                       validate_lang_guess, validate_min_confidence, validate_model, validate_positive,
                       validate_preset, validate_questions, validate_state, validate_task)

__all__ = ["AUTO", "BATCH_ITEM_OVERRIDES", "PRESETS", "TOOL_NAMES", "VALID_TYPES", "LayaTools", "ToolError",
           "batch_item_key_doc", "get_available_presets", "laya_decide", "laya_predict", "laya_predict_batch",
           "laya_predict_long", "laya_preset", "laya_route", "laya_route_batch", "laya_shortlist", "laya_status",
           "laya_tournament", "validate_batch_requests", "validate_budget", "validate_lang", "validate_lang_guess",
           "validate_min_confidence", "validate_model", "validate_preset", "validate_questions", "validate_state",
           "validate_task"]

TOOL_NAMES = ("laya_status", "laya_route", "laya_route_batch", "laya_predict", "laya_predict_batch",
              "laya_shortlist", "laya_tournament", "laya_preset", "laya_decide", "laya_predict_long")
PRESETS = {"guard": "guard_questions", "moderation": "moderation_questions", "triage": "triage_questions",
           "model_router": "router_questions", "email": "email_questions"}
DEFAULT_K = 20
DEFAULT_GROUP_SIZE = 16
MAX_LONG_CHOICE_OPTIONS = 255  # shortlist and tournament narrow long lists: the tournament-mode cap of laya serve
NO_ROUTER_REASON = "auto routing without router"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


def _is_remote(router: Any) -> bool:
    return bool(getattr(router, "is_remote", False))


def _runner(router: Any, agent: Any) -> Any:
    """The given router, else the process-wide one when no agent is given either."""
    if router is None and agent is None:
        from .runtime import shared_router

        return shared_router()
    return router


def _remote_refused(router: Any, tool: str) -> None:
    if _is_remote(router):
        raise ToolError("unsupported_remote", f"{tool} needs the checkpoint in this process; it is not available "
                                              f"through a remote laya serve ({router.base_url})")


def _explicit(model: str | None) -> dict:
    return {"model": model, "repo": None, "reason": "explicit model"}


def _decision_keys(decision: Any) -> dict:
    return {"model": decision.get("model"), "repo": decision.get("repo"), "reason": decision.get("reason")}


def _routed_device(router: Any, routing: dict) -> str | None:
    name = routing.get("model")
    return agent_device(router_agent(router, name)) if router is not None and name else None


def _with_device(out: dict, device: str | None) -> dict:
    if device is not None:
        out["device"] = device
    return out


def _set(**kwargs: Any) -> dict:
    return {k: v for k, v in kwargs.items() if v is not None}


def _call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run the runner: remote failures keep their code, a library ValueError is the caller's to fix, a
    checkpoint that cannot load is `models_not_ready`."""
    from ..structured import SchemaError
    try:
        return fn(*args, **kwargs)
    except ToolError:
        raise
    except RemoteError as e:
        raise ToolError(e.code, e.message) from None
    except SchemaError as e:
        raise ToolError("invalid_schema", str(e)) from None
    except (ValueError, TypeError) as e:
        text = str(e) or type(e).__name__
        code = "invalid_model" if text.startswith("unknown model") else \
            "invalid_questions" if text.startswith("question ") else "invalid_request"
        raise ToolError(code, text) from None
    except (OSError, ImportError) as e:
        raise ToolError("models_not_ready", f"the checkpoint could not be loaded ({type(e).__name__}: "
                                            f"{str(e).splitlines()[0][:300] if str(e) else ''})") from None


def _controls(model: Any, task: Any, lang: Any, lang_guess: Any, max_len: Any, head_max_len: Any,
              min_confidence: Any, router: Any) -> dict:
    name = validate_model(model, router)
    return {"model": name, "task": validate_task(task, name, router), "lang": validate_lang(lang),
            "lang_guess": validate_lang_guess(lang_guess), "max_len": validate_budget(max_len, "max_len"),
            "head_max_len": validate_budget(head_max_len, "head_max_len"),
            "min_confidence": validate_min_confidence(min_confidence)}


def _answer(state: dict, questions: dict, c: dict, router: Any, agent: Any) -> tuple[dict, dict, str | None]:
    """One predict on the agent or the router: (result, routing, device)."""
    budgets = _set(max_len=c["max_len"], head_max_len=c["head_max_len"], min_confidence=c["min_confidence"])
    if agent is not None and (c["model"] != AUTO or router is None):
        result = _call(agent.predict, state, questions, **_set(lang=c["lang"]), **budgets)
        routing = {"model": None, "repo": None, "reason": NO_ROUTER_REASON} if c["model"] == AUTO else \
            (result.get("routing") or _explicit(c["model"]))
        return result, dict(routing), agent_device(agent)
    model = None if c["model"] == AUTO else c["model"]
    result = _call(router.predict, state, questions, **_set(model=model, task=c["task"], lang=c["lang"],
                                                              lang_guess=c["lang_guess"]), **budgets)
    routing = dict(result.get("routing") or _explicit(model))
    return result, routing, _routed_device(router, routing)


def _local_agent(state: dict, questions: dict, c: dict, router: Any, agent: Any) -> tuple[Any, dict, str | None]:
    """The agent a shortlist/tournament/long call runs on, its routing and the language to pass."""
    if agent is not None and (c["model"] != AUTO or router is None):
        routing = {"model": None, "repo": None, "reason": NO_ROUTER_REASON} if c["model"] == AUTO else \
            _explicit(c["model"])
        return agent, routing, c["lang"]
    model = None if c["model"] == AUTO else c["model"]
    decision = _call(router.route, state, questions, model, c["task"], c["lang"], c["lang_guess"])
    loaded = _call(router.load, decision["model"])
    lang = c["lang"] if c["lang"] is not None else (decision.get("detection") or {}).get("language")
    return loaded, dict(decision), lang


def _package_versions() -> dict:
    from .. import __version__

    out = {}
    for name in ("laya", "torch", "transformers"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = __version__ if name == "laya" else None
    return out


# ---- status and routing --------------------------------------------------------------------------------

def _remote_status(router: Any) -> dict:
    out = {"mode": "remote", "base_url": router.base_url, "router_preload": False, "router_ready": True,
           "package_versions": _package_versions()}
    try:
        health = router.health()
    except RemoteError as e:
        return {**out, "server": None, "server_error": f"{e.code}: {e.message}", "loaded": []}
    out.update(server=health, loaded=list(health.get("loaded") or []))
    out.update({k: health[k] for k in ("device", "device_is_preference", "checkpoint_devices") if k in health})
    return out


def laya_status(*, router: Any = None, loaded: list | None = None, preload: bool = True) -> dict:
    """Devices, resident checkpoints and versions (remote: the server's /health). Loads nothing."""
    if _is_remote(router):
        return _remote_status(router)
    names = list(loaded) if loaded is not None else (list(router.agents()) if router is not None else [])
    devices = {n: d for n in names if (d := agent_device(router_agent(router, n))) is not None} \
        if router is not None else {}
    report = device_report()
    return {**report, "mode": "local", "device": next(iter(devices.values()), report["device"]),
            "device_is_preference": not devices, "checkpoint_devices": devices, "loaded": names,
            "router_preload": bool(preload), "router_ready": router is not None,
            "package_versions": _package_versions()}


def laya_route(state: Any, questions: Any, *, model: Any = None, task: Any = None, lang: Any = None,
               lang_guess: Any = None, router: Any = None) -> dict:
    """Which checkpoint would answer: `{model, repo, reason}`. Loads nothing."""
    validate_state(state)
    validate_questions(questions, None)
    router = _runner(router, None)
    name = validate_model(model, router)
    c = {"task": validate_task(task, name, router), "lang": validate_lang(lang), "lang_guess": validate_lang_guess(lang_guess)}
    decision = _call(router.route, state, questions, None if name == AUTO else name, c["task"], c["lang"],
                     c["lang_guess"])
    return _decision_keys(decision)


def _counts(models: list) -> dict:
    out: dict = {}
    for m in models:
        out[m] = out.get(m, 0) + 1
    return out


def laya_route_batch(requests: Any, hooks_timeout: Any = None, *, router: Any = None) -> dict:
    """Routing for several requests: `{decisions: [{model, repo, reason}], model_counts}`. Loads nothing."""
    timeout = validate_hooks_timeout(hooks_timeout)
    validate_batch_requests(requests, None, max_choice=None)
    router = _runner(router, None)
    checked = validate_batch_requests(requests, router, max_choice=None)
    items = [{k: v for k, v in r.items() if v is not None} for r in checked]
    decisions = [_decision_keys(d) for d in _call(router.route_batch, items, **_set(hooks_timeout=timeout))]
    return {"decisions": decisions, "model_counts": _counts([d["model"] for d in decisions])}


# ---- answering -----------------------------------------------------------------------------------------

def laya_predict(state: Any, questions: Any, model: Any = AUTO, *, task: Any = None, lang: Any = None,
                 lang_guess: Any = None, max_len: Any = None, head_max_len: Any = None, min_confidence: Any = None,
                 router: Any = None, agent: Any = None) -> dict:
    """Answer typed questions about a state: `{answers, routing, latency_ms[, device]}`."""
    started = time.perf_counter()
    validate_state(state)
    validate_questions(questions)
    router = _runner(router, agent)
    c = _controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence, router)
    result, routing, device = _answer(state, questions, c, router, agent)
    return _with_device({"answers": result["answers"], "routing": routing, "latency_ms": _ms(started)}, device)


def laya_predict_batch(requests: Any, batch_size: Any = None, hooks_timeout: Any = None, min_confidence: Any = None,
                       sort_by_length: Any = False, *, router: Any = None) -> dict:
    """Answer many requests in input order: `{requests, model_counts, total_latency_ms, per_request_latency_ms}`."""
    started = time.perf_counter()
    size = validate_positive(batch_size, "batch_size")
    timeout = validate_hooks_timeout(hooks_timeout)
    threshold = validate_min_confidence(min_confidence)
    if not isinstance(sort_by_length, bool):
        raise ToolError("invalid_request", f"sort_by_length must be true or false, got {sort_by_length!r}")
    validate_batch_requests(requests, None)
    router = _runner(router, None)
    checked = validate_batch_requests(requests, router)
    items = [{k: v for k, v in r.items() if v is not None} for r in checked]
    results = _call(router.predict_batch, items, **_set(batch_size=size, hooks_timeout=timeout,
                                                        min_confidence=threshold), sort_by_length=sort_by_length)
    out = []
    for item, result in zip(items, results):
        routing = dict(result.get("routing") or _explicit(item.get("model")))
        out.append(_with_device({"answers": result["answers"], "routing": routing},
                                _routed_device(router, routing)))
    total = _ms(started)
    return {"requests": out, "model_counts": _counts([r["routing"].get("model") for r in out]),
            "total_latency_ms": total, "per_request_latency_ms": round(total / len(out), 3)}


_EMBED_FNS: dict[int, tuple[Any, Any]] = {}


def _embed_fn(agent: Any, router: Any) -> Any:
    """One cached embedding function per resident agent; evicted agents (and their caches) are let go."""
    from ..shortlist import cached_embed_fn, embed_fn_from_agent

    resident = {id(a) for a in router.agents().values()} if router is not None else set()
    for key in [k for k, (a, _) in _EMBED_FNS.items() if k not in resident and a is not agent]:
        del _EMBED_FNS[key]
    held = _EMBED_FNS.get(id(agent))
    if held is None or held[0] is not agent:
        held = _EMBED_FNS[id(agent)] = (agent, cached_embed_fn(embed_fn_from_agent(agent)))
    return held[1]


def _order_dropped(out: dict, block: dict) -> dict:
    if any(isinstance(e, dict) and e.get("option_order_dropped") for e in block.values()):
        out["option_order_dropped"] = True
    return out


def laya_shortlist(state: Any, questions: Any, model: Any = AUTO, k: Any = None, *, task: Any = None,
                   lang: Any = None, lang_guess: Any = None, max_len: Any = None, head_max_len: Any = None,
                   min_confidence: Any = None, router: Any = None, agent: Any = None, embed_fn: Any = None) -> dict:
    """Narrow each long choice to its k options nearest the state, then answer:
    `{answers, routing, shortlist, latency_ms[, option_order_dropped][, device]}`."""
    from ..shortlist import predict_shortlist

    started = time.perf_counter()
    validate_state(state)
    validate_questions(questions, None)
    k = DEFAULT_K if k is None else validate_positive(k, "k")
    router = _runner(router, agent)
    _remote_refused(router, "laya_shortlist")
    c = _controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence, router)
    runner, routing, effective = _local_agent(state, questions, c, router, agent)
    embed = embed_fn if embed_fn is not None else _embed_fn(runner, router)
    kwargs = _set(lang=effective, max_len=c["max_len"], head_max_len=c["head_max_len"],
                  min_confidence=c["min_confidence"])
    result = _call(predict_shortlist, runner, state, questions, embed, k, **kwargs)
    out = {"answers": result["answers"], "routing": routing, "shortlist": result["shortlist"],
           "latency_ms": _ms(started)}
    return _with_device(_order_dropped(out, result["shortlist"]), agent_device(runner))


def laya_tournament(state: Any, questions: Any, model: Any = AUTO, group_size: Any = DEFAULT_GROUP_SIZE, *,
                    task: Any = None, lang: Any = None, lang_guess: Any = None, max_len: Any = None,
                    head_max_len: Any = None, min_confidence: Any = None, router: Any = None,
                    agent: Any = None) -> dict:
    """Narrow long choices in rounds of group_size: the tournament result plus `routing`, `latency_ms`."""
    from ..shortlist import predict_tournament

    started = time.perf_counter()
    validate_state(state)
    validate_questions(questions, MAX_LONG_CHOICE_OPTIONS)
    group_size = validate_positive(DEFAULT_GROUP_SIZE if group_size is None else group_size, "group_size", 2)
    router = _runner(router, agent)
    _remote_refused(router, "laya_tournament")
    c = _controls(model, task, lang, lang_guess, max_len, head_max_len, min_confidence, router)
    runner, routing, effective = _local_agent(state, questions, c, router, agent)
    kwargs = _set(lang=effective, max_len=c["max_len"], head_max_len=c["head_max_len"],
                  min_confidence=c["min_confidence"])
    try:
        result = _call(predict_tournament, runner, state, questions, group_size, **kwargs)
    except KeyError as e:  # a round answered with a label it was not asked about
        raise ToolError("internal_error", f"a tournament round answered outside its labels ({e})") from None
    out = {**result, "routing": routing, "latency_ms": _ms(started)}
    return _with_device(_order_dropped(out, result.get("tournament") or {}), agent_device(runner))


def laya_predict_long(state: Any, questions: Any, model: Any = AUTO, *, window: Any = None, stride: Any = None,
                      task: Any = None, lang: Any = None, router: Any = None, agent: Any = None) -> dict:
    """Answer about a state longer than one window: `{answers, routing, windows, latency_ms[, device]}`."""
    started = time.perf_counter()
    validate_state(state)
    validate_questions(questions)
    sizes = _set(window=validate_positive(window, "window"), stride=validate_positive(stride, "stride"))
    router = _runner(router, agent)
    _remote_refused(router, "laya_predict_long")
    c = _controls(model, task, lang, None, None, None, None, router)
    runner, routing, effective = _local_agent(state, questions, c, router, agent)
    if not callable(getattr(runner, "predict_long", None)):
        raise ToolError("invalid_request", "this runner has no predict_long")
    result = _call(runner.predict_long, state, questions, **_set(lang=effective), **sizes)
    out = {"answers": result["answers"], "routing": routing,
           "windows": int((result.get("usage") or {}).get("windows", 1)), "latency_ms": _ms(started)}
    return _with_device(out, agent_device(runner))


# ---- presets and structured decisions ------------------------------------------------------------------

def _preset_questions(name: str) -> dict:
    from .. import presets

    return getattr(presets, PRESETS[name])()


def get_available_presets() -> dict:
    """`{name: {"questions", "aliases"?, "n_questions", "state_field"?}}` for every preset."""
    from ..presets import state_field

    aliases = {"model_router": ["router"]}
    out = {}
    for name in PRESETS:
        questions = _preset_questions(name)
        entry: dict = {"questions": list(questions)}
        if name in aliases:
            entry["aliases"] = aliases[name]
        entry["n_questions"] = len(questions)
        field = state_field(questions)
        if field is not None:
            entry["state_field"] = field
        out[name] = entry
    return out


def _rekeyed(state: dict, field: str | None) -> dict:
    """A one-field state holding a string is re-keyed to the field the preset reads."""
    if field is None or len(state) != 1 or field in state:
        return state
    (value,) = state.values()
    return {field: value} if isinstance(value, str) else state


def laya_preset(preset: Any, state: Any, *, task: Any = None, lang: Any = None, lang_guess: Any = None,
                max_len: Any = None, head_max_len: Any = None, min_confidence: Any = None, router: Any = None,
                agent: Any = None, preset_builder: Callable | None = None) -> dict:
    """Run a ready-made question set (the router picks the checkpoint): laya_predict's result plus `preset`."""
    from ..presets import state_field

    started = time.perf_counter()
    name = validate_preset(preset, PRESETS)
    validate_state(state)
    questions = preset_builder(name) if preset_builder is not None else _preset_questions(name)
    validate_questions(questions)
    router = _runner(router, agent)
    state = _rekeyed(state, state_field(questions))
    c = _controls(AUTO, task, lang, lang_guess, max_len, head_max_len, min_confidence, router)
    result, routing, device = _answer(state, questions, c, router, agent)
    out = {"answers": result["answers"], "routing": routing, "preset": name, "latency_ms": _ms(started)}
    return _with_device(out, device)


def laya_decide(state: Any, schema: Any, model: Any = AUTO, *, min_confidence: Any = None, router: Any = None,
                agent: Any = None) -> dict:
    """Fill a JSON schema from the state: `{values, confidence, probabilities, routing, latency_ms[, usage]
    [, device]}` (a field below min_confidence is null)."""
    from ..structured import decide

    started = time.perf_counter()
    validate_state(state)
    if not isinstance(schema, dict):
        raise ToolError("invalid_schema", f"schema must be a JSON schema object, got {type(schema).__name__}")
    router = _runner(router, agent)
    name = validate_model(model, router)
    threshold = validate_min_confidence(min_confidence)
    use_agent = agent is not None and (name != AUTO or router is None)
    runner = agent if use_agent else router
    pinned = _set(model=None if use_agent or name == AUTO else name)
    details = _call(decide, runner, state, schema, return_details=True, min_confidence=threshold, **pinned)
    routing = dict(details.routing) if details.routing else \
        ({"model": None, "repo": None, "reason": NO_ROUTER_REASON} if name == AUTO else _explicit(name))
    out = {"values": details.values, "confidence": details.confidence, "probabilities": details.probabilities,
           "routing": routing, "latency_ms": _ms(started)}
    if details.usage is not None:
        out["usage"] = details.usage
    return _with_device(out, agent_device(agent) if use_agent else _routed_device(router, routing))


from .laya_tools import LayaTools  # noqa: E402 - the class form is built on the functions above
