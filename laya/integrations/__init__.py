"""LangChain runnables around a laya Agent (spec §1.1): see `laya.integrations.langchain` for the design.

`langchain_core` is optional: importing this package without it raises ImportError naming
`pip install langchain-core`.
"""

from __future__ import annotations

from .langchain import (LayaDecision, LayaEvaluator, LayaGuardrail, LayaGuardrailError, LayaRouter, LayaTriage,
                        state_from_input, summarise)

__all__ = ["LayaDecision", "LayaEvaluator", "LayaGuardrail", "LayaGuardrailError", "LayaRouter", "LayaTriage",
           "state_from_input", "summarise"]
