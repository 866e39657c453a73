"""Validated question sets, remembered process-wide: agents ask the same questions about many states."""

from __future__ import annotations

import marshal
import threading
import weakref
from typing import Any

from .answers import Calibration, DecodePlan, plan_shape
from .questions import Question, check_questions
from .sequence import build_heads

QUESTION_CACHE_SIZE = 1024  # validated question sets remembered process-wide (agents ask the same ones again)

_checked: dict = {}  # marshal bytes of a question dict -> its QuestionSet (insertion order = age)
_checked_lock = threading.Lock()


class QuestionSet:
    """A validated question dict and what the request path derives from its questions alone: each
    question's decoding shape, and (via `heads`) its token head per tokenizer and head_max_len. Remembered
    per distinct dict by `question_set`: agents ask the same questions about many states."""

    __slots__ = ("key", "qs", "shapes", "last_heads", "last_plans")

    def __init__(self, key: bytes | None, qs: list[Question]):
        self.key = key  # the dict's marshal bytes: equal keys, equal questions; None = not remembered
        self.qs = tuple(qs)  # Questions are frozen: safe to share between calls
        self.shapes = tuple(plan_shape(q) for q in qs)
        # (weak reference to a tokenizer view, head_max_len, heads) of the last `heads_for`: the request
        # path's usual answer in one attribute read. Heads are frozen. The view is held weakly (remembered
        # sets must not keep evicted agents' tokenizers alive): while it lives no other view can be it,
        # and once it is gone the reference answers None, which is never the caller's view.
        self.last_heads: tuple | None = None
        self.last_plans: tuple | None = None  # (temperatures read, binning map or None, plans): see plans_for

    def heads(self, tok: Any, head_max_len: int) -> tuple:
        return build_heads(tok, self.qs, head_max_len, self.key)

    def heads_for(self, view: Any, tok: Any, head_max_len: int) -> tuple:
        """`heads` for `tok`, whose tokenizer view is `view`, remembered for the last view and length."""
        last = self.last_heads
        if last is not None and last[0]() is view and last[1] == head_max_len:
            return last[2]
        heads = build_heads(tok, self.qs, head_max_len, self.key)
        self.last_heads = (weakref.ref(view), head_max_len, heads)
        return heads

    def plans(self, cal: Calibration, lang: str | None) -> list[DecodePlan]:
        return [DecodePlan(q, cal, lang, shape) for q, shape in zip(self.qs, self.shapes)]

    def plans_for(self, temperature: Any, by_options: Any, lang_temperatures: Any, binning_map: Any) -> tuple:
        """`plans` for a call without a language (no language table applies), remembered for the last
        calibration. Every call reads each question's temperature afresh, exactly as DecodePlan does, and
        reuses the plans only when each value read is the very object they were built with and the binning
        map (when truthy) is the same object: the plans hold those objects, so no other can take their ids,
        and a temperature list or map changed in place gives new plans. DecodePlans are read-only."""
        ts = []
        for shape in self.shapes:  # DecodePlan's bucket_temperature
            ts.append(by_options.get(shape.bucket, temperature[shape.qtype_id]))
        binning = binning_map if binning_map else None
        last = self.last_plans
        if last is not None and last[1] is binning:
            for now, then in zip(ts, last[0]):
                if now is not then:
                    break
            else:
                return last[2]
        plans = tuple(self.plans(Calibration(temperature, by_options, lang_temperatures, binning_map), None))
        # keyed by the temperatures the plans hold (the same objects as `ts` unless changed meanwhile)
        self.last_plans = ([plan.t for plan in plans], binning, plans)
        return plans


def question_set(questions: Any) -> QuestionSet:
    """`check_questions` as a QuestionSet, remembered for question dicts made of plain built-in data.

    The key is the dict's `marshal` serialisation: it takes only exact built-in types (a subclass or any
    other object raises, and such a dict is validated afresh every time), keeps key order, and tells
    True/1/1.0 and 0.0/-0.0 apart, so equal keys mean the same validated questions.
    """
    if type(questions) is dict:
        try:
            key = marshal.dumps(questions)
        except Exception:  # noqa: BLE001 - not plain data: no key, validate as usual
            key = None
        if key is not None:
            qset = _checked.get(key)
            if qset is None:
                qset = QuestionSet(key, check_questions(questions))  # invalid questions raise: not remembered
                with _checked_lock:
                    _checked[key] = qset
                    while len(_checked) > QUESTION_CACHE_SIZE:
                        del _checked[next(iter(_checked))]
            return qset
    return QuestionSet(None, check_questions(questions))


def checked_questions(questions: Any) -> list[Question]:
    """`check_questions`, remembered like `question_set`."""
    return list(question_set(questions).qs)
