"""`laya.common`: the shared arithmetic of inference, calibration and training in one namespace.

Re-exports (one implementation each, defined where it is used):
  from laya.questions:        QTYPES, QTYPE_NAMES, render_options
  from laya.answers:          answer_confidence, confidence_from_probs
  from laya.calibrate:        ece_score
  from laya.train.objectives: proper_reward, td_lambda_targets (torch: resolved on first access, so
                              `import laya.common` itself stays torch-free)
"""

from __future__ import annotations

from typing import Any

from .answers import answer_confidence, confidence_from_probs
from .calibrate import ece_score
from .questions import QTYPE_NAMES, QTYPES, render_options

_TORCH = {"proper_reward": "laya.train.objectives", "td_lambda_targets": "laya.train.objectives"}

__all__ = ["QTYPES", "QTYPE_NAMES", "answer_confidence", "build_head", "build_sequence", "collate_items",
           "confidence_from_probs", "ece_score", "proper_reward", "render_options", "state_room",
           "td_lambda_targets"]


# ---- sequence construction (§3.2, §3.3) under the spec's names: thin adapters over laya.sequence, which
# imports torch (so they import it on first call, not here). `q` is a validated Question or a raw
# definition dict (validated here, with the id "q" in its errors).

def _question(q: Any) -> Any:
    from .questions import Question, check_question

    return q if isinstance(q, Question) else check_question("q", q)


def _head_max_len(head_max_len: int | None) -> int:
    from .sequence import DEFAULT_HEAD_MAX_LEN

    return DEFAULT_HEAD_MAX_LEN if head_max_len is None else head_max_len


def build_head(tok: Any, q: Any, head_max_len: int | None = None) -> Any:
    """The question part of a row (laya.sequence.Head: ids, markers, tokens_per_option, distinct)."""
    from . import sequence

    return sequence.build_head(tok, _question(q), _head_max_len(head_max_len))


def state_room(tok: Any, q: Any, max_len: int, head_max_len: int | None = None) -> int:
    """State tokens that fit in this question's row: max(0, max_len - len(head) - 1)."""
    from . import sequence

    return sequence.state_room(tok, _question(q), max_len, _head_max_len(head_max_len))


def build_sequence(tok: Any, q: Any, state: Any, max_len: int, head_max_len: int | None = None) -> Any:
    """One full row (laya.sequence.Row): head + as much state as fits (a list state keeps its tail) + [SEP]."""
    from . import sequence
    from .questions import keeps_tail, render_state

    state_ids = sequence.encode(tok, sequence.scrub_mask(tok, render_state(state)))
    return sequence.build_row(tok, _question(q), state_ids, keeps_tail(state), max_len, _head_max_len(head_max_len))


def collate_items(rows: list, pad_id: int, parallel: bool = False) -> dict:
    """Right-padded batch tensors of rows in (state, question) order: input_ids, attention_mask,
    marker_pos, marker_mask, qtype; with `parallel` (spec 3.9) also position_ids and option_ids."""
    from . import sequence

    batch = sequence.collate(rows, pad_id, parallel)
    items = dict(zip(("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype"), batch.tensors()))
    if parallel:
        items.update(position_ids=batch.position_ids, option_ids=batch.option_ids)
    return items


def __getattr__(name: str):
    module = _TORCH.get(name)
    if module is None:
        raise AttributeError(f"module 'laya.common' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_TORCH))
