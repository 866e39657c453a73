"""Training items under the published names: data rows -> items (one per question) -> encoded rows, and the
evaluation summaries of calibration records. Rows are the gold-JSONL form
`{"state", "questions": {qid: definition}, "gold": {qid: {"probabilities"}} | "expected": {qid: answer}}`."""

from __future__ import annotations

import collections
import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..questions import QTYPE_NAMES, QTYPES, keeps_tail, render_state
from .data import is_text_label, read_jsonl, text_label_rows, to_internal, usable_questions

DEFAULT_INSTRUCTIONS = "Which label fits the text?"


def rows_from_csv(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
                  instructions: str | None = None) -> list[dict]:
    """Text+label rows (CSV, or JSONL) as gold rows: one choice question over every label seen."""
    return text_label_rows(path, text_column, label_column, question_id, instructions or DEFAULT_INSTRUCTIONS)


def read_data(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
              instructions: str | None = None) -> list[dict]:
    """Gold rows from a gold JSONL file, or from text+label data (a CSV, or a JSONL without 'questions')."""
    if is_text_label(path, text_column != "text"):
        return rows_from_csv(path, text_column, label_column, question_id, instructions)
    return read_jsonl(path)


def encode_state(tok: Any, state: Any, max_len: int) -> list[int]:
    """The state's token ids (no special tokens), at most max_len: a list state keeps its newest tokens."""
    from ..sequence import encode, scrub_mask

    ids = encode(tok, scrub_mask(tok, render_state(state)))
    if len(ids) <= max_len:
        return ids
    return ids[len(ids) - max_len:] if keeps_tail(state) else ids[:max_len]


def make_item(tok: Any, q: Any, target: Any, state_ids: Any, head_max_len: int, max_len: int | None = None,
              keep_tail: bool = False) -> dict:
    """One training item: a question, its target (caller order) and the state's token ids."""
    question = q if hasattr(q, "option_texts") else to_internal("q", q)
    target = np.asarray(target, dtype=np.float64)
    if target.shape != (question.k,):
        raise ValueError(f"question '{question.qid}': target has {target.size} values for {question.k} options")
    return {"qid": question.qid, "question": question, "qtype": QTYPES[question.qtype], "k": question.k,
            "target": target, "state_ids": list(state_ids), "keep_tail": bool(keep_tail),
            "head_max_len": head_max_len, "max_len": max_len}


def items_from_rows(tok: Any, rows: Any, max_len: int, head_max_len: int,
                    label_smoothing: float = 0.0) -> tuple[list[dict], dict]:
    """(items, skipped counts): one item per question with a gold or expected answer; rows or questions
    that cannot be used are counted under `bad_row`, `invalid_question`, `invalid_target`, `no_target`."""
    items, skipped = [], collections.Counter()
    for row in rows:
        state_ids = None
        for q, target in usable_questions(row, label_smoothing, skipped):
            if state_ids is None:
                state_ids = encode_state(tok, row["state"], max_len)
            items.append(make_item(tok, q, target, state_ids, head_max_len, max_len, keeps_tail(row["state"])))
    return items, dict(skipped)


def encode_item(tok: Any, item: dict, max_len: int, head_max_len: int, option_order: Any = None,
                parallel: bool = False) -> dict:
    """The model row of an item: input_ids, attention_mask, marker_pos, qtype and the target in slot order
    (`option_order[s]` = the option shown in slot s); with `parallel` also position_ids and option_ids."""
    from ..sequence import build_row
    from ..sequence_names import parallel_layout

    q, target = item["question"], np.asarray(item["target"], dtype=np.float64)
    if option_order is not None:
        order = [int(i) for i in option_order]
        q, target = replace(q, option_order=tuple(order)), target[order]
    row = build_row(tok, q, item["state_ids"], item.get("keep_tail", False), max_len, head_max_len)
    out = {"input_ids": list(row.ids), "attention_mask": [1] * len(row.ids), "marker_pos": list(row.markers),
           "qtype": row.qtype, "target": target.tolist()}
    if parallel:
        out.update(parallel_layout(row.markers, len(row.head.ids), len(row.ids)))
    return out


def evaluate_records(records: Any, temperature: Any = None, temperature_by_options: Any = None) -> dict:
    """Accuracy (argmax against the gold argmax), ECE and NLL of calibration records at these temperatures
    (1.0 everywhere by default), overall and per question type."""
    from ..calibrate import check_records, ece_score, predictions, temperature_for

    records = check_records(records)
    temps = list(temperature) if temperature is not None else [1.0, 1.0, 1.0]
    by_type: dict = {}
    for qtype_id, name in QTYPE_NAMES.items():
        subset = [r for r in records if r[0] == qtype_id]
        if subset:
            by_type[name] = _summary(subset, temps, temperature_by_options, predictions, ece_score, temperature_for)
    overall = _summary(records, temps, temperature_by_options, predictions, ece_score, temperature_for)
    return {**overall, "by_type": by_type}


def _summary(records: list, temps: list, by_options: Any, predictions: Any, ece_score: Any, temperature_for: Any) -> dict:
    if not records:
        return {"n": 0, "accuracy": None, "ece": None, "nll": None}
    conf, correct = predictions(records, temps, by_options)
    nll = []
    for qtype, logits, target, k in records:
        z = np.asarray(logits[:k], dtype=np.float64) / temperature_for(qtype, k, temps, by_options)
        log_p = z - z.max() - math.log(np.exp(z - z.max()).sum())
        nll.append(float(-(np.asarray(target[:k], dtype=np.float64) * log_p).sum()))
    return {"n": len(records), "accuracy": round(float(correct.mean()), 4),
            "ece": round(ece_score(conf, correct), 4), "nll": round(float(np.mean(nll)), 4)}


def calibration_report(records: Any, temperature: Any) -> dict:
    """ECE, accuracy and NLL of the calibration records before (T = 1) and after the fitted temperatures."""
    before = evaluate_records(records)
    after = evaluate_records(records, temperature)
    return {"n": before["n"], "ece_before": before["ece"], "ece_after": after["ece"], "nll_before": before["nll"],
            "nll_after": after["nll"], "accuracy": after["accuracy"], "temperature": list(temperature)}
