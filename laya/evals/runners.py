"""The runners `laya-evals run` evaluates through: a Router (each example routed, or sent to the model it
names) or one ONNX agent. Both forward `min_confidence` only when it is set."""

from __future__ import annotations

from typing import Any

from .dataset import EvalError


def _gate(min_confidence: Any) -> dict:
    return {} if min_confidence is None else {"min_confidence": min_confidence}


class RouterRunner:
    """`evaluate` runner over a `laya.Router`: `predict_batch` sends request dicts in one router call."""

    def __init__(self, router: Any):
        self.router = router

    def predict(self, state: Any, questions: dict, model: str | None = None, min_confidence: Any = None) -> dict:
        return self.router.predict(state, questions, model=model, **_gate(min_confidence))

    def predict_batch(self, states: list, questions: dict, model: str | None = None, batch_size: int | None = None,
                      sort_by_length: bool = False, min_confidence: Any = None) -> list[dict]:
        requests = [{"state": s, "questions": questions, **({"model": model} if model is not None else {})}
                    for s in states]
        extra = {"sort_by_length": True} if sort_by_length else {}
        return self.router.predict_batch(requests, batch_size=batch_size, **extra, **_gate(min_confidence))


def _same_checkpoint(a: str, b: str) -> bool:
    from ..registry import canonical_name

    return a == b or (canonical_name(a) is not None and canonical_name(a) == canonical_name(b))


class OnnxRunner:
    """`evaluate` runner over one ONNX agent; an example naming another checkpoint is refused."""

    def __init__(self, agent: Any, model_id: str | None = None):
        self.agent = agent
        self.model_id = str(model_id if model_id is not None else getattr(agent, "model_id", "onnx"))

    def _check_model(self, model: str | None) -> None:
        if model is not None and not _same_checkpoint(str(model), self.model_id):
            raise EvalError(f"the ONNX runner serves only {self.model_id!r}, but this example asks for {model!r}; "
                            "run them separately or drop --onnx")

    def predict(self, state: Any, questions: dict, model: str | None = None, min_confidence: Any = None) -> dict:
        self._check_model(model)
        return self.agent.predict(state, questions, **_gate(min_confidence))

    def predict_batch(self, states: list, questions: dict, model: str | None = None, batch_size: int | None = None,
                      sort_by_length: bool = False, min_confidence: Any = None) -> list[dict]:
        self._check_model(model)
        extra = {"sort_by_length": True} if sort_by_length else {}
        return self.agent.predict_batch(list(states), questions, batch_size=batch_size, **extra,
                                        **_gate(min_confidence))
