"""`laya.common`: the shared arithmetic of inference, calibration and training in one namespace.

Re-exports (one implementation each, defined where it is used):
  laya.questions:        QTYPES, QTYPE_NAMES, render_criterion
  laya.answers:          TEMP_MIN, TEMP_MAX, clamp_temperature, temperature_rejected, temp_bucket,
                         unpermute_probs, answer_confidence, confidence_from_probs
  laya.calibrate:        ece_score
  laya.parallel_layout:  OPTION_LAYOUTS (its LAYOUTS)
  laya.sequence_names:   render_options(q), build_head, build_sequence, state_room, collate_items, encode_text,
                         window_budget, window_batch_cap, collapsed_options, uses_parallel_layout, parallel_layout,
                         parallel_option_masks (adapters under the published names and argument order)
  torch-backed, resolved on first access so that `import laya.common` itself stays torch-free:
  laya.model: DecisionModel, build_model; laya.device: amp_dtype;
  laya.train.objectives: proper_reward, td_lambda_targets
"""

from __future__ import annotations

import json
from typing import Any

from .answers import (TEMP_MAX, TEMP_MIN, answer_confidence, clamp_temperature, confidence_from_probs,
                      temp_bucket, temperature_rejected, unpermute_probs)
from .calibrate import ece_score
from .parallel_layout import LAYOUTS as OPTION_LAYOUTS
from .questions import QTYPE_NAMES, QTYPES, render_criterion
from .sequence_names import (build_head, build_sequence, collapsed_options, collate_items, encode_text,
                             parallel_layout, parallel_option_masks, render_options, state_room,
                             uses_parallel_layout, window_batch_cap, window_budget)

_TORCH = {"proper_reward": "laya.train.objectives", "td_lambda_targets": "laya.train.objectives",
          "DecisionModel": "laya.model", "build_model": "laya.model", "amp_dtype": "laya.device"}

__all__ = ["DecisionModel", "OPTION_LAYOUTS", "QTYPES", "QTYPE_NAMES", "TEMP_MAX", "TEMP_MIN", "amp_dtype",
           "answer_confidence", "build_head", "build_model", "build_sequence", "clamp_temperature",
           "collapsed_options", "collate_items", "confidence_from_probs", "ece_score", "encode_text",
           "parallel_layout", "parallel_option_masks", "proper_reward", "render_criterion", "render_options",
           "resolve_lang_temperatures", "serialize_state", "state_room", "td_lambda_targets", "temp_bucket",
           "temperature_rejected", "unpermute_probs", "uses_parallel_layout", "window_batch_cap", "window_budget"]


def serialize_state(state: Any) -> str:
    """The text a state contributes: a str as is, anything else as JSON (non-ASCII kept)."""
    return state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def resolve_lang_temperatures(raw: Any, base_temperature: Any) -> dict:
    """{primary subtag: {"temperature", "temperature_by_options"}} for an Agent's lang_temperatures
    (laya.answers.resolve_lang_temperatures, whose rules and texts apply)."""
    from .answers import resolve_lang_temperatures as resolve

    return resolve(raw, list(base_temperature))


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
