"""Jev compatibility: Jev's confidence formula (`x_jev_confidence`) and the strict Jev response shape."""

from __future__ import annotations

import math
from typing import Any

ROUND = 4
STRICT_ANSWER_KEYS = {
    "choice": ("type", "choice", "confidence", "probabilities"),
    "score": ("type", "score", "confidence", "probabilities", "legend"),
    "noul": ("type", "noul"),
}


def _distribution(probabilities: Any) -> list[float] | None:
    """Renormalised probabilities, or None when any value is not a finite, non-negative number."""
    if not isinstance(probabilities, dict) or not probabilities:
        return None
    values = list(probabilities.values())
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in values):
        return None
    total = float(sum(values))
    if total <= 0:
        return None
    return [v / total for v in values]


def jev_confidence(answer: dict) -> float | None:
    """choice: (max p - 1/n)/(1 - 1/n); score: max(0, 1 - sum p_i|i - mode| / D), D being that spread for a
    uniform distribution around the centre; one option -> 1.0; noul or unusable numbers -> None."""
    kind = answer.get("type")
    if kind not in ("choice", "score"):
        return None
    p = _distribution(answer.get("probabilities"))
    if p is None:
        return None
    n = len(p)
    if n == 1:
        return 1.0
    if kind == "choice":
        value = (max(p) - 1.0 / n) / (1.0 - 1.0 / n)
    else:
        mode = p.index(max(p))
        spread = sum(pi * abs(i - mode) for i, pi in enumerate(p))
        centre = (n - 1) / 2.0
        uniform = sum(abs(i - centre) for i in range(n)) / n
        value = max(0.0, 1.0 - spread / uniform)
    return round(min(1.0, max(0.0, value)), ROUND)


def with_jev_confidence(result: dict) -> dict:
    """The result with `x_jev_confidence` on each choice/score answer (a new dict; the input is untouched)."""
    answers = {}
    for qid, answer in result.get("answers", {}).items():
        value = jev_confidence(answer)
        answers[qid] = {**answer, "x_jev_confidence": value} if answer.get("type") in ("choice", "score") \
            else answer
    return {**result, "answers": answers}


def strict(result: dict) -> dict:
    """The exact Jev shape: model, answers (per-type keys only) and usage{input_tokens, output_tokens}."""
    answers = {}
    for qid, answer in result.get("answers", {}).items():
        keys = STRICT_ANSWER_KEYS.get(answer.get("type"), ("type",))
        answers[qid] = {k: answer[k] for k in keys if k in answer}
    usage = result.get("usage", {})
    return {"model": result.get("model"), "answers": answers,
            "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": usage.get("output_tokens", 0)}}


def project(result: dict, strict_mode: bool) -> dict:
    return strict(result) if strict_mode else with_jev_confidence(result)
