"""Per-answer evaluators (`score(answer, expected) -> float | None`; None = does not apply) and the
correctness and confidence of one answer that the calibration metrics use. Torch-free."""

from __future__ import annotations

import math
from typing import Any

from .dataset import EvalError


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


ANSWER_KEYS = ("choice", "noul", "score")  # the value key of each answer type


def _answer_type(answer: Any) -> str | None:
    """The answer's `type`, else the type its value key names (a stub runner's answer may carry no type)."""
    if not isinstance(answer, dict):
        return None
    if "type" in answer:
        return answer["type"]
    return next((key for key in ANSWER_KEYS if key in answer), None)


def answer_confidence(answer: Any) -> float | None:
    """`answer_confidence`, else `confidence`, else max(p, 1-p) for noul, else the largest probability."""
    if not isinstance(answer, dict):
        return None
    for key in ("answer_confidence", "confidence"):
        if _number(answer.get(key)):
            return float(answer[key])
    if _answer_type(answer) == "noul" and _number(answer.get("noul")):
        p = float(answer["noul"])
        return max(p, 1.0 - p)
    probs = answer.get("probabilities")
    if isinstance(probs, dict):
        values = [float(v) for v in probs.values() if _number(v)]
        if values:
            return max(values)
    return None


def answer_correct(answer: Any, expected: Any) -> bool | None:
    """Label equality for choice, P >= 0.5 against a bool for noul; None for anything else."""
    kind = _answer_type(answer)
    if kind == "choice" and isinstance(expected, str):
        return answer.get("choice") == expected
    if kind == "noul" and isinstance(expected, bool) and _number(answer.get("noul")):
        return (float(answer["noul"]) >= 0.5) == expected
    return None


class Evaluator:
    """Base class: `name` and `score(answer, expected) -> float | None` (None: not applicable)."""

    name = "evaluator"

    def score(self, answer: dict, expected: Any) -> float | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class ChoiceAccuracy(Evaluator):
    name = "choice_accuracy"

    def score(self, answer: dict, expected: Any) -> float | None:
        if _answer_type(answer) != "choice" or not isinstance(expected, str):
            return None
        return 1.0 if answer.get("choice") == expected else 0.0


class NoulAccuracy(Evaluator):
    name = "noul_accuracy"

    def score(self, answer: dict, expected: Any) -> float | None:
        correct = answer_correct(answer, expected) if _answer_type(answer) == "noul" else None
        return None if correct is None else float(correct)


def _score_error(answer: Any, expected: Any) -> float | None:
    if _answer_type(answer) != "score" or not _number(expected) or not _number(answer.get("score")):
        return None
    return abs(float(answer["score"]) - float(expected))


class ScoreMAE(Evaluator):
    name = "score_mae"

    def score(self, answer: dict, expected: Any) -> float | None:
        return _score_error(answer, expected)


class ScoreWithin(Evaluator):
    """1.0 when a score answer is within `tolerance` of the expected level, else 0.0."""

    def __init__(self, tolerance: float = 0.1):
        if not _number(tolerance) or tolerance < 0:
            raise EvalError(f"ScoreWithin tolerance must be a finite number >= 0, got {tolerance!r}")
        self.tolerance = float(tolerance)
        self.name = f"score_within_{self.tolerance:g}"

    def score(self, answer: dict, expected: Any) -> float | None:
        error = _score_error(answer, expected)
        return None if error is None else (1.0 if error <= self.tolerance + 1e-12 else 0.0)


class MeanConfidence(Evaluator):
    name = "mean_confidence"

    def score(self, answer: dict, expected: Any) -> float | None:
        return answer_confidence(answer)


def default_evaluators() -> list[Evaluator]:
    """Fresh ChoiceAccuracy, NoulAccuracy, ScoreMAE and MeanConfidence."""
    return [ChoiceAccuracy(), NoulAccuracy(), ScoreMAE(), MeanConfidence()]


def check_evaluators(evaluators: Any) -> list[Evaluator]:
    if evaluators is None:
        return default_evaluators()
    if isinstance(evaluators, (str, bytes, dict)) or not hasattr(evaluators, "__iter__"):
        raise EvalError(f"evaluators must be a list of Evaluator, got {type(evaluators).__name__}")
    out = list(evaluators)
    for e in out:
        if not isinstance(getattr(e, "name", None), str) or not callable(getattr(e, "score", None)):
            raise EvalError(f"evaluator {e!r} needs a string 'name' and a score(answer, expected) method")
    names = [e.name for e in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EvalError(f"evaluator names must be unique, got {', '.join(dupes)} more than once")
    return out
