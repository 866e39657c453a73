"""Confidence helpers on answer dicts: the `min_confidence` abstention gate (spec §2.4) and Jev's
confidence formula (§2.5). Torch-free.

- `check_min_confidence(value)`: a float in [0, 1] or a bucket map, validated (None passes through).
- `check_min_confidence_map(value)`: the map form only: keys the twelve buckets
  `{choice,score,noul}:{2,3-5,6-10,11+}` plus "default", values numbers in [0, 1].
- `resolve_min_confidence(min_confidence, answer_or_bucket)`: the threshold applied to a bucket
  (a float applies everywhere; a map: the named bucket, else its "default", else 0.0).
- `flag_low_confidence(answer, min_confidence)` / `apply_confidence_gate(result, min_confidence)`:
  write the abstention fields (`abstention`, `abstention_threshold`, `low_confidence`) on one answer /
  on every answer of a result (or of a list of results), in place.
- `GATE_STATES`: the values `abstention` takes.
- `jev_confidence(answer)`: Jev's confidence of a choice/score answer (serve's `x_jev_confidence`).
"""

from __future__ import annotations

import math
from typing import Any

from .answers import BUCKETS, ROUND, answer_bucket, apply_min_confidence, bucket_threshold, check_min_confidence

__all__ = ["GATE_STATES", "apply_confidence_gate", "check_min_confidence", "check_min_confidence_map",
           "flag_low_confidence", "jev_confidence", "resolve_min_confidence"]

# "passed": confidence >= threshold; "abstained": below it (and `low_confidence: true`);
# "unevaluated": the answer carries no usable confidence number.
GATE_STATES = ("passed", "abstained", "unevaluated")


def check_min_confidence_map(value: Any) -> dict:
    """Validate the bucket-map form of `min_confidence`; returns {key: float}."""
    if not isinstance(value, dict):
        raise ValueError(f"a min_confidence map must be a dict of bucket -> number between 0 and 1 (keys: "
                         f"'default' or one of {', '.join(BUCKETS)}), got {value!r}")
    return check_min_confidence(value)


def resolve_min_confidence(min_confidence: Any, answer_or_bucket: dict | str) -> float:
    """The threshold `min_confidence` applies to an answer (dict) or a bucket name ('choice:3-5').

    A float applies to every bucket; a map gives the named bucket's value, else its "default", else 0.0.
    None (no gate) resolves to 0.0."""
    if isinstance(answer_or_bucket, dict):
        bucket = answer_bucket(answer_or_bucket)
    elif isinstance(answer_or_bucket, str) and answer_or_bucket in BUCKETS:
        bucket = answer_or_bucket
    else:
        raise ValueError(f"expected an answer dict or a bucket name (one of {', '.join(BUCKETS)}), "
                         f"got {answer_or_bucket!r}")
    checked = check_min_confidence(min_confidence)
    return 0.0 if checked is None else bucket_threshold(checked, bucket)


_ANSWER_TYPES = ("choice", "score", "noul")


def _check_answer(answer: Any, where: str) -> None:
    """Refuse what the gate cannot bucket (§2.4): a non-dict, a missing/unknown "type", or choice/score
    `probabilities` that are not a dict. `where` names the answer in the message."""
    if not isinstance(answer, dict):
        raise TypeError(f"{where} must be an answer dict, got {type(answer).__name__}")
    kind = answer.get("type")
    if kind not in _ANSWER_TYPES:
        detail = 'has no "type"' if "type" not in answer else f'has "type" {kind!r}'
        raise ValueError(f"{where} {detail}; an answer's type must be one of {', '.join(_ANSWER_TYPES)}")
    if kind != "noul" and not isinstance(answer.get("probabilities", {}), dict):
        raise ValueError(f"{where}: 'probabilities' must be a dict {{label: p}}, got "
                         f"{type(answer['probabilities']).__name__}")


def flag_low_confidence(answer: dict, min_confidence: Any) -> dict:
    """Write the §2.4 abstention fields on one answer, in place, and return it.

    `abstention_threshold` is the threshold of the answer's bucket; `abstention` is one of
    GATE_STATES; `low_confidence: true` when `answer_confidence` (else `confidence`) is below the
    threshold (a stale `low_confidence` from an earlier gate is removed). min_confidence None: the
    answer is returned untouched. An answer without a known "type" (or not a dict) is refused
    (ValueError / TypeError) before anything is written."""
    if min_confidence is None:
        return answer
    _check_answer(answer, "answer")
    threshold = resolve_min_confidence(min_confidence, answer)
    answer.pop("low_confidence", None)
    apply_min_confidence(answer, threshold)
    return answer


def apply_confidence_gate(result: dict | list, min_confidence: Any) -> dict | list:
    """`flag_low_confidence` on every answer of a result (`{"answers": {qid: answer}}`) or of each result
    in a list (predict_batch's output); in place, returning its argument. min_confidence None: untouched.

    The whole input is checked first: a result that is not a dict, `answers` that are not a dict, or an
    answer the gate cannot bucket (not a dict, no known "type") raises TypeError / ValueError naming it
    (result index, question id), and nothing has been modified."""
    if min_confidence is None:
        return result
    check_min_confidence(min_confidence)  # refuse a bad value even when there are no answers
    batch = isinstance(result, (list, tuple))
    results = result if batch else (result,)
    for i, one in enumerate(results):
        where = f"result {i}" if batch else "result"
        if not isinstance(one, dict):
            raise TypeError(f"{where} must be a dict with 'answers', got {type(one).__name__}")
        answers = one.get("answers", {})
        if not isinstance(answers, dict):
            raise TypeError(f"{where}: 'answers' must be a dict {{question id: answer}}, got {type(answers).__name__}")
        for qid, answer in answers.items():
            _check_answer(answer, f"{where}: answer {qid!r}" if batch else f"answer {qid!r}")
    for one in results:
        for answer in one.get("answers", {}).values():
            flag_low_confidence(answer, min_confidence)
    return result


def _is_level(key: Any) -> bool:
    return (isinstance(key, str) and key.isascii() and key.isdigit()) or \
        (isinstance(key, int) and not isinstance(key, bool) and key >= 0)


def _distribution(probabilities: Any, by_level: bool = False) -> list[float] | None:
    """Renormalised probabilities, or None when any value is not a finite, non-negative number.

    `by_level` (score answers): when every key is a level index ("0", "1", ... or ints), the values are
    taken in level order, not dict order -- a JSON round trip with sort_keys turns 12 levels into
    '0', '1', '10', '11', '2', ... and |i - mode| must be measured between levels."""
    if not isinstance(probabilities, dict) or not probabilities:
        return None
    if by_level and all(_is_level(key) for key in probabilities):
        values = [v for _, v in sorted(probabilities.items(), key=lambda item: int(item[0]))]
    else:
        values = list(probabilities.values())
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in values):
        return None
    total = float(sum(values))
    if total <= 0:
        return None
    return [v / total for v in values]


def jev_confidence(answer: dict) -> float | None:
    """choice: (max p - 1/n)/(1 - 1/n); score: max(0, 1 - sum p_i|i - mode| / D), D being that spread for a
    uniform distribution around the centre, i being the level (keys "0".."n-1" are read in level order
    whatever the dict order); one option -> 1.0; noul or unusable numbers -> None."""
    if not isinstance(answer, dict):
        return None
    kind = answer.get("type")
    if kind not in ("choice", "score"):
        return None
    p = _distribution(answer.get("probabilities"), by_level=kind == "score")
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
    return round(min(1.0, max(0.0, value)), ROUND)
