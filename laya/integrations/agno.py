"""Agno integration: `LayaAgnoRouter` picks the agent for a message, `LayaAgnoGuardrail` screens messages.

Works without Agno: `AgnoAgent` / `AgnoTeam` are Agno's classes when importable, else small stand-ins with
the same attribute names (any object with those attributes routes the same way).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .selection import LayaControls, LayaLowConfidenceError, Screen, check_fallback, choose
from .controls import PolicyViolation
from .text import extract_text

__all__ = ["AgnoAgent", "AgnoRouteDecision", "AgnoTeam", "LayaAgnoGuardrail", "LayaAgnoGuardrailError",
           "LayaAgnoRouter", "LayaLowConfidenceError"]

try:
    from agno.agent import Agent as AgnoAgent
    from agno.team import Team as AgnoTeam
except ImportError:
    @dataclass
    class AgnoAgent:  # type: ignore[no-redef]
        name: Any = None
        role: Any = None
        description: Any = None
        instructions: Any = None

    @dataclass
    class AgnoTeam:  # type: ignore[no-redef]
        members: list = field(default_factory=list)
        mode: Any = None


@dataclass
class AgnoRouteDecision:
    agent: Any
    agent_index: int
    name: Any
    role: Any
    confidence: float
    reason: str
    raw_decision: Any = None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def describe_agent(agent: Any, index: int) -> str:
    """An agent's option text: name, role and description (or instructions)."""
    name = getattr(agent, "name", None) or f"agent {index}"
    parts = [str(name)]
    role = getattr(agent, "role", None)
    if role:
        parts.append(f"role: {_text(role)}")
    about = getattr(agent, "description", None) or getattr(agent, "instructions", None)
    if about:
        parts.append(_text(about))
    return " - ".join(parts)


class LayaAgnoRouter(LayaControls):
    """Route a message to one of an Agno team's agents (question `delegation`, options `agent_<i>`)."""

    def __init__(self, instructions: str = "Which agent is best qualified to handle this task or message?",
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

    def route(self, message: Any, agents: Any) -> AgnoRouteDecision:
        agents = list(agents or [])
        if not agents:
            raise ValueError("No agents provided to route the message to.")
        check_fallback(self.fallback_agent_index, len(agents))
        names = [str(getattr(a, "name", None) or f"agent_{i}") for i, a in enumerate(agents)]
        picked = choose(self, extract_text(message), "delegation", self.instructions,
                        [describe_agent(a, i) for i, a in enumerate(agents)], "agent", self.confidence_threshold,
                        self.fallback_agent_index, self.raise_on_low_confidence, names)
        chosen = agents[picked.index]
        return AgnoRouteDecision(chosen, picked.index, getattr(chosen, "name", None), getattr(chosen, "role", None),
                                 picked.confidence, picked.reason, picked.raw)

    def route_team(self, message: Any, team: Any) -> AgnoRouteDecision:
        members = getattr(team, "members", None)
        return self.route(message, members if members is not None else getattr(team, "agents", None))

    def run(self, message: Any, agents: Any) -> AgnoRouteDecision:
        return self.route(message, agents)

    __call__ = run

    async def aroute(self, message: Any, agents: Any) -> AgnoRouteDecision:
        return await asyncio.to_thread(self.route, message, agents)

    async def aroute_team(self, message: Any, team: Any) -> AgnoRouteDecision:
        return await asyncio.to_thread(self.route_team, message, team)

    async def arun(self, message: Any, agents: Any) -> AgnoRouteDecision:
        return await self.aroute(message, agents)


class LayaAgnoGuardrailError(PolicyViolation):
    """A message that broke the guardrail policy. `.violations`, `.raw_decision`."""


class LayaAgnoGuardrail(Screen):
    """Screen a message: `raise`, `filter` (the rejection message), `annotate` (`guardrail`), or pass it."""

    error_class = LayaAgnoGuardrailError
    error_prefix = "Laya Agno guardrail policy violation detected"

    def __init__(self, questions: Any = None, action: str = "raise",
                 rejection_message: str = "This message cannot be processed because it violates safety guidelines.",
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

    def screen(self, message: Any) -> Any:
        found, result = self._violations(extract_text(message))
        if self.action == "annotate":
            block = self._block(found, result)
            return {**message, "guardrail": block} if isinstance(message, dict) else \
                {"message": message, "guardrail": block}
        if not found:
            return message
        if self.action == "raise":
            self._raise(found, result)
        if self.action == "filter":
            return self.rejection_message
        return message

    __call__ = screen

    async def ascreen(self, message: Any) -> Any:
        return await asyncio.to_thread(self.screen, message)
