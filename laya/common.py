"""`laya.common`: the shared arithmetic of inference, calibration and training in one namespace.

Re-exports (one implementation each, defined where it is used):
  from laya.questions:        QTYPES, QTYPE_NAMES, render_options
  from laya.answers:          answer_confidence, confidence_from_probs
  from laya.calibrate:        ece_score
  from laya.train.objectives: proper_reward (torch: resolved on first access, so
                              `import laya.common` itself stays torch-free)
"""

from __future__ import annotations

from .answers import answer_confidence, confidence_from_probs
from .calibrate import ece_score
from .questions import QTYPE_NAMES, QTYPES, render_options

_TORCH = {"proper_reward": "laya.train.objectives"}

__all__ = ["QTYPES", "QTYPE_NAMES", "answer_confidence", "confidence_from_probs", "ece_score", "proper_reward",
           "render_options"]


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
