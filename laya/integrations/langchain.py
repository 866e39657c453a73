"""LangChain runnables over laya: routing, guardrails, triage, evaluation and structured decisions.

With `langchain_core` installed they are `RunnableSerializable` pydantic models (fields validated and coerced,
extra keywords allowed); without it they are plain classes with the same methods (`invoke`, `batch`,
`ainvoke`, `abatch`). Every class takes the common controls of `laya.integrations.controls` as keywords.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ..presets import guard_questions, triage_questions
from .base import LANGCHAIN_AVAILABLE, LayaRunnable, controls_from
from .controls import PolicyViolation, check_threshold, confidence_of, violations

__all__ = ["LANGCHAIN_AVAILABLE", "LayaDecision", "LayaEvaluator", "LayaGuardrail", "LayaGuardrailError",
           "LayaRouter", "LayaTriage"]

GUARD_ACTIONS = ("raise", "filter", "annotate")


class LayaRouter(LayaRunnable):
    """`invoke(input)` -> the chosen route label (question id `route`), or `fallback` below the threshold."""

    criteria: Union[dict, list]
    instructions: str = "Which route should handle this request?"
    confidence_threshold: float = 0.0
    fallback: Optional[str] = None

    def __init__(self, criteria: Any, instructions: Any = "Which route should handle this request?",
                 confidence_threshold: Any = 0.0, fallback: Any = None, state_key: Any = None, agent: Any = None,
                 base_url: Any = None, api_key: Any = None, model: Any = None, max_len: Any = None,
                 head_max_len: Any = None, lang: Any = None, min_confidence: Any = None, task: Any = None,
                 lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                 hooks_raise: Any = None, hooks_timeout: Any = None, **kwargs: Any):
        super().__init__(criteria=criteria, instructions=instructions, confidence_threshold=confidence_threshold,
                         fallback=fallback, state_key=state_key, **controls_from(locals()), **kwargs)

    def _questions(self) -> dict:
        return {"route": {"type": "choice", "instructions": self.instructions, "criteria": self.criteria}}

    def _finish(self, input: Any, state: Any, result: dict) -> Any:  # noqa: A002
        answer = result["answers"]["route"]
        threshold = float(self.confidence_threshold or 0.0)
        if threshold > 0 and self.fallback is not None and confidence_of(answer) < threshold:
            return self.fallback
        return answer["choice"]


class LayaGuardrailError(PolicyViolation):
    """An input that broke the guardrail policy. `.violations`, `.raw_decision`."""


class LayaGuardrail(LayaRunnable):
    """Screen the input: `raise` LayaGuardrailError, `filter` to the rejection message, `annotate` it, or pass."""

    questions: Optional[dict] = None
    action: str = "raise"
    rejection_message: str = "I cannot fulfill this request because it violates safety guidelines."
    threshold: float = 0.5

    def __init__(self, questions: Any = None, action: Any = "raise",
                 rejection_message: Any = "I cannot fulfill this request because it violates safety guidelines.",
                 threshold: Any = 0.5, state_key: Any = None, agent: Any = None, base_url: Any = None,
                 api_key: Any = None, model: Any = None, max_len: Any = None, head_max_len: Any = None,
                 lang: Any = None, min_confidence: Any = None, task: Any = None, lang_guess: Any = None,
                 hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None, **kwargs: Any):
        super().__init__(questions=questions, action=action, rejection_message=rejection_message,
                         threshold=threshold, state_key=state_key, **controls_from(locals()), **kwargs)
        check_threshold(self.threshold)

    def _questions(self) -> dict:
        return self.questions if self.questions is not None else guard_questions()

    def _finish(self, input: Any, state: Any, result: dict) -> Any:  # noqa: A002
        found = violations(result.get("answers") or {}, float(self.threshold), self._questions())
        if self.action == "annotate":
            block = {"passed": not found, "violations": found, "answers": result.get("answers")}
            return {**input, "guardrails": block} if isinstance(input, dict) else {"input": input, "guardrails": block}
        if not found:
            return input
        if self.action == "raise":
            raise LayaGuardrailError(f"Laya guardrail policy violation detected: {list(found)}", found, result)
        if self.action == "filter":
            return {**input, "output": self.rejection_message} if isinstance(input, dict) else self.rejection_message
        return input


def _yes(answer: dict | None) -> bool | None:
    return None if not answer else bool(answer.get("noul", 0.0) >= 0.5)


class LayaTriage(LayaRunnable):
    """The triage preset: a copy of the input with `triage` {intent, intent_confidence, is_urgent,
    frustration_score, churn_risk, refund_requested}."""

    def __init__(self, state_key: Any = None, agent: Any = None, base_url: Any = None, api_key: Any = None,
                 model: Any = None, max_len: Any = None, head_max_len: Any = None, lang: Any = None,
                 min_confidence: Any = None, task: Any = None, lang_guess: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None, **kwargs: Any):
        super().__init__(state_key=state_key, **controls_from(locals()), **kwargs)

    def _questions(self) -> dict:
        return triage_questions()

    def _finish(self, input: Any, state: Any, result: dict) -> Any:  # noqa: A002
        answers = result.get("answers") or {}
        intent = answers.get("intent") or {}
        block = {"intent": intent.get("choice"), "intent_confidence": confidence_of(intent) if intent else None,
                 "is_urgent": _yes(answers.get("is_urgent")),
                 "frustration_score": (answers.get("frustration") or {}).get("score"),
                 "churn_risk": _yes(answers.get("churn_risk")),
                 "refund_requested": _yes(answers.get("refund_requested"))}
        return {**input, "triage": block} if isinstance(input, dict) else {"input": state, "triage": block}


class LayaEvaluator(LayaRunnable):
    """`invoke(input)` -> the answers to `questions`; `evaluate_strings(prediction=, input=)` for evaluators."""

    questions: dict

    def __init__(self, questions: Any, state_key: Any = None, agent: Any = None, base_url: Any = None,
                 api_key: Any = None, model: Any = None, max_len: Any = None, head_max_len: Any = None,
                 lang: Any = None, min_confidence: Any = None, task: Any = None, lang_guess: Any = None,
                 hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None, **kwargs: Any):
        super().__init__(questions=questions, state_key=state_key, **controls_from(locals()), **kwargs)

    def _questions(self) -> dict:
        return self.questions

    def _finish(self, input: Any, state: Any, result: dict) -> Any:  # noqa: A002
        return result.get("answers")

    def evaluate_strings(self, *, prediction: Any, input: Any = None, **kwargs: Any) -> dict:  # noqa: A002
        state = {"input": input, "prediction": prediction} if input is not None else prediction
        return self._finish(state, state, self._answer(state))


class LayaDecision(LayaRunnable):
    """`invoke(input)` -> `laya.structured.decide` over `decision_schema` (a JSON schema or pydantic class)."""

    decision_schema: Any
    return_details: bool = False

    def __init__(self, decision_schema: Any, return_details: Any = False, state_key: Any = None, agent: Any = None,
                 base_url: Any = None, api_key: Any = None, model: Any = None, max_len: Any = None,
                 head_max_len: Any = None, task: Any = None, lang_guess: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None, **kwargs: Any):
        from ..structured import plan_for

        plan_for(decision_schema)  # SchemaError (a ValueError) at construction, naming the path
        super().__init__(decision_schema=decision_schema, return_details=return_details, state_key=state_key,
                         **controls_from(locals()), **kwargs)

    def _decide_kwargs(self, runner: Any) -> dict:
        # LayaDecision has no lang/min_confidence controls (R-INT-2): extra keywords of those names stay unused
        return {k: v for k, v in self._runner().controls(runner).items() if k not in ("lang", "min_confidence")}

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        from ..structured import decide

        runner = self._runner().target()
        return decide(runner, self._state(input), self.decision_schema, return_details=bool(self.return_details),
                      **self._decide_kwargs(runner))

    def batch(self, inputs: list, config: Any = None, *, return_exceptions: bool = False, **kwargs: Any) -> list:
        return [self._invoke_caught(i, config, return_exceptions) for i in list(inputs)]
