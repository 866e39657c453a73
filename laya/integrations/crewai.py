"""CrewAI integration: `LayaCrewRouter` picks the crew agent for a task, `LayaTaskGuard` screens tasks.

Works without CrewAI: `CrewAgent` / `CrewTask` are CrewAI's classes when importable, else small stand-ins
with the same attribute names.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .selection import LayaControls, LayaLowConfidenceError, Screen, check_fallback, choose
from .controls import PolicyViolation
from .text import extract_text

__all__ = ["CrewAgent", "CrewRouteDecision", "CrewTask", "LayaCrewRouter", "LayaLowConfidenceError",
           "LayaTaskGuard", "LayaTaskGuardError"]

try:
    from crewai import Agent as CrewAgent
    from crewai import Task as CrewTask
except ImportError:
    @dataclass
    class CrewAgent:  # type: ignore[no-redef]
        role: Any = None
        goal: Any = None
        backstory: Any = None

    @dataclass
    class CrewTask:  # type: ignore[no-redef]
        description: Any = None
        expected_output: Any = None
        agent: Any = None


@dataclass
class CrewRouteDecision:
    agent: Any
    agent_index: int
    role: Any
    confidence: float
    reason: str
    raw_decision: Any = None


def _field(task: Any, name: str) -> Any:
    return task.get(name) if isinstance(task, dict) else getattr(task, name, None)


def task_text(task: Any) -> Any:
    """The task's description plus ` (Expected output: ...)` when it names one."""
    description = _field(task, "description")
    if description is None:
        return extract_text(task)
    expected = _field(task, "expected_output")
    return f"{description} (Expected output: {expected})" if expected else str(description)


class LayaCrewRouter(LayaControls):
    """Pick the crew agent for a task (options `role: goal`)."""

    def __init__(self, instructions: str = "Which agent in the crew is best qualified to execute this task?",
                 confidence_threshold: float = 0.0, fallback_agent_index: int | None = None,
                 raise_on_low_confidence: bool = False, agent: Any = None, base_url: Any = None, api_key: Any = None,
                 model: Any = None, max_len: Any = None, head_max_len: Any = None, lang: Any = None,
                 min_confidence: Any = None, task: Any = None, lang_guess: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None):
        super().__init__(agent=agent, base_url=base_url, api_key=api_key, model=model, max_len=max_len,
                         head_max_len=head_max_len, lang=lang, min_confidence=min_confidence, task=task,
                         lang_guess=lang_guess, hooks=hooks, on_predict_start=on_predict_start,
                         on_predict_end=on_predict_end, hooks_raise=hooks_raise, hooks_timeout=hooks_timeout)
        self.instructions, self.confidence_threshold = instructions, confidence_threshold
        self.fallback_agent_index, self.raise_on_low_confidence = fallback_agent_index, raise_on_low_confidence

    def route(self, task: Any, agents: Any) -> CrewRouteDecision:
        agents = list(agents or [])
        if not agents:
            raise ValueError("No agents provided to route task to.")
        check_fallback(self.fallback_agent_index, len(agents))
        options = [f"{getattr(a, 'role', None)}: {getattr(a, 'goal', None)}" for a in agents]
        names = [str(getattr(a, "role", None) or f"agent_{i}") for i, a in enumerate(agents)]
        picked = choose(self, task_text(task), "delegation", self.instructions, options, "agent",
                        self.confidence_threshold, self.fallback_agent_index, self.raise_on_low_confidence, names)
        chosen = agents[picked.index]
        return CrewRouteDecision(chosen, picked.index, getattr(chosen, "role", None), picked.confidence,
                                 picked.reason, picked.raw)

    def delegate(self, task: Any, agents: Any) -> Any:
        """Route, set `task.agent` to the chosen agent and return it."""
        chosen = self.route(task, agents).agent
        if isinstance(task, dict):
            task["agent"] = chosen
        else:
            task.agent = chosen
        return chosen

    async def aroute(self, task: Any, agents: Any) -> CrewRouteDecision:
        return await asyncio.to_thread(self.route, task, agents)

    async def adelegate(self, task: Any, agents: Any) -> Any:
        return await asyncio.to_thread(self.delegate, task, agents)


class LayaTaskGuardError(PolicyViolation):
    """A task that broke the guardrail policy. `.violations`, `.raw_decision`."""


class LayaTaskGuard(Screen):
    """Screen a task before it runs: `raise`, `filter` (rewrite the description), `annotate`, or pass."""

    error_class = LayaTaskGuardError
    error_prefix = "Laya task guardrail policy violation detected"

    def __init__(self, questions: Any = None, action: str = "raise",
                 rejection_message: str = "This task cannot be executed because it violates safety guidelines.",
                 threshold: float = 0.5, agent: Any = None, base_url: Any = None, api_key: Any = None,
                 model: Any = None, max_len: Any = None, head_max_len: Any = None, lang: Any = None,
                 min_confidence: Any = None, task: Any = None, lang_guess: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None):
        super().__init__(questions, action, rejection_message, threshold, agent=agent, base_url=base_url,
                         api_key=api_key, model=model, max_len=max_len, head_max_len=head_max_len, lang=lang,
                         min_confidence=min_confidence, task=task, lang_guess=lang_guess, hooks=hooks,
                         on_predict_start=on_predict_start, on_predict_end=on_predict_end, hooks_raise=hooks_raise,
                         hooks_timeout=hooks_timeout)

    def _set(self, task: Any, name: str, value: Any) -> Any:
        if isinstance(task, dict):
            return {**task, name: value}
        if not isinstance(task, str):
            try:
                setattr(task, name, value)
                return task
            except (AttributeError, TypeError, ValueError):  # __slots__ or frozen: the string form's answer
                pass
        return value if name == "description" else {"task": task, name: value}

    def screen(self, task: Any) -> Any:
        found, result = self._violations(task_text(task))
        if self.action == "annotate":
            return self._set(task, "guardrail", self._block(found, result))
        if not found:
            return task
        if self.action == "raise":
            self._raise(found, result)
        if self.action == "filter":
            return self._set(task, "description", self.rejection_message)
        return task

    __call__ = screen

    async def ascreen(self, task: Any) -> Any:
        return await asyncio.to_thread(self.screen, task)
