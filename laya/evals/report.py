"""`EvalReport`: the per-case records of one evaluation, their overall and sliced metrics, rendering, and
the comparison against a baseline report. Torch-free."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..numeric import is_real
from .cli_files import read_json_strict
from .dataset import EvalError
from .selective import aurc, brier, ece, selective_accuracy

REPORT_SCHEMA = "laya-evals-report/1"
SLICE_DIMENSIONS = ("language", "model", "qid", "tag")
LATENCY_METRICS = ("latency_p50_ms", "latency_p95_ms", "cost_per_decision_p50_ms", "cost_per_decision_p95_ms")
CALIBRATION_METRICS = ("ece", "brier", "aurc", "selective_accuracy@50", "selective_accuracy@80")
LOWER_IS_BETTER = frozenset({"ece", "brier", "aurc", "score_mae"})
TWO_SIDED = frozenset({"mean_confidence"})
IDENTITY_FIELDS = ("schema", "dataset_sha256", "questions_sha256", "tournament_group_size")


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: list, q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _confident_pairs(cases: list[dict]) -> tuple[list, list]:
    pairs = [(c["confidence"], c["correct"]) for c in cases
             if c.get("correct") is not None and c.get("confidence") is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def metric_table(cases: list[dict], evaluator_names: list[str]) -> dict:
    """Evaluator means, calibration and selective metrics, and latency percentiles over `cases`."""
    out: dict[str, Any] = {}
    for name in evaluator_names:
        out[name] = _mean([c["scores"][name] for c in cases if c.get("scores", {}).get(name) is not None])
    conf, correct = _confident_pairs(cases)
    out.update({"ece": ece(conf, correct), "brier": brier(conf, correct), "aurc": aurc(conf, correct),
                "selective_accuracy@50": selective_accuracy(conf, correct, 0.5),
                "selective_accuracy@80": selective_accuracy(conf, correct, 0.8)})
    per_example = {c.get("index", i): c for i, c in enumerate(cases)}.values()
    latency = [c["latency_ms"] for c in per_example if c.get("latency_ms") is not None]
    cost = [c["cost_per_decision_ms"] for c in per_example if c.get("cost_per_decision_ms") is not None]
    out.update({"latency_p50_ms": _percentile(latency, 50), "latency_p95_ms": _percentile(latency, 95),
                "cost_per_decision_p50_ms": _percentile(cost, 50), "cost_per_decision_p95_ms": _percentile(cost, 95)})
    return out


def usable_count(cases: list[dict], metric: str) -> int:
    """How many of `cases` feed `metric` (a score, a (confidence, correct) pair, or a timing)."""
    if metric in CALIBRATION_METRICS:
        return len(_confident_pairs(cases)[0])
    if metric in LATENCY_METRICS:
        key = "latency_ms" if metric.startswith("latency") else "cost_per_decision_ms"
        return len({c.get("index", i) for i, c in enumerate(cases) if c.get(key) is not None})
    return sum(1 for c in cases if c.get("scores", {}).get(metric) is not None)


def slice_values(case: dict, dimension: str) -> list:
    if dimension == "tag":
        return list(case.get("tags") or ())
    value = case.get(dimension)
    return [] if value is None else [str(value)]


def slice_cases(cases: list[dict], dimension: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for c in cases:
        for value in slice_values(c, dimension):
            groups.setdefault(value, []).append(c)
    return groups


def slice_tables(cases: list[dict], evaluator_names: list[str]) -> dict:
    return {dim: {value: {"n": len(members), **metric_table(members, evaluator_names)}
                  for value, members in sorted(slice_cases(cases, dim).items())}
            for dim in SLICE_DIMENSIONS}


def check_tolerances(tolerances: Any) -> dict[str, float]:
    if tolerances is None:
        return {}
    if not isinstance(tolerances, dict):
        raise EvalError(f"tolerances must be a dict of metric -> number, got {type(tolerances).__name__}")
    out = {}
    for metric, value in tolerances.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise EvalError(f"tolerance for {metric!r} must be a finite number >= 0, got {value!r}")
        out[str(metric)] = float(value)
    return out


def metric_number(value: Any, metric: str, source: str) -> float | None:
    """A metric's value as a float (None stays None; NaN and inf are numbers `regressed` judges); an EvalError
    naming the metric when it is not a number a float can hold."""
    if value is None:
        return None
    try:
        if is_real(value):
            return float(value)
    except OverflowError:
        pass
    raise EvalError(f"the {source}'s metric {metric} is {value!r}, not a number; fix or regenerate that report")


def regressed(metric: str, baseline: float, value: float, tolerance: float) -> bool:
    if not (math.isfinite(baseline) and math.isfinite(value)):  # NaN compares false: it must not pass
        return True
    slack = tolerance + 1e-12
    if metric in LOWER_IS_BETTER or metric.endswith("_ms"):
        return value > baseline + slack
    if metric in TWO_SIDED:
        return abs(value - baseline) > slack
    return value < baseline - slack


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _as_report(other: Any) -> "EvalReport":
    if isinstance(other, EvalReport):
        return other
    if isinstance(other, dict):
        return EvalReport.from_dict(other)
    raise EvalError(f"a baseline must be an EvalReport or its dict, got {type(other).__name__}")


@dataclass
class EvalReport:
    config: dict = field(default_factory=dict)
    overall: dict = field(default_factory=dict)
    slices: dict = field(default_factory=dict)
    cases: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"config": self.config, "overall": self.overall, "slices": self.slices, "cases": self.cases}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, data: Any) -> "EvalReport":
        def shaped(key: str, kind: type) -> bool:
            return data.get(key) is None or isinstance(data[key], kind)

        parts_ok = isinstance(data, dict) and shaped("config", dict) and shaped("slices", dict) and shaped("cases", list)
        parts_ok = parts_ok and all(isinstance(c, dict) for c in data.get("cases") or []) and all(
            isinstance(table, dict) and all(isinstance(row, dict) for row in table.values())
            for table in (data.get("slices") or {}).values())
        if not parts_ok or not isinstance(data.get("overall"), dict):
            raise EvalError("an eval report must be an object with 'config', 'overall', 'slices' and 'cases'")
        return cls(dict(data.get("config") or {}), dict(data["overall"]), dict(data.get("slices") or {}),
                   list(data.get("cases") or []))

    @classmethod
    def load(cls, path: str) -> "EvalReport":
        data = read_json_strict(path, refuse_duplicate_keys=False)  # a report's duplicate keys were never refused
        try:
            return cls.from_dict(data)
        except EvalError as e:
            raise EvalError(f"{path}: {e}") from None

    def to_markdown(self) -> str:
        lines = ["| metric | value |", "|---|---|"]
        lines += [f"| {name} | {_fmt(value)} |" for name, value in self.overall.items()]
        for dim, table in self.slices.items():
            if not table:
                continue
            metrics = list(next(iter(table.values())))
            lines += ["", f"### by {dim}", "", "| " + " | ".join([dim, *metrics]) + " |",
                      "|" + "|".join("---" for _ in range(len(metrics) + 1)) + "|"]
            lines += ["| " + " | ".join([str(value), *(_fmt(row.get(m)) for m in metrics)]) + " |"
                      for value, row in table.items()]
        return "\n".join(lines) + "\n"

    def comparable_to(self, baseline: Any) -> tuple[bool, list[str]]:
        """Schema, dataset and question fingerprints (and a tournament's group size) must agree where both
        reports know them."""
        other = _as_report(baseline)
        reasons = []
        for key in IDENTITY_FIELDS:
            mine, theirs = self.config.get(key), other.config.get(key)
            if mine is not None and theirs is not None and mine != theirs:
                reasons.append(f"{key} differs: {mine!r} here, {theirs!r} in the baseline")
        return not reasons, reasons

    def compare(self, baseline: Any, tolerances: dict | None = None) -> tuple[bool, dict]:
        """(ok, deltas): each baseline metric against this report's, within its tolerance (default 0);
        `_ms` metrics only when given a tolerance. Entries of reports that are not comparable (see
        `comparable_to`) say `"incomparable": true` and fail."""
        tol = check_tolerances(tolerances)
        other = _as_report(baseline)
        comparable = self.comparable_to(other)[0]
        names = [m for m in other.overall if not m.endswith("_ms") or m in tol]
        names += [m for m in tol if m not in names]
        deltas, ok = {}, comparable
        for m in names:
            base = metric_number(other.overall.get(m), repr(m), "baseline")
            value, t = metric_number(self.overall.get(m), repr(m), "report"), tol.get(m, 0.0)
            if base is None and m not in tol:
                continue
            entry = {"baseline": base, "value": value, "diff": None, "tolerance": t}
            if base is None or value is None:
                entry["missing"] = True
                ok = False
            else:
                entry["diff"] = value - base
                ok = ok and not regressed(m, base, value, t)
            if not comparable:
                entry["incomparable"] = True
            deltas[m] = entry
        return ok, deltas


def failing_deltas(deltas: dict) -> dict:
    out = {}
    for m, d in deltas.items():
        if d.get("incomparable") or d.get("missing") or \
                (d.get("diff") is not None and regressed(m, d["baseline"], d["value"], d["tolerance"])):
            out[m] = d
    return out


def assert_regression(report: EvalReport, baseline: Any, tolerances: dict | None = None) -> dict:
    """Raise `AssertionError('evaluation regressed: {...}')` when `report` is worse than `baseline`."""
    ok, deltas = report.compare(baseline, tolerances)
    if not ok:
        raise AssertionError(f"evaluation regressed: {json.dumps(failing_deltas(deltas), default=str)}")
    return deltas
