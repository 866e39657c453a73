"""laya inside agent frameworks: LangChain runnables, Agno and CrewAI routers and guards, LlamaIndex
selectors and a tool selector. Importable with none of the frameworks installed: each module binds the
framework's classes when it can and small stand-ins otherwise (see `laya.integrations.controls` for the
controls every class takes)."""

from __future__ import annotations

from .agno import AgnoRouteDecision, LayaAgnoGuardrail, LayaAgnoGuardrailError, LayaAgnoRouter
from .crewai import CrewRouteDecision, LayaCrewRouter, LayaTaskGuard, LayaTaskGuardError
from .langchain import LayaDecision, LayaEvaluator, LayaGuardrail, LayaGuardrailError, LayaRouter, LayaTriage
from .llamaindex import LayaMultiSelector, LayaQueryRouter, LayaSingleSelector
from .selection import LayaLowConfidenceError
from .tools import LayaToolSelector, ToolRouteDecision

__all__ = ["LayaRouter", "LayaGuardrail", "LayaGuardrailError", "LayaTriage", "LayaEvaluator", "LayaDecision",
           "LayaSingleSelector", "LayaMultiSelector", "LayaQueryRouter", "LayaCrewRouter", "LayaTaskGuard",
           "LayaTaskGuardError", "CrewRouteDecision", "AgnoRouteDecision", "LayaAgnoRouter", "LayaAgnoGuardrail",
           "LayaAgnoGuardrailError", "LayaToolSelector", "ToolRouteDecision", "LayaLowConfidenceError"]
