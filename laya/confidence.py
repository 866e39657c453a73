"""Confidence helpers on answer dicts: the `min_confidence` abstention gate and Jev's confidence formula.

Torch-free, and the one implementation of the gate: the Agent's decoder, `laya.structured.decide`, the
Router and serve all validate and gate through these functions.

- `check_min_confidence(v)`: a float in [0, 1] (not a bool, finite) or a bucket map; returns it checked.
- `check_min_confidence_map(m)`: a non-empty dict whose keys are `bucket_keys()` or "default".
- `resolve_min_confidence(answer, thresholds, default=0.0)`: the threshold a bucket map applies to an answer.
- `answer_confidence_value(answer)`: the answer's usable `answer_confidence`, else None.
- `flag_low_confidence(results, min_confidence)` / `apply_confidence_gate(results, min_confidence=None)`:
  mark the answers of a list of result dicts in place (`low_confidence`; the gate adds `abstention` and
  `abstention_threshold`).
- `jev_confidence(answer)`: Jev's confidence of a choice/score answer (serve's `x_jev_confidence`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from .numeric import is_real, nesting_guard, shown

__all__ = ["BUCKET_QTYPES", "BUCKET_SIZES", "DEFAULT_BUCKET_KEY", "GATE_ABSTAINED", "GATE_PASSED", "GATE_STATES",
           "GATE_UNEVALUATED", "answer_bucket", "answer_confidence_value", "apply_confidence_gate", "bucket_keys",
           "bucket_size", "check_min_confidence", "check_min_confidence_map", "flag_low_confidence", "gate_answer",
           "jev_confidence", "resolve_min_confidence"]

GATE_PASSED = "passed"  # the compared number is at or above the threshold
GATE_ABSTAINED = "abstained"  # below it: the answer also carries `low_confidence: true`
GATE_UNEVALUATED = "unevaluated"  # the answer carries no usable confidence number
GATE_STATES = (GATE_PASSED, GATE_ABSTAINED, GATE_UNEVALUATED)

BUCKET_QTYPES = ("choice", "score", "noul")
BUCKET_SIZES = ("2", "3-5", "6-10", "11+")
DEFAULT_BUCKET_KEY = "default"
_BUCKET_KEYS = frozenset(f"{t}:{s}" for t in BUCKET_QTYPES for s in BUCKET_SIZES)
_ROUND = 4


def bucket_keys() -> set:
    """The twelve bucket names "<type>:<size>" a min_confidence map may use (besides "default")."""
    return set(_BUCKET_KEYS)


def bucket_size(k: int) -> str:
    """The size part of a bucket name for a question with k options."""
    return "2" if k <= 2 else "3-5" if k <= 5 else "6-10" if k <= 10 else "11+"


# ---- validation ---------------------------------------------------------------------------------

_THRESHOLD_FIX = "pass a float in [0.0, 1.0] or a bucket map of them"


def _check_threshold(value: Any) -> float:
    if not is_real(value, finite=True) or not 0.0 <= value <= 1.0:
        raise ValueError(f"min_confidence must be a float in [0.0, 1.0], got {shown(value)}")
    return float(value)


def check_min_confidence_map(m: Any) -> dict[str, float]:
    """A bucket map of thresholds, checked: keys from `bucket_keys()` or "default", values in [0, 1]."""
    with nesting_guard("min_confidence", _THRESHOLD_FIX):
        if not isinstance(m, dict) or not m:
            raise ValueError(f"a min_confidence map must be a non-empty dict of bucket -> float, got {shown(m)}")
        out = {}
        for key, value in m.items():
            if key != DEFAULT_BUCKET_KEY and key not in _BUCKET_KEYS:
                raise ValueError(f"min_confidence map keys must be a bucket like 'choice:3-5' or 'default', "
                                 f"got {key!r}")
            out[key] = _check_threshold(value)
    return out


def check_min_confidence(v: Any) -> float | dict[str, float]:
    """A `min_confidence` threshold, checked: a dict goes to `check_min_confidence_map`; anything else must
    be a finite real number in [0, 1] and not a bool (None is refused too). Returns a float or the map."""
    if isinstance(v, dict):
        return check_min_confidence_map(v)
    with nesting_guard("min_confidence", _THRESHOLD_FIX):
        return _check_threshold(v)


# ---- buckets and the compared number -------------------------------------------------------------

def answer_bucket(answer: Any) -> str | None:
    """"<type>:<size>" of an answer: k = its `probabilities` count (2 for a noul without them); None when
    the type is not choice/score/noul or a choice/score answer has no probabilities."""
    if not isinstance(answer, dict):
        return None
    kind = answer.get("type")
    if not isinstance(kind, str) or kind not in BUCKET_QTYPES:
        return None
    probabilities = answer.get("probabilities")
    try:
        k = len(probabilities) if probabilities else 0
    except TypeError:
        k = 0
    if not k:
        if kind != "noul":
            return None
        k = 2
    return f"{kind}:{bucket_size(k)}"


def resolve_min_confidence(answer: Any, thresholds: Any, default: float = 0.0) -> float:
    """The threshold a bucket map gives an answer: its bucket's entry, else the map's "default", else
    `default`. A bare number applies to every answer; None gives `default`. `answer` may also be a bucket
    name such as "choice:3-5"."""
    if thresholds is None:
        return float(default)
    if not isinstance(thresholds, dict):
        return float(thresholds)
    bucket = answer if isinstance(answer, str) else answer_bucket(answer)
    if bucket is not None and bucket in thresholds:
        return float(thresholds[bucket])
    return float(thresholds.get(DEFAULT_BUCKET_KEY, default))


def answer_confidence_value(answer: Any) -> float | None:
    """The answer's `answer_confidence` when it is a finite, non-bool number, else None (no fallback)."""
    value = answer.get("answer_confidence") if isinstance(answer, dict) else None
    return float(value) if is_real(value, finite=True) else None


def _compared_number(answer: dict) -> float | None:
    """`answer_confidence` when usable, else `confidence` under the same rule, else None."""
    value = answer_confidence_value(answer)
    if value is None and is_real(answer.get("confidence"), finite=True):
        value = float(answer["confidence"])
    return value


# ---- the gate -----------------------------------------------------------------------------------

def gate_answer(answer: dict, min_confidence: float | dict, abstention: bool = True) -> None:
    """Gate one answer dict in place with a *checked* threshold (float or bucket map).

    `low_confidence: true` below the threshold, the key removed otherwise (at or above it, or no usable
    number); with `abstention`, also `abstention` (one of GATE_STATES) and `abstention_threshold`."""
    threshold = resolve_min_confidence(answer, min_confidence)
    value = _compared_number(answer)
    if value is None:
        state = GATE_UNEVALUATED
        answer.pop("low_confidence", None)
    elif value < threshold:
        state = GATE_ABSTAINED
        answer["low_confidence"] = True
    else:
        state = GATE_PASSED
        answer.pop("low_confidence", None)
    if abstention:
        answer["abstention"] = state
        answer["abstention_threshold"] = threshold


def _answer_dicts(results: Any) -> Iterable[dict]:
    """Every answer dict of a list of result dicts (a single result dict counts as a list of one);
    results and answers that are not dicts are skipped."""
    if isinstance(results, dict):
        results = (results,)
    for result in results or ():
        answers = result.get("answers") if isinstance(result, dict) else None
        if isinstance(answers, dict):
            yield from (a for a in answers.values() if isinstance(a, dict))


def flag_low_confidence(results: Any, min_confidence: Any) -> None:
    """Mark the answers of a list of result dicts in place: `low_confidence: true` below the threshold
    (a float or a bucket map), the key removed otherwise. No `abstention` fields; None does nothing."""
    if min_confidence is None:
        return
    checked = check_min_confidence(min_confidence)
    for answer in _answer_dicts(results):
        gate_answer(answer, checked, abstention=False)


def apply_confidence_gate(results: Any, min_confidence: Any = None) -> None:
    """The abstention gate on a list of result dicts, in place: every answer dict gets `abstention`
    (GATE_STATES) and `abstention_threshold`, and `low_confidence: true` when below the threshold (the key
    is removed when it passes or has no usable number). With min_confidence None nothing is written."""
    if min_confidence is None:
        return
    checked = check_min_confidence(min_confidence)
    for answer in _answer_dicts(results):
        gate_answer(answer, checked)


# ---- Jev's confidence ---------------------------------------------------------------------------

def _level(key: Any) -> int | None:
    """A score key's level (an integer string or an int), else None."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        return None
    try:
        return int(key)
    except ValueError:
        return None


def _jev_distribution(kind: str, probabilities: Any) -> list[float] | None:
    """The probabilities as a renormalised list (score: in level order), or None when unusable."""
    if not isinstance(probabilities, dict) or not probabilities:
        return None
    items = list(probabilities.items())
    if kind == "score":
        levels = [_level(key) for key, _ in items]
        if any(level is None for level in levels):
            return None
        items = [item for _, item in sorted(zip(levels, items), key=lambda pair: pair[0])]
    values = []
    for _, raw in items:
        if isinstance(raw, bool):
            return None
        try:
            value = float(raw)
        except (TypeError, ValueError, OverflowError):
            return None
        if not math.isfinite(value) or value < 0:
            return None
        values.append(value)
    total = sum(values)
    if not math.isfinite(total):  # finite values whose sum overflows: the same distribution, scaled down first
        top = max(values)
        values = [v / top for v in values]
        total = sum(values)
    if total <= 0:  # all zero: read as the uniform distribution
        return [1.0 / len(values)] * len(values)
    return [v / total for v in values]


def jev_confidence(answer: Any) -> float | None:
    """choice: (max p - 1/n)/(1 - 1/n); score: max(0, 1 - sum p_i|i - mode| / D), D being that spread for a
    uniform distribution around the centre, i the level (keys read in integer order); one option -> 1.0;
    noul, or probabilities that are not all finite non-negative numbers -> None. Rounded to 4 decimals."""
    if not isinstance(answer, dict):
        return None
    kind = answer.get("type")
    if kind not in ("choice", "score"):
        return None
    p = _jev_distribution(kind, answer.get("probabilities"))
    if p is None:
        return None
    n = len(p)
    if n == 1:
        return 1.0
    if kind == "choice":
        value = (max(p) - 1.0 / n) / (1.0 - 1.0 / n)
    else:
        mode = p.index(max(p))
        spread = sum(pi * abs(i - mode) for i, pi in enumerate(p))
        centre = (n - 1) / 2.0
        uniform = sum(abs(i - centre) for i in range(n)) / n
        value = max(0.0, 1.0 - spread / uniform)
    return round(min(1.0, max(0.0, value)), _ROUND)
