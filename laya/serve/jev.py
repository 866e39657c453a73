"""Jev compatibility: Jev's confidence formula (`x_jev_confidence`) and the strict Jev response shape."""

from __future__ import annotations

from ..confidence import jev_confidence

STRICT_ANSWER_KEYS = {
    "choice": ("type", "choice", "confidence", "probabilities"),
    "score": ("type", "score", "confidence", "probabilities", "legend"),
    "noul": ("type", "noul"),
}


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
