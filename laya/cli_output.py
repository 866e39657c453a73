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


def _group_sizes(diagnostics: Any) -> list[int]:
    groups = diagnostics.get("groups") if isinstance(diagnostics, dict) else None
    sizes = []
    for group in groups or []:
        size = group.get("size") if isinstance(group, dict) else group
        if isinstance(size, int) and not isinstance(size, bool):
            sizes.append(size)
    return sizes


def sort_note(batch_size: int | None, n_lines: int, diagnostics: Any = None) -> str | None:
    """Why --sort-by-length changed nothing for some batches, or None when every batch could reorder."""
    def reorders(size: int) -> bool:
        return batch_size is not None and 1 < batch_size < size

    sizes = _group_sizes(diagnostics) or [n_lines]
    blocked = [s for s in sizes if not reorders(s)]
    if not blocked:
        return None
    if len(sizes) == 1:
        return (f"note: --sort-by-length only takes effect with --batch-size N where 1 < N < {sizes[0]}; "
                "it changed nothing here.")
    spread = f"{min(blocked)}" if min(blocked) == max(blocked) else f"{min(blocked)}-{max(blocked)}"
    return (f"note: --sort-by-length groups within each checkpoint batch, not across the file: {len(blocked)} "
            f"of {len(sizes)} batches could not reorder (sizes {spread}); the smallest batch has {min(sizes)} "
            f"requests against the file's {n_lines} lines.")
