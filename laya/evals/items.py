"""Checkpoint eval helpers of `laya-evals --data` (laya/evals/checkpoint_cli.py) and `scripts/train_mini.py`.

- `is_hit` / `metrics`: accuracy (the argmax is one of the gold maxima), Brier, ECE
  (`laya.calibrate.ece_score`) and mean confidence per question type and overall.
- `load_eval_items`: gold JSONL (spec §7.1) or text+label CSV/JSONL through the training loaders
  (`laya.train.data`), keeping each question's raw definition so the public `predict_batch` API can
  answer it exactly as a caller would.
- `answer_items`: every item answered by an `Agent` or `ONNXAgent`; probabilities back in canonical
  option order (choice labels, score levels 0..k-1, noul [false, true]).
- `agreement`: argmax agreement and |dp| between two sets of answers to the same items.
- `judge_gates`: min-accuracy / max-ECE gates per row under a gate policy.

numpy only at import time; torch is pulled by whoever loads an agent.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..questions import QTYPES, Question

TYPES = ("choice", "score", "noul")
GATE_POLICIES = ("any", "all", "warn")


def is_hit(p: np.ndarray, target: np.ndarray) -> bool:
    """The predicted option is one of the gold maxima (score targets tie between two levels for some k)."""
    return bool(target[int(np.argmax(p))] >= target.max() - 1e-9)


def metrics(records: Sequence[tuple], probs: Sequence[np.ndarray], bins: int = 15) -> dict:
    """{type: {n, accuracy, brier, ece, confidence}} plus "all" (types without rows are left out);
    records are (qtype_id, target, k, meta). Brier is the multi-class sum of squares (0..2),
    confidence the mean top probability; values rounded to 4 decimals."""
    from ..calibrate import ece_score

    out = {}
    for name, want in [(t, i) for i, t in enumerate(TYPES)] + [("all", None)]:
        idx = [i for i, r in enumerate(records) if want is None or r[0] == want]
        if not idx:
            continue
        correct = np.array([is_hit(probs[i], records[i][1]) for i in idx])
        brier = np.array([float(((probs[i] - records[i][1]) ** 2).sum()) for i in idx])
        conf = np.array([float(np.max(probs[i])) for i in idx])
        out[name] = {"n": len(idx), "accuracy": round(float(correct.mean()), 4), "brier": round(float(brier.mean()), 4),
                     "ece": round(ece_score(conf, correct, bins), 4), "confidence": round(float(conf.mean()), 4)}
    return out


# ---- data ------------------------------------------------------------------------------------------------

@dataclass
class EvalItem:
    """One (state, question) pair with its raw definition (for `predict_batch`) and gold target."""

    state: Any
    qid: Any
    definition: dict
    question: Question
    target: np.ndarray

    @property
    def record(self) -> tuple:
        return (self.question.qtype_id, self.target, self.question.k, {})


def load_eval_items(path: str, text_column: str | None = None, label_column: str = "label",
                    question_id: str = "label", instructions: str = "Which label fits the text?") -> list[EvalItem]:
    """Gold JSONL (`{"state", "questions", "gold"|"expected"}` rows; questions without gold skipped) or,
    for a CSV or when `text_column` is named, text+label rows (one choice question over the labels seen).
    Validation and targets come from `laya.train.data`; errors are ValueError/FileNotFoundError."""
    import os

    from ..train.data import is_text_label, load_examples, read_jsonl

    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file {path} not found")
    if is_text_label(path, text_column is not None):
        examples = load_examples(path, text_column or "text", label_column=label_column, question_id=question_id,
                                 instructions=instructions)
        items = []
        for ex in examples:
            definition = {"type": "choice", "instructions": instructions, "criteria": list(ex.question.labels)}
            items.append(EvalItem(ex.state, ex.question.qid, definition, ex.question, ex.target))
        return items
    examples = load_examples(path)
    definitions = []
    for row in read_jsonl(path):  # the loader validated every row; walk them in the same order
        gold, expected = row.get("gold") or {}, row.get("expected") or {}
        definitions += [(qid, d) for qid, d in row["questions"].items() if qid in gold or qid in expected]
    if len(definitions) != len(examples):
        raise ValueError(f"{path}: {len(definitions)} gold questions read but {len(examples)} examples loaded "
                         "(rows and loaded examples out of step)")
    return [EvalItem(ex.state, qid, d, ex.question, ex.target) for ex, (qid, d) in zip(examples, definitions)]


# ---- answering -------------------------------------------------------------------------------------------

def probs_from_answer(q: Question, answer: dict) -> np.ndarray:
    """An answer's probabilities in canonical option order (4-decimal values as returned, renormalised)."""
    if q.qtype == "noul":
        p_true = float(answer["noul"])
        values = [1.0 - p_true, p_true]
    else:
        got = answer.get("probabilities") or {}
        values = []
        for label in q.labels:
            v = got.get(label, got.get(str(label)))
            if v is None:
                raise ValueError(f"the answer to '{q.qid}' has no probability for option {label!r}: {answer!r}")
            values.append(float(v))
    arr = np.asarray(values, dtype=np.float64)
    total = arr.sum()
    return arr / total if total > 0 else np.full(arr.size, 1.0 / arr.size)


def _group_key(item: EvalItem) -> str:
    # order-sensitive (no sort_keys), like the Router's grouping: criteria order changes the model's output
    return json.dumps([str(item.qid), item.definition], ensure_ascii=False, default=repr)


def answer_items(agent: Any, items: Sequence[EvalItem], batch_size: int | None = None) -> list[np.ndarray]:
    """Answer every item with `agent.predict_batch`, one call per distinct question (states batched)."""
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(_group_key(item), []).append(i)
    probs: list[np.ndarray | None] = [None] * len(items)
    for idx in groups.values():
        first = items[idx[0]]
        results = agent.predict_batch([items[i].state for i in idx], {first.qid: first.definition},
                                      batch_size=batch_size)
        for i, result in zip(idx, results):
            probs[i] = probs_from_answer(items[i].question, result["answers"][first.qid])
    return probs  # type: ignore[return-value]


def agreement(items: Sequence[EvalItem], probs_a: Sequence[np.ndarray], probs_b: Sequence[np.ndarray]) -> dict:
    """{type: {n, argmax_agreement, max_abs_dp, mean_abs_dp}} plus "all": the share of items whose
    argmax is the same, and the largest / mean absolute difference of any option's probability."""
    out = {}
    for name, want in [(t, QTYPES[t]) for t in TYPES] + [("all", None)]:
        idx = [i for i, it in enumerate(items) if want is None or it.question.qtype_id == want]
        if not idx:
            continue
        same = [int(np.argmax(probs_a[i])) == int(np.argmax(probs_b[i])) for i in idx]
        dp = [float(np.max(np.abs(probs_a[i] - probs_b[i]))) for i in idx]
        out[name] = {"n": len(idx), "argmax_agreement": round(float(np.mean(same)), 4),
                     "max_abs_dp": round(max(dp), 4), "mean_abs_dp": round(float(np.mean(dp)), 4)}
    return out


# ---- gates -----------------------------------------------------------------------------------------------

def judge_gates(table: dict, min_accuracy: float | None = None, max_ece: float | None = None,
                policy: str = "any") -> dict:
    """Judge every row of a `metrics` table (each question type present, and "all").

    A row fails when accuracy < min_accuracy or ece > max_ece (gates left as None are not checked).
    Policy "any": the run fails when any judged row fails; "all": only when every judged row fails;
    "warn": rows are judged and reported, the run never fails. No gate given -> the run passes.
    Returns {"policy", "min_accuracy", "max_ece", "rows": {row: {"passed", "failures": [...]}},
    "failed_rows": [...], "passed": bool}."""
    if policy not in GATE_POLICIES:
        raise ValueError(f"gate policy {policy!r} is not one of {', '.join(GATE_POLICIES)}")
    rows = {}
    for name, m in table.items():
        failures = []
        if min_accuracy is not None and m["accuracy"] < min_accuracy:
            failures.append(f"accuracy {m['accuracy']:.4f} < {min_accuracy:g}")
        if max_ece is not None and m["ece"] > max_ece:
            failures.append(f"ece {m['ece']:.4f} > {max_ece:g}")
        rows[name] = {"passed": not failures, "failures": failures}
    failed = [name for name, r in rows.items() if not r["passed"]]
    if policy == "warn" or not rows:
        passed = True
    elif policy == "any":
        passed = not failed
    else:
        passed = len(failed) < len(rows)
    return {"policy": policy, "min_accuracy": min_accuracy, "max_ece": max_ece, "rows": rows,
            "failed_rows": failed, "passed": passed}


def finite_fraction(value: str, what: str) -> float:
    """A probability-like flag value in [0, 1]; ValueError naming the value otherwise."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number in [0, 1], got {value!r}") from None
    if not math.isfinite(x) or not 0.0 <= x <= 1.0:
        raise ValueError(f"{what} must be a number in [0, 1], got {value!r}")
    return x
