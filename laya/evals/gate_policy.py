"""Gate policy files of `laya-evals run/compare --gate-policy FILE`:

    {"version": 1, "rules": [{"slice": {"language": "de"}, "metric": "choice_accuracy", "min_count": 20,
                              "min": 0.8}]}

Each rule names at most one slice (language, model, qid or tag; none = the whole report), a metric, an
optional `min_count` of usable cases, and exactly one limit: `min`, `max`, or (against `--baseline`)
`max_drop` / `max_increase`. A rule fails when the slice or metric is missing, too few cases feed it, or
the limit is broken."""

from __future__ import annotations

from typing import Any

from ..numeric import is_real
from .cli_files import read_json_strict
from .dataset import EvalError
from .report import SLICE_DIMENSIONS, EvalReport, metric_number, slice_cases, usable_count

LIMITS = ("min", "max", "max_drop", "max_increase")
RELATIVE = ("max_drop", "max_increase")


def _check_rule(rule: Any, i: int) -> dict:
    where = f"gate policy rule {i}"
    if not isinstance(rule, dict):
        raise EvalError(f"{where} must be an object")
    unknown = sorted(set(rule) - {"slice", "metric", "min_count", *LIMITS})
    if unknown:
        raise EvalError(f"{where} has unknown keys: {', '.join(unknown)}")
    sl = rule.get("slice") or {}
    if not isinstance(sl, dict) or len(sl) > 1 or any(k not in SLICE_DIMENSIONS for k in sl):
        raise EvalError(f"{where} 'slice' must be an object with one of {', '.join(SLICE_DIMENSIONS)}")
    if not isinstance(rule.get("metric"), str) or not rule["metric"]:
        raise EvalError(f"{where} needs a 'metric' name")
    count = rule.get("min_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise EvalError(f"{where} 'min_count' must be a non-negative integer, got {count!r}")
    limits = [k for k in LIMITS if k in rule]
    if len(limits) != 1:
        raise EvalError(f"{where} needs exactly one of {', '.join(LIMITS)}, got {len(limits)}")
    value = rule[limits[0]]
    if not is_real(value, finite=True, types=(int, float)):
        raise EvalError(f"{where} {limits[0]!r} must be a finite number, got {value!r}")
    return {"slice": dict(sl), "metric": rule["metric"], "min_count": count, "limit": limits[0],
            "value": float(value)}


def load_policy(path: str, have_baseline: bool) -> list[dict]:
    """The checked rules of a policy file; relative rules need a baseline."""
    doc = read_json_strict(path)
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise EvalError(f"{path}: a gate policy must be an object with \"version\": 1")
    if not isinstance(doc.get("rules"), list):
        raise EvalError(f"{path}: a gate policy needs a 'rules' list")
    rules = [_check_rule(r, i) for i, r in enumerate(doc["rules"])]
    for i, r in enumerate(rules):
        if r["limit"] in RELATIVE and not have_baseline:
            raise EvalError(f"{path}: gate policy rule {i} uses {r['limit']}, which needs --baseline")
    return rules


def _metric_of(report: EvalReport, sl: dict) -> tuple[dict | None, list]:
    if not sl:
        return report.overall, report.cases
    (dim, value), = sl.items()
    table = (report.slices.get(dim) or {}).get(str(value))
    return table, slice_cases(report.cases, dim).get(str(value), [])


def _label(rule: dict) -> str:
    where = ", ".join(f"{k}={v}" for k, v in rule["slice"].items()) or "overall"
    return f"{rule['metric']} [{where}]"


def _judge(rule: dict, report: EvalReport, baseline: EvalReport | None) -> str | None:
    table, cases = _metric_of(report, rule["slice"])
    label, limit, bound = _label(rule), rule["limit"], rule["value"]
    value = None if table is None else metric_number(table.get(rule["metric"]), label, "report")
    if value is None:
        return f"{label}: missing from the report"
    count = usable_count(cases, rule["metric"])
    if count < rule["min_count"]:
        return f"{label}: {count} usable case(s), fewer than min_count {rule['min_count']}"
    if limit == "min" and value < bound:
        return f"{label}: {value:.4f} < min {bound:g}"
    if limit == "max" and value > bound:
        return f"{label}: {value:.4f} > max {bound:g}"
    if limit in RELATIVE:
        base_table = _metric_of(baseline, rule["slice"])[0] if baseline is not None else None
        base = None if base_table is None else metric_number(base_table.get(rule["metric"]), label, "baseline")
        if base is None:
            return f"{label}: missing from the baseline"
        change = (base - value) if limit == "max_drop" else (value - base)
        if change > bound + 1e-12:
            word = "dropped" if limit == "max_drop" else "increased"
            return f"{label}: {word} by {change:.4f} ({base:.4f} -> {value:.4f}), more than {limit} {bound:g}"
    return None


def apply_policy(rules: list[dict], report: EvalReport, baseline: EvalReport | None = None) -> list[str]:
    """The failure reason of every rule that fails (empty: the policy passes)."""
    return [reason for reason in (_judge(r, report, baseline) for r in rules) if reason]
