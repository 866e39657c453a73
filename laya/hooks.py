"""Predict hooks: observe or rewrite a predict call (start: inputs, end: results) or answer it from a cache.

Hooks come from three places, composed in this order: process defaults, hooks installed on the agent,
hooks passed to the call. A hook is an object with any subset of the event methods, or a plain
callable (used for start or end, depending on the argument it was passed as).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

EVENTS = ("on_predict_start", "on_predict_end", "on_route", "on_load", "on_evict", "on_error")


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
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    started_at: float = field(default_factory=time.time)
    elapsed_ms: float | None = None
    error: BaseException | None = None
    skipped: bool = False

    def skip(self, results: list) -> None:
        """Answer this call with `results` (one, or one per state) and run no inference."""
        if not isinstance(results, list) or len(results) not in (1, len(self.states)):
            raise ValueError(f"skip() needs a list of 1 result or {len(self.states)} results (one per state), "
                             f"got {type(results).__name__} of length {len(results) if isinstance(results, list) else '?'}")
        self.results = list(results) * len(self.states) if len(results) == 1 else list(results)
        self.skipped = True


class CallableHook:
    """Adapter: a plain callable used as one event."""

    def __init__(self, fn: Callable, event: str):
        if not callable(fn):
            raise TypeError(f"{event} hook must be callable, got {type(fn).__name__}")
        setattr(self, event, fn)
        self.fn = fn


def as_hooks(hooks: Any) -> list:
    """Normalise None / one hook / a list of hooks into a list; refuse objects with no event method."""
    if hooks is None:
        return []
    items = list(hooks) if isinstance(hooks, (list, tuple)) else [hooks]
    for h in items:
        if not any(callable(getattr(h, e, None)) for e in EVENTS):
            raise TypeError(f"hook {h!r} has none of the hook methods {', '.join(EVENTS)}; pass an object "
                            "with one of them, or a callable as on_predict_start/on_predict_end")
    return items


def with_callables(hooks: list, on_start: Callable | None, on_end: Callable | None) -> list:
    out = list(hooks)
    if on_start is not None:
        out.append(CallableHook(on_start, "on_predict_start"))
    if on_end is not None:
        out.append(CallableHook(on_end, "on_predict_end"))
    return out


_defaults: list = []
_defaults_lock = threading.Lock()


def set_default_hooks(hooks: Any) -> None:
    global _defaults
    with _defaults_lock:
        _defaults = as_hooks(hooks)


def add_default_hook(hook: Any) -> None:
    with _defaults_lock:
        _defaults.extend(as_hooks(hook))


def clear_default_hooks() -> None:
    with _defaults_lock:
        _defaults.clear()


def default_hooks() -> list:
    with _defaults_lock:
        return list(_defaults)


def has_default_hooks() -> bool:
    """Whether any process-wide hook is installed (a lock-free read: the hot path asks on every call)."""
    return bool(_defaults)


class HookRegistry:
    """Mixin: hooks installed on an object (between process defaults and per-call hooks)."""

    hooks: list

    def add_hook(self, hook: Any) -> None:
        self.hooks = [*self.hooks, *as_hooks(hook)]

    def remove_hook(self, hook: Any) -> None:
        self.hooks = [h for h in self.hooks if h is not hook and getattr(h, "fn", None) is not hook]

    @contextlib.contextmanager
    def hooks_installed(self, *hooks: Any) -> Iterator[None]:
        added = as_hooks(list(hooks))
        self.hooks = [*self.hooks, *added]
        try:
            yield
        finally:
            self.hooks = [h for h in self.hooks if all(h is not a for a in added)]


def _call_with_timeout(fn: Callable, ctx: PredictContext, timeout: float | None) -> None:
    if timeout is None:
        fn(ctx)
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(fn, ctx).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"hook {fn!r} did not finish within hooks_timeout={timeout}s") from None
    finally:
        pool.shutdown(wait=False)


def fire(hooks: list, event: str, ctx: PredictContext, raise_errors: bool, timeout: float | None,
         lock: Any = None) -> None:
    """Call `event` on every hook that has it, in order."""
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
            warnings.warn(f"laya: {event} hook {fn!r} failed and was ignored (hooks_raise=False): "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)
