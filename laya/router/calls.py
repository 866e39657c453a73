"""How the Router calls agents and hooks: only public agent methods, keywords passed only when set (an
older agent that rejects `lang=` or `sort_by_length=` is called again without it), and one per-call hook
set that fires events with the call's hooks_raise / hooks_timeout."""

from __future__ import annotations

import time
from typing import Any, Callable

from .. import hooks as hooks_mod
from ..confidence import apply_confidence_gate
from ..hooks import PredictContext

OPTIONAL_KEYWORDS = ("lang", "sort_by_length", "min_confidence")  # min_confidence: serve's; the caller gates


def _rejected(error: TypeError, kwargs: dict) -> list[str]:
    text = str(error)
    return [k for k in OPTIONAL_KEYWORDS if k in kwargs and f"unexpected keyword argument '{k}'" in text]


def call_agent(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """fn(*args, **kwargs); a TypeError naming an optional keyword retries once without that keyword."""
    while True:
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            drop = _rejected(e, kwargs)
            if not drop:
                raise
            kwargs = {k: v for k, v in kwargs.items() if k not in drop}


def budgets(max_len: Any, head_max_len: Any) -> dict:
    """The token budgets that were set (an unset one is not passed at all)."""
    out = {}
    if max_len is not None:
        out["max_len"] = max_len
    if head_max_len is not None:
        out["head_max_len"] = head_max_len
    return out


def answer_one(agent: Any, state: Any, questions: dict, lang: Any, max_len: Any, head_max_len: Any) -> dict:
    """agent.system_one(state, questions, lang=..., [max_len=...], [head_max_len=...])."""
    fn = getattr(agent, "system_one", None)
    if not callable(fn):
        fn = getattr(agent, "predict", None)
    if not callable(fn):
        raise TypeError(f"the routed agent {type(agent).__name__} has no system_one/predict method; attach an "
                        "object that answers predict(state, questions)")
    result = call_agent(fn, (state, questions), {"lang": lang, **budgets(max_len, head_max_len)})
    if not isinstance(result, dict):
        raise TypeError(f"the routed agent {type(agent).__name__} returned {type(result).__name__} from "
                        f"{fn.__name__}; a result must be a dict with 'answers'")
    return result


def answer_group(agent: Any, states: list, questions: dict, batch_size: Any, max_len: Any, head_max_len: Any,
                 lang: tuple, sort_by_length: bool) -> list:
    """One agent.predict_batch call; `lang` is () (not passed) or (code,). A wrong result count is refused."""
    fn = getattr(agent, "predict_batch", None)
    if not callable(fn):
        raise TypeError(f"the routed agent {type(agent).__name__} has no predict_batch method; attach an object "
                        "that answers predict_batch(states, questions)")
    kwargs = {"batch_size": batch_size, **budgets(max_len, head_max_len)}
    if lang:
        kwargs["lang"] = lang[0]
    if sort_by_length:
        kwargs["sort_by_length"] = True
    results = list(call_agent(fn, (states, questions), kwargs))
    if len(results) != len(states):
        raise RuntimeError(f"the agent's predict_batch returned {len(results)} results for {len(states)} states; "
                           "it must answer every state once, in order")
    return results


class HookRun:
    """The hooks of one Router call (process defaults -> installed on the Router -> this call's) and the
    call's min_confidence gate, applied to each context's results before its end hooks."""

    def __init__(self, hooks: list, raise_errors: bool, timeout: float | None, lock: Any, threshold: Any):
        self.hooks, self.raise_errors, self.timeout, self.lock = hooks, raise_errors, timeout, lock
        self.threshold = threshold  # checked already; None = no gate

    @staticmethod
    def context(**fields: Any) -> PredictContext:
        return PredictContext(**fields)

    def fire(self, event: str, ctx: PredictContext, raise_errors: bool | None = None) -> None:
        hooks_mod.fire(self.hooks, event, ctx, self.raise_errors if raise_errors is None else raise_errors,
                       self.timeout, self.lock)

    def start(self, ctx: PredictContext) -> bool:
        """The start hooks; True when one of them answered the call."""
        self.fire("on_predict_start", ctx)
        return ctx.results is not None

    def finish(self, ctx: PredictContext, failed: bool = False) -> None:
        """Gate the results a context holds, then its end hooks (a failing call's never raise)."""
        if self.threshold is not None and isinstance(ctx.results, list):
            apply_confidence_gate(ctx.results, self.threshold)
        ctx.elapsed_ms = (time.perf_counter() - ctx.started_at) * 1000.0
        self.fire("on_predict_end", ctx, False if failed else None)

    def fail(self, ctx: PredictContext, error: BaseException) -> None:
        """A call that failed before its results existed: on_error, then the end hooks."""
        ctx.error = error
        self.fire("on_error", ctx, False)
        self.finish(ctx, failed=True)

    def with_routing(self, ctx: PredictContext, decision: Any) -> dict:
        """The call's result with `routing`; a result a start hook supplied keeps a `routing` it has."""
        result = ctx.results[0]
        if ctx.skipped and isinstance(result, dict) and "routing" in result:
            return result
        return {**result, "routing": dict(decision)}
