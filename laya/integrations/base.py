"""The base of the LangChain runnables: `RunnableSerializable` (a pydantic model: declared fields are validated
and coerced) when `langchain_core` is importable, else a plain class with the same fields and methods."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Optional

from .controls import CONTROL_NAMES, Runner
from .text import extract_text

try:
    from langchain_core.runnables import RunnableSerializable as _Base

    LANGCHAIN_AVAILABLE = True
except ImportError:
    LANGCHAIN_AVAILABLE = False

    class _Base:  # type: ignore[no-redef]
        """Fields from the class annotations (defaults copied), extra keywords kept as attributes."""

        def __init__(self, **data: Any):
            for cls in reversed(type(self).__mro__):
                for name in getattr(cls, "__annotations__", {}):
                    if not name.startswith("_") and name not in data and hasattr(cls, name):
                        setattr(self, name, copy.copy(getattr(cls, name)))
            for name, value in data.items():
                setattr(self, name, value)

        def __or__(self, other: Any) -> Any:
            return _Sequence(self, other)

__all__ = ["LANGCHAIN_AVAILABLE", "LayaRunnable", "controls_from"]


class _Sequence:
    """`a | b` without LangChain: b receives a's output."""

    def __init__(self, first: Any, second: Any):
        self.first, self.second = first, second

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        value = self.first.invoke(input, config)
        second = self.second
        return second.invoke(value, config) if callable(getattr(second, "invoke", None)) else second(value)

    def __or__(self, other: Any) -> "_Sequence":
        return _Sequence(self, other)


def controls_from(values: dict) -> dict:
    """The common controls among a constructor's locals."""
    return {name: values.get(name) for name in CONTROL_NAMES if name in values}


class LayaRunnable(_Base):
    """Shared plumbing: the state from the input, one laya call per invoke, one batched call per batch."""

    if LANGCHAIN_AVAILABLE:
        model_config = {"extra": "allow", "arbitrary_types_allowed": True}

    state_key: Any = None
    agent: Any = None
    base_url: Optional[str] = None
    api_key: Optional[str] = None
    model: Optional[str] = None
    max_len: Optional[int] = None
    head_max_len: Optional[int] = None
    lang: Optional[str] = None
    min_confidence: Any = None
    task: Optional[str] = None
    lang_guess: Any = None
    hooks: Any = None
    on_predict_start: Any = None
    on_predict_end: Any = None
    hooks_raise: Optional[bool] = None
    hooks_timeout: Optional[float] = None

    # ---- what a subclass says ---------------------------------------------------------------------

    def _questions(self) -> dict:
        raise NotImplementedError

    def _finish(self, input: Any, state: Any, result: dict) -> Any:  # noqa: A002
        raise NotImplementedError

    # ---- calls -----------------------------------------------------------------------------------

    def _state(self, input: Any) -> Any:  # noqa: A002
        return extract_text(input, self.state_key)

    def _runner(self) -> Runner:
        return Runner(self)

    def _answer(self, state: Any) -> dict:
        return self._runner().predict(state, self._questions())

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        state = self._state(input)
        return self._finish(input, state, self._answer(state))

    def _answer_many(self, states: list) -> list:
        return self._runner().predict_batch(states, self._questions())

    def batch(self, inputs: list, config: Any = None, *, return_exceptions: bool = False, **kwargs: Any) -> list:
        inputs = list(inputs)
        if not inputs:
            return []
        if not self._runner().batchable(return_exceptions):
            return [self._invoke_caught(i, config, return_exceptions) for i in inputs]
        states = [self._state(i) for i in inputs]
        results = self._answer_many(states)
        return [self._finish(i, s, r) for i, s, r in zip(inputs, states, results)]

    def _invoke_caught(self, input: Any, config: Any, return_exceptions: bool) -> Any:  # noqa: A002
        try:
            return self.invoke(input, config)
        except Exception as e:  # noqa: BLE001 - batch(return_exceptions=True) returns it in place
            if return_exceptions:
                return e
            raise

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        return await asyncio.to_thread(self.invoke, input, config, **kwargs)

    async def abatch(self, inputs: list, config: Any = None, *, return_exceptions: bool = False,
                     **kwargs: Any) -> list:
        return await asyncio.to_thread(self.batch, inputs, config, return_exceptions=return_exceptions)
