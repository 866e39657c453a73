"""Predict hooks: observe or rewrite a predict call (start: inputs, end: results) or answer it from a cache.

Hooks come from three places, composed in this order (`compose_hooks`): process defaults, hooks installed
on the agent or router, hooks passed to the call. A hook is an object with any subset of the event
methods (`HOOK_EVENTS`), or a plain callable passed as `on_predict_start=` / `on_predict_end=`.
`dispatch` runs one event over a list of hooks; `OptionStabilityHook` lives in `laya.stability`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import inspect
import math
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence, Union

HOOK_EVENTS = ("on_predict_start", "on_predict_end", "on_route", "on_load", "on_evict", "on_error")
EVENTS = HOOK_EVENTS  # the earlier name

HookArg = Union[object, Sequence[object], None]  # one hook object, a list/tuple of them, or None
PredictHookArg = Optional[Callable[["PredictContext"], Any]]  # a plain callable for one predict event


@dataclass(eq=False)  # identity equality: two contexts are never "the same call"
class PredictContext:
    states: list
    questions: dict
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    results: list | None = None
    decision: Any = None
    model: str | None = None
    agent: Any = None
    router: Any = None
    max_len: int | None = None
    head_max_len: int | None = None
    usage: dict | None = None
    started_at: float = field(default_factory=time.perf_counter)
    elapsed_ms: float | None = None
    error: BaseException | None = None

    def skip(self, results: list) -> None:
        """Answer this call with `results` (one for the whole call, or one per state): no inference runs."""
        if not isinstance(results, list):
            raise TypeError(f"ctx.skip() takes a list of results, got {type(results).__name__}")
        if len(results) not in (1, len(self.states)):
            raise ValueError(f"ctx.skip() takes one result for the whole call or one per state in ctx.states "
                             f"({len(self.states)}); got {len(results)}")
        self.results = results
        self.__dict__["_answered"] = True

    @property
    def skipped(self) -> bool:
        """Whether the start hooks answered the call (ctx.skip, or ctx.results set before inference)."""
        return self.__dict__.get("_answered", False)


def aggregate_usage(results: Any) -> dict:
    """{"input_tokens", "output_tokens"} summed over results (a missing count is 0)."""
    totals = {"input_tokens": 0, "output_tokens": 0}
    for result in results or ():
        usage = result.get("usage") if isinstance(result, dict) else None
        if isinstance(usage, dict):
            for key in totals:
                totals[key] += usage.get(key) or 0
    return totals


class CallableHook:
    """Adapter: a plain callable used as one event."""

    def __init__(self, fn: Callable, event: str):
        if not callable(fn):
            raise TypeError(f"{event} must be callable, got {type(fn).__name__}")
        setattr(self, event, fn)
        self.fn = fn


def _check_hook(hook: Any) -> None:
    if isinstance(hook, type):
        raise TypeError(f"hooks entries must be instances, not classes; got {hook.__name__}. Instantiate it first.")
    present = [e for e in HOOK_EVENTS if getattr(hook, e, None) is not None]
    if not present:
        raise TypeError(f"hooks entries must implement at least one of {', '.join(HOOK_EVENTS)}; got "
                        f"{type(hook).__name__}. Pass a plain callable as on_predict_start=/on_predict_end= instead.")
    for event in present:
        value = getattr(hook, event)
        if not callable(value):
            raise TypeError(f"hooks entry {type(hook).__name__}.{event} must be callable, got {type(value).__name__}")


def _entries(hooks: HookArg) -> list:
    """The hooks of a `hooks` argument: one object, or a list/tuple of them."""
    return [] if hooks is None else list(hooks) if isinstance(hooks, (list, tuple)) else [hooks]


def normalise_hooks(hooks: HookArg = None, on_predict_start: PredictHookArg = None,
                    on_predict_end: PredictHookArg = None) -> list:
    """One hook, a list/tuple of hooks, and the two callable adapters, as one checked list."""
    items = _entries(hooks)
    for hook in items:
        _check_hook(hook)
    if on_predict_start is not None:
        items.append(CallableHook(on_predict_start, "on_predict_start"))
    if on_predict_end is not None:
        items.append(CallableHook(on_predict_end, "on_predict_end"))
    return items


def as_hooks(hooks: HookArg) -> list:
    """normalise_hooks without adapters (the name the engine and router use)."""
    return normalise_hooks(hooks)


def with_callables(hooks: list, on_start: PredictHookArg, on_end: PredictHookArg) -> list:
    return [*hooks, *normalise_hooks(None, on_start, on_end)]


def validate_timeout(value: Any) -> float | None:
    """`hooks_timeout`: None, or a positive finite number of seconds (a numeric string is read as one)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"hooks_timeout must be a positive finite number or None, not a bool; got {value!r}")
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):  # (OverflowError: an int too big for a float)
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"hooks_timeout must be a positive finite number or None; got {value!r}")
    return seconds


_defaults: list = []
_defaults_lock = threading.Lock()


def set_default_hooks(hooks: HookArg) -> None:
    global _defaults
    with _defaults_lock:
        _defaults = normalise_hooks(hooks)


def add_default_hook(hook: Any) -> None:
    with _defaults_lock:
        _defaults.extend(normalise_hooks(hook))


def clear_default_hooks() -> None:
    with _defaults_lock:
        _defaults.clear()


def default_hooks() -> list:
    with _defaults_lock:
        return list(_defaults)


def has_default_hooks() -> bool:
    """Whether any process-wide hook is installed (a lock-free read: the hot path asks on every call)."""
    return bool(_defaults)


def compose_hooks(installed: Sequence[Any], hooks: HookArg = None, on_predict_start: PredictHookArg = None,
                  on_predict_end: PredictHookArg = None) -> list:
    """The hooks of one call: process defaults, then `installed`, then the per-call ones."""
    return [*default_hooks(), *installed, *normalise_hooks(hooks, on_predict_start, on_predict_end)]


class HookRegistry:
    """Mixin: hooks installed on an object (between process defaults and per-call hooks)."""

    hooks: list

    def add_hook(self, hook: Any) -> None:
        self.hooks = [*self.hooks, *normalise_hooks(hook)]

    def remove_hook(self, hook: Any) -> None:
        """Uninstall what `add_hook(hook)` installed (one hook or a list/tuple); a hook not installed is ignored."""
        gone = _entries(hook)
        self.hooks = [h for h in self.hooks
                      if not any(h is g or (isinstance(h, CallableHook) and h.fn is g) for g in gone)]

    @contextlib.contextmanager
    def hooks_installed(self, *hooks: Any) -> Iterator[None]:
        added = normalise_hooks(list(hooks))
        self.hooks = [*self.hooks, *added]
        try:
            yield
        finally:
            self.hooks = [h for h in self.hooks if all(h is not a for a in added)]


# ---- running one event ------------------------------------------------------------------------------

def _call(fn: Callable, ctx: Any) -> Any:
    """fn(ctx), awaiting what it returns when that is awaitable."""
    result = fn(ctx)
    if inspect.isawaitable(result):
        return run_coroutine_sync(result)
    return result


def _call_with_timeout(fn: Callable, ctx: Any, timeout: float | None) -> None:
    if timeout is None:
        _call(fn, ctx)
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:  # the worker sees the caller's context variables
        pool.submit(contextvars.copy_context().run, _call, fn, ctx).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        raise TimeoutError(f"laya: hook {name} exceeded {timeout}s") from None
    finally:
        pool.shutdown(wait=False)


def _hook_name(hook: Any, fn: Callable) -> str:
    if isinstance(hook, CallableHook):
        return getattr(fn, "__name__", type(fn).__name__)
    return type(hook).__name__


def dispatch(hooks: Sequence[Any], event: str, ctx: Any, *, raise_errors: bool = True, lock: Any = None,
             timeout: float | None = None) -> None:
    """Call `event` on every hook that has it, in order. A failure raises (raise_errors) or becomes a
    RuntimeWarning; after on_predict_start, results a hook supplied answer the call (one is broadcast
    to every state)."""
    for hook in hooks:
        fn = getattr(hook, event, None)
        if not callable(fn):
            continue
        try:
            with lock if lock is not None else contextlib.nullcontext():
                _call_with_timeout(fn, ctx, timeout)
        except Exception as e:
            if raise_errors:
                raise
            warnings.warn(f"laya: hook {_hook_name(hook, fn)}.{event} failed: {e}", RuntimeWarning, stacklevel=3)
    if event == "on_predict_start" and isinstance(ctx, PredictContext) and ctx.results is not None:
        ctx.__dict__["_answered"] = True
        if isinstance(ctx.results, list) and len(ctx.results) == 1 and len(ctx.states) != 1:
            ctx.results = ctx.results * len(ctx.states)


def fire(hooks: list, event: str, ctx: Any, raise_errors: bool, timeout: float | None, lock: Any = None) -> None:
    """dispatch with positional arguments (the engine's and router's call form)."""
    dispatch(hooks, event, ctx, raise_errors=raise_errors, lock=lock, timeout=timeout)


# ---- public hook base classes ------------------------------------------------------------------------
#
# Any object with a subset of the event methods is a hook; these classes exist so a hook can subclass
# one and override only the events it cares about. The published package exports `Hook`, `BaseHook` and
# `PredictHook` without saying how they differ; here:
#   PredictHook - the predict-path events: on_predict_start, on_predict_end, on_error (no-ops);
#   BaseHook    - every event (PredictHook's plus on_route, on_load, on_evict), all no-ops;
#   Hook        - the same class as BaseHook (the general name).


class PredictHook:
    """Base class for hooks on predict calls: override any of the methods; the others do nothing.

    `on_predict_start(ctx)` may rewrite `ctx.states`, `ctx.questions`, `ctx.max_len`, `ctx.head_max_len`
    or answer the call with `ctx.skip(results)`; `on_predict_end(ctx)` may rewrite `ctx.results`;
    `on_error(ctx)` sees `ctx.error` when the inference raised (its own exceptions are only warnings).
    """

    def on_predict_start(self, ctx: PredictContext) -> None:
        return None

    def on_predict_end(self, ctx: PredictContext) -> None:
        return None

    def on_error(self, ctx: PredictContext) -> None:
        return None


class BaseHook(PredictHook):
    """Base class with every hook event (`EVENTS`) as a no-op: subclass it and override what you need."""

    def on_route(self, ctx: PredictContext) -> None:
        return None

    def on_load(self, ctx: Any) -> None:
        return None

    def on_evict(self, ctx: Any) -> None:
        return None


Hook = BaseHook


# ---- AsyncHook -------------------------------------------------------------------------------------------


class AsyncHook:
    """Run a hook whose event methods are coroutines (`async def on_predict_end(self, ctx)`) from laya's
    synchronous hook firing, to completion, before the call goes on.

    Where a coroutine runs: on `loop` (through `asyncio.run_coroutine_threadsafe`) when `loop` is given
    and is running in another thread - so the coroutine can use that loop's clients and locks; otherwise
    (no loop, a loop that is not running, or the loop of the very thread that fires the hook, which would
    deadlock waiting on itself) on one process-wide event loop in a daemon thread (started on first use,
    shared by every AsyncHook: wrappers made per call cost no thread). Methods of the wrapped hook
    that are not coroutine functions are called directly. Only the events the wrapped object has are
    exposed. A coroutine's exception propagates exactly like a sync hook's, so `hooks_raise=False` turns
    it into a warning and `hooks_timeout` bounds the wait (a coroutine still running when the timeout
    expires goes on running on its loop, as a timed-out sync hook goes on in its worker thread). If the
    given loop stops while a call waits on it, the call raises RuntimeError instead of waiting forever.
    """

    def __init__(self, hook: Any, loop: Any = None):
        if isinstance(hook, type):
            raise TypeError(f"AsyncHook wraps an instance, not a class; got {hook.__name__}")
        if not any(callable(getattr(hook, e, None)) for e in EVENTS):
            raise TypeError(f"AsyncHook needs an object with one of the hook methods {', '.join(EVENTS)}, "
                            f"got {hook!r}")
        import asyncio

        if loop is not None and not isinstance(loop, asyncio.AbstractEventLoop):
            raise TypeError(f"loop must be an asyncio event loop or None, got {type(loop).__name__}")
        self.hook = hook
        self.loop = loop
        for event in EVENTS:
            fn = getattr(hook, event, None)
            if callable(fn):
                setattr(self, event, self._runner(event, fn))

    def __repr__(self) -> str:
        return f"AsyncHook({self.hook!r})"

    def _runner(self, event: str, fn: Callable) -> Callable:
        def run(ctx: Any) -> Any:
            import inspect

            result = fn(ctx)
            if inspect.isawaitable(result):
                return self._wait(result)
            return result

        run.__name__ = event
        run.__qualname__ = f"AsyncHook.{event}"
        return run

    def _target_loop(self) -> Any:
        import asyncio

        loop = self.loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            try:
                current = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is not loop:
                return loop
        return self._private_loop()

    def _private_loop(self) -> Any:
        return _shared_loop()

    def _wait(self, awaitable: Any) -> Any:
        import asyncio
        import concurrent.futures

        async def as_coroutine() -> Any:  # run_coroutine_threadsafe takes coroutines only, not any awaitable
            return await awaitable

        coro = awaitable if asyncio.iscoroutine(awaitable) else as_coroutine()
        loop = self._target_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            while True:
                try:
                    return future.result(timeout=WAIT_POLL_S)
                except concurrent.futures.TimeoutError:
                    if not loop.is_running():  # the caller's loop stopped with our coroutine pending
                        raise RuntimeError("AsyncHook: the event loop running the hook stopped before the hook "
                                           "finished; keep the loop running while laya calls the hook") from None
        except BaseException:
            future.cancel()  # an interrupted wait leaves no coroutine running behind it
            raise

    def close(self) -> None:
        """Kept for API symmetry: coroutines without a usable caller loop run on ONE process-wide daemon
        loop shared by every AsyncHook (no thread per hook), which lives as long as the process."""
        return None


WAIT_POLL_S = 0.05  # how often a waiting hook call checks that its loop still runs
_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def _shared_loop() -> Any:
    """The process-wide event loop (a daemon thread, started on first use) for AsyncHook coroutines."""
    import asyncio

    with _SHARED_LOCK:
        loop = _SHARED.get("loop")
        if loop is None or loop.is_closed() or not _SHARED["thread"].is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="laya-async-hook", daemon=True)
            thread.start()
            ready.wait()
            _SHARED.update(loop=loop, thread=thread)
        return loop




def _same_thread(loop: Any) -> bool:
    import asyncio

    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def run_coroutine_sync(coro: Any, loop: Any = None) -> Any:
    """Run a coroutine (or any awaitable) to completion from synchronous code and return its result.

    Without `loop`: in this thread, or on laya's background loop when a loop already runs in this
    thread. With `loop`: on that loop, which must be running in another thread (else ValueError, and the
    coroutine is closed so it never warns "was never awaited")."""
    import asyncio

    if not asyncio.iscoroutine(coro):
        awaitable = coro

        async def as_coroutine() -> Any:
            return await awaitable

        coro = as_coroutine()
    if loop is not None:
        # R-HK-5 gives one text for both: waiting on the calling thread's own loop would deadlock
        if not loop.is_running() or loop.is_closed() or _same_thread(loop):
            coro.close()
            raise ValueError("run_coroutine_sync: the loop passed is not running")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return asyncio.run_coroutine_threadsafe(coro, _shared_loop()).result()


from .stability import (ALL_VARIANTS, VARIANT_PRESETS, OptionStabilityHook, calibrate_reliability,  # noqa: E402,F401
                        decide_reliability, make_variants)
