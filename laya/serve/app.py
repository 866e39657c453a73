"""The FastAPI app: System One routes (Jev-compatible), health, models and metrics over one dynamic batcher.

Order of work for a decision request: bearer key (401) -> admission (503 + Retry-After) -> size- and
time-capped body read (413 / 408) -> JSON and shape (400) -> limits (413) -> the library's validation and
routing (422) -> queue room (429 + Retry-After) -> the batcher -> response. Nothing that fails before the
batcher reaches it; a failure inside it is 422 for the library's ValueError/TypeError and a bare 500 for
anything else (the traceback goes to the server log only).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import threading
import time
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import Route

from .. import hooks as hooks_mod
from ..registry import DEFAULT_MODELS
from .auth import bearer_ok
from .batcher import Batcher, Item
from .config import ServeConfig
from .jev import project
from .metrics import Metrics
from .schema import (MAX_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS_TOURNAMENT, ApiError, Decision, parse_batch, parse_json,
                     parse_single)

log = logging.getLogger("laya.serve")
SINGLE, BATCH = "/v1/systemone", "/v1/systemone/batch"
# Young-generation collections every 20k net allocations instead of 700 (gc_freeze on): a request allocates a few
# thousand tracked objects, most freed by reference counting long before a collection would look at them.
GC_THRESHOLD = (20000, 20, 20)
INLINE_ROUTE_CHARS = 4096  # states up to this many characters are routed on the event loop (language detection
# on 4k characters takes well under a millisecond; longer ones go to a thread so they never block the loop)
_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+: a deadline without wrapping the read in a new task


def build_router(cfg: ServeConfig) -> Any:
    from ..router import Router

    return Router(models=dict(cfg.extra_models), device=cfg.device, max_loaded=cfg.max_loaded,
                  default=cfg.default_model, auto_task_detection=cfg.auto_task,
                  agent_kwargs={"backend": cfg.backend} if cfg.backend else None)


def served_names(cfg: ServeConfig, router: Any) -> list[str]:
    """The checkpoints this server answers with: `models` (LAYA_MODELS) when given, else the custom ones named by
    --model/LAYA_EXTRA_MODELS when any are, else every registered one."""
    names = cfg.models or tuple(cfg.extra_models) or tuple(router.registered)
    try:
        return list(dict.fromkeys(router.resolve(n) for n in names))
    except ValueError as e:
        raise ValueError(f"laya serve: LAYA_MODELS/--models: {e}") from None


def with_x_tournament(result: dict) -> dict:
    """The library's `tournament` block moved onto each narrowed answer as `x_tournament`."""
    block = result.get("tournament")
    out = {k: v for k, v in result.items() if k != "tournament"}
    if block:
        out["answers"] = {qid: {**a, "x_tournament": block[qid]} if qid in block else a
                          for qid, a in result["answers"].items()}
    return out


class Server:
    """State shared by the routes: router, batcher, metrics, admission count."""

    def __init__(self, cfg: ServeConfig, router: Any = None):
        self.cfg = cfg
        self.router = router if router is not None else build_router(cfg)
        self.served = served_names(cfg, self.router)
        # A server with no shipped (Hub) checkpoint among the ones it serves never reaches for the Hub: requests
        # without `model` go to its default (LAYA_DEFAULT_MODEL when served, else the first served name), and a
        # request naming an unserved checkpoint is refused. Otherwise routing is the Router's, lazy loads and all.
        custom = {self.router.resolve(n) for n in cfg.extra_models}
        self.custom_only = not any(n in DEFAULT_MODELS and n not in custom for n in self.served)
        default = self.router.default
        self.auto_default = default if default in self.served else self.served[0]
        self.max_choice_options = MAX_CHOICE_OPTIONS_TOURNAMENT if cfg.tournament_group else MAX_CHOICE_OPTIONS
        self.metrics = Metrics()
        self.batcher = Batcher(self._infer, window_ms=cfg.batch_window_ms, max_rows=cfg.max_batch_rows,
                               max_batch_tokens=cfg.max_batch_tokens, batching=cfg.batching,
                               on_forward=self._on_forward)
        self.admitted = 0
        self.last_request = time.monotonic()
        self._gc_lock = threading.Lock()
        self._gc_names: frozenset | None = None  # the checkpoints loaded when the heap was last frozen
        self._gc_saved: tuple | None = None  # the thresholds to restore on stop
        self._children: dict = {}  # labelled metric children, looked up once

    def child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        handle = self._children.get(key)
        if handle is None:
            handle = self._children[key] = self.metrics.child(metric, *labels)
        return handle

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Thread settings, preload, worker start (blocking: run it off the event loop)."""
        if self.cfg.threads:
            import torch

            torch.set_num_threads(self.cfg.threads)
        if self.custom_only and self.auto_default != self.router.default:
            log.info("laya serve: serving %s only; requests without 'model' go to %r", ", ".join(self.served),
                     self.auto_default)
        if self.cfg.preload:
            self.router.preload(self.served)
        self.settle_gc()
        self.batcher.start()

    def stop(self) -> None:
        self.batcher.stop()
        with self._gc_lock:  # the thresholds go back; frozen objects stay frozen (gc.unfreeze() releases them)
            if self._gc_saved is not None:
                gc.set_threshold(*self._gc_saved)
                self._gc_saved = self._gc_names = None

    def settle_gc(self) -> None:
        """With gc_freeze: collect what loading left behind, then move every survivor (modules, weights, tokenizer
        and registry tables) to the permanent generation, and collect the young generation less often. A full
        collection over the ~400k objects a loaded server holds took 90-300 ms with the GIL held, stalling every
        request in flight; frozen, it scans only what requests allocated. Runs again when the loaded set changes:
        after a lazy load it collects and freezes the newcomer; after an eviction or an idle unload it unfreezes
        everything first, so the unloaded checkpoint's objects can be freed."""
        if not self.cfg.gc_freeze:
            return
        with self._gc_lock:
            names = frozenset(self.router.loaded)
            if self._gc_saved is None:
                self._gc_saved = gc.get_threshold()
                gc.set_threshold(*GC_THRESHOLD)
            if self._gc_names is not None and not names >= self._gc_names:
                gc.unfreeze()  # something was unloaded: its frozen objects must become collectable again
            gc.collect()
            gc.freeze()
            self._gc_names = names

    async def unload_when_idle(self) -> None:
        limit = self.cfg.idle_unload_seconds
        while True:
            await asyncio.sleep(min(5.0, limit))
            if self.router.loaded and self.admitted == 0 and time.monotonic() - self.last_request >= limit:
                log.info("laya serve: idle for %.0f s; unloading %s", limit, ", ".join(self.router.loaded))
                self.router.unload()
                self.settle_gc()

    # ---- inference worker side ---------------------------------------------------------------------

    def _infer(self, name: str, states: list, questions: dict, options: dict) -> list:
        agent = self.router.load(name)
        if self._gc_saved is not None and frozenset(self.router.loaded) != self._gc_names:
            self.settle_gc()  # a checkpoint was loaded or evicted since the heap was frozen
        if self.cfg.tournament_group:
            from ..shortlist import predict_tournament_batch

            results = [with_x_tournament(r) for r in
                       predict_tournament_batch(agent, states, questions, self.cfg.tournament_group, **options)]
        else:
            results = agent.predict_batch(states, questions, **options)
        tokens = sum(r.get("usage", {}).get("input_tokens", 0) for r in results)
        self.child(self.metrics.tokens, name).inc(tokens)
        return results

    def _on_forward(self, rows: int, items: int, seconds: float) -> None:
        self.child(self.metrics.batch_rows).observe(rows)
        self.child(self.metrics.batch_items).observe(items)
        self.child(self.metrics.inference).observe(seconds)

    # ---- request side ------------------------------------------------------------------------------

    def authorized(self, request: Request) -> bool:
        return bearer_ok(request.headers.get("authorization"), self.cfg.api_key)

    @contextlib.contextmanager
    def admission(self):
        if self.admitted >= self.cfg.max_concurrent:
            raise ApiError(503, f"the server is at its limit of {self.cfg.max_concurrent} concurrent requests; "
                                "retry shortly", {"Retry-After": "1"})
        self.admitted += 1
        inflight = self.child(self.metrics.inflight)
        inflight.set(self.admitted)
        try:
            yield
        finally:
            self.admitted -= 1
            inflight.set(self.admitted)

    async def read_body(self, request: Request) -> bytes:
        limit = self.cfg.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise ApiError(400, f"Content-Length {declared!r} is not a number") from None
            if size > limit:
                raise ApiError(413, f"the body is {size} bytes; the limit is {limit} bytes",
                               {"Connection": "close"})

        async def read() -> bytes:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, f"the body is over the limit of {limit} bytes", {"Connection": "close"})
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            if _timeout is not None:
                async with _timeout(self.cfg.body_read_timeout):
                    return await read()
            return await asyncio.wait_for(read(), self.cfg.body_read_timeout)
        except asyncio.TimeoutError:
            raise ApiError(408, f"the body did not arrive within {self.cfg.body_read_timeout:g} s; send it at once",
                           {"Connection": "close"}) from None

    def route(self, d: Decision) -> Any:
        """The router's decision, kept to the served checkpoints on a server of custom checkpoints only."""
        decision = self.router.route(d.state, d.questions, d.model, d.task, d.lang, d.lang_guess)
        if not self.custom_only or decision.model in self.served:
            return decision
        if d.model is not None or (d.task is not None and d.task.strip()):
            raise ValueError(f"model {decision.model!r} is not served here; this server answers with "
                             f"{', '.join(self.served)} (or send no 'model' to use {self.auto_default!r})")
        chosen = self.router.route(d.state, d.questions, self.auto_default)
        reason = (f"served default {self.auto_default!r} (routing chose {decision.model!r}, which this server does "
                  f"not serve: {decision.reason})")
        return {**chosen, "reason": reason, "detection": decision.detection, "workflow": decision.workflow}

    def items(self, decisions: list[Decision]) -> list[tuple[Item, dict]]:
        """Route each decision (torch-free) and build its batch item; 422 for what the router refuses."""
        out = []
        for d in decisions:
            try:
                decision = self.route(d)
            except (ValueError, TypeError) as e:
                raise ApiError(422, str(e)) from None
            lang = d.lang if d.lang is not None else (decision.get("detection") or {}).get("language")
            options = {"lang": lang, "max_len": d.max_len, "head_max_len": d.head_max_len,
                       "min_confidence": d.min_confidence}
            if d.batch_size is not None:
                options["batch_size"] = d.batch_size
            if d.sort_by_length:
                options["sort_by_length"] = True
            key = (decision["model"], d.questions_key or json.dumps(d.questions, ensure_ascii=False), d.max_len,
                   d.head_max_len, lang, json.dumps(d.min_confidence, sort_keys=True), d.batch_size,
                   d.sort_by_length)
            item = Item(key, decision["model"], d.state, d.questions, d.n_questions, d.row_width, options)
            out.append((item, dict(decision)))
        return out

    def route_inline(self, decisions: list[Decision]) -> bool:
        """Whether routing is cheap enough for the event loop: no on_route hook (those may block) and either an
        explicit model on every item or short states. A thread hop costs the loop more than such routing does."""
        hooks = (*hooks_mod.default_hooks(), *getattr(self.router, "hooks", ()))
        if any(callable(getattr(h, "on_route", None)) for h in hooks):
            return False
        return all(d.model is not None for d in decisions) or sum(d.chars for d in decisions) <= INLINE_ROUTE_CHARS

    async def decide(self, decisions: list[Decision]) -> tuple[list[dict], dict]:
        """Route, queue and await; the caller's 'arriving' slot is handed back once queued (or refused)."""
        try:
            if self.route_inline(decisions):
                routed = self.items(decisions)
            else:
                routed = await anyio.to_thread.run_sync(self.items, decisions)
            rows = sum(item.rows for item, _ in routed)
            if self.batcher.queued_rows + rows > self.cfg.max_queue_rows:
                raise ApiError(429, f"{self.batcher.queued_rows} question rows are already waiting (limit "
                                    f"{self.cfg.max_queue_rows}); retry shortly", {"Retry-After": "1"})
            futures = self.batcher.submit([item for item, _ in routed])
        finally:
            self.batcher.arriving(-1)
        self.child(self.metrics.queue_rows).set(self.batcher.queued_rows)
        try:
            if len(futures) == 1:
                outcomes = [await asyncio.wrap_future(futures[0])]
            else:
                outcomes = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        except (ValueError, TypeError) as e:
            raise ApiError(422, str(e)) from None
        except Exception:
            log.exception("laya serve: inference failed")
            raise ApiError(500, "inference failed") from None
        results, timings = [], {}
        for (result, timing), (_, routing) in zip(outcomes, routed):
            results.append({**result, "routing": routing})
            timings[timing.forward_id] = timing
        inference = sum(t.inference_ms for t in timings.values())
        queue = max(t.queue_ms for t in timings.values())
        return results, {"inference": inference, "queue": queue}

    async def answer(self, request: Request, route: str) -> Response:
        started = time.perf_counter()
        self.last_request = time.monotonic()
        status = 500
        try:
            if not self.authorized(request):
                raise ApiError(401, "missing or wrong API key; send 'Authorization: Bearer <key>'",
                               {"WWW-Authenticate": "Bearer"})
            with self.admission():
                self.batcher.arriving(1)
                arriving = True
                try:
                    data = parse_json(await self.read_body(request))
                    parse = parse_single if route == SINGLE else parse_batch
                    parsed = parse(data, self.router.registered, self.router.resolve, self.cfg.max_token_budget,
                                   self.max_choice_options)
                    decisions = [parsed] if route == SINGLE else parsed
                    arriving = False  # decide() hands the slot over when it queues
                    results, times = await self.decide(decisions)
                finally:
                    if arriving:
                        self.batcher.arriving(-1)
            strict = self.cfg.jev_strict
            if route == SINGLE:
                body = project(results[0], strict)
            else:
                total = {k: sum(r["usage"].get(k, 0) for r in results) for k in ("input_tokens", "output_tokens")}
                body = {"results": [project(r, strict) for r in results], "total_usage": total}
            total_ms = (time.perf_counter() - started) * 1000.0
            headers = {"Server-Timing": f"inference;dur={times['inference']:.2f}, queue;dur={times['queue']:.2f}, "
                                        f"total;dur={total_ms:.2f}",
                       "X-Inference-Time-Ms": f"{times['inference']:.2f}"}
            status = 200
            return JSONResponse(body, headers=headers)
        except ApiError as e:
            status = e.status
            return JSONResponse({"detail": e.detail}, status_code=e.status, headers=e.headers)
        except Exception:  # noqa: BLE001 - never leak internals
            log.exception("laya serve: request failed")
            return JSONResponse({"detail": "internal server error"}, status_code=500)
        finally:
            self.child(self.metrics.requests, route, str(status)).inc()
            self.child(self.metrics.latency, route).observe(time.perf_counter() - started)
            self.child(self.metrics.queue_rows).set(self.batcher.queued_rows)

    def health(self, authorized: bool) -> dict:
        if not authorized:
            return {"status": "ok"}
        agents = self.router.agents()
        loaded = list(agents)
        devices = {name: str(getattr(a, "device", "cpu")) for name, a in agents.items()}
        preferred = self.cfg.device or getattr(self.router, "device", None)
        out = {"status": "ok", "loaded": loaded, "revisions": self.router.loaded_revisions,
               "device": next(iter(devices.values())) if devices else str(preferred or "auto"),
               "device_is_preference": not devices, "checkpoint_devices": devices,
               "backends": {name: getattr(a, "backend", None) for name, a in agents.items()},
               "cpu_fallbacks": {name: {"count": int(getattr(a, "cpu_fallback_count", 0)),
                                        "last_reason": getattr(a, "last_fallback_reason", None)}
                                 for name, a in agents.items()},
               "batching": {"enabled": self.cfg.batching, "window_ms": self.cfg.batch_window_ms,
                            "max_batch_rows": self.cfg.max_batch_rows},
               "queue_rows": self.batcher.queued_rows, "inflight": self.admitted}
        if self.cfg.idle_unload_seconds > 0:
            out["idle_unload_seconds"] = self.cfg.idle_unload_seconds
            out["idle_seconds"] = round(time.monotonic() - self.last_request, 1)
        return out

    def models(self) -> dict:
        """The checkpoints a request may name: the served ones on a custom-only server, else every registered one."""
        loaded = set(self.router.agents())
        names = self.served if self.custom_only else self.router.registered
        default = self.auto_default if self.custom_only else self.router.default
        data = [{"id": name, "object": "model", "loaded": name in loaded, "default": name == default,
                 "description": self.router.describe(name)} for name in names]
        return {"object": "list", "data": data}


def create_app(cfg: ServeConfig | None = None, router: Any = None) -> FastAPI:
    """The ASGI app. `router` (a laya Router) replaces the one built from `cfg` (tests, embedding)."""
    cfg = cfg or ServeConfig()
    server = Server(cfg, router)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await anyio.to_thread.run_sync(server.start)
        idle = asyncio.create_task(server.unload_when_idle()) if cfg.idle_unload_seconds > 0 else None
        try:
            yield
        finally:
            if idle is not None:
                idle.cancel()
            await anyio.to_thread.run_sync(server.stop)

    hidden = bool(cfg.api_key)  # with a key, the schema pages are not served
    app = FastAPI(title="laya serve", lifespan=lifespan, root_path=cfg.root_path,
                  docs_url=None if hidden else "/docs", redoc_url=None if hidden else "/redoc",
                  openapi_url=None if hidden else "/openapi.json")
    app.state.server = server

    def refused(request: Request) -> Response | None:
        if server.authorized(request):
            return None
        return JSONResponse({"detail": "missing or wrong API key; send 'Authorization: Bearer <key>'"},
                            status_code=401, headers={"WWW-Authenticate": "Bearer"})

    async def systemone(request: Request) -> Response:
        return await server.answer(request, SINGLE)

    async def systemone_batch(request: Request) -> Response:
        return await server.answer(request, BATCH)

    # The decision routes read their own body, so they are plain Starlette routes placed first: FastAPI's
    # per-request dependency solving and query parsing would only add time. The FastAPI routes below are
    # never reached; they keep both routes in /openapi.json and /docs.
    app.router.routes[:0] = [Route(SINGLE, systemone, methods=["POST"]),
                             Route(BATCH, systemone_batch, methods=["POST"])]
    app.post(SINGLE)(systemone)
    app.post(BATCH)(systemone_batch)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        return refused(request) or JSONResponse(server.models())

    @app.get("/health")
    async def health(request: Request) -> Response:
        return JSONResponse(server.health(server.authorized(request)))

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        body, content_type = server.metrics.render()
        return Response(body, media_type=content_type)

    return app
