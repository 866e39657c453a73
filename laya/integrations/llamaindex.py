"""LlamaIndex integration: selectors (`LayaSingleSelector`, `LayaMultiSelector`) and `LayaQueryRouter`.

Works without LlamaIndex: `BaseSelector`, `ToolMetadata`, `ToolSelection`, `SelectorResult` and `QueryBundle`
are LlamaIndex's classes when importable, else small stand-ins with the same attribute names.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

from .controls import CONTROL_NAMES, confidence_of, is_number, strict_answer
from .selection import LayaControls, LayaLowConfidenceError, check_fallback, choose
from .text import extract_text

__all__ = ["BaseSelector", "LayaLowConfidenceError", "LayaMultiSelector", "LayaQueryRouter", "LayaSingleSelector",
           "QueryBundle", "SelectorResult", "ToolMetadata", "ToolSelection"]

try:
    from llama_index.core.base.base_selector import BaseSelector, SelectorResult, SingleSelection as ToolSelection
    from llama_index.core.schema import QueryBundle
    from llama_index.core.tools.types import ToolMetadata
    LLAMAINDEX_AVAILABLE = True
except ImportError:
    LLAMAINDEX_AVAILABLE = False

    class BaseSelector:  # type: ignore[no-redef]
        """Stand-in: `select` / `aselect` call `_select` / `_aselect`."""

        def select(self, choices: Any, query: Any) -> Any:
            return self._select(choices, query)

        async def aselect(self, choices: Any, query: Any) -> Any:
            return await self._aselect(choices, query)

    @dataclass
    class ToolMetadata:  # type: ignore[no-redef]
        description: str = ""
        name: Any = None

    @dataclass
    class ToolSelection:  # type: ignore[no-redef]
        index: int = 0
        reason: str = ""

    @dataclass
    class SelectorResult:  # type: ignore[no-redef]
        selections: list = field(default_factory=list)

        @property
        def ind(self) -> int:
            return self.selections[0].index

        @property
        def reason(self) -> str:
            return self.selections[0].reason

    @dataclass
    class QueryBundle:  # type: ignore[no-redef]
        query_str: str = ""


def choice_text(choice: Any, index: int) -> str:
    """`name: description` of a ToolMetadata-like choice (or the string itself)."""
    if isinstance(choice, str):
        return choice
    name = getattr(choice, "name", None) or f"choice {index}"
    description = getattr(choice, "description", None)
    return f"{name}: {description}" if description else str(name)


def _query(query: Any) -> Any:
    return query.query_str if isinstance(getattr(query, "query_str", None), str) else extract_text(query)


def _choices(choices: Any) -> list:
    choices = list(choices or [])
    if not choices:
        raise ValueError("No choices provided to select from.")
    return choices


def _controls(values: dict) -> dict:
    """The common controls among a constructor's locals."""
    return {k: values[k] for k in CONTROL_NAMES if k in values}


class _Selector(LayaControls, BaseSelector):
    def __init__(self, **controls: Any):
        LayaControls.__init__(self, **controls)

    async def _aselect(self, choices: Any, query: Any) -> Any:
        return await asyncio.to_thread(self._select, choices, query)

    def _get_prompts(self) -> dict:
        return {}

    def _update_prompts(self, prompts: dict) -> None:
        return None


class LayaSingleSelector(_Selector):
    """Pick one choice (question `selector`, options `choice_<i>`)."""

    def __init__(self, instructions: str = "Which tool or query engine is best suited to answer this query?",
                 confidence_threshold: float = 0.0, fallback_index: int | None = None,
                 raise_on_low_confidence: bool = False, agent: Any = None, base_url: Any = None, api_key: Any = None,
                 model: Any = None, max_len: Any = None, head_max_len: Any = None, lang: Any = None,
                 min_confidence: Any = None, task: Any = None, lang_guess: Any = None, hooks: Any = None,
                 on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None):
        super().__init__(**_controls(locals()))
        self.instructions, self.confidence_threshold = instructions, confidence_threshold
        self.fallback_index, self.raise_on_low_confidence = fallback_index, raise_on_low_confidence

    def _select(self, choices: Any, query: Any) -> Any:
        choices = _choices(choices)
        check_fallback(self.fallback_index, len(choices), "fallback_index")
        picked = choose(self, _query(query), "selector", self.instructions,
                        [choice_text(c, i) for i, c in enumerate(choices)], "choice", self.confidence_threshold,
                        self.fallback_index, self.raise_on_low_confidence)
        return SelectorResult(selections=[ToolSelection(index=picked.index, reason=picked.reason)])

    def select(self, choices: Any, query: Any) -> Any:
        return self._select(choices, query)


class LayaMultiSelector(_Selector):
    """Every choice with probability >= probability_threshold, most probable first (else the top one)."""

    def __init__(self, instructions: str = "Which tools or query engines are relevant to answer this query?",
                 max_outputs: int | None = None, probability_threshold: float = 0.25, default_index: int = 0,
                 agent: Any = None, base_url: Any = None, api_key: Any = None, model: Any = None, max_len: Any = None,
                 head_max_len: Any = None, lang: Any = None, min_confidence: Any = None, task: Any = None,
                 lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                 hooks_raise: Any = None, hooks_timeout: Any = None):
        super().__init__(**_controls(locals()))
        self.instructions, self.max_outputs = instructions, max_outputs
        self.probability_threshold, self.default_index = probability_threshold, default_index

    def _ranked(self, answer: dict, keys: list) -> list[tuple[int, float]]:
        probs = answer.get("probabilities") if isinstance(answer.get("probabilities"), dict) else {}
        scored = [(i, float(probs[k])) for i, k in enumerate(keys) if is_number(probs.get(k))]
        return sorted(scored, key=lambda item: (-item[1], item[0]))

    def _select(self, choices: Any, query: Any) -> Any:
        choices = _choices(choices)
        keys = [f"choice_{i}" for i in range(len(choices))]
        criteria = dict(zip(keys, (choice_text(c, i) for i, c in enumerate(choices))))
        result = self._decide(_query(query), {"selector": {"type": "choice", "instructions": self.instructions,
                                                            "criteria": criteria}})
        ranked = self._ranked(strict_answer(result, "selector", self._source, "choice"), keys)
        kept = [(i, p) for i, p in ranked if p >= self.probability_threshold]
        if self.max_outputs is not None:
            kept = kept[:self.max_outputs]
        if not kept:
            kept = ranked[:1] or [(self.default_index, 0.0)]
        return SelectorResult(selections=[ToolSelection(index=i, reason=f"probability {p:.3f}") for i, p in kept])

    def select(self, choices: Any, query: Any) -> Any:
        return self._select(choices, query)


class LayaQueryRouter(LayaControls):
    """Route a query to one of `query_engines` (question `route`) and run it there."""

    def __init__(self, query_engines: dict, descriptions: dict | None = None,
                 instructions: str = "Which query engine should handle this request?",
                 confidence_threshold: float = 0.0, fallback_key: Any = None, agent: Any = None, base_url: Any = None,
                 api_key: Any = None, model: Any = None, max_len: Any = None, head_max_len: Any = None,
                 lang: Any = None, min_confidence: Any = None, task: Any = None, lang_guess: Any = None,
                 hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: Any = None,
                 hooks_timeout: Any = None):
        super().__init__(**_controls(locals()))
        if not isinstance(query_engines, dict) or not query_engines:
            raise ValueError("No choices provided to select from.")
        self.query_engines, self.descriptions = dict(query_engines), dict(descriptions or {})
        self.instructions, self.confidence_threshold = instructions, confidence_threshold
        self.fallback_key = fallback_key if fallback_key is not None else next(iter(self.query_engines))
        if self.fallback_key not in self.query_engines:
            raise ValueError(f"fallback_key {fallback_key!r} is not one of {list(self.query_engines)}")

    def route(self, query: Any) -> Any:
        keys = list(self.query_engines)
        criteria = {str(k): self.descriptions.get(k) or f"Engine for {k}" for k in keys}
        result = self._decide(_query(query), {"route": {"type": "choice", "instructions": self.instructions,
                                                         "criteria": criteria}})
        answer = strict_answer(result, "route", self._source, "choice")
        labels = [str(k) for k in keys]
        if answer["choice"] not in labels:
            raise RuntimeError(f"Malformed decision response from {self._source}: 'route' chose "
                               f"{answer['choice']!r}, which is not one of {labels}")
        floor = float(self.confidence_threshold or 0.0)
        if floor > 0 and confidence_of(answer) < floor:
            return self.fallback_key
        return keys[labels.index(answer["choice"])]

    def query(self, query: Any, **kwargs: Any) -> Any:
        engine = self.query_engines[self.route(query)]
        if callable(getattr(engine, "query", None)):
            return engine.query(query, **kwargs)
        if callable(engine):
            return engine(query, **kwargs)
        raise TypeError(f"query engine {type(engine).__name__} has no query() and is not callable")

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        key = await asyncio.to_thread(self.route, query)
        engine = self.query_engines[key]
        for name in ("aquery", "query"):
            method = getattr(engine, name, None)
            if callable(method):
                out = method(query, **kwargs)
                return await out if inspect.isawaitable(out) else out
        if callable(engine):
            out = engine(query, **kwargs)
            return await out if inspect.isawaitable(out) else out
        raise TypeError(f"query engine {type(engine).__name__} has no aquery()/query() and is not callable")
