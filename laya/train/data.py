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
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..numeric import is_real
from ..questions import Question, check_question, render_state


@dataclass
class Example:
    """One (state, question) row and its gold probabilities in canonical option order."""

    state: Any
    question: Question
    target: np.ndarray  # float64 [k], sums to 1


ENCODING = "utf-8-sig"  # a leading byte-order mark (Excel, Notepad) is not part of the first column or row


def _where(source: str, line: int) -> str:
    return f"{source}:{line}"


def _not_utf8(path: str) -> ValueError:
    """The first byte of `path` that is not UTF-8, by line (a decoder's own offset is within its chunk)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = len(re.findall(rb"\r\n|\r|\n", raw[:e.start])) + 1  # (every line end Python's text reading knows)
        return ValueError(f"{_where(path, line)}: byte 0x{raw[e.start]:02x} is not valid UTF-8; save the file as UTF-8")
    return ValueError(f"{path} is not valid UTF-8; save the file as UTF-8")


def _jsonl_values(path: str) -> list[tuple[int, Any]]:
    """(line number, JSON value) of every non-blank line; a bad line or byte is a ValueError naming its line."""
    values = []
    try:
        with open(path, encoding=ENCODING) as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    values.append((line_no, json.loads(line)))
                except (ValueError, RecursionError) as e:  # (RecursionError: nested too deep)
                    where = _where(path, line_no)
                    raise ValueError(f"{where}: not valid JSON ({e}); fix or remove that line") from None
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    return values


def _open_quote(lines: list[str]) -> str | None:
    """The last field of `lines` (whole records) when its quoted field is still open at their end, else None."""
    # a non-strict reader saves an open quoted field at end of data; one more line break would land inside it
    rows = [r for r in csv.reader(lines) if r]
    try:
        longer = [r for r in csv.reader(lines + ["\n"]) if r]
    except csv.Error:  # the line break pushed the open field past csv.field_size_limit()
        return rows[-1][-1]
    return rows[-1][-1] if rows != longer else None


def csv_records(path: str) -> list[tuple[int, dict]]:
    """(line number, {column: value}) of every CSV record (the line it ends on); a bad byte, malformed CSV or
    a quoted field left open at the end of the file is a ValueError naming its line."""
    records: list[tuple[int, dict]] = []
    last: list[str] = []  # raw lines of the final record (the header until a record is read)
    pending: list[str] = []  # raw lines read since the last record

    def lines(f: Any) -> Any:
        for line in f:
            pending.append(line)
            yield line

    try:
        with open(path, encoding=ENCODING, newline="") as f:
            reader = csv.DictReader(lines(f))
            try:
                for row in reader:
                    records.append((reader.line_num, row))
                    last, pending[:] = pending[:], []
            except csv.Error as e:
                line = reader.reader.line_num  # (the DictReader's own count stops at the last good row)
                raise ValueError(f"{_where(path, line)}: not valid CSV ({e}); fix or remove that row") from None
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    field = _open_quote(last + pending)
    if field is not None:  # its line: the file's last line, less the line breaks the field swallowed
        line = reader.reader.line_num - len(re.findall(r"\r\n|\r|\n", field)) + field.endswith(("\n", "\r"))
        raise ValueError(f"{_where(path, line)}: not valid CSV (a quoted field starts on this line and is never "
                         "closed, so it runs to the end of the file); close the quote")
    return records


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
        if not is_real(v, finite=True, types=(int, float)):
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
    return [value for _, value in _jsonl_values(path)]


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


def _row_problem(row: Any) -> str | None:
    """Why a gold row cannot be used at all, or None."""
    if not isinstance(row, dict) or "state" not in row or not isinstance(row.get("questions"), dict):
        return "each row needs 'state' and a 'questions' dict"
    for key in ("gold", "expected"):
        if row.get(key) is not None and not isinstance(row[key], dict):
            kind = type(row[key]).__name__
            return f"{key!r} must be an object keyed by question id, got {kind}; fix or remove the row"
    try:  # a state the model cannot read fails here, not in the middle of training
        render_state(row["state"])
    except (TypeError, ValueError) as e:
        return f"{e}; fix or remove the row"
    return None


def usable_questions(row: Any, smoothing: float = 0.0, skipped: collections.Counter | None = None,
                     where: str = "row", checked: dict | None = None) -> list[tuple[Question, np.ndarray]]:
    """(question, target) of every question of a gold row that has gold or an expected answer: the one
    classification of unusable rows.  With a `skipped` counter what cannot be used is counted there
    (`bad_row`, `invalid_question`, `invalid_target`, `no_target`); without, it is a ValueError naming
    `where` (a question without an answer is skipped either way).  `checked`: {qid: Question} already validated."""
    tally = skipped if skipped is not None else collections.Counter()
    problem = _row_problem(row)
    if problem is not None:
        if skipped is None:
            raise ValueError(f"{where}: {problem}")
        tally["bad_row"] += 1
        return []
    gold, expected = row.get("gold") or {}, row.get("expected") or {}
    out = []
    for qid, definition in row["questions"].items():
        reason = "invalid_question"
        try:
            q = checked[qid] if checked and qid in checked else check_question(qid, definition)
            reason = "invalid_target"
            if qid in gold:
                target = target_from_gold(q, gold[qid])
            elif qid in expected:
                target = target_from_expected(q, expected[qid], smoothing)
            else:
                tally["no_target"] += 1
                continue
        except ValueError as e:
            if skipped is None:
                raise ValueError(f"{where}: {e}") from None
            tally[reason] += 1
            continue
        out.append((q, target))
    return out


def load_gold_jsonl(path: str, smoothing: float = 0.0, skipped: collections.Counter | None = None) -> list[Example]:
    """Rows `{"state", "questions": {qid: def}, "gold": {qid: {"probabilities": {...}}}}` (or
    `"expected": {qid: answer}`); questions without gold are skipped.  With a `skipped` counter, rows and
    questions that cannot be used are counted there (`usable_questions`) instead of raising."""
    return [example for line_no, row in _jsonl_values(path)
            for example in gold_examples(row, smoothing, skipped, _where(path, line_no))]


def gold_examples(row: Any, smoothing: float = 0.0, skipped: collections.Counter | None = None,
                  where: str = "row", checked: dict | None = None) -> list[Example]:
    """The examples of one gold row: its `usable_questions`, each with the row's state."""
    pairs = usable_questions(row, smoothing, skipped, where, checked)
    return [Example(row["state"], q, target) for q, target in pairs]


def _missing(value: Any) -> bool:
    """A label cell that gives no answer: JSON null, a short CSV row, or an empty cell."""
    return value is None or (isinstance(value, str) and not value.strip())


def _text_label_records(path: str, text_column: str, label_column: str) -> list[tuple[int, dict]]:
    """(line, row) of a text+label CSV (by extension) or JSONL file; every row must have both columns."""
    records = csv_records(path) if path.lower().endswith(".csv") else _jsonl_values(path)
    for line, row in records:
        if not isinstance(row, dict):
            raise ValueError(f"{_where(path, line)}: a text+label row must be an object with {text_column!r} and "
                             f"{label_column!r}, got {type(row).__name__}")
        if text_column not in row or label_column not in row:
            has = sorted(str(k) for k in row if k is not None)  # (None: the cells of a CSV row longer than its header)
            raise ValueError(f"{_where(path, line)}: the row lacks column {text_column!r} or {label_column!r} "
                             f"(it has {has}); pass --text-column / --label-column")
    return records


def _text_label_gold_rows(path: str, text_column: str, label_column: str, question_id: str, instructions: str,
                          labels: list[str] | None) -> list[tuple[int, dict]]:
    """(line, gold row) per text+label row; a row without a label has no 'expected', one without text no 'state'."""
    records = _text_label_records(path, text_column, label_column)
    seen = {str(row[label_column]) for _, row in records if not _missing(row[label_column])}
    if records and not seen and not labels:
        raise ValueError(f"{path}: no row has a label in column {label_column!r}; fill the labels in or pass "
                         "--label-column")
    question = {"type": "choice", "instructions": instructions, "criteria": labels or sorted(seen)}
    rows = []
    for line, record in records:
        text, label = record[text_column], record[label_column]
        row = {} if text is None else {"state": str(text)}
        row["questions"] = {question_id: question}
        if not _missing(label):
            row["expected"] = {question_id: str(label)}
        rows.append((line, row))
    return rows


def text_label_rows(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
                    instructions: str = "Which label fits the text?", labels: list[str] | None = None) -> list[dict]:
    """CSV (by extension) or JSONL rows with a text and a label column -> gold rows with one choice question
    over all labels seen (sorted, or `labels` when given) and the row's label as the expected answer (none
    for a null or empty label; a row with a null text gets no 'state')."""
    return [row for _, row in _text_label_gold_rows(path, text_column, label_column, question_id, instructions,
                                                   labels)]


def load_text_label(path: str, text_column: str = "text", label_column: str = "label", question_id: str = "label",
                    instructions: str = "Which label fits the text?", smoothing: float = 0.0,
                    labels: list[str] | None = None, skipped: collections.Counter | None = None) -> list[Example]:
    """text_label_rows as examples (the one question validated once); a row without a label is skipped
    (`no_target`), one without a text is a `bad_row` (`skipped` as `load_gold_jsonl`'s)."""
    rows = _text_label_gold_rows(path, text_column, label_column, question_id, instructions, labels)
    if not rows:
        return []
    try:  # the labels seen make the question's options: name the file when one cannot be an option
        checked = {question_id: check_question(question_id, rows[0][1]["questions"][question_id])}
    except ValueError as e:
        raise ValueError(f"{path}: column {label_column!r}: {e}") from None
    examples = []
    for line, row in rows:
        if "state" not in row and skipped is None:
            raise ValueError(f"{_where(path, line)}: column {text_column!r} is null; give the row a text or remove it")
        examples += gold_examples(row, smoothing, skipped, _where(path, line), checked)
    return examples


def is_text_label(path: str, text_column_given: bool = False) -> bool:
    """The one data-kind rule shared by `laya-train` and `laya-evals`: text+label rows when a text column is
    given explicitly, for a CSV, or for a JSONL whose first row has no 'questions' dict; gold-probability
    JSONL otherwise (including an unreadable first row, so the gold loader reports it with its line)."""
    if text_column_given or path.lower().endswith(".csv"):
        return True
    try:
        with open(path, encoding=ENCODING) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and not isinstance(row.get("questions"), dict)
    except (OSError, ValueError, RecursionError):
        return False
    return False


def load_examples(path: str, text_column: str | None = None, skipped: collections.Counter | None = None,
                  **kwargs: Any) -> list[Example]:
    """Gold JSONL, unless a text column is named, the file is a CSV, or its first row has no 'questions'
    dict (`is_text_label`).  `skipped`: as `load_gold_jsonl`'s."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training data {path} not found")
    if is_text_label(path, text_column is not None):
        return load_text_label(path, text_column or "text", skipped=skipped, **kwargs)
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
