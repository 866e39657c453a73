"""Training examples from files: gold-probability JSONL, or text+label CSV/JSONL.

Questions are validated and rendered exactly as at inference (`laya.questions.check_question`), so
a model trained here sees the token rows the Agent will build.
"""

from __future__ import annotations

import collections
import csv
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..questions import Question, check_question


@dataclass
class Example:
    """One (state, question) row and its gold probabilities in canonical option order."""

    state: Any
    question: Question
    target: np.ndarray  # float64 [k], sums to 1


def _where(source: str, line: int) -> str:
    return f"{source}:{line}"


def normalise_target(values: list[float], where: str) -> np.ndarray:
    """Gold probabilities summing to 1; all zero -> uniform; negative or non-finite -> ValueError."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        raise ValueError(f"{where}: the gold probabilities are empty")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{where}: gold probabilities must be finite and >= 0, got {values!r}")
    total = arr.sum()
    return np.full(arr.size, 1.0 / arr.size) if total == 0 else arr / total


def option_keys(q: Question) -> list[str]:
    """The keys gold probabilities use: choice labels as strings, score levels "0".., noul "false"/"true"."""
    return [str(label) for label in q.labels]


def target_from_probabilities(q: Question, probabilities: Any, where: str) -> np.ndarray:
    if not isinstance(probabilities, dict):
        raise ValueError(f"{where}: 'probabilities' for question '{q.qid}' must be a dict {{option: p}}")
    keys = option_keys(q)
    unknown = [k for k in probabilities if str(k) not in keys]
    if unknown:
        raise ValueError(f"{where}: question '{q.qid}' has gold for unknown options {unknown}; "
                         f"its options are {keys}")
    given = {str(k): v for k, v in probabilities.items()}
    values = []
    for key in keys:
        v = given.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}: gold probability for option {key!r} of '{q.qid}' must be a number, got {v!r}")
        values.append(float(v))
    return normalise_target(values, where)


def to_internal(qid: Any, question: Any) -> Question:
    """A question definition validated and rendered exactly as at inference."""
    return check_question(qid, question)


def target_from_gold(q: Question, gold_q: Any) -> np.ndarray:
    """The target of one question's gold entry {"probabilities": {option key: p}} (normalised)."""
    probs = gold_q.get("probabilities") if isinstance(gold_q, dict) else None
    return target_from_probabilities(q, probs, f"gold for '{q.qid}'")


def read_jsonl(path: str) -> list:
    """The JSON value of every non-blank line; a bad line is a ValueError naming it."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except (json.JSONDecodeError, RecursionError) as e:  # (RecursionError: nested too deep)
                    raise ValueError(f"{_where(path, line_no)}: not valid JSON ({e})") from None
    return rows


def draw_option_order(item: Any, rng: Any, shuffle_types: Any = None) -> list[int] | None:
    """A random option order for this example's question, or None (one option, or its type not in
    shuffle_types; None = every type)."""
    q = item["question"] if isinstance(item, dict) else item.question
    if q.k <= 1 or (shuffle_types is not None and q.qtype not in shuffle_types):
        return None
    order = list(range(q.k))
    rng.shuffle(order)
    return order


def target_from_expected(q: Question, expected_val: Any, label_smoothing: float = 0.0) -> np.ndarray:
    """One expected answer -> a (label-smoothed) target. noul takes a bool or "true"/"false"."""
    smoothing, expected = label_smoothing, expected_val
    keys = option_keys(q)
    if q.qtype == "noul" and isinstance(expected, bool):
        expected = "true" if expected else "false"
    key = str(expected).lower() if q.qtype == "noul" else str(expected)
    if key not in keys:
        raise ValueError(f"question '{q.qid}': expected answer {expected!r} is not one of its options {keys}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing!r}")
    target = np.full(len(keys), smoothing / len(keys))
    target[keys.index(key)] += 1.0 - smoothing
    return target


def load_gold_jsonl(path: str, smoothing: float = 0.0, skipped: collections.Counter | None = None) -> list[Example]:
    """Rows `{"state", "questions": {qid: def}, "gold": {qid: {"probabilities": {...}}}}` (or
    `"expected": {qid: answer}`); questions without gold are skipped.  With a `skipped` counter, rows and
    questions that cannot be used are counted there (`bad_row`, `invalid_question`, `invalid_target`,
    `no_target`, as `items_from_rows`) instead of raising."""
    examples = []
    tally = skipped if skipped is not None else collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = _where(path, line_no)
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as e:  # (RecursionError: nested too deep)
                raise ValueError(f"{where}: not valid JSON ({e})") from None
            if not isinstance(row, dict) or "state" not in row or not isinstance(row.get("questions"), dict):
                if skipped is None:
                    raise ValueError(f"{where}: each row needs 'state' and a 'questions' dict")
                tally["bad_row"] += 1
                continue
            gold, expected = row.get("gold") or {}, row.get("expected") or {}
            for qid, definition in row["questions"].items():
                try:
                    q = check_question(qid, definition)
                except ValueError:
                    if skipped is None:
                        raise
                    tally["invalid_question"] += 1
                    continue
                try:
                    if qid in gold:
                        entry = gold[qid]
                        probs = entry.get("probabilities") if isinstance(entry, dict) else None
                        target = target_from_probabilities(q, probs, where)
                    elif qid in expected:
                        target = target_from_expected(q, expected[qid], smoothing)
                    else:
                        tally["no_target"] += 1
                        continue
                except ValueError:
                    if skipped is None:
                        raise
                    tally["invalid_target"] += 1
                    continue
                examples.append(Example(row["state"], q, target))
    return examples


def text_label_rows(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
                    instructions: str = "Which label fits the text?", labels: list[str] | None = None) -> list[dict]:
    """CSV (by extension) or JSONL rows with a text and a label column -> gold rows with one choice question
    over all labels seen (sorted, or `labels` when given) and the row's label as the expected answer."""
    if path.lower().endswith(".csv"):
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    for i, row in enumerate(rows, 1):
        if text_column not in row or label_column not in row:
            raise ValueError(f"{path}: row {i} lacks column {text_column!r} or {label_column!r} "
                             f"(it has {sorted(row)}); pass --text-column / --label-column")
    names = labels or sorted({str(row[label_column]) for row in rows})
    question = {"type": "choice", "instructions": instructions, "criteria": names}
    return [{"state": str(row[text_column]), "questions": {question_id: question},
             "expected": {question_id: str(row[label_column])}} for row in rows]


def load_text_label(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
                    instructions: str = "Which label fits the text?", smoothing: float = 0.0,
                    labels: list[str] | None = None) -> list[Example]:
    """text_label_rows as examples (the one question validated once)."""
    rows = text_label_rows(path, text_column, label_column, question_id, instructions, labels)
    if not rows:
        return []
    q = check_question(question_id, rows[0]["questions"][question_id])
    return [Example(row["state"], q, target_from_expected(q, row["expected"][question_id], smoothing)) for row in rows]


def is_text_label(path: str, text_column_given: bool = False) -> bool:
    """The one data-kind rule shared by `laya-train` and `laya-evals`: text+label rows when a text column is
    given explicitly, for a CSV, or for a JSONL whose first row has no 'questions' dict; gold-probability
    JSONL otherwise (including an unreadable first row, so the gold loader reports it with its line)."""
    if text_column_given or path.lower().endswith(".csv"):
        return True
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and not isinstance(row.get("questions"), dict)
    except (OSError, ValueError):
        return False
    return False


def load_examples(path: str, text_column: str | None = None, skipped: collections.Counter | None = None,
                  **kwargs: Any) -> list[Example]:
    """Gold JSONL, unless a text column is named, the file is a CSV, or its first row has no 'questions'
    dict (`is_text_label`).  `skipped`: as `load_gold_jsonl`'s (text + label rows skip nothing)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training data {path} not found")
    if is_text_label(path, text_column is not None):
        return load_text_label(path, text_column or "text", **kwargs)
    return load_gold_jsonl(path, kwargs.get("smoothing", 0.0), skipped)


def with_option_order(example: Example, order: list[int]) -> tuple[Question, np.ndarray]:
    """The question showing option order[s] in slot s, and the target permuted to slot order."""
    from dataclasses import replace

    q = replace(example.question, option_order=tuple(order))
    return q, example.target[list(order)]


def check_finite(x: float, what: str) -> float:
    if not math.isfinite(x):
        raise FloatingPointError(f"{what} is not finite ({x}); lower the learning rates or check the data")
    return x
