"""What evidence a checkpoint carries (read-only): its calibration record, an eval report about it, and
whether the two describe the same questions. Backs `laya-evals evidence --checkpoint DIR [--report FILE]`.

States: PRESENT (there, usable), MISSING (absent), INSUFFICIENT (there, too thin to rely on), UNKNOWN
(unreadable or silent on the point), INCOMPARABLE (the report and the calibration name different data).
The calibration record is the checkpoint's `training.laya_train_calibration` block; the report's
identity fields are read from its `config`. Torch-free.
"""

from __future__ import annotations

import json
import os
from typing import Any

PRESENT, MISSING, INSUFFICIENT, UNKNOWN, INCOMPARABLE = "PRESENT", "MISSING", "INSUFFICIENT", "UNKNOWN", "INCOMPARABLE"
CONFIG_FILE = "rl_agent_config.json"
CALIBRATION_BLOCK = "laya_train_calibration"
MIN_CALIBRATION_N = 50  # fewer records per type than this: a thin calibration (laya.train warns likewise)
QUESTION_TYPES = ("choice", "score", "noul")
REPORT_IDENTITY = ("schema", "laya_version", "dataset_path", "dataset_sha256", "questions_sha256", "checkpoint_id",
                   "revision", "tournament_group_size", "n_examples", "n_cases")
SHARED_IDENTITY = ("dataset_sha256", "questions_sha256")

__all__ = ["INCOMPARABLE", "INSUFFICIENT", "MISSING", "PRESENT", "UNKNOWN", "format_summary", "inspect_calibration",
           "inspect_checkpoint", "inspect_report", "relate"]


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text: {e}") from None


def _type_counts(block: dict) -> dict:
    types = block.get("types") if isinstance(block.get("types"), dict) else \
        {t: block[t] for t in QUESTION_TYPES if t in block}
    counts = {}
    for name, entry in types.items():
        n = entry.get("n", entry.get("count")) if isinstance(entry, dict) else entry
        counts[str(name)] = n if isinstance(n, int) and not isinstance(n, bool) else None
    return counts


def inspect_calibration(config: Any) -> dict:
    """The state of a checkpoint config's `training.laya_train_calibration` block."""
    training = config.get("training") if isinstance(config, dict) else None
    block = training.get(CALIBRATION_BLOCK) if isinstance(training, dict) else None
    if block is None:
        return {"state": MISSING, "reason": f"the checkpoint has no training.{CALIBRATION_BLOCK} block"}
    if not isinstance(block, dict):
        return {"state": UNKNOWN, "reason": f"training.{CALIBRATION_BLOCK} is not an object"}
    counts = _type_counts(block)
    if not counts:
        return {"state": INSUFFICIENT, "reason": "the calibration block names no question type"}
    enough = sorted(t for t, n in counts.items() if n is None or n >= MIN_CALIBRATION_N)
    if not enough:
        thin = ", ".join(f"{t} {n}" for t, n in sorted(counts.items()))
        return {"state": INSUFFICIENT, "reason": f"fewer than {MIN_CALIBRATION_N} calibration records per type ({thin})"}
    return {"state": PRESENT, "types": enough}


def inspect_report(report_path: str) -> dict:
    """The state of an eval report file and its identity fields."""
    if not os.path.isfile(report_path):
        return {"state": MISSING, "fields": {}, "reason": f"no report file at {report_path!r}"}
    try:
        data = _read_json(report_path)
    except (OSError, ValueError) as e:
        return {"state": UNKNOWN, "fields": {}, "reason": str(e)}
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) or not isinstance(data.get("overall"), dict):
        return {"state": UNKNOWN, "fields": {}, "reason": "not a laya-evals report (no 'config' and 'overall')"}
    fields = {k: config[k] for k in REPORT_IDENTITY if config.get(k) is not None}
    if "schema" not in fields:
        return {"state": UNKNOWN, "fields": fields, "reason": "the report names no schema"}
    return {"state": PRESENT, "fields": fields}


def relate(calibration_block: Any, report_fields: Any) -> dict:
    """Whether the report and the checkpoint's calibration record name the same data (`report_fields` may
    also be an `inspect_report` result)."""
    block = calibration_block if isinstance(calibration_block, dict) else {}
    if isinstance(report_fields, dict) and isinstance(report_fields.get("fields"), dict):
        report_fields = report_fields["fields"]
    report_fields = report_fields if isinstance(report_fields, dict) else {}
    shared = [k for k in SHARED_IDENTITY if block.get(k) is not None and report_fields.get(k) is not None]
    if not shared:
        return {"state": UNKNOWN, "reason": "the report and the calibration record share no data fingerprint"}
    differ = [k for k in shared if block[k] != report_fields[k]]
    if differ:
        return {"state": INCOMPARABLE, "reason": f"{', '.join(differ)} differ between the report and the calibration"}
    return {"state": PRESENT, "reason": f"the report and the calibration agree on {', '.join(shared)}"}


def inspect_checkpoint(checkpoint_dir: str, report_path: str | None = None) -> dict:
    """{"checkpoint", "calibration", "report"?, "relationship"?} for a checkpoint directory."""
    path = os.path.join(str(checkpoint_dir), CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {CONFIG_FILE} under {str(checkpoint_dir)!r}")
    config = _read_json(path)
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(config).__name__}")
    result: dict[str, Any] = {"checkpoint": str(checkpoint_dir), "calibration": inspect_calibration(config)}
    if report_path is not None:
        report = inspect_report(str(report_path))
        result["report"] = report
        if report["state"] == PRESENT:
            block = (config.get("training") or {}).get(CALIBRATION_BLOCK) if isinstance(config.get("training"), dict) \
                else None
            result["relationship"] = relate(block, report["fields"])
    return result


def _line(name: str, part: dict) -> str:
    detail = part.get("reason")
    if "types" in part:
        detail = "types: " + ", ".join(part["types"])
    elif part.get("fields"):
        detail = ", ".join(f"{k} {v}" for k, v in part["fields"].items())
    return f"{name}: {part['state']}" + (f" ({detail})" if detail else "")


def format_summary(result: dict) -> str:
    """A few lines for people; the first is `evidence summary for <dir>`."""
    lines = [f"evidence summary for {result['checkpoint']}", _line("calibration", result["calibration"])]
    for name in ("report", "relationship"):
        if name in result:
            lines.append(_line(name, result[name]))
    return "\n".join(lines)
