"""The choice behind the Agno, CrewAI, LlamaIndex and tool-selector classes: one choice question over
numbered options, a confidence floor with a fallback, and the screening guard they share."""

from __future__ import annotations

import asyncio
from typing import Any

from .controls import CONTROL_NAMES, Runner, check_answers, check_threshold, confidence_of, strict_answer, violations

__all__ = ["Choice", "LayaControls", "LayaLowConfidenceError", "Screen"]


class LayaLowConfidenceError(ValueError):
    """A decision below the confidence floor with no fallback: `.confidence`, `.threshold`, `.raw_decision`."""

    def __init__(self, message: str, confidence: float | None = None, threshold: float | None = None,
                 raw_decision: Any = None):
        super().__init__(message)
        self.confidence, self.threshold, self.raw_decision = confidence, threshold, raw_decision

    def __reduce__(self) -> tuple:
        return (type(self), (str(self), self.confidence, self.threshold, self.raw_decision))


class LayaControls:
    """The common controls as attributes, the runner they pick, and `last_decision` (the latest laya result)."""

    def __init__(self, **controls: Any):
        for name in CONTROL_NAMES:
            setattr(self, name, controls.pop(name, None))
        if controls:
            raise TypeError(f"unexpected keyword arguments {sorted(controls)}")
        self.last_decision: Any = None

    @property
    def _source(self) -> str:
        return Runner(self).source

    def _predict(self, state: Any, questions: dict) -> Any:
        self.last_decision = Runner(self).predict(state, questions)
        return self.last_decision

    def _decide(self, state: Any, questions: dict) -> dict:
        result = self._predict(state, questions)
        check_answers(result, self._source)
        return result


class Choice:
    """One routed pick: the option index, its confidence, a reason and the raw laya result."""

    def __init__(self, index: int, confidence: float, reason: str, raw: dict, fallback: bool = False):
        self.index, self.confidence, self.reason, self.raw, self.fallback = index, confidence, reason, raw, fallback


def choose(owner: LayaControls, state: Any, qid: str, instructions: str, descriptions: list, prefix: str,
           threshold: Any = 0.0, fallback_index: int | None = None, raise_on_low: bool = False,
           names: list | None = None) -> Choice:
    """Ask which of `descriptions` fits; below `threshold` take the fallback, raise, or keep the pick."""
    keys = [f"{prefix}_{i}" for i in range(len(descriptions))]
    questions = {qid: {"type": "choice", "instructions": instructions, "criteria": dict(zip(keys, descriptions))}}
    result = owner._decide(state, questions)
    answer = strict_answer(result, qid, owner._source, "choice")
    if answer["choice"] not in keys:
        raise RuntimeError(f"Malformed decision response from {owner._source}: {qid!r} chose "
                           f"{answer['choice']!r}, which is not one of {keys}")
    index, confidence = keys.index(answer["choice"]), confidence_of(answer)
    names = names or keys
    floor = float(threshold or 0.0)
    if floor > 0 and confidence < floor:
        if fallback_index is not None:
            reason = (f"confidence {confidence:.3f} below threshold {floor:.3f}; fell back to "
                      f"{names[fallback_index]}")
            return Choice(fallback_index, confidence, reason, result, fallback=True)
        if raise_on_low:
            raise LayaLowConfidenceError(f"Laya routing confidence {confidence:.3f} is below the threshold "
                                         f"{floor:.3f} (chose {names[index]})", confidence, floor, result)
    return Choice(index, confidence, f"Laya chose {names[index]} with confidence {confidence:.3f}", result)


def check_fallback(index: Any, count: int, name: str = "fallback_agent_index") -> None:
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count):
        raise ValueError(f"{name} {index!r} is out of range for {count} options")


class Screen(LayaControls):
    """Guard screening shared by the Agno and CrewAI guards: questions, action, threshold, violations."""

    error_class: type = ValueError
    error_prefix = "Laya guardrail policy violation detected"

    def __init__(self, questions: Any, action: str, rejection_message: str, threshold: Any, **controls: Any):
        super().__init__(**controls)
        self.questions, self.action, self.rejection_message = questions, action, rejection_message
        self.threshold = check_threshold(threshold)

    def _guard_questions(self) -> dict:
        from ..presets import guard_questions

        return self.questions if self.questions is not None else guard_questions()

    def _violations(self, state: Any) -> tuple[dict, dict]:
        questions = self._guard_questions()
        result = self._decide(state, questions)
        return violations(result["answers"], self.threshold, questions), result

    def _raise(self, found: dict, result: dict) -> None:
        raise self.error_class(f"{self.error_prefix}: {list(found)}", found, result)

    def _block(self, found: dict, result: dict) -> dict:
        return {"passed": not found, "violations": found, "answers": result.get("answers")}

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)
