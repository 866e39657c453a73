"""Row construction under the published `laya.common` names and argument order (spec §3.2, §3.3, §3.9).

Thin adapters over laya.sequence, laya.long and laya.parallel_layout. laya.sequence imports torch, so it
is imported on first call, not here. `q` is a validated Question or a raw definition dict (validated with
the id "q" in its errors).
"""

from __future__ import annotations

import dataclasses
from typing import Any

DEFAULT_MAX_LEN = 512
DEFAULT_HEAD_MAX_LEN = 192


def _question(q: Any, option_order: Any = None) -> Any:
    from .questions import Question, check_question

    q = q if isinstance(q, Question) else check_question("q", q)
    if option_order is not None:
        q = dataclasses.replace(q, option_order=tuple(int(i) for i in option_order))
    return q


def render_options(q: Any, *args: Any, **kwargs: Any) -> list[str]:
    """The option texts of a question (a Question or a raw definition) in canonical order; the older
    (qtype, criteria, labels) form goes to laya.questions.render_options."""
    from . import questions

    if isinstance(q, str):
        return questions.render_options(q, *args, **kwargs)
    return list(_question(q).option_texts)


class BuiltSequence(tuple):
    """`(ids, markers)` of one row, which also reads as the laya.sequence.Row it wraps (.ids, .head,
    .state_tokens_dropped, ...)."""

    def __new__(cls, row: Any):
        built = super().__new__(cls, (row.ids, row.markers))
        built.row = row
        return built

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["row"], name)


def encode_text(tok: Any, text: Any, **kwargs: Any) -> Any:
    """The tokenizer call, under the process-wide tokenizer lock (fast tokenizers are not re-entrant)."""
    from .sequence import TOKENIZER_LOCK

    with TOKENIZER_LOCK:
        return tok(text, **kwargs)


def build_head(tok: Any, q: Any, head_max_len: int = DEFAULT_HEAD_MAX_LEN, option_order: Any = None) -> Any:
    """The question part of a row (laya.sequence.Head: ids, markers, tokens_per_option, distinct)."""
    from . import sequence

    return sequence.build_head(tok, _question(q, option_order), head_max_len)


def state_room(tok: Any, q: Any, max_len: int = DEFAULT_MAX_LEN, head_max_len: int = DEFAULT_HEAD_MAX_LEN) -> int:
    """State tokens that fit in this question's row: max(0, max_len - len(head) - 1)."""
    from . import sequence

    return sequence.state_room(tok, _question(q), max_len, head_max_len)


def build_sequence(tok: Any, state: Any, q: Any, max_len: int = DEFAULT_MAX_LEN,
                   head_max_len: int = DEFAULT_HEAD_MAX_LEN, option_order: Any = None, truncate_left: bool = False,
                   state_ids: Any = None, return_stats: bool = False, return_truncation_stats: bool = False,
                   return_layout: bool = False) -> Any:
    """One row: head + as much state as fits (its end with truncate_left) + [SEP], as `(ids, markers)`;
    each return_* flag appends a dict: head stats, truncation stats, parallel layout ids."""
    from . import sequence
    from .questions import render_state

    question = _question(q, option_order)
    if state_ids is None:
        state_ids = sequence.encode(tok, sequence.scrub_mask(tok, render_state(state)))
    row = sequence.build_row(tok, question, list(state_ids), bool(truncate_left), max_len, head_max_len)
    built = BuiltSequence(row)
    extras = []
    if return_stats:
        extras.append({"options": len(row.head.markers), "options_distinct": row.head.distinct,
                       "tokens_per_option": row.head.tokens_per_option})
    if return_truncation_stats:
        total = row.state_tokens_used + row.state_tokens_dropped
        extras.append({"state_tokens": total, "state_tokens_used": row.state_tokens_used,
                       "state_tokens_dropped": row.state_tokens_dropped, "truncated": row.state_tokens_dropped > 0})
    if return_layout:
        extras.append(parallel_layout(row.markers, len(row.head.ids), len(row.ids)))
    return (*built, *extras) if extras else built


class _EncodedRow:
    """A training item encoded by laya.train.encode_item, read as the row laya.sequence.collate expects."""

    def __init__(self, item: dict):
        self.ids, self.markers, self.qtype = list(item["input_ids"]), list(item["marker_pos"]), int(item["qtype"])


def _padded(values: list, width: int, dtype: Any) -> Any:
    import torch

    out = torch.zeros((len(values), width), dtype=dtype)
    for i, v in enumerate(values):
        out[i, :len(v)] = torch.as_tensor(v, dtype=dtype)
    return out


def _encoded_extras(items: list, k: int, width: int) -> dict:
    """target [N, K] (0 beyond a row's options), the parallel ids [N, width] (0 on pads), ep_group/ep_step."""
    import torch

    out = {}
    if all("target" in i for i in items):
        out["target"] = _padded([i["target"] for i in items], k, torch.float32)
    for name in ("position_ids", "option_ids"):
        if all(name in i for i in items):
            out[name] = _padded([i[name] for i in items], width, torch.long)
    for name in ("ep_group", "ep_step"):
        if all(name in i for i in items):
            out[name] = torch.as_tensor([int(i[name]) for i in items], dtype=torch.long)
    return out


def collate_items(batch: list, pad_id: int, parallel: bool = False) -> dict:
    """Right-padded batch tensors: input_ids, attention_mask, marker_pos, marker_mask, qtype. `batch` holds
    rows (laya.sequence rows or build_sequence results; `parallel` adds position_ids and option_ids) or
    training items from laya.train.encode_item (their target, parallel ids and ep_group/ep_step come along)."""
    from . import sequence

    encoded = bool(batch) and all(isinstance(r, dict) for r in batch)
    rows = [_EncodedRow(r) for r in batch] if encoded else [getattr(r, "row", r) for r in batch]
    collated = sequence.collate(rows, pad_id, parallel and not encoded)
    items = dict(zip(("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype"), collated.tensors()))
    if encoded:
        items.update(_encoded_extras(batch, collated.marker_mask.shape[1], collated.input_ids.shape[1]))
    elif parallel:
        items.update(position_ids=collated.position_ids, option_ids=collated.option_ids)
    return items


def window_budget(tok: Any, questions: Any, max_len: int = DEFAULT_MAX_LEN, head_max_len: int = DEFAULT_HEAD_MAX_LEN,
                  window: int | None = None, stride: int | None = None) -> tuple[int, int, int]:
    """(window, stride, room) as predict_long sizes them (its warnings and errors included)."""
    from .long import window_plan
    from .questions import check_questions

    qs = check_questions(questions)
    if not qs:
        raise ValueError("window_budget needs at least one question")
    room = min(state_room(tok, q, max_len, head_max_len) for q in qs)
    effective, step = window_plan(0, room, max_len, head_max_len, window, stride)
    return effective, step, room


def window_batch_cap(n_windows: int, window: int, config_budget: Any, batch_size: int | None = None) -> int | None:
    """Windows answered per forward pass: at most batch_size, and at most as many windows of `window` tokens
    as a token budget (config_budget) holds (at least 1); None when neither bounds the n_windows."""
    from .answers import positive_int

    caps = []
    if batch_size is not None:
        caps.append(positive_int(batch_size, "batch_size"))
    if config_budget:
        caps.append(max(1, int(config_budget) // max(1, int(window))))
    return min(min(caps), max(1, n_windows)) if caps else None


def _option_stats(item: Any) -> tuple[int, int, int | None]:
    if isinstance(item, dict):
        return item["options"], item["options_distinct"], item.get("tokens_per_option")
    head = getattr(item, "head", item)  # a Row or BuiltSequence carries its Head
    return len(head.markers), head.distinct, head.tokens_per_option


def collapsed_options(qids: Any, items: Any) -> dict:
    """{qid: {"total", "distinct", "tokens_per_option"}} for the questions whose option spans were squeezed
    or became identical (the usage["options"] block); items are heads, rows or head-stats dicts."""
    out = {}
    for qid, item in zip(qids, items):
        total, distinct, per = _option_stats(item)
        if per is not None or distinct < total:
            out[qid] = {"total": total, "distinct": distinct, "tokens_per_option": per}
    return out


def uses_parallel_layout(cfg: Any) -> bool:
    """Whether a config asks for the parallel option layout (None/absent = sequential)."""
    from .parallel_layout import LAYOUTS

    layout = cfg.get("option_layout") if isinstance(cfg, dict) else getattr(cfg, "option_layout", None)
    layout = "sequential" if layout is None else layout
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"option_layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout == "parallel"


def parallel_layout(markers: Any, head_len: int, length: int) -> dict:
    """{"position_ids", "option_ids"} (lists of ints) of one row in the parallel option layout."""
    from .parallel_layout import row_positions

    positions, options = row_positions(length, head_len, markers)
    return {"position_ids": [int(v) for v in positions], "option_ids": [int(v) for v in options]}


def parallel_option_masks(attention_mask: Any, position_ids: Any, option_ids: Any, sliding_window: Any) -> dict:
    """The per-layer attention masks of the parallel layout (laya.parallel_layout.parallel_masks)."""
    from .parallel_layout import parallel_masks

    return parallel_masks(attention_mask, position_ids, option_ids, sliding_window)
