"""Logits -> typed answers: temperatures, softmax, confidence, abstention, 4-decimal result dicts."""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import confidence
from .confidence import BUCKET_SIZES, bucket_size
from .numeric import is_real, nesting_guard, shown
from .questions import QTYPES, QTYPE_NAMES, Question

TEMP_MIN = 0.5
TEMP_MAX = 5.0
ROUND = 4
BUCKETS = tuple(f"{t}:{s}" for t in QTYPES for s in BUCKET_SIZES)


def temp_bucket(qtype: int | str, k: int) -> str:
    name = QTYPE_NAMES[qtype] if isinstance(qtype, int) else qtype
    return f"{name}:{bucket_size(k)}"


def clamp_temperature(t: Any, lo: float = TEMP_MIN, hi: float = TEMP_MAX) -> float:
    if not is_real(t, finite=True, huge_ints=True):  # (an int too big for a float clamps to hi)
        return 1.0
    return float(min(hi, max(lo, t)))


def temperature_rejected(raw: Any, applied: Any) -> bool:
    """True when a raw temperature was not used as given: a bool, a non-number, or a value the clamp changed."""
    return not is_real(raw) or applied != raw


def unpermute_probs(p: Any, option_order: Any) -> list:
    """Slot-order probabilities back in caller order (slot s showed option option_order[s]); unchanged
    when the order is missing or is not a permutation of the slots."""
    p = list(p)
    order = list(option_order) if option_order is not None else None
    if order is None or sorted(order) != list(range(len(p))):
        return p
    out = [0.0] * len(p)
    for slot, option in enumerate(order):
        out[option] = p[slot]
    return out


def _replaced(name: str, raw: Any, applied: float) -> str | None:
    if temperature_rejected(raw, applied):
        return f"{name}={raw!r} -> {applied:g}"
    return None


def clamp_temperatures(raw_list: Any, raw_map: Any, source: str = "checkpoint",
                       prefix: str = "laya") -> tuple[list[float], dict[str, float]]:
    """Clamped copies of a temperature list and bucket map; ONE RuntimeWarning lists every replacement."""
    if not isinstance(raw_list, (list, tuple)) or len(raw_list) != 3:
        raise ValueError(f"temperature must be a list of 3 floats (choice, score, noul), got {raw_list!r}")
    if not isinstance(raw_map, dict):
        raise ValueError(f"temperature_by_options must be a dict {{bucket: float}}, got {raw_map!r}")
    temps = [clamp_temperature(t) for t in raw_list]
    by_options = {str(k): clamp_temperature(v) for k, v in raw_map.items()}
    notes = [_replaced(f"temperature[{i}]", r, a) for i, (r, a) in enumerate(zip(raw_list, temps))]
    notes += [_replaced(str(k), v, by_options[str(k)]) for k, v in raw_map.items()]
    notes = [n for n in notes if n]
    if notes:
        warnings.warn(
            f"{prefix}: the {source} ships invalid or out-of-range temperatures (allowed range "
            f"[{TEMP_MIN:g}, {TEMP_MAX:g}]); replaced {', '.join(notes)}. Treat confidences from the "
            "affected buckets as uncalibrated.", RuntimeWarning, stacklevel=3)
    return temps, by_options


def resolve_lang_temperatures(lang_temperatures: Any, base: list[float], prefix: str = "laya",
                              base_map: dict | None = None) -> dict[str, dict]:
    """{primary subtag: {"temperature": list, "temperature_by_options": map}} (the published shape); a None entry
    or temperature inherits the checkpoint's."""
    if lang_temperatures is None:
        return {}
    if not isinstance(lang_temperatures, dict):
        raise ValueError("lang_temperatures must be a dict {lang: {'temperature': [3 floats], "
                         "'temperature_by_options': {...}}}")
    out = {}
    for lang, entry in lang_temperatures.items():
        if not isinstance(lang, str):
            raise ValueError(f"Language override keys must be strings, got {lang!r}")
        out[primary_subtag(lang)] = _lang_override(lang, entry, base, base_map or {}, prefix)
    return out


def _lang_override(lang: str, entry: Any, base: list[float], base_map: dict, prefix: str) -> dict:
    """One language's {"temperature", "temperature_by_options"}, checked in the published words."""
    if entry is None:
        return {"temperature": list(base), "temperature_by_options": dict(base_map)}
    if not isinstance(entry, dict):
        raise ValueError(f"Language override {lang!r} must be a mapping, got {type(entry).__name__}")
    temps = entry.get("temperature")
    temps = list(base) if temps is None else temps
    if not isinstance(temps, (list, tuple)) or len(temps) != 3:
        got = len(temps) if isinstance(temps, (list, tuple)) else type(temps).__name__
        raise ValueError(f"Language override {lang!r} temperature must be a list of 3 floats, got {got}")
    raw_map = entry.get("temperature_by_options")
    raw_map = {} if raw_map is None else raw_map
    if not isinstance(raw_map, dict):
        raise ValueError(f"Language override {lang!r} temperature_by_options must be a mapping of "
                         f"bucket -> float, got {type(raw_map).__name__}")
    applied = [clamp_temperature(t) for t in temps]
    by_options = {str(k): clamp_temperature(v) for k, v in raw_map.items()}
    replaced = any(temperature_rejected(r, a) for r, a in zip(temps, applied)) or any(
        temperature_rejected(v, by_options[str(k)]) for k, v in raw_map.items())
    if replaced:
        warnings.warn(f"{prefix}: language override {primary_subtag(lang)!r} ships invalid temperatures or values outside "
                      f"[{TEMP_MIN:g}, {TEMP_MAX:g}]; using temperature={applied} and "
                      f"temperature_by_options={by_options}", RuntimeWarning, stacklevel=4)
    return {"temperature": applied, "temperature_by_options": by_options}


def primary_subtag(lang: str) -> str:
    return lang.strip().split("-")[0].split("_")[0].lower()


def confidence_from_probs(p: Any, k: int) -> float:
    """1 - H(p)/ln k clipped to [0, 1]; 1.0 for fewer than two options. (Plain floats: these run per
    answer on a handful of options, where numpy's per-call cost dominates.)"""
    if k < 2:
        return 1.0
    entropy = 0.0
    for v in list(p)[:k]:
        v = min(1.0, max(1e-12, float(v)))
        entropy -= v * math.log(v)
    return min(1.0, max(0.0, 1.0 - entropy / math.log(k)))


def answer_confidence(p: Any, k: int) -> float:
    if k < 1:
        return 1.0
    return min(1.0, max(0.0, max(float(v) for v in list(p)[:k])))


def apply_binning_map(conf: float, bucket: str, binning_map: dict | None) -> float:
    entry = (binning_map or {}).get(bucket)
    if not entry:
        return conf
    bins = int(entry["bins"])
    index = min(bins - 1, max(0, int(conf * bins)))
    return float(entry["values"][index])


def softmax(z: Any) -> list[float]:
    """The softmax of laya: max-shifted, in float64, on a short sequence (NaN in, NaN out)."""
    z = [float(v) for v in z]
    top = z[0]
    for v in z:
        if v > top or v != v:  # like max(), but NaN wins wherever it sits
            top = v
    e = [math.exp(v - top) for v in z]
    total = sum(e)
    return [v / total for v in e]


def softmax_rows_fp32(z: Any) -> list[list[float]]:
    """Row softmax in float32 numpy, as lists: the published ONNX agent's act softmax (spec 1.4), kept for its bits."""
    import numpy as np

    z = np.asarray(z, dtype=np.float32)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).tolist()


def softmax_rows(rows: Any) -> list[list[float]]:
    """`softmax` of each row of a 2-D array-like (lists, ndarray, tensor rows)."""
    return [softmax(row) for row in rows]


@dataclass
class Calibration:
    """The temperatures and optional binning a decode uses."""

    temperature: list[float]
    temperature_by_options: dict[str, float]
    lang_temperatures: dict[str, dict]  # resolve_lang_temperatures
    binning_map: dict | None = None

    def temperature_for(self, qtype: int, k: int, lang: str | None) -> tuple[float, bool]:
        """(T, whether a language table was used)."""
        return self.bucket_temperature(temp_bucket(qtype, k), qtype, lang)

    def bucket_temperature(self, bucket: str, qtype: int, lang: str | None) -> tuple[float, bool]:
        """`temperature_for` with the question's bucket at hand."""
        if lang:
            table = self.lang_temperatures.get(primary_subtag(lang))
            if table is not None:
                return table["temperature_by_options"].get(bucket, table["temperature"][qtype]), True
        return self.temperature_by_options.get(bucket, self.temperature[qtype]), False


class QuestionShape(NamedTuple):
    """The part of a question's DecodePlan that depends on the question alone (a cached question set keeps
    it, so a call only adds its calibration)."""

    k: int
    kind: str
    qtype_id: int
    labels: tuple
    order: Any
    log_k: float | None
    keys: tuple
    legend: tuple | None
    bucket: str


def plan_shape(q: Question) -> QuestionShape:
    """The QuestionShape of `q`."""
    k = q.k
    if q.qtype == "score":
        keys = tuple(str(i) for i in range(k))
        legend = tuple(zip(keys, q.legend))
    else:
        keys, legend = q.labels, None
    return QuestionShape(k, q.qtype, q.qtype_id, q.labels, q.option_order, math.log(k) if k >= 2 else None, keys,
                         legend, temp_bucket(q.qtype_id, k))


class DecodePlan:
    """What decoding one question needs, worked out once per call instead of once per answer;
    `shape` = plan_shape(q) when the caller has it."""

    __slots__ = ("k", "t", "kind", "labels", "order", "log_k", "bucket", "binning", "keys", "legend")

    def __init__(self, q: Question, cal: Calibration, lang: str | None, shape: QuestionShape | None = None):
        (self.k, self.kind, qtype_id, self.labels, self.order, self.log_k, self.keys, self.legend,
         bucket) = shape or plan_shape(q)
        self.t, lang_used = cal.bucket_temperature(bucket, qtype_id, lang)
        self.binning = cal.binning_map if cal.binning_map and not lang_used else None
        self.bucket = bucket if self.binning is not None else None


def decode_planned(plan: DecodePlan, logits_row: list, act_prob: Any) -> dict:
    """`decode_answer` with the per-question work done already (same arithmetic, same dict)."""
    k, t = plan.k, plan.t
    p = softmax([v / t for v in logits_row[:k]])
    if plan.order is not None:
        p_slots, p = p, [0.0] * k
        for slot, option in enumerate(plan.order):  # slot s held option order[s]
            p[option] = p_slots[slot]
    conf = confidence_from_probs(p, k)
    ans_conf = answer_confidence(p, k)
    p_max = max(p)
    if plan.binning is not None:
        ans_conf = apply_binning_map(ans_conf, plan.bucket, plan.binning)
    action = {"act_probability": round(float(act_prob), ROUND)}
    kind = plan.kind
    if kind == "choice":
        # the first of equal maxima, like argmax: max(p) is the first element no later one exceeds, and no
        # earlier element equals it (else max would have kept that one)
        return {"type": "choice", "choice": plan.labels[p.index(p_max)],
                "probabilities": {key: round(v, ROUND) for key, v in zip(plan.keys, p)},
                "confidence": round(conf, ROUND), "answer_confidence": round(ans_conf, ROUND), "action": action}
    if kind == "score":
        expected = sum([i * v for i, v in enumerate(p)])
        return {"type": "score", "score": round(expected, ROUND), "legend": dict(plan.legend),
                "probabilities": {key: round(v, ROUND) for key, v in zip(plan.keys, p)},
                "confidence": round(conf, ROUND), "answer_confidence": round(ans_conf, ROUND), "action": action}
    p_true = p[1]
    p_false = 1.0 - p_true
    return {"type": "noul", "noul": round(p_true, ROUND),
            "confidence": round(p_false if p_false > p_true else p_true, ROUND),  # max(p_true, 1 - p_true)
            "answer_confidence": round(ans_conf, ROUND), "action": action}


def decode_answer(q: Question, logits_row: Any, act_prob: float, cal: Calibration,
                  lang: str | None = None) -> dict:
    """One answer dict from this question's row of logits (slot order) and act probability."""
    plan = DecodePlan(q, cal, lang)
    return decode_planned(plan, [float(v) for v in logits_row[:plan.k]], act_prob)


def check_min_confidence(value: Any) -> float | dict | None:
    """`laya.confidence.check_min_confidence`, with None (no gate) passed through."""
    return None if value is None else confidence.check_min_confidence(value)


def unit_interval(value: Any, name: str) -> float:
    """`value` as a float in [0, 1]; bools, NaN and inf refused with a message naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:  # (NaN fails too)
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


def positive_int(value: Any, name: str) -> int:
    """`value` as an int when it is an integral number >= 1 (numpy ints too; bools refused), else a ValueError
    naming `name`."""
    if not is_real(value, positive=True, types=(numbers.Integral,)):
        with nesting_guard(name, "pass a positive integer"):  # (the repr of a deep value recurses)
            raise ValueError(f"{name} must be a positive integer, got {shown(value)}")
    return int(value)


def check_flag(value: Any, name: str) -> Any:
    """`value`, unless it is text: a TypeError naming `name` (a truthy 'no' must not read as yes; the specs read
    these flags by truthiness, so 0, 1 and numpy bools pass)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def apply_min_confidence(answer: dict, min_confidence: float | dict) -> None:
    """Add the abstention fields to one answer, in place (min_confidence already checked)."""
    confidence.gate_answer(answer, min_confidence)
