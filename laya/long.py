"""`predict_long`: answer questions about a state longer than one row holds, by sliding windows (spec §2.6).

A row holds `max_len - head_len - 1` state tokens (`state_room`); a longer state is cut. Instead, the
state's tokens are split into windows of `window` tokens every `stride` tokens, each window is decoded
back to text and all windows are answered by `predict_batch` (at most WINDOW_BATCH_CAP windows per
forward; a smaller `batch_size` lowers that). Per question the deciding window wins: for a noul the
window with the highest P(true) (any window that finds the statement true decides), for a choice or a
score the window with the highest `answer_confidence`. The chosen answer gains
`"window": {"index", "token_start", "token_end", "count"}`; numeric usage fields are summed over the
windows and `usage["windows"]` counts them.

Defaults: `window = max(64, max_len - head_max_len - 8)` capped at the smallest room over the questions;
`stride` = half the effective window. A state that fits a row (or the explicit window) is answered by
one plain `predict` call (`usage["windows"] = 1`; 0 when a hook answered instead of the model). Known limits (spec §10.18): the probabilities are the deciding window's, a
noul's maximum drifts up with the number of windows, and re-tokenised window text can shift at the
window edges.
"""

from __future__ import annotations

import warnings
from typing import Any

from .hooks import as_hooks
from .answers import positive_int
from .questions import render_state
from .question_sets import checked_questions
from .sequence import config_head_max_len, config_max_len, encode, scrub_mask, state_room, tokenizer_view

WINDOW_BATCH_CAP = 16  # windows answered per forward when the caller gives no batch_size
MIN_DEFAULT_WINDOW = 64
HEAD_MARGIN = 8  # the default window leaves this many tokens of slack beyond head_max_len


def window_plan(n_tokens: int, room: int, max_len: int, head_max_len: int, window: int | None,
                stride: int | None) -> tuple[int, int]:
    """(effective window, stride) for a state of n_tokens whose rows hold `room` state tokens."""
    explicit = window is not None
    if explicit:
        wanted = positive_int(window, "predict_long: window")
    else:
        wanted = max(MIN_DEFAULT_WINDOW, max_len - head_max_len - HEAD_MARGIN)
    if stride is not None:
        positive_int(stride, "predict_long: stride")
    effective = max(1, min(wanted, room))
    shrunk = effective < wanted
    if shrunk and explicit:
        warnings.warn(f"predict_long: window={wanted} is wider than the {room} state tokens a row has room for "
                      f"with these questions; using window={effective}", RuntimeWarning, stacklevel=3)
    elif shrunk and effective * 2 <= wanted:
        warnings.warn(f"predict_long: the default window of {wanted} tokens was cut to {effective} (the room the "
                      "questions leave in a row); long question heads leave little state per window",
                      RuntimeWarning, stacklevel=3)
    if stride is None:
        return effective, max(1, effective // 2)
    if stride > effective:
        if not shrunk:
            raise ValueError(f"predict_long: stride={stride} is larger than window={effective}; windows would skip "
                             "tokens. Use stride <= window")
        halved = max(1, effective // 2)
        warnings.warn(f"predict_long: stride={stride} is larger than the shrunk window={effective}; using "
                      f"stride={halved}", RuntimeWarning, stacklevel=3)
        return effective, halved
    return effective, stride


def window_starts(n_tokens: int, window: int, stride: int) -> list[int]:
    """Window starts every `stride` tokens, the last window ending at the state's end."""
    starts = list(range(0, max(n_tokens - window, 0) + 1, stride))
    if starts[-1] + window < n_tokens:
        starts.append(n_tokens - window)
    return starts


def _merge_usage(usages: list[dict]) -> dict:
    merged: dict = {}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, bool):
                merged[key] = merged.get(key, False) or value
            elif isinstance(value, (int, float)):
                merged[key] = merged.get(key, 0) + value
            elif isinstance(value, list):
                seen = merged.setdefault(key, [])
                seen.extend(v for v in value if v not in seen)
            elif key not in merged:
                merged[key] = value
    return merged


def _strength(answer: dict) -> float:
    if answer.get("type") == "noul":
        return float(answer["noul"])
    value = answer.get("answer_confidence")
    return float(answer.get("confidence", 0.0) if value is None else value)


class _SkipProbe:
    """A last end hook that notes whether a hook answered the call (ctx.skip) instead of the model."""

    def __init__(self) -> None:
        self.skipped = False

    def on_predict_end(self, ctx: Any) -> None:
        self.skipped = bool(ctx.skipped)


def predict_long(predictor: Any, state: Any, questions: dict, window: int | None = None, stride: int | None = None,
                 aggregate: str = "auto", batch_size: int | None = None, lang: str | None = None,
                 **hook_kwargs: Any) -> dict:
    """Spec §2.6 for an Agent or ONNXAgent (`predictor`); hook_kwargs: hooks, on_predict_start,
    on_predict_end, hooks_raise, hooks_timeout (passed to the predict call)."""

    if aggregate != "auto":
        raise ValueError(f"predict_long: aggregate must be 'auto' (the deciding window per question), "
                         f"got {aggregate!r}")
    if state is None:
        raise TypeError("state must be a str, dict or list, got None")
    if not isinstance(questions, dict):
        raise TypeError(f"questions must be a dict {{id: definition}}, got {type(questions).__name__}")
    qs = checked_questions(questions)
    cfg = predictor.cfg
    max_len, head_max_len = config_max_len(cfg), config_head_max_len(cfg)
    if batch_size is not None:
        positive_int(batch_size, "predict_long: batch_size")
    tok = predictor.tok
    ids = encode(tok, scrub_mask(tok, render_state(state)))
    rooms = {q.qid: state_room(tok, q, max_len, head_max_len) for q in qs}
    room = min(rooms.values(), default=max_len)
    if room < 1:
        tight = min(rooms, key=rooms.get)
        raise ValueError(f"predict_long: question {tight!r} leaves no room for state tokens in a row of "
                         f"max_len={max_len} (head_max_len={head_max_len}); shorten its instructions or options")
    size, step = window_plan(len(ids), room, max_len, head_max_len, window, stride)
    probe = _SkipProbe()
    hooks = [*as_hooks(hook_kwargs.pop("hooks", None)), probe]
    # A state that fits one row (or the explicit window) is one plain call.
    if len(ids) <= (size if window is not None else room):
        result = predictor.predict(state, questions, lang=lang, hooks=hooks, **hook_kwargs)
        if isinstance(result, dict):  # (a hook's skip may answer with anything: it is returned as given)
            result.setdefault("usage", {})["windows"] = 0 if probe.skipped else 1
        return result

    starts = window_starts(len(ids), size, step)
    view = tokenizer_view(tok)
    texts = [tok.decode(ids[s:s + size], skip_special_tokens=False) for s in starts]
    if view.mask_token:
        texts = [t.replace(view.mask_token, " ") for t in texts]
    results = predictor.predict_batch(texts, questions, lang=lang, hooks=hooks, **hook_kwargs,
                                      batch_size=min(batch_size or WINDOW_BATCH_CAP, WINDOW_BATCH_CAP))
    if probe.skipped:  # a hook answered (e.g. a cache): its answer stands, no window was scored
        if not isinstance(results[0], dict):  # as predict returns a hook's skip results: as given
            return results[0]
        result = dict(results[0])
        result["usage"] = {**result.get("usage", {}), "windows": 0}
        return result
    answers = {}
    for q in qs:
        best = max(range(len(results)), key=lambda i: _strength(results[i]["answers"][q.qid]))
        answer = dict(results[best]["answers"][q.qid])
        answer["window"] = {"index": best, "token_start": starts[best],
                            "token_end": min(starts[best] + size, len(ids)), "count": len(starts)}
        answers[q.qid] = answer
    usage = _merge_usage([r.get("usage", {}) for r in results])
    usage["windows"] = len(starts)
    return {"model": results[0].get("model", predictor.MODEL_NAME), "answers": answers, "usage": usage}
