"""Calibration from held-out predictions (temperatures, ECE, binning, abstention thresholds) and its
persistence (the calibration JSON `save_calibration` writes and `load_calibration` applies).

A record is `(qtype, logits, target[, k])`: qtype 0/1/2 (choice/score/noul), the logits of a row in
canonical option order, the gold probabilities (same length) and how many of them count (k, default the
length). Answers then use `softmax(logits / T)` with T looked up per (type, option-count bucket) exactly
as `laya.answers` does.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import random
import warnings
from typing import Any, Iterable, Sequence

import numpy as np

from .answers import (TEMP_MAX, TEMP_MIN, apply_binning_map, clamp_temperature, softmax, temp_bucket,  # noqa: F401 (re-exported)
                      temperature_rejected)
from .answers import check_flag
from .atomic_file import write_json_atomic
from .numeric import is_real
from .questions import QTYPE_NAMES

CALIBRATION_VERSION = 2
N_QTYPES = 3
MIN_TYPE_N = 10
MIN_BUCKET_N = 2000
MIN_ABSTAIN_BUCKET_N = 100
MIN_BINNING_BUCKET_N = 200
MAX_MAP_BINS = 10_000  # a binning map stores one value per bin
LOG_T_MARGIN = 10.0  # e-folds the optimiser may wander outside [TEMP_MIN, TEMP_MAX] before the clamp
ECE_HOLDOUT_FRAC = 0.2
TEMPERATURE_KEYS = ("temperature", "temperature_by_options")

Record = tuple  # (qtype, logits, target, k)

RECORD_SHAPE = "record must be (qtype, logits, target[, k])"


# ---- record validation (every fitter) ----------------------------------------------------------------

def _integral(value: Any) -> int | None:
    """`value` as an int when it is a non-bool integral number, else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    return int(value) if math.isfinite(value) and float(value).is_integer() else None


def _bad_record(where: str, text: str, value: Any) -> ValueError:
    """The rule first (callers match on it), then the value and which record it was."""
    return ValueError(f"{text}, got {value!r:.120} ({where})")


def _vector(values: Any, name: str, where: str) -> np.ndarray:
    arr = None
    if not isinstance(values, (str, bytes, dict)) and getattr(values, "dtype", None) != np.bool_:
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            arr = None
    if arr is None or arr.ndim != 1 or (not isinstance(values, np.ndarray) and any(isinstance(v, bool) for v in values)):
        raise _bad_record(where, f"{name} must be a one-dimensional numeric vector", values)
    if not np.all(np.isfinite(arr)):
        raise _bad_record(where, f"{name} must contain only finite values", values)
    return arr


def check_record(record: Any, where: str = "record") -> tuple:
    """One record checked and normalised to `(qtype: int, logits, target, k: int)` (numpy vectors)."""
    if not isinstance(record, (list, tuple)) or len(record) not in (3, 4):
        raise _bad_record(where, RECORD_SHAPE, record)
    qtype = _integral(record[0])
    if qtype is None or not 0 <= qtype < N_QTYPES:
        raise _bad_record(where, "qtype must be an integer between 0 and 2", record[0])
    logits = _vector(record[1], "logits", where)
    target = _vector(record[2], "target", where)
    if len(logits) != len(target):
        raise _bad_record(where, f"logits and target must have the same length ({len(logits)} logits)", len(target))
    k = _integral(record[3]) if len(record) == 4 else len(logits)
    if k is None or not 1 <= k <= len(logits):
        raise _bad_record(where, f"k must be an integer between 1 and the vector length ({len(logits)})",
                          record[3] if len(record) == 4 else k)
    if np.any(target < 0) or abs(float(target.sum()) - 1.0) > 1e-5:
        raise _bad_record(where, "target must be a nonnegative probability vector summing to 1", record[2])
    return qtype, logits, target, k


def check_records(records: Any) -> list:
    """Records checked up front: a bad one is a ValueError naming its index (not an error deep in a fit)."""
    if isinstance(records, (str, bytes, dict)) or not hasattr(records, "__iter__"):
        raise ValueError(f"records must be a list of (qtype, logits, target[, k]) records, got {type(records).__name__}")
    return [check_record(r, f"records[{i}]") for i, r in enumerate(records)]


def _positive_count(value: Any, name: str) -> int:
    n = _integral(value)
    if n is None or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return n


def check_bins(bins: Any) -> int:
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 1:
        raise ValueError(f"bins must be an integer of at least 1, got {bins!r}")
    return int(bins)


# ---- fitting -----------------------------------------------------------------------------------------

def _fit_raw_temperature(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """The T minimising mean NLL of softmax(z / T) against the targets (LBFGS on log T), before the clamp."""
    import torch

    width = max(len(z) for z, _ in pairs)
    z = torch.full((len(pairs), width), -1e4, dtype=torch.float64)
    t = torch.zeros((len(pairs), width), dtype=torch.float64)
    for i, (logits, target) in enumerate(pairs):
        z[i, :len(logits)] = torch.as_tensor(np.asarray(logits, dtype=np.float64))
        t[i, :len(target)] = torch.as_tensor(np.asarray(target, dtype=np.float64))
    lo, hi = math.log(TEMP_MIN) - LOG_T_MARGIN, math.log(TEMP_MAX) + LOG_T_MARGIN
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.1, max_iter=100, line_search_fn=None)

    def closure():
        opt.zero_grad()
        scaled = z / log_t.clamp(lo, hi).exp()
        loss = -(t * torch.log_softmax(scaled, dim=-1)).sum(-1).mean()
        loss.backward()
        return loss

    opt.step(closure)
    return float(log_t.detach().clamp(lo, hi).exp())


def fit_one_temperature(pairs: Sequence[tuple[np.ndarray, np.ndarray]], min_n: int = MIN_BUCKET_N) -> float:
    """The NLL-optimal temperature clamped to [TEMP_MIN, TEMP_MAX]; 1.0 with fewer than `min_n` pairs."""
    if len(pairs) < max(1, min_n):
        return 1.0
    value = _fit_raw_temperature(pairs)
    return clamp_temperature(value) if math.isfinite(value) else 1.0


def temperature_for(qtype: int, k: int, temperature: Sequence[float], by_options: dict | None) -> float:
    return (by_options or {}).get(temp_bucket(qtype, k), temperature[qtype])


def _check_temperatures(temperature: Any, by_options: Any) -> None:
    """Temperatures a fit divides logits by: three positive finite numbers, and a bucket map of the same."""
    def positive(t: Any) -> bool:  # (logits are divided by float(t): it must be a positive finite float)
        return is_real(t, finite=True) and float(t) > 0

    if not isinstance(temperature, (list, tuple)) or len(temperature) != 3 or not all(map(positive, temperature)):
        raise ValueError(f"temperature must be 3 positive finite numbers (choice, score, noul), got {temperature!r:.120}")
    if by_options is not None and (not isinstance(by_options, dict) or not all(map(positive, by_options.values()))):
        raise ValueError(f"temperature_by_options must be a dict of bucket -> positive finite number, "
                         f"got {by_options!r:.120}")


def predictions(records: Iterable[Record], temperature: Sequence[float] = (1.0, 1.0, 1.0),
                by_options: dict | None = None, binning_map: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(answer confidence = max probability, binned when a map is given; correct = argmax matches the gold
    argmax) per record."""
    _check_temperatures(temperature, by_options)
    conf, correct = [], []
    for qtype, logits, target, k in records:
        t = temperature_for(qtype, k, temperature, by_options)
        p = np.asarray(softmax([float(v) / t for v in logits[:k]]))
        c = float(p.max())
        conf.append(apply_binning_map(c, temp_bucket(qtype, k), binning_map) if binning_map else c)
        correct.append(int(np.argmax(p)) == int(np.argmax(np.asarray(target[:k]))))
    return np.asarray(conf), np.asarray(correct, dtype=bool)


def ece_score(conf: Sequence[float], correct: Sequence[bool], bins: int = 15) -> float:
    """Expected calibration error: bins (i/bins, (i+1)/bins], the first also holding 0."""
    bins = check_bins(bins)
    conf = np.asarray(conf, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if conf.size == 0:
        return 0.0
    if correct.shape != conf.shape:
        raise ValueError(f"conf and correct must be the same length, got {conf.size} and {correct.size}")
    index = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in np.unique(index):  # the occupied bins, in order: the same sum without walking empty ones
        sel = index == b
        total += sel.sum() / conf.size * abs(correct[sel].mean() - conf[sel].mean())
    return float(total)


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be None or an integer in [0, 2**32), got {seed!r}")
    return int(seed)


def _fit_entry(pairs: list, min_n: int, name: str, clamped: dict) -> float:
    """One fitted temperature (1.0 below `min_n`); a fit outside the range is clamped and noted."""
    if len(pairs) < max(1, min_n):
        return 1.0
    raw = _fit_raw_temperature(pairs)
    applied = clamp_temperature(raw) if math.isfinite(raw) else 1.0
    if math.isfinite(raw) and applied != raw and applied in (TEMP_MIN, TEMP_MAX):
        clamped[name] = {"fitted": raw, "applied": applied, "bound": "min" if applied == TEMP_MIN else "max"}
    return applied


def _holdout(records: list, compute_ece: bool, seed: int | None) -> tuple[list, list]:
    """(fit split, held-out split): ECE_HOLDOUT_FRAC of the records, seeded, when ECE is asked for."""
    if not compute_ece or len(records) < 10:
        return records, []
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    cut = int(round(len(records) * ECE_HOLDOUT_FRAC))
    return [records[i] for i in order[cut:]], [records[i] for i in order[:cut]]


def fit_temperature_map(records: Sequence[Record], compute_ece: bool = False, seed: int | None = 0,
                        min_type_n: int = MIN_TYPE_N, min_bucket_n: int = MIN_BUCKET_N) -> dict:
    """Per-type temperatures (floor `min_type_n`) and per-bucket ones (floor `min_bucket_n`).

    Returns {"temperature", "temperature_by_options", "n_by_bucket", "temperature_clamped": {name:
    {"fitted", "applied", "bound"}}}; with compute_ece, ECE_HOLDOUT_FRAC of the records (seeded) are kept
    out of the fit and "report" gives {"ece_before", "ece_after", "n", "n_eval", "buckets_excluded_from_eval"}."""
    records = check_records(records)
    check_flag(compute_ece, "compute_ece")
    seed = _check_seed(seed)
    fit_on, check_on = _holdout(records, compute_ece, seed)
    clamped: dict = {}
    temperature = [_fit_entry([(z[:k], t[:k]) for q, z, t, k in fit_on if q == qtype], min_type_n,
                              f"temperature[{qtype}]", clamped) for qtype in range(N_QTYPES)]
    counts: dict = {}
    for q, _, _, k in fit_on:
        counts[temp_bucket(q, k)] = counts.get(temp_bucket(q, k), 0) + 1
    by_options = {}
    for bucket, n in sorted(counts.items()):
        if n >= min_bucket_n:
            pairs = [(z[:k], t[:k]) for q, z, t, k in fit_on if temp_bucket(q, k) == bucket]
            by_options[bucket] = _fit_entry(pairs, min_bucket_n, bucket, clamped)
    out = {"temperature": temperature, "temperature_by_options": by_options, "n_by_bucket": counts,
           "temperature_clamped": clamped}
    if compute_ece:  # (too few records to hold any out: a report on none, n_eval 0)
        unseen = sorted({temp_bucket(q, k) for q, _, _, k in check_on} - set(counts))
        evaluated = [r for r in check_on if temp_bucket(r[0], r[3]) not in unseen]
        out["report"] = {"ece_before": ece_score(*predictions(evaluated)) if evaluated else None,
                         "ece_after": ece_score(*predictions(evaluated, temperature, by_options)) if evaluated else None,
                         "n": len(records), "n_eval": len(evaluated), "buckets_excluded_from_eval": unseen}
    return out


fit_temperatures = fit_temperature_map  # the published module-level alias


def fit_binning_map(records: Sequence[Record], temperature: Sequence[float], temperature_by_options: dict | None,
                    *, bins: int = 15, min_bucket_n: int = MIN_BINNING_BUCKET_N) -> dict:
    """{bucket: {"bins", "values": per-bin accuracy (an empty bin keeps its centre)}} for full buckets."""
    bins = check_bins(bins)
    if bins > MAX_MAP_BINS:
        raise ValueError(f"bins must be at most {MAX_MAP_BINS} for a binning map (it stores one value per bin), "
                         f"got {bins}")
    min_bucket_n = _positive_count(min_bucket_n, "min_bucket_n")
    groups: dict[str, list] = {}
    for r in check_records(records):
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


def _abstention_cut(conf: np.ndarray, correct: np.ndarray, target_error: float, conservative: bool) -> float:
    """The lowest distinct confidence whose accepted answers (conf >= cut) have error rate <= target."""
    for cut in np.unique(conf):
        accepted = conf >= cut
        errors = int((~correct[accepted]).sum())
        n = int(accepted.sum())
        rate = (errors + 1) / (n + 1) if conservative else errors / n
        if rate <= target_error:
            return float(cut)
    return 1.0


def fit_abstention_thresholds(records: Sequence[Record], temperature: Sequence[float],
                              temperature_by_options: dict | None, *, binning_map: dict | None = None,
                              target_error: float = 0.1, min_bucket_n: int = MIN_ABSTAIN_BUCKET_N,
                              conservative: bool = True) -> dict:
    """A `min_confidence` map {bucket: threshold} for buckets with at least `min_bucket_n` records: the
    lowest answer confidence (4 dp) at which the kept answers' error rate is <= target_error (1.0 if none);
    conservative counts one extra error per cut ((errors + 1) / (accepted + 1))."""
    if isinstance(target_error, bool) or not isinstance(target_error, numbers.Real) or \
            not 0.0 <= target_error <= 1.0:
        raise ValueError(f"target_error must be in [0.0, 1.0], got {target_error!r}")
    min_bucket_n = _positive_count(min_bucket_n, "min_bucket_n")
    check_flag(conservative, "conservative")
    binning_map = check_binning_map(binning_map)
    groups: dict[str, list] = {}
    for r in check_records(records):
        groups.setdefault(temp_bucket(r[0], r[3]), []).append(r)
    out: dict = {}
    for bucket, rows in sorted(groups.items()):
        if len(rows) >= min_bucket_n:
            conf, correct = predictions(rows, temperature, temperature_by_options, binning_map)
            out[bucket] = _abstention_cut(np.round(conf, 4), correct, float(target_error), conservative)
    return out


# ---- persistence: the calibration JSON ---------------------------------------------------------------

def calibration_payload(temperature: Sequence[float], temperature_by_options: dict, model_id_or_path: Any = None,
                        subfolder: str | None = None, config: dict | None = None,
                        binning_map: dict | None = None) -> dict:
    """The calibration JSON object: version, temperatures, the identity it was fitted for, binning."""
    if not isinstance(temperature, (list, tuple)) or len(temperature) != N_QTYPES:
        raise ValueError(f"temperature must be a list of 3 floats (choice, score, noul), got {temperature!r}")
    if not isinstance(temperature_by_options, dict):
        raise ValueError(f"temperature_by_options must be a dict {{bucket: float}}, got {temperature_by_options!r}")
    payload = {"version": CALIBRATION_VERSION, "temperature": [float(t) for t in temperature],
               "temperature_by_options": {str(k): float(v) for k, v in temperature_by_options.items()},
               "model_id_or_path": model_id_or_path, "subfolder": subfolder,
               "config": None if config is None else {k: v for k, v in config.items() if k not in TEMPERATURE_KEYS}}
    if binning_map is not None:
        payload["binning_map"] = binning_map
    return payload


def _payload_version(payload: dict) -> int:
    value = payload.get("version")
    if value is None:
        return 1
    version = _integral(value)
    if version is None and isinstance(value, str):
        try:
            version = _integral(float(value.strip()))
        except ValueError:
            version = None
    if version is None:
        raise ValueError(f"calibration JSON version must be an integer, got {value!r}")
    return version


def _check_binning_entry(bucket: Any, entry: Any) -> None:
    where = f"calibration JSON binning_map[{str(bucket)!r}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object {{bins, values}}, got {type(entry).__name__}")
    bins = entry.get("bins")
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 1:
        raise ValueError(f"{where} bins must be an integer >= 1, got {bins!r}")
    values = entry.get("values")
    if not isinstance(values, (list, tuple)) or len(values) != bins:
        raise ValueError(f"{where} values must be a list of {bins} numbers (one per bin), got {values!r:.120}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"{where} values must be numbers, got {v!r}")
        if not math.isfinite(v):
            raise ValueError(f"{where} values must be finite, got {v!r}")
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{where} values must be in [0, 1], got {v!r}")


def check_binning_map(binning_map: Any) -> dict | None:
    """A binning map checked: {bucket: {"bins": int >= 1, "values": bins numbers in [0, 1]}} or None."""
    if binning_map is None:
        return None
    if not isinstance(binning_map, dict):
        raise ValueError("calibration JSON binning_map must be an object of bucket -> {bins, values}, "
                         f"got {type(binning_map).__name__}")
    for bucket, entry in binning_map.items():
        _check_binning_entry(bucket, entry)
    return binning_map


def _clamped_with_note(raw: list, raw_map: dict) -> tuple[list, dict]:
    """Clamped copies of the temperatures; one RuntimeWarning lists every replaced entry."""
    temps = [clamp_temperature(t) for t in raw]
    by_options = {str(k): clamp_temperature(v) for k, v in raw_map.items()}
    named = [(f"temperature[{i}]", r, a) for i, (r, a) in enumerate(zip(raw, temps))]
    named += [(str(k), v, by_options[str(k)]) for k, v in raw_map.items()]
    notes = [f"{name}={r!r} -> {a:g}" for name, r, a in named if temperature_rejected(r, a)]
    if notes:
        warnings.warn(f"laya: calibration temperatures are invalid or outside [{TEMP_MIN:g}, {TEMP_MAX:g}]; using "
                      f"{', '.join(notes)}. Treat confidences from those buckets as uncalibrated.",
                      RuntimeWarning, stacklevel=4)
    return temps, by_options


def _identity(obj: Any) -> tuple:
    """(model_id_or_path, subfolder, config) of an agent as a payload records them (JSON-normalised)."""
    model = getattr(obj, "model_id_or_path", None)
    cfg = getattr(obj, "cfg", None)
    config = {k: v for k, v in cfg.items() if k not in TEMPERATURE_KEYS} if isinstance(cfg, dict) else None
    return (None if model is None else str(model), getattr(obj, "subfolder", None),
            json.loads(json.dumps(config, default=str)) if config is not None else None)


def apply_calibration_payload(obj: Any, payload: Any) -> None:
    """Install a calibration JSON object on an agent-like `obj` (temperature[_raw], temperature_by_options
    [_raw], binning_map), after checking it; every malformed field is a ValueError."""
    if not isinstance(payload, dict):
        raise ValueError(f"calibration JSON must be an object, got {type(payload).__name__}")
    version = _payload_version(payload)
    raw = payload.get("temperature")
    if not isinstance(raw, (list, tuple)) or len(raw) != N_QTYPES:
        raise ValueError("calibration JSON must contain temperature: [3 floats]")
    raw_map = payload.get("temperature_by_options", {})
    raw_map = {} if raw_map is None else raw_map
    if not isinstance(raw_map, dict):
        raise ValueError("calibration JSON temperature_by_options must be an object of bucket -> float, "
                         f"got {type(raw_map).__name__}")
    binning_map = check_binning_map(payload.get("binning_map"))
    if version >= 2:
        fitted_for = (payload.get("model_id_or_path"), payload.get("subfolder"), payload.get("config"))
        mine = _identity(obj)
        if fitted_for != mine:
            config_note = "" if fitted_for[2] == mine[2] else " with a different config"
            warnings.warn(f"calibration was fitted for model_id_or_path={fitted_for[0]!r}, subfolder={fitted_for[1]!r}"
                          f"{config_note}; this agent is model_id_or_path={mine[0]!r}, subfolder={mine[1]!r}. "
                          "Applying it anyway: refit it for this model if its answers look off.",
                          UserWarning, stacklevel=3)
    temps, by_options = _clamped_with_note(list(raw), dict(raw_map))
    obj.temperature_raw, obj.temperature_by_options_raw = list(raw), dict(raw_map)
    obj.temperature, obj.temperature_by_options = temps, by_options
    obj.binning_map = binning_map


def read_calibration_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_calibration(path: str, payload: dict) -> None:
    """Write the payload as the calibration JSON, atomically (laya.atomic_file)."""
    write_json_atomic(path, payload, ensure_ascii=False, indent=2)


def calibration_payload_for(obj: Any) -> dict:
    """The payload `save_calibration` writes for an agent-like `obj` (its temperatures, identity, binning)."""
    model, subfolder, _ = _identity(obj)
    return calibration_payload(obj.temperature, obj.temperature_by_options, model, subfolder,
                               getattr(obj, "cfg", None), getattr(obj, "binning_map", None) or None)


def records_from_labeled(agent: Any, pairs: Iterable) -> list:
    """Calibration records from labelled data: `pairs` of (state, questions, {qid: gold probability
    vector}); one forward per state through the agent's own rows, logits in canonical option order.
    Questions are validated like predict; a question without a target is skipped."""
    from .answers import unpermute_probs
    from .question_sets import checked_questions

    records = []
    for n, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 3 or not isinstance(pair[2], dict):
            raise ValueError(f"pairs[{n}] must be (state, questions, {{qid: target probabilities}}), got {pair!r:.120}")
        state, questions, targets = pair
        qs = checked_questions(questions)
        for q, z in zip(qs, agent.decision_logits(state, questions)):
            if q.qid not in targets:
                continue
            canonical = np.asarray(unpermute_probs(z[:q.k], q.option_order), dtype=np.float64)
            gold = targets[q.qid]
            target = list(gold)[:q.k] if isinstance(gold, (list, tuple, np.ndarray)) else gold
            records.append(check_record((q.qtype_id, canonical, target, q.k), f"pairs[{n}] question {q.qid!r}"))
    return records
