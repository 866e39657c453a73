"""Predict hooks: observe or rewrite a predict call (start: inputs, end: results) or answer it from a cache.

Hooks come from three places, composed in this order: process defaults, hooks installed on the agent,
hooks passed to the call. A hook is an object with any subset of the event methods, or a plain
callable (used for start or end, depending on the argument it was passed as).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import random
import re
import threading
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .answers import positive_int, unit_interval

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


# ---- OptionStabilityHook --------------------------------------------------------------------------------

STABILITY_VARIANTS = ("full", "order", "rename")
_PROBE_ID = re.compile(r"~stability\d+~*$")


def _neutral_name(j: int) -> str:
    """A, B, ..., Z, then O27, O28, ... (the names relabelled options get)."""
    return chr(ord("A") + j) if j < 26 else f"O{j + 1}"


def _distinct_perms(rng: random.Random, k: int, n: int, identity_ok: bool) -> list[tuple[int, ...]]:
    """Up to `n` distinct permutations of range(k), drawn with `rng` (without the identity unless allowed)."""
    identity = tuple(range(k))
    if k <= 7:  # 5040 permutations at most: draw without replacement from all of them
        pool = [p for p in itertools.permutations(range(k)) if identity_ok or p != identity]
        return rng.sample(pool, min(n, len(pool)))
    out: list[tuple[int, ...]] = []
    while len(out) < n:  # k >= 8: 40320+ permutations, a repeat is rare
        p = list(range(k))
        rng.shuffle(p)
        t = tuple(p)
        if (identity_ok or t != identity) and t not in out:
            out.append(t)
    return out


@dataclass
class _Probe:
    """One probed question of one call: how its variants' answers map back to its options."""

    index: dict  # original label -> option index
    variants: list  # [(variant id, {variant label: original option index})]


class OptionStabilityHook(PredictHook):
    """Measure how stable each choice answer is under option reordering and renaming, in the same forward.

    On `on_predict_start` every probed choice question (all choice questions, or those whose ids are in
    `probes`; other question types are never probed) gets up to `n_shuffles` variant questions appended to
    the call's question dict. The variants ask the same instructions over the same options, changed by
    `variants`:
      "full"   - the options in a different order (a distinct non-identity `option_order` per variant)
                 and, when `relabel` is true and the question has at most `rename_max_options` options,
                 renamed to neutral names in reading order (A, B, C, ...: the option shown first is "A"),
                 each neutral name prefixed to the option's original text ("A: billing: invoices ...");
      "order"  - only the different order, original labels;
      "rename" - original order, options renamed to a different assignment of the neutral names per
                 variant (needs `relabel`; a question above `rename_max_options` falls back to "order").
    Variants are answered in the call's one forward, next to the original questions; each question is
    its own row, so the original answers are the answers a plain predict gives. A question with k
    options has at most k!-1 reorderings (k! renamings), hence "up to" `n_shuffles`.

    On `on_predict_end` the variants are removed from every result (a caller, and end hooks after this
    one, never see a probe id) and each probed choice answer gains
        "reliability": {"agreement": share of variants whose answer, mapped back to the original options,
                                     is the original answer's choice (0..1),
                        "mean_prob": mean probability the variants give the original choice (0..1),
                        "variants":  how many variants were answered,
                        "decision":  "accept" | "review" | "escalate"}
    `accept` is the lowest agreement that accepts (agreement >= accept -> "accept"); `escalate` is the
    agreement below which the answer is escalated (agreement < escalate -> "escalate"); anything in
    between is "review". Both in [0, 1] with escalate <= accept. A single-option question has no
    variants: agreement 1.0, mean_prob its probability, variants 0. Floats are rounded to 4 decimals like
    every answer field; the decision uses the unrounded agreement.

    Usage: the probe rows are encoded once, in the same forward, so `usage["input_tokens"]` (and the
    call's `ctx.usage`) counts every row that ran exactly once - originals and probes - and
    `usage["probe_rows"]` says how many of this state's rows were probes. Probe ids are removed from
    `usage["options"]`; a truncated probe is reported under its original question id in
    `usage["truncated_questions"]` (so `truncated` still agrees with that list).

    `seed`: None draws fresh permutations every call; an int makes them a pure function of (seed,
    question id, option count), so a call is reproducible. A call answered by `ctx.skip` (a cache) is
    passed through with only the probe ids removed.
    """

    def __init__(self, *, accept: float, escalate: float, probes: Any = None, n_shuffles: int = 3,
                 relabel: bool = True, rename_max_options: int = 20, variants: str = "full",
                 seed: int | None = None):
        self.accept = unit_interval(accept, "accept")
        self.escalate = unit_interval(escalate, "escalate")
        if self.escalate > self.accept:
            raise ValueError(f"escalate ({escalate}) must not exceed accept ({accept}): agreement >= accept "
                             "accepts, agreement < escalate escalates, anything between is reviewed")
        positive_int(n_shuffles, "n_shuffles")
        positive_int(rename_max_options, "rename_max_options")
        if variants not in STABILITY_VARIANTS:
            raise ValueError(f"variants must be one of {', '.join(map(repr, STABILITY_VARIANTS))}, got {variants!r}")
        if variants == "rename" and not relabel:
            raise ValueError("variants='rename' needs relabel=True")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, got {seed!r}")
        if probes is not None:
            probes = frozenset([probes] if isinstance(probes, (str, int)) else probes)
        self.probes = probes
        self.n_shuffles = n_shuffles
        self.relabel = bool(relabel)
        self.rename_max_options = rename_max_options
        self.variants = variants
        self.seed = seed
        self._calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # ctx -> {qid: _Probe}
        self._calls_lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"OptionStabilityHook(accept={self.accept}, escalate={self.escalate}, n_shuffles={self.n_shuffles}, "
                f"variants={self.variants!r}, seed={self.seed})")

    def decision(self, agreement: float) -> str:
        if agreement >= self.accept:
            return "accept"
        if agreement < self.escalate:
            return "escalate"
        return "review"

    # ---- start: add the variants ----

    def _rng(self, qid: Any, k: int) -> random.Random:
        if self.seed is None:
            return random.Random()
        return random.Random(f"laya-option-stability:{self.seed}:{qid!r}:{k}")

    def _variant_defs(self, qid: Any, definition: dict, q: Any) -> list[tuple[dict, dict]]:
        """[(variant definition, {variant label: original option index})] for one choice question."""
        k = q.k
        if k < 2:
            return []
        rng = self._rng(qid, k)
        rename = self.relabel and k <= self.rename_max_options and self.variants != "order"
        base = {key: value for key, value in definition.items() if key not in ("criteria", "option_order")}
        out = []
        if self.variants == "rename" and rename:
            for names in _distinct_perms(rng, k, self.n_shuffles, identity_ok=True):
                labels = [_neutral_name(names[i]) for i in range(k)]  # option i is called labels[i]
                criteria = {labels[i]: q.option_texts[i] for i in range(k)}  # canonical order kept
                out.append(({**base, "criteria": criteria}, {label: i for i, label in enumerate(labels)}))
            return out
        for order in _distinct_perms(rng, k, self.n_shuffles, identity_ok=False):
            if rename:  # slot s shows option order[s] and calls it _neutral_name(s)
                labels = [""] * k
                for slot, option in enumerate(order):
                    labels[option] = _neutral_name(slot)
                criteria = {labels[i]: q.option_texts[i] for i in range(k)}
                mapping = {label: i for i, label in enumerate(labels)}
            else:
                criteria = definition["criteria"]
                mapping = {label: i for i, label in enumerate(q.labels)}
            out.append(({**base, "criteria": criteria, "option_order": list(order)}, mapping))
        return out

    def on_predict_start(self, ctx: PredictContext) -> None:
        from .questions import check_question

        questions = ctx.questions
        if not isinstance(questions, dict) or ctx.skipped:
            return
        with self._calls_lock:
            if ctx in self._calls:
                return  # this instance fires twice in one call (a default and a per-call hook): probe once
        added: dict = {}
        plan: dict = {}
        for qid, definition in questions.items():
            if self.probes is not None and qid not in self.probes:
                continue
            if not isinstance(definition, dict) or definition.get("type") != "choice":
                continue
            if isinstance(qid, str) and _PROBE_ID.search(qid):
                continue  # a variant of an outer call (the hook installed on a router and its agent)
            try:
                q = check_question(qid, definition)
            except (ValueError, TypeError):
                continue  # the call itself reports the invalid question
            entries = []
            for n, (vdef, mapping) in enumerate(self._variant_defs(qid, definition, q)):
                vid = f"{qid}~stability{n}"
                while vid in questions or vid in added:
                    vid += "~"
                added[vid] = vdef
                entries.append((vid, mapping))
            plan[qid] = _Probe({label: i for i, label in enumerate(q.labels)}, entries)
        if not plan:
            return
        ctx.questions = {**questions, **added}  # a new dict: the caller's is left as it was
        with self._calls_lock:
            self._calls[ctx] = plan

    # ---- end: fold the variants back into reliability ----

    def _pop(self, ctx: PredictContext) -> dict | None:
        with self._calls_lock:
            return self._calls.pop(ctx, None)

    def on_error(self, ctx: PredictContext) -> None:
        self._pop(ctx)

    def on_predict_end(self, ctx: PredictContext) -> None:
        plan = self._pop(ctx)
        if not plan or not isinstance(ctx.results, list):
            return
        ctx.results = [self._fold(result, plan, ctx.skipped) for result in ctx.results]

    def _reliability(self, answer: dict, probe: _Probe, answers: dict) -> dict | None:
        i = probe.index.get(answer.get("choice"))
        if i is None:
            return None
        votes, probs = [], []
        for vid, mapping in probe.variants:
            v = answers.get(vid)
            if not isinstance(v, dict) or v.get("choice") not in mapping:
                continue
            votes.append(mapping[v["choice"]] == i)
            p = list(v.get("probabilities", {}).values())  # keyed in the original option order
            probs.append(float(p[i]) if i < len(p) else 0.0)
        if not votes:
            if probe.variants:  # probed, but the probe answers are gone: nothing to say
                return None
            p = list(answer.get("probabilities", {}).values())
            agreement, mean_prob = 1.0, float(p[i]) if i < len(p) else 1.0
        else:
            agreement, mean_prob = sum(votes) / len(votes), sum(probs) / len(probs)
        return {"agreement": round(agreement, 4), "mean_prob": round(mean_prob, 4), "variants": len(votes),
                "decision": self.decision(agreement)}

    def _fold(self, result: Any, plan: dict, skipped: bool) -> Any:
        if not isinstance(result, dict) or not isinstance(result.get("answers"), dict):
            return result
        answers = result["answers"]
        origin = {vid: qid for qid, probe in plan.items() for vid, _ in probe.variants}
        kept = {qid: a for qid, a in answers.items() if qid not in origin}
        if not skipped:
            for qid, probe in plan.items():
                answer = kept.get(qid)
                if isinstance(answer, dict) and answer.get("type") == "choice":
                    reliability = self._reliability(answer, probe, answers)
                    if reliability is not None:
                        kept[qid] = {**answer, "reliability": reliability}
        out = {**result, "answers": kept}
        usage = result.get("usage")
        if isinstance(usage, dict):
            usage = dict(usage)
            if not skipped:
                usage["probe_rows"] = sum(1 for vid in origin if vid in answers)
            if isinstance(usage.get("truncated_questions"), list):
                truncated = []
                for qid in usage["truncated_questions"]:
                    qid = origin.get(qid, qid)
                    if qid not in truncated:
                        truncated.append(qid)
                usage["truncated_questions"] = truncated
            if isinstance(usage.get("options"), dict):
                options = {qid: v for qid, v in usage["options"].items() if qid not in origin}
                if options:
                    usage["options"] = options
                else:
                    del usage["options"]
            out["usage"] = usage
        return out
