"""The FastAPI app: System One routes (Jev-compatible), health, models and metrics over one dynamic batcher.

Order of work for a decision request: bearer key (401) -> admission (503 + Retry-After) -> Content-Encoding
(415) -> size- and time-capped body read (413 / 408) -> JSON and shape (400) -> limits (413) -> the library's
validation and routing (422) -> queue room (503 + Retry-After) -> the batcher -> response (499, counted apart,
when the client left first; its queued work is dropped). Nothing that fails before the
batcher reaches it; a failure inside it is 422 for the library's ValueError/TypeError and a bare 500 for
anything else (the traceback goes to the server log only). Every status and text is in `errors.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import replace
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from .. import hooks as hooks_mod
from .. import stage_clock
from ..confidence import apply_confidence_gate
from ..registry import DEFAULT_MODELS
from . import injected
from .auth import bearer_ok
from .batcher import Batcher, Item
from .body import may_hold_surrogate, parse_json
from .config import (CPU_BATCH_ROWS, GPU_BATCH_ROWS, MAIN_ONLY, ROUTER_ONLY, ServeConfig, SettingError, from_env,
                     request_settings)
from .engine import EngineProcess, EngineRouter, engine_wanted
from .errors import CLIENT_CLOSED, ApiError, fail, library
from .gc_policy import GC_THRESHOLD, FrozenHeap  # noqa: F401 - GC_THRESHOLD re-exported
from .health import (PublicRepo, description, health, known_names, missing_local_sources, report_failure,
                     resident_agents, resident_names)
from .jev import project
from .limits import LIVENESS_ONLY, MAX_CHOICE_OPTIONS, MAX_TOURNAMENT_CHOICE_OPTIONS
from .metrics import STAGES, Metrics
from .schema import Decision, Limits, parse_batch, parse_single

log = logging.getLogger("laya.serve")
SINGLE, BATCH = "/v1/systemone", "/v1/systemone/batch"
IDLE_UNLOADING = "idle unloading"  # its key in Server.failing (no router attribute has that name)
INLINE_ROUTE_CHARS = 4096  # states up to this many characters are routed on the event loop (language detection
# on 4k characters takes well under a millisecond; longer ones go to a thread so they never block the loop)
_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+: a deadline without wrapping the read in a new task


def build_router(cfg: ServeConfig) -> Any:
    """The Router of a `ServeConfig` (the `laya serve` flags); `laya.serve.build_router()` reads the env."""
    from ..router import Router

    if cfg.backend:
        from ..backends import normalise

        normalise(cfg.backend)  # a misspelt --backend is refused now, not on the first request of --no-preload
    agent_kwargs = {"backend": cfg.backend} if cfg.backend else {}
    if cfg.batch_invariant:
        agent_kwargs["batch_invariant"] = True
    return Router(models=dict(cfg.extra_models), device=cfg.device, max_loaded=cfg.max_loaded,
                  default=cfg.default_model, auto_task_detection=cfg.auto_task, agent_kwargs=agent_kwargs or None)


def served_names(cfg: ServeConfig, router: Any) -> list[str]:
    """The checkpoints this server answers with: `models` (LAYA_MODELS) when given, else the custom ones named by
    --model/LAYA_EXTRA_MODELS when any are, else every registered one."""
    names = cfg.models or tuple(cfg.extra_models) or tuple(known_names(router))
    try:
        return list(dict.fromkeys(router.resolve(n) for n in names))
    except ValueError as e:
        raise ValueError(f"laya serve: LAYA_MODELS/--models: {e}") from None


def with_x_tournament(result: dict) -> dict:
    """The library's `tournament` block moved onto each narrowed answer as `x_tournament` (finalists, rounds and
    option_order_dropped when it was)."""
    block = result.get("tournament")
    out = {k: v for k, v in result.items() if k != "tournament"}
    if block:
        out["answers"] = {qid: {**a, "x_tournament": {k: v for k, v in block[qid].items() if k != "options"}}
                          if qid in block else a for qid, a in result["answers"].items()}
    return out


def run_forward(router: Any, heap: FrozenHeap, cfg: ServeConfig, name: str, states: list, questions: dict,
                options: dict) -> list:
    """One batcher forward on `router`'s agent for `name` (in the server, or in its engine process)."""
    agent = router.load(name)
    fast = getattr(agent, "_fast", None)
    if cfg.batching and fast is not None:  # a forward's company is already the clock's choice here
        fast.split_while_building = True
    if heap.stale(router.loaded):
        heap.settle(router.loaded)  # a checkpoint was loaded or evicted since the heap was frozen
    options = dict(options)
    group = options.pop("tournament_group", 0)
    if group:
        from ..shortlist import predict_tournament_batch

        results = [with_x_tournament(r) for r in predict_tournament_batch(agent, states, questions, group,
                                                                          **options)]
    else:
        results = _agent_batch(agent, states, questions, options)
    apply_confidence_gate(results, options.get("min_confidence"))  # whatever the agent did with it
    return results


def _agent_batch(agent: Any, states: list, questions: dict, options: dict) -> list:
    """agent.predict_batch as Router.predict_batch calls it: unset budgets not passed, an older agent's
    rejected optional keyword (lang, sort_by_length, min_confidence) dropped."""
    from ..router.calls import call_agent

    kwargs = {k: v for k, v in options.items() if v is not None or k == "lang"}
    results = list(call_agent(agent.predict_batch, (states, questions), kwargs))
    if len(results) != len(states):
        raise RuntimeError(f"the agent's predict_batch returned {len(results)} results for {len(states)} states")
    return results


async def client_gone(request: Request) -> None:
    """Returns once the client has disconnected (the body has been read, so only that message can come)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Server:
    """State shared by the routes: router, batcher, metrics, admission count."""

    def __init__(self, cfg: ServeConfig, router: Any = None, live_env: bool = False):
        self.cfg, self.live_env = cfg, live_env  # live_env: LAYA_* per-request variables are read on each request
        own = router is None  # built from cfg here, so an engine process can build the same one
        self.router = router if router is not None else build_router(cfg)
        self.batched = injected.batchable(self.router)
        self.public_repo = PublicRepo()
        self.failing: set[str] = set()  # router reads and idle unloading failing now (`report_failure`)
        self.served = (served_names(cfg, self.router) if self.batched
                       else resident_names(self.router, self.failing))
        self.custom_only, self.auto_default = False, getattr(self.router, "default", None)
        if self.batched:
            self._check_sources()
            # A server with no shipped (Hub) checkpoint among the ones it serves never reaches for the Hub:
            # requests without `model` go to its default (LAYA_DEFAULT_MODEL when served, else the first served
            # name), and a request naming an unserved checkpoint is refused.
            custom = {self.router.resolve(n) for n in cfg.extra_models}
            self.custom_only = not any(n in DEFAULT_MODELS and n not in custom for n in self.served)
            self.auto_default = self.auto_default if self.auto_default in self.served else self.served[0]
        self.max_choice_options = MAX_TOURNAMENT_CHOICE_OPTIONS if cfg.tournament_group else MAX_CHOICE_OPTIONS
        self.metrics = Metrics()
        self.stage_metrics = [self.metrics.child(self.metrics.stages, stage) for stage in STAGES]
        self.replica: str | None = None  # set on a Ray replica: each answer names it in X-Laya-Replica
        self.engine: EngineProcess | None = None
        if own and self.batched and engine_wanted(cfg):
            self.engine = EngineProcess(cfg)
            self.router = EngineRouter(self.router, self.engine)
        rows = cfg.max_batch_rows or GPU_BATCH_ROWS  # unset: start() picks the device's default
        self.batcher = Batcher(self._infer, window_ms=cfg.batch_window_ms, max_rows=rows,
                               max_batch_tokens=cfg.max_batch_tokens, batching=cfg.batching,
                               on_forward=self._on_forward)
        self.heap = FrozenHeap(cfg.gc_freeze)
        self.admitted = 0
        self.reads = 0  # bodies being read outside an admission slot (max_body_reads > 0)
        self.started = False
        self.last_request = time.monotonic()
        self._children: dict = {}  # labelled metric children, looked up once

    def _check_sources(self) -> None:
        """Fail at start, naming them, when configured local checkpoints are not on disk (--no-preload would
        otherwise start and answer every request with a 500)."""
        served = set(self.served)
        sources = {n: s for n, s in self.cfg.extra_models.items() if self.router.resolve(n) in served}
        missing = missing_local_sources(sources)
        if missing:
            raise ValueError(f"laya serve: no checkpoint at {'; '.join(missing)}; fix the path in --model or "
                             "LAYA_EXTRA_MODELS (a local checkpoint directory or a Hub id)")

    def child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        handle = self._children.get(key)
        if handle is None:
            handle = self._children[key] = self.metrics.child(metric, *labels)
        return handle

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Thread settings, preload, worker start (blocking: run it off the event loop); once only, so `laya serve`
        can run it before uvicorn and report a failure in one line."""
        if self.started:
            return
        self.started = True
        if self.cfg.threads:
            import torch

            torch.set_num_threads(self.cfg.threads)
        if not self.batched:
            return
        if self.engine is not None:
            self.engine.start()
        if self.cfg.preload:
            self.router.preload(self.served)
        if self.custom_only and self.auto_default != self.router.default:
            log.info("laya serve: serving %s only; requests without 'model' go to %r", ", ".join(self.served),
                     self.auto_default)
        if self.cfg.max_batch_rows is None:
            self.batcher.max_rows = CPU_BATCH_ROWS if self.on_cpu() else GPU_BATCH_ROWS
        self.heap.settle(self.router.loaded)
        self.batcher.start()

    def on_cpu(self) -> bool:
        """Whether the served checkpoints run on the CPU: the resident ones' devices, else the device setting."""
        from ..mcp.device import agent_device, resolve_device

        agents = resident_agents(self.router, self.failing)
        devices = {agent_device(a) for a in agents.values()} - {None}
        if not devices:
            devices = {str(resolve_device(self.cfg.device)).split(":")[0]}
        return devices == {"cpu"}

    def stop(self) -> None:
        self.batcher.stop()
        if self.engine is not None:
            self.engine.close()
        self.heap.restore()

    def settle_gc(self) -> None:
        self.heap.settle(self.router.loaded)

    async def unload_when_idle(self) -> None:
        limit = self.cfg.idle_unload_seconds
        while True:
            await asyncio.sleep(min(5.0, max(limit, 0.1)))  # (a tiny limit must not spin the event loop)
            try:
                self._unload_if_idle(limit)
                self.failing.discard(IDLE_UNLOADING)
            except Exception:  # noqa: BLE001 - an injected router's failure must not end idle unloading for good
                report_failure(self.failing, IDLE_UNLOADING, "laya serve: idle unloading failed; trying again later")

    def _unload_if_idle(self, limit: float) -> None:
        # an injected router may offer `loaded` as a method, or no unload
        loaded = resident_names(self.router, self.failing)
        unload = getattr(self.router, "unload", None)
        if loaded and callable(unload) and self.admitted == 0 and time.monotonic() - self.last_request >= limit:
            log.info("laya serve: idle for %.0f s; unloading %s", limit, ", ".join(map(str, loaded)))
            unload()
            if self.batched:
                self.settle_gc()

    # ---- inference worker side ---------------------------------------------------------------------

    def _infer(self, name: str, states: list, questions: dict, options: dict) -> list:
        if self.engine is None:
            results = run_forward(self.router, self.heap, self.cfg, name, states, questions, options)
        else:
            results, prep, forward = self.engine.infer(name, states, questions, options)
            clock = stage_clock.current()  # the batcher's: the child's stages, the pipe counted as decode
            clock.prep += prep
            clock.forward += forward
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
            raise fail("busy")
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
        encoding = request.headers.get("content-encoding")
        if encoding is not None and encoding.strip().lower() not in ("", "identity"):
            raise fail("unsupported_encoding", value=encoding)
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise fail("bad_content_length", value=declared) from None
            if size > limit:
                raise fail("body_too_large")

        async def read() -> bytes:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise fail("body_too_large")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            if _timeout is not None:
                async with _timeout(self.cfg.body_read_timeout):
                    return await read()
            return await asyncio.wait_for(read(), self.cfg.body_read_timeout)
        except asyncio.TimeoutError:
            raise fail("read_timeout") from None

    def unknown_model(self, value: str, router_text: str) -> str:
        """The unknown-model text for a path or repo a client named: the router's (R-RT-8), except that `laya serve
        --model ...` (custom checkpoints only) names just the ones it serves."""
        if not self.custom_only or self.live_env:
            return router_text
        return f"unknown model {value!r}; choose one of {sorted(self.served)!r}"

    def limits(self, cfg: ServeConfig, body: bytes) -> Limits:
        resolve = getattr(self.router, "resolve", None)
        return Limits(known_names(self.router) if self.batched else [], resolve if callable(resolve) else str,
                      cfg.max_token_budget, self.max_choice_options, cfg.tournament_group, may_hold_surrogate(body),
                      self.unknown_model)

    def route(self, d: Decision) -> Any:
        """The router's decision, kept to the served checkpoints on a server of custom checkpoints only."""
        decision = self.router.route(d.state, d.questions, d.model, d.task, d.lang, d.lang_guess)
        if not self.custom_only or decision.model in self.served:
            return decision
        if d.model is not None or (d.task is not None and d.task.strip()):
            raise fail("model_not_served", model=decision.model, served=", ".join(self.served),
                       default=self.auto_default)
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
                raise library(e) from None
            lang = d.lang if d.lang is not None else (decision.get("detection") or {}).get("language")
            options = {"lang": lang, "max_len": d.max_len, "head_max_len": d.head_max_len,
                       "min_confidence": d.min_confidence}
            if d.batch_size is not None:
                options["batch_size"] = d.batch_size
            if d.sort_by_length:
                options["sort_by_length"] = True
            if d.narrow:
                options["tournament_group"] = self.cfg.tournament_group
            key = (decision["model"], d.questions_key or json.dumps(d.questions, ensure_ascii=False), d.max_len,
                   d.head_max_len, lang, json.dumps(d.min_confidence, sort_keys=True), d.batch_size,
                   d.sort_by_length, d.narrow)
            item = Item(key, decision["model"], d.state, d.questions, d.n_questions, d.row_width, options)
            out.append((item, self.public_repo(dict(decision))))
        return out

    def route_inline(self, decisions: list[Decision]) -> bool:
        """Whether routing is cheap enough for the event loop: no on_route hook (those may block) and either an
        explicit model on every item or short states. A thread hop costs the loop more than such routing does."""
        hooks = (*hooks_mod.default_hooks(), *getattr(self.router, "hooks", ()))
        if any(callable(getattr(h, "on_route", None)) for h in hooks):
            return False
        return all(d.model is not None for d in decisions) or sum(d.chars for d in decisions) <= INLINE_ROUTE_CHARS

    async def queue(self, decisions: list[Decision], max_batch_tokens: int) -> tuple[list, list]:
        """Route and submit; the caller's 'arriving' slot is handed back once queued (or refused)."""
        try:
            if self.route_inline(decisions):
                routed = self.items(decisions)
            else:
                routed = await anyio.to_thread.run_sync(self.items, decisions)
            rows = sum(item.rows for item, _ in routed)
            if self.batcher.queued_rows + rows > self.cfg.max_queue_rows:
                raise fail("busy")
            self.batcher.max_batch_tokens = max_batch_tokens
            futures = self.batcher.submit([item for item, _ in routed])
        finally:
            self.batcher.arriving(-1)
        self.child(self.metrics.queue_rows).set(self.batcher.queued_rows)
        return routed, futures

    async def decide(self, decisions: list[Decision], max_batch_tokens: int,
                     request: Request | None = None) -> tuple[list[dict], dict]:
        routed, futures = await self.queue(decisions, max_batch_tokens)
        submitted = routed[0][0].enqueued  # where the http stage hands over to the queue
        try:
            outcomes = await self.outcomes(futures, request)
        except ClientDisconnect:
            raise
        except (ValueError, TypeError) as e:
            raise library(e) from None
        except Exception:
            if self.batcher.stopping:  # the worker stopped with this request still queued
                raise fail("shutting_down") from None
            log.exception("laya serve: inference failed")
            raise fail("inference_failed") from None
        resumed = time.perf_counter()
        results, timings = [], {}
        for (result, timing), (_, routing) in zip(outcomes, routed):
            results.append({**result, "routing": routing})
            timings[timing.forward_id] = timing
        forwards = timings.values()
        if len(timings) == 1:  # the common case: one forward answered the whole request
            (t,) = forwards
            return results, {"inference": t.inference_ms, "queue": t.queue_ms, "prep": t.prep_ms,
                             "forward": t.forward_ms, "decode": t.decode_ms, "submitted": submitted,
                             "done": t.done, "resumed": resumed}
        return results, {"inference": sum(t.inference_ms for t in forwards), "queue": max(t.queue_ms for t in forwards),
                         "prep": sum(t.prep_ms for t in forwards), "forward": sum(t.forward_ms for t in forwards),
                         "decode": sum(t.decode_ms for t in forwards), "submitted": submitted,
                         "done": max(t.done for t in forwards), "resumed": resumed}

    @staticmethod
    async def outcomes(futures: list, request: Request | None) -> list:
        """The futures' results; if the client disconnects first, the queued ones are cancelled (the worker drops
        them before their forward) and ClientDisconnect is raised."""
        single = len(futures) == 1
        waiting = (asyncio.wrap_future(futures[0]) if single
                   else asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
        if request is None:
            return [await waiting] if single else await waiting
        gone = asyncio.ensure_future(client_gone(request))
        # the client leaving cancels the wrapped futures, and through them each one the worker has not taken
        gone.add_done_callback(lambda task: task.cancelled() or waiting.cancel())
        try:
            result = await waiting
        except asyncio.CancelledError:
            if gone.done() and not gone.cancelled():
                raise ClientDisconnect() from None
            raise
        finally:
            gone.cancel()
        return [result] if single else result

    async def decide_injected(self, decisions: list[Decision], single: bool) -> tuple[list[dict], dict]:
        """An injected router that is not a laya Router: its own predict calls, off the event loop."""
        self.batcher.arriving(-1)
        started = time.perf_counter()
        try:
            results = await anyio.to_thread.run_sync(injected.answer, self.router, decisions, single)
        except (ValueError, TypeError) as e:
            raise library(e) from None
        except Exception:
            log.exception("laya serve: inference failed")
            raise fail("inference_failed") from None
        results = [{**r, "routing": self.public_repo(r["routing"])} if isinstance(r, dict) and "routing" in r
                   else r for r in results]
        return results, {"inference": (time.perf_counter() - started) * 1000.0, "queue": 0.0}

    async def respond(self, request: Request, route: str, cfg: ServeConfig) -> tuple[list[dict], dict]:
        """Admission, body, parsing and the answers for one decision request. As published, a body is read
        inside its admission slot; with max_body_reads, bodies are read under that limit of their own and only a
        complete one takes a slot (a full server still refuses before reading)."""
        if not self.cfg.max_body_reads:
            with self.admission():
                return await self.answer_body(request, await self.read_body(request), route, cfg)
        with self.reading():
            if self.admitted >= self.cfg.max_concurrent:
                raise fail("busy")
            raw = await self.read_body(request)
        with self.admission():
            return await self.answer_body(request, raw, route, cfg)

    @contextlib.contextmanager
    def reading(self):
        if self.reads >= self.cfg.max_body_reads:
            raise fail("busy")
        self.reads += 1
        try:
            yield
        finally:
            self.reads -= 1

    async def answer_body(self, request: Request, raw: bytes, route: str, cfg: ServeConfig) -> tuple[list, dict]:
        self.batcher.arriving(1)
        arriving = True
        try:
            data = parse_json(raw)
            parse = parse_single if route == SINGLE else parse_batch
            parsed = parse(data, self.limits(cfg, raw))
            decisions = [parsed] if route == SINGLE else parsed
            arriving = False  # the decide calls hand the slot over
            if not self.batched:
                return await self.decide_injected(decisions, route == SINGLE)
            return await self.decide(decisions, cfg.max_batch_tokens, request)
        finally:
            if arriving:
                self.batcher.arriving(-1)

    async def answer(self, request: Request, route: str) -> Response:
        started = time.perf_counter()
        self.last_request = time.monotonic()
        status = 500
        try:
            if not self.authorized(request):
                raise fail("unauthorized")
            cfg = request_settings(self.cfg) if self.live_env else self.cfg
            results, times = await self.respond(request, route, cfg)
            if route == SINGLE:
                body = project(results[0], cfg.jev_strict)
            else:
                total = {k: sum((r.get("usage") or {}).get(k, 0) for r in results)
                         for k in ("input_tokens", "output_tokens")}
                body = {"results": [project(r, cfg.jev_strict) for r in results], "total_usage": total}
            response = JSONResponse(body)  # rendered here: the http stage includes it
            headers = response.headers
            headers["Server-Timing"] = self.record_stages(times, started, time.perf_counter())
            headers["X-Inference-Time-Ms"] = f"{times['inference']:.2f}"
            if self.replica is not None:
                headers["X-Laya-Replica"] = self.replica
            status = 200
            return response
        except ApiError as e:
            status = e.status
            headers = e.headers if self.replica is None else {**(e.headers or {}), "X-Laya-Replica": self.replica}
            return JSONResponse({"detail": e.detail}, status_code=e.status, headers=headers)
        except asyncio.CancelledError:
            # uvicorn cancels the requests still running at the drain deadline (--shutdown-timeout): a 503 that
            # says so, not its 500 and traceback (a client leaving never cancels: that is ClientDisconnect)
            e = fail("shutting_down")
            status = e.status
            log.info("laya serve: %s: stopped at the shutdown drain deadline", route)
            return JSONResponse({"detail": e.detail}, status_code=e.status, headers=e.headers)
        except ClientDisconnect:  # the client went away: nothing to answer, nothing went wrong here
            status = CLIENT_CLOSED
            log.info("laya serve: %s: the client closed the connection before its answer was ready", route)
            return Response(status_code=CLIENT_CLOSED)
        except RecursionError:  # a nesting the depth check let through still never becomes a 500
            e = fail("too_deep")
            status = e.status
            return JSONResponse({"detail": e.detail}, status_code=e.status)
        except Exception:  # noqa: BLE001 - never leak internals
            log.exception("laya serve: request failed")
            return JSONResponse({"detail": fail("inference_failed").detail}, status_code=500)
        finally:
            self.child(self.metrics.requests, route, str(status)).inc()
            self.child(self.metrics.latency, route).observe(time.perf_counter() - started)
            self.child(self.metrics.queue_rows).set(self.batcher.queued_rows)

    def record_stages(self, times: dict, started: float, ended: float) -> str:
        """An answered request's stages into /metrics; returns its Server-Timing value (milliseconds)."""
        total = (ended - started) * 1000.0
        head = f"inference;dur={times['inference']:.2f}, queue;dur={times['queue']:.2f}"
        if "resumed" not in times:  # an injected router: no stages
            return f"{head}, total;dur={total:.2f}"
        resumed = times["resumed"]
        http = ((times["submitted"] - started) + (ended - resumed)) * 1000.0
        wakeup = max(0.0, resumed - times["done"]) * 1000.0
        ms = (http, times["queue"], times["prep"], times["forward"], times["decode"], wakeup)
        for handle, value in zip(self.stage_metrics, ms):
            handle.observe(value / 1000.0)
        return (f"{head}, prep;dur={ms[2]:.2f}, forward;dur={ms[3]:.2f}, decode;dur={ms[4]:.2f}, "
                f"wakeup;dur={wakeup:.2f}, http;dur={http:.2f}, total;dur={total:.2f}")

    def health(self, authorized: bool) -> dict:
        if not authorized:
            return dict(LIVENESS_ONLY)
        # an env-read app shows resolve_device() (LAYA_DEVICE, else detected); `laya serve` its --device
        out = health(self.router, None if self.live_env else self.cfg.device, self.failing)
        if self.cfg.idle_unload_seconds > 0:
            out["idle_unload_seconds"] = self.cfg.idle_unload_seconds
            out["idle_seconds"] = round(time.monotonic() - self.last_request, 1)
        return out

    def models(self) -> dict:
        """The checkpoints a request may name: the served ones on a custom-only server, else every known one."""
        failing = self.failing
        agents = resident_agents(self.router, failing)
        names = self.served if self.custom_only or not self.batched else known_names(self.router, failing)
        default = self.auto_default if self.custom_only else getattr(self.router, "default", None)
        data = [{"id": name, "object": "model", "loaded": name in agents, "default": name == default,
                 "backend": getattr(agents.get(name), "backend", None),
                 "description": description(self.router, name, failing),
                 "batch_invariant": bool(getattr(agents.get(name), "batch_invariant", self.cfg.batch_invariant))}
                for name in names]
        return {"object": "list", "data": data}


def _settings(router: Any, cfg: ServeConfig | None) -> tuple[ServeConfig, Any, bool]:
    if isinstance(router, ServeConfig):
        raise TypeError("create_app(router=None, *, cfg=None): the positional argument is the router; pass a "
                        "ServeConfig as cfg=...")
    if cfg is not None:
        return cfg, router, False
    skip = MAIN_ONLY if router is None else MAIN_ONLY + ROUTER_ONLY  # host/port/log level are main()'s
    try:
        cfg = from_env({k: v for k, v in os.environ.items() if k not in skip})
    except SettingError as e:
        raise SystemExit(str(e)) from None
    cfg = replace(cfg, preload=False)  # preloading is build_router()'s; an injected router comes as it is
    if router is not None:
        return cfg, router, True
    import laya.serve as package  # looked up at call time: a caller may stand in its own build_router

    return cfg, package.build_router(), True


def create_app(router: Any = None, *, cfg: ServeConfig | None = None) -> FastAPI:
    """The ASGI app. `router` (a laya Router, or any object with `predict`) replaces the one built from the
    settings; without `cfg` the settings are the LAYA_* variables, read now and (three of them) per request."""
    cfg, router, live_env = _settings(router, cfg)
    server = Server(cfg, router, live_env)

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

    hidden = bool(cfg.api_key)  # with a key, the schema pages are not served: they cannot be authenticated
    app = FastAPI(title="laya serve", lifespan=lifespan, docs_url=None if hidden else "/docs",
                  redoc_url=None if hidden else "/redoc", openapi_url=None if hidden else "/openapi.json")
    app.root_path = cfg.root_path  # set after: newer FastAPI warns about the constructor argument
    app.state.server = server
    _add_routes(app, server)
    return app


def _add_routes(app: FastAPI, server: Server) -> None:
    def refused(request: Request) -> Response | None:
        if server.authorized(request):
            return None
        e = fail("unauthorized")
        return JSONResponse({"detail": e.detail}, status_code=e.status, headers=e.headers)

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
    async def health_route(request: Request) -> Response:
        return JSONResponse(server.health(server.authorized(request)))

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        body, content_type = server.metrics.render()
        return Response(body, media_type=content_type)
