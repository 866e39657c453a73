"""laya: typed decisions (choice, score, yes/no) about a text state in one encoder forward pass.

`import laya` stays torch-free: the torch-backed names below resolve on first access.
"""

import os

# Before anything can import transformers: a broken TensorFlow install would crash it natively.
os.environ.setdefault("USE_TF", "0")

__version__ = "0.4.15"

from .presets import (email_questions, guard_questions, moderation_questions, router_questions,  # noqa: E402
                      triage_questions)
from .questions import QTYPE_NAMES, QTYPES  # noqa: E402
from .sequence_names import render_options  # noqa: E402 (laya.common's: a question or (qtype, criteria))
from .registry import DEFAULT_MODELS  # noqa: E402
from .email import clean_email_body, email_state  # noqa: E402
from .hooks import (AsyncHook, BaseHook, Hook, HookRegistry, OptionStabilityHook, PredictContext,  # noqa: E402
                    PredictHook)
from .lang import detect_language, detect_script, is_english  # noqa: E402
from .router import RouteDecision, Router  # noqa: E402
from .structured import DecisionResult, decide, decide_batch  # noqa: E402
from . import confidence, email, hooks, lang, presets, router, structured  # noqa: E402,F401

# Lazy names whose module needs an optional extra: resolvable, but not in __all__, so that
# `from laya import *` works on a core install (laya.integrations imports without its frameworks).
_EXTRAS: tuple = ()

_LAZY = {
    "PINNED_REVISIONS": "laya.revisions",
    "Agent": "laya.agent",
    "RLAgent": "laya.agent",
    "load": "laya.loading",
    # calibration fitting (numpy)
    "fit_temperatures": "laya.calibrate",  # module alias of fit_temperature_map
    "fit_one_temperature": "laya.calibrate",
    "fit_temperature_map": "laya.calibrate",
    "fit_abstention_thresholds": "laya.calibrate",
    "fit_binning_map": "laya.calibrate",
    "apply_binning_map": "laya.calibrate",
    # shared arithmetic (proper_reward pulls torch)
    "proper_reward": "laya.common",
    "td_lambda_targets": "laya.common",
    "ece_score": "laya.common",
    "answer_confidence": "laya.common",
    "confidence_from_probs": "laya.common",
    # confidence gate and Jev confidence (torch-free)
    "check_min_confidence": "laya.confidence",
    "check_min_confidence_map": "laya.confidence",
    "resolve_min_confidence": "laya.confidence",
    "flag_low_confidence": "laya.confidence",
    "apply_confidence_gate": "laya.confidence",
    "GATE_STATES": "laya.confidence",
    "jev_confidence": "laya.confidence",
    # narrowing choices with many options (torch via the agent)
    "shortlist_choice": "laya.shortlist",
    "predict_shortlist": "laya.shortlist",
    "predict_tournament": "laya.shortlist",
    "embed_fn_from_agent": "laya.shortlist",
    "cached_embed_fn": "laya.shortlist",
    # LangChain runnables (plain classes when langchain-core is missing)
    "LayaRouter": "laya.integrations",
    "LayaGuardrail": "laya.integrations",
    "LayaGuardrailError": "laya.integrations",
    "LayaTriage": "laya.integrations",
    "LayaEvaluator": "laya.integrations",
    "LayaDecision": "laya.integrations",
}

__all__ = ["__version__", "QTYPES", "QTYPE_NAMES", "render_options", "DEFAULT_MODELS", "HookRegistry",
           "PredictContext", "AsyncHook", "BaseHook", "Hook", "OptionStabilityHook", "PredictHook",
           "clean_email_body", "email_state", "email_questions", "guard_questions", "moderation_questions", "router_questions",
           "triage_questions", "detect_language", "detect_script", "is_english", "Router", "RouteDecision",
           "DecisionResult", "decide", "decide_batch", "confidence", "email", "hooks", "lang", "presets", "router", "structured",
           *(name for name, module in _LAZY.items() if module not in _EXTRAS)]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'laya' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this function
    return value
