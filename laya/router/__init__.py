"""laya.router: route each request to a checkpoint (english, multilingual, typed-decisions or a caller's
own) before any forward pass, and keep a few agents loaded.

The package: `registry` (names and sources), `pool` (resident agents, LRU), `policy` (workflows,
language codes, detection verdicts), `calls` (how agents and hooks are called), `batch`
(predict_batch), `router` (the Router).
"""

from __future__ import annotations

from typing import Any

from .policy import WORKFLOW_SIGNATURES, RouteDecision, match_typed_decisions_workflow, primary_lang
from .registry import (ALIASES, BUNDLE_REPO, DEFAULT_MODELS, STANDALONE_MODELS, canonical_name, check_agent_kwargs,
                       normalise_name, resolve_model_spec)
from .router import Router

__all__ = ["ALIASES", "BUNDLE_REPO", "DEFAULT_MODELS", "STANDALONE_MODELS", "WORKFLOW_SIGNATURES", "RouteDecision",
           "Router", "canonical_name", "check_agent_kwargs", "match_typed_decisions_workflow", "normalise_name",
           "primary_lang", "resolve_model_spec"]


def __getattr__(name: str) -> Any:
    # `laya.router.Agent`: the class the Router builds, imported (with torch) only when asked for
    if name == "Agent":
        from ..agent import Agent

        return Agent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
