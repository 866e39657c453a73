"""Fitting calibration from held-out predictions: temperatures, ECE, binning, abstention thresholds.

A record is `(qtype, logits, target, k)`: qtype 0/1/2 (choice/score/noul), the first k logits of a row
in canonical option order, and the gold probabilities (length k). Answers then use
`softmax(logits / T)` with T looked up per (type, option-count bucket) exactly as `laya.answers` does.
"""

from __future__ import annotations

import math
import random
from typing import Iterable, Sequence

import numpy as np

from .answers import TEMP_MAX, TEMP_MIN, apply_binning_map, clamp_temperature, temp_bucket  # noqa: F401 (re-exported)
from .questions import QTYPE_NAMES

MIN_TYPE_N = 10
MIN_BUCKET_N = 2000
LOG_T_SLACK = 10.0  # e-folds the optimiser may wander outside [TEMP_MIN, TEMP_MAX] before the clamp
ECE_HOLDOUT = 0.2

Record = tuple  # (qtype, logits, target, k)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def fit_one_temperature(pairs: Sequence[tuple[np.ndarray, np.ndarray]], min_n: int = MIN_BUCKET_N) -> float:
    """The T minimising mean NLL of softmax(z / T) against the targets (LBFGS on log T), clamped to
    [TEMP_MIN, TEMP_MAX]; 1.0 when there are fewer than `min_n` pairs."""
    import torch

    if len(pairs) < max(1, min_n):
        return 1.0
    width = max(len(z) for z, _ in pairs)
    z = torch.full((len(pairs), width), -1e4, dtype=torch.float64)
    t = torch.zeros((len(pairs), width), dtype=torch.float64)
    for i, (logits, target) in enumerate(pairs):
        z[i, :len(logits)] = torch.as_tensor(np.asarray(logits, dtype=np.float64))
        t[i, :len(target)] = torch.as_tensor(np.asarray(target, dtype=np.float64))
    lo, hi = math.log(TEMP_MIN) - LOG_T_SLACK, math.log(TEMP_MAX) + LOG_T_SLACK
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.1, max_iter=100, line_search_fn=None)

    def closure():
        opt.zero_grad()
        scaled = z / log_t.clamp(lo, hi).exp()
        loss = -(t * torch.log_softmax(scaled, dim=-1)).sum(-1).mean()
        loss.backward()
        return loss

    opt.step(closure)
    value = float(log_t.detach().clamp(lo, hi).exp())
    return clamp_temperature(value) if math.isfinite(value) else 1.0


def temperature_for(qtype: int, k: int, temperature: Sequence[float], by_options: dict | None) -> float:
    return (by_options or {}).get(temp_bucket(qtype, k), temperature[qtype])


def predictions(records: Iterable[Record], temperature: Sequence[float] = (1.0, 1.0, 1.0),
                by_options: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(answer confidence = max probability, correct = argmax matches the gold argmax) per record."""
    conf, correct = [], []
    for qtype, logits, target, k in records:
        p = _softmax(np.asarray(logits[:k], dtype=np.float64) / temperature_for(qtype, k, temperature, by_options))
        conf.append(float(p.max()))
        correct.append(int(np.argmax(p)) == int(np.argmax(np.asarray(target[:k]))))
    return np.asarray(conf), np.asarray(correct, dtype=bool)


def ece_score(conf: Sequence[float], correct: Sequence[bool], bins: int = 15) -> float:
    """Expected calibration error: bins (i/bins, (i+1)/bins], the first also holding 0."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be an int >= 1, got {bins!r}")
    conf = np.asarray(conf, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if conf.size == 0:
        return 0.0
    index = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = index == b
        if sel.any():
            total += sel.sum() / conf.size * abs(correct[sel].mean() - conf[sel].mean())
    return float(total)


def fit_temperature_map(records: Sequence[Record], compute_ece: bool = False, seed: int = 0,
                        min_type_n: int = MIN_TYPE_N, min_bucket_n: int = MIN_BUCKET_N) -> dict:
    """Per-type temperatures (floor `min_type_n`) and per-bucket ones (floor `min_bucket_n`).

    With compute_ece, 20% of the records (seeded) are kept out of the fit and the ECE before and
    after the temperatures is measured on them. Returns {"temperature", "temperature_by_options",
    "clamped": [names whose fit hit the range], "counts": {bucket: n}, "ece"?: {...}}."""
    records = list(records)
    fit_on, check_on = records, []
    if compute_ece and len(records) >= 10:
        order = list(range(len(records)))
        random.Random(seed).shuffle(order)
        cut = int(round(len(records) * ECE_HOLDOUT))
        check_on = [records[i] for i in order[:cut]]
        fit_on = [records[i] for i in order[cut:]]
    temperature, clamped = [1.0, 1.0, 1.0], []
    for qtype in range(3):
        pairs = [(z[:k], t[:k]) for q, z, t, k in fit_on if q == qtype]
        temperature[qtype] = fit_one_temperature(pairs, min_n=min_type_n)
        if len(pairs) >= min_type_n and temperature[qtype] in (TEMP_MIN, TEMP_MAX):
            clamped.append(f"temperature[{qtype}]")
    by_options, counts = {}, {}
    for q, z, t, k in fit_on:
        counts[temp_bucket(q, k)] = counts.get(temp_bucket(q, k), 0) + 1
    for bucket, n in sorted(counts.items()):
        if n < min_bucket_n:
            continue
        pairs = [(z[:k], t[:k]) for q, z, t, k in fit_on if temp_bucket(q, k) == bucket]
        by_options[bucket] = fit_one_temperature(pairs, min_n=min_bucket_n)
        if by_options[bucket] in (TEMP_MIN, TEMP_MAX):
            clamped.append(bucket)
    out = {"temperature": temperature, "temperature_by_options": by_options, "clamped": clamped, "counts": counts}
    if check_on:
        before = predictions(check_on)
        after = predictions(check_on, temperature, by_options)
        out["ece"] = {"n": len(check_on), "before": ece_score(*before), "after": ece_score(*after),
                      "per_type_after": {QTYPE_NAMES[q]: ece_score(*predictions(
                          [r for r in check_on if r[0] == q], temperature, by_options))
                          for q in range(3) if any(r[0] == q for r in check_on)}}
    return out


fit_temperatures = fit_temperature_map  # the published module-level alias


def fit_binning_map(records: Sequence[Record], temperature: Sequence[float], temperature_by_options: dict | None,
                    *, bins: int = 15, min_bucket_n: int = 200) -> dict:
    """{bucket: {"bins", "values": per-bin accuracy (an empty bin keeps its centre)}} for full buckets."""
    groups: dict[str, list] = {}
    for r in records:
        groups.setdefault(temp_bucket(r[0], r[3]), []).append(r)
    out = {}
    for bucket, rows in sorted(groups.items()):
        if len(rows) < min_bucket_n:
            continue
        conf, correct = predictions(rows, temperature, temperature_by_options)
        index = np.clip((conf * bins).astype(int), 0, bins - 1)
        values = [float(correct[index == b].mean()) if (index == b).any() else (b + 0.5) / bins for b in range(bins)]
        out[bucket] = {"bins": bins, "values": values}
    return out


def fit_abstention_thresholds(records: Sequence[Record], temperature: Sequence[float],
                              temperature_by_options: dict | None = None, target_error: float = 0.10,
                              min_bucket_n: int = 100, min_n: int = 10) -> dict:
    """A `min_confidence` map: per bucket (with >= min_bucket_n records) and "default", the lowest
    answer-confidence threshold at which the answers kept have an error rate <= target_error
    (1.0 when no threshold reaches it)."""
    def threshold(rows: list) -> float:
        conf, correct = predictions(rows, temperature, temperature_by_options)
        order = np.argsort(-conf)
        errors = np.cumsum(~correct[order])
        kept = np.arange(1, len(order) + 1)
        ok = np.nonzero(errors / kept <= target_error)[0]
        return round(float(conf[order][ok.max()]), 4) if ok.size else 1.0

    records = list(records)
    out: dict = {}
    if len(records) >= min_n:
        out["default"] = threshold(records)
    groups: dict[str, list] = {}
    for r in records:
        groups.setdefault(temp_bucket(r[0], r[3]), []).append(r)
    for bucket, rows in sorted(groups.items()):
        if len(rows) >= min_bucket_n:
            out[bucket] = threshold(rows)
    return out
