"""What the `laya` command prints: routing blocks, answer lines, batch lines and the --sort-by-length note."""

from __future__ import annotations

import json
from typing import Any

REQUEST_SHOWN = 45  # batch routing: requests longer than REQUEST_CUT_AT are cut to this many characters
REQUEST_CUT_AT = 48


def show_decision(decision: Any) -> None:
    """Model, reason and (when detection ran) the detection as JSON, diagnostic and reason code included."""
    print(f"{'Model':<10}: {decision['model']}")
    print(f"{'Reason':<10}: {decision['reason']}")
    detection = decision.get("detection")
    if detection is not None:
        print(f"{'Detected':<10}: {json.dumps(detection)}")


def answer_detail(answer: dict) -> str:
    """choice `label (p=0.873)`, score `2.35`, noul `0.912`; `  [low-confidence]` when flagged."""
    kind = answer.get("type")
    if kind == "choice":
        probs = answer.get("probabilities") or {}
        p = probs.get(str(answer["choice"]), max(probs.values(), default=0.0))
        text = f"{answer['choice']} (p={p:.3f})"
    elif kind == "score":
        text = f"{answer['score']:.2f}"
    else:
        text = f"{answer['noul']:.3f}"
    return text + ("  [low-confidence]" if answer.get("low_confidence") else "")


def show_answers(result: dict) -> None:
    """The routing block (when the result has one), a blank line, then one line per question."""
    routing = result.get("routing")
    if routing:
        show_decision(routing)
        print()
    for qid, answer in result["answers"].items():
        print("%-12s: %s" % (qid, answer_detail(answer)))


def batch_line(decision: Any, request: str) -> str:
    shown = request if len(request) <= REQUEST_CUT_AT else request[:REQUEST_SHOWN] + "..."
    return f"{decision['model']:<14} {decision['reason']}  <- {shown}"


def _sort_report(diagnostics: Any) -> dict | None:
    """The router's diagnostics["sort_by_length"] block (R-RT-19), or None when it wrote none."""
    report = diagnostics.get("sort_by_length") if isinstance(diagnostics, dict) else None
    if not isinstance(report, dict):
        return None
    counts = [report.get(key) for key in ("groups", "reordered", "smallest", "largest")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in counts) or counts[0] < 1:
        return None
    return report


def sort_note(batch_size: int | None, n_lines: int, diagnostics: Any = None) -> str | None:
    """Why --sort-by-length changed nothing for some batches, or None when every batch could reorder.
    `diagnostics`: what the router wrote (None when its predict_batch takes no diagnostics)."""
    report = _sort_report(diagnostics)
    if report is None:
        if diagnostics is not None or (batch_size is not None and 1 < batch_size < n_lines):
            return None
        report = {"groups": 1, "reordered": 0, "smallest": n_lines, "largest": n_lines}
    groups, blocked = report["groups"], report["groups"] - report["reordered"]
    if blocked <= 0:
        return None
    smallest, largest = report["smallest"], report["largest"]
    if groups == 1:
        return (f"note: --sort-by-length only takes effect with --batch-size N where 1 < N < {smallest}; "
                "it changed nothing here.")
    spread = f"{smallest}" if smallest == largest else f"{smallest}-{largest}"
    return (f"note: --sort-by-length groups within each checkpoint batch, not across the file: {blocked} "
            f"of {groups} batches could not reorder (batch sizes {spread}); the smallest batch has {smallest} "
            f"requests against the file's {n_lines} lines.")
