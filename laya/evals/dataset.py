"""Labelled eval data: `Example` rows and a checked `Dataset` read from JSONL, plus their fingerprints.

A row is `{"state", "questions": {qid: definition}, "expected": {qid: answer}, "tags"?, "language"?,
"model"?}`; every problem is an `EvalError` (a ValueError) naming the row (`<path>:<line>`).
Torch-free.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..questions import check_questions


class EvalError(ValueError):
    """Bad eval input or a refused evaluation: the message names the value and what to change."""


REQUIRED_KEYS = ("state", "questions", "expected")


def _check_row(row: Any, where: str) -> None:
    if not isinstance(row, dict):
        raise EvalError(f"{where} must be an object, got {type(row).__name__}")
    for key in REQUIRED_KEYS:
        if key not in row:
            raise EvalError(f"{where} is missing {key!r}")
    if not isinstance(row["questions"], dict):
        raise EvalError(f"{where} 'questions' must be an object")
    if not isinstance(row["expected"], dict):
        raise EvalError(f"{where} 'expected' must be an object keyed by question id")
    unknown = sorted(str(q) for q in row["expected"] if q not in row["questions"])
    if unknown:
        raise EvalError(f"{where} 'expected' names unknown question(s): {', '.join(unknown)}")
    if "tags" in row and row["tags"] is not None and not isinstance(row["tags"], list):
        raise EvalError(f"{where} 'tags' must be a list")
    for key in ("language", "model"):
        value = row.get(key)
        if value is not None and not isinstance(value, str):
            raise EvalError(f"{where} {key!r} must be a string or null, got {type(value).__name__}")


@dataclass
class Example:
    """One labelled state: its questions and the expected answer per question id."""

    state: Any
    questions: dict
    expected: dict
    tags: tuple = ()
    language: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        self.tags = tuple(str(t) for t in (self.tags or ()))

    @classmethod
    def from_dict(cls, row: Any, where: str = "row") -> "Example":
        """An Example from one JSON row; `EvalError` naming `where` when the row is malformed."""
        _check_row(row, where)
        return cls(row["state"], row["questions"], row["expected"], tuple(row.get("tags") or ()),
                   row.get("language"), row.get("model"))

    def to_dict(self) -> dict:
        out = {"state": self.state, "questions": self.questions, "expected": self.expected}
        if self.tags:
            out["tags"] = list(self.tags)
        for key in ("language", "model"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass
class Dataset:
    """Checked examples (`len()`, iteration, indexing); `path` is set when read from a file."""

    examples: list = field(default_factory=list)
    path: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.examples, (str, bytes, dict)) or not hasattr(self.examples, "__iter__"):
            raise EvalError(f"a Dataset needs a list of Example, got {type(self.examples).__name__}")
        self.examples = list(self.examples)
        for i, ex in enumerate(self.examples):
            where = f"example {i}"
            if not isinstance(ex, Example):
                raise EvalError(f"{where} must be an Example, got {type(ex).__name__}")
            _check_row(ex.to_dict(), where)

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    def __getitem__(self, i: int) -> Example:
        return self.examples[i]

    @property
    def question_ids(self) -> list[str]:
        """Every question id named by an example, sorted."""
        return sorted({str(q) for ex in self.examples for q in ex.questions})

    @classmethod
    def from_jsonl(cls, path: str) -> "Dataset":
        """Rows of a JSONL file (blank and `#` lines skipped); `EvalError` naming `<path>:<line>`."""
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise EvalError(f"{path} cannot be read: {e}") from None
        examples = []
        for n, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as e:  # (RecursionError: nested too deep)
                raise EvalError(f"{path}:{n} is not valid JSON: {e}") from None
            examples.append(Example.from_dict(row, where=f"{path}:{n}"))
        if not examples:
            raise EvalError(f"{path} contains no examples")
        return cls(examples, path=str(path))


# ---- fingerprints --------------------------------------------------------------------------------------

def _question_schema(qid: Any, definition: Any) -> str:
    """Canonical JSON of one question as the model sees it (the raw definition when it does not validate)."""
    try:
        (q,) = check_questions({qid: definition})
    except (ValueError, TypeError):
        schema = {"qid": str(qid), "definition": definition}
    else:
        schema = {"qid": str(q.qid), "type": q.qtype, "instructions": q.instructions,
                  "labels": [str(label) for label in q.labels], "criteria": list(q.option_texts)}
        if q.option_order is not None:
            schema["option_order"] = list(q.option_order)
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def questions_fingerprint(dataset: Any) -> str:
    """SHA-256 over the sorted set of canonical question schemas (one per line) of every example."""
    examples = dataset.examples if isinstance(dataset, Dataset) else list(dataset)
    schemas = set()
    for ex in examples:
        questions = ex.questions if isinstance(ex, Example) else ex["questions"]
        schemas.update(_question_schema(qid, d) for qid, d in questions.items())
    digest = hashlib.sha256()
    for schema in sorted(schemas):
        digest.update((schema + "\n").encode("utf-8", "surrogatepass"))  # (a skipped lone surrogate: no crash)
    return digest.hexdigest()


def file_fingerprint(path: str) -> str:
    """SHA-256 of a file's bytes; `EvalError` when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as e:
        raise EvalError(f"{path} cannot be read: {e}") from None
    return digest.hexdigest()
