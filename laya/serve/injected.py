"""An injected router that is not a `laya.Router`: answered through its own `predict` / `predict_batch`, with
only the controls the client sent (the dynamic batcher needs a real Router's routing and loading)."""

from __future__ import annotations

from typing import Any

from .schema import Decision

ITEM_CONTROLS = ("max_len", "head_max_len", "task", "lang", "lang_guess")


def batchable(router: Any) -> bool:
    """Whether the server may route, load and batch for this router itself: a Router whose predict paths are the
    stock ones (a subclass answering elsewhere, e.g. over HTTP, is called through its own predict)."""
    from ..router import Router

    cls = type(router)
    return isinstance(router, Router) and getattr(cls, "predict", None) is Router.predict \
        and getattr(cls, "predict_batch", None) is Router.predict_batch


def _item_controls(d: Decision) -> dict:
    return {k: getattr(d, k) for k in ITEM_CONTROLS if k in d.sent}


def predict_single(router: Any, d: Decision) -> dict:
    extra = _item_controls(d)
    if "min_confidence" in d.sent:
        extra["min_confidence"] = d.min_confidence
    return router.predict(d.state, d.questions, model=d.model, **extra)


def predict_many(router: Any, decisions: list[Decision]) -> list[dict]:
    first = decisions[0]
    call = {k: v for k, v in (("batch_size", first.batch_size), ("min_confidence", first.min_confidence),
                              ("sort_by_length", True if first.sort_by_length else None)) if k in first.sent}
    batch = getattr(router, "predict_batch", None)
    if not callable(batch):
        extra = {"min_confidence": first.min_confidence} if "min_confidence" in first.sent else {}
        return [router.predict(d.state, d.questions, model=d.model, **_item_controls(d), **extra) for d in decisions]
    requests = [{"state": d.state, "questions": d.questions, "model": d.model, **_item_controls(d)}
                for d in decisions]
    return list(batch(requests, **call))


def answer(router: Any, decisions: list[Decision], single: bool) -> list[dict]:
    """Blocking: run it off the event loop."""
    return [predict_single(router, decisions[0])] if single else predict_many(router, decisions)
