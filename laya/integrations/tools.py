"""`LayaToolSelector`: pick the tool (or a direct answer) for a user request in one laya decision.

Tools may be strings (`name: description`), OpenAI-style dicts (`{"function": {"name", "description"}}` or flat
`{"name", "description"}`), objects with `metadata` or `name`/`description`, or plain callables (their
`__name__` and first docstring line).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

from .controls import check_answers, is_number
from .selection import LayaControls, LayaLowConfidenceError
from .text import extract_text

__all__ = ["DIRECT_ANSWER", "LayaLowConfidenceError", "LayaToolSelector", "ToolRouteDecision", "tool_info"]

DIRECT_ANSWER = "__direct_answer__"
QUESTION_ID = "tool_select"


@dataclass
class ToolRouteDecision:
    tool: Any
    tool_name: str | None
    tool_index: int
    confidence: float | None
    probabilities: dict = field(default_factory=dict)
    reason: str = ""
    is_direct_answer: bool = False
    is_fallback: bool = False
    raw_decision: Any = None


def _first_line(text: Any) -> str:
    return (inspect.cleandoc(text).splitlines() or [""])[0].strip() if isinstance(text, str) else ""


def tool_info(tool: Any, index: int) -> tuple[str, str]:
    """(name, description) of a tool in any of the accepted forms."""
    if isinstance(tool, str):
        name, _, description = tool.partition(":")
        return name.strip() or f"tool_{index}", description.strip()
    if isinstance(tool, dict):
        spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        return str(spec.get("name") or f"tool_{index}"), str(spec.get("description") or "")
    meta = getattr(tool, "metadata", None)
    if meta is not None and getattr(meta, "name", None):
        return str(meta.name), str(getattr(meta, "description", "") or "")
    name = getattr(tool, "name", None)
    if isinstance(name, str) and name:
        return name, str(getattr(tool, "description", "") or "")
    if callable(tool):
        return getattr(tool, "__name__", f"tool_{index}"), _first_line(getattr(tool, "__doc__", None))
    return f"tool_{index}", ""


def _check_threshold(value: Any) -> float | None:
    if value is None:
        return None
    if not is_number(value) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"confidence_threshold must be a float in [0.0, 1.0], got {value!r}")
    return float(value)


class LayaToolSelector(LayaControls):
    """Which tool should handle the request (question `tool_select`, options `tool_<i>` / `direct_answer`)."""

    def __init__(self, tools: Any = None, instructions: str = "Which tool should be called to handle the user request?",
                 allow_direct_answer: bool = False,
                 direct_answer_description: str = "Answer the user request directly without calling any tools.",
                 confidence_threshold: float | None = None, fallback_tool: Any = None, agent: Any = None,
                 base_url: Any = None, api_key: Any = None, model: Any = None, max_len: Any = None,
                 head_max_len: Any = None, lang: Any = None, min_confidence: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None):
        super().__init__(agent=agent, base_url=base_url, api_key=api_key, model=model, max_len=max_len,
                         head_max_len=head_max_len, lang=lang, min_confidence=min_confidence, hooks=hooks,
                         on_predict_start=on_predict_start, on_predict_end=on_predict_end, hooks_raise=hooks_raise,
                         hooks_timeout=hooks_timeout)
        self.tools = list(tools or [])
        self.instructions, self.allow_direct_answer = instructions, bool(allow_direct_answer)
        self.direct_answer_description = direct_answer_description
        self.confidence_threshold = _check_threshold(confidence_threshold)
        self.fallback_tool = fallback_tool

    def _floor(self) -> float | None:
        if self.confidence_threshold is not None:
            return self.confidence_threshold
        mc = self.min_confidence
        return float(mc) if is_number(mc) else None

    def _options(self, tools: list) -> tuple[dict, list]:
        infos = [tool_info(t, i) for i, t in enumerate(tools)]
        criteria = {f"tool_{i}": f"{name}: {desc}" if desc else name for i, (name, desc) in enumerate(infos)}
        if self.allow_direct_answer:
            criteria["direct_answer"] = f"{DIRECT_ANSWER}: {self.direct_answer_description}"
        if not criteria:
            raise ValueError("No tools provided to LayaToolSelector.")
        return criteria, [name for name, _ in infos]

    def _fallback(self, why: str, confidence: Any, probs: dict, raw: Any, error: Exception) -> ToolRouteDecision:
        if self.fallback_tool is None:
            raise error
        name = tool_info(self.fallback_tool, -1)[0]
        return ToolRouteDecision(self.fallback_tool, name, -1, confidence, probs, f"{why}; using the fallback tool "
                                 f"{name}", False, True, raw)

    def select(self, state: Any, tools: Any = None, instructions: str | None = None) -> ToolRouteDecision:
        tools = list(tools) if tools is not None else self.tools
        criteria, names = self._options(tools)
        questions = {QUESTION_ID: {"type": "choice", "instructions": instructions or self.instructions,
                                   "criteria": criteria}}
        result = self._predict(extract_text(state), questions)
        try:
            check_answers(result, self._source)
        except RuntimeError as error:  # a malformed answer falls back like a missing one (R-INT-7)
            return self._fallback("the decision response was malformed", None, {}, result, error)
        return self._decision(result, tools, names)

    def _decision(self, result: dict, tools: list, names: list) -> ToolRouteDecision:
        answer = (result.get("answers") or {}).get(QUESTION_ID)
        source = self._source
        choice = answer.get("choice") if isinstance(answer, dict) else None
        keys = [f"tool_{i}" for i in range(len(tools))] + (["direct_answer"] if self.allow_direct_answer else [])
        if choice not in keys:
            error = RuntimeError(f"Malformed decision response from {source}: {QUESTION_ID!r} has no usable choice "
                                 f"({choice!r})")
            return self._fallback("the decision had no usable tool", None, {}, result, error)
        labels = names + ([DIRECT_ANSWER] if self.allow_direct_answer else [])
        raw_probs = answer.get("probabilities") if isinstance(answer.get("probabilities"), dict) else {}
        probs = {labels[i]: raw_probs[k] for i, k in enumerate(keys) if k in raw_probs}
        confidence = next((float(answer[k]) for k in ("answer_confidence", "confidence") if is_number(answer.get(k))),
                          None)
        floor = self._floor()
        if answer.get("low_confidence") or confidence is None or (floor is not None and confidence < floor):
            error = LayaLowConfidenceError(f"Laya tool selection confidence {confidence} is below the threshold "
                                           f"{floor}", confidence, floor, result)
            return self._fallback(f"low confidence ({confidence})", confidence, probs, result, error)
        index = keys.index(choice)
        if choice == "direct_answer":
            return ToolRouteDecision(None, DIRECT_ANSWER, -1, confidence, probs, "answer directly", True, False,
                                     result)
        return ToolRouteDecision(tools[index], names[index], index, confidence, probs,
                                 f"Laya chose {names[index]} with confidence {confidence:.3f}", False, False, result)

    async def aselect(self, state: Any, tools: Any = None, instructions: str | None = None) -> ToolRouteDecision:
        return await asyncio.to_thread(self.select, state, tools, instructions)

    def call(self, state: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        """Select, then run the tool (a callable, `.run` or `.invoke`); None for a direct answer."""
        decision = self.select(state, tools)
        tool = decision.tool
        if decision.is_direct_answer:
            return None
        if callable(tool):
            return tool(*args, **kwargs)
        for name in ("run", "invoke"):
            method = getattr(tool, name, None)
            if callable(method):
                return method(*args, **kwargs)
        raise TypeError(f"tool {decision.tool_name!r} is not callable and has no run() or invoke()")

    def as_runnable(self) -> Any:
        """A LangChain `RunnableLambda` over `select` when LangChain is installed, else an object with `invoke`
        and `|`."""
        try:
            from langchain_core.runnables import RunnableLambda
        except ImportError:
            from .base import _Sequence

            class _Select:
                def __init__(self, selector: LayaToolSelector):
                    self.selector = selector

                def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> ToolRouteDecision:  # noqa: A002
                    return self.selector.select(input)

                def __or__(self, other: Any) -> Any:
                    return _Sequence(self, other)

            return _Select(self)
        return RunnableLambda(lambda value: self.select(value))
