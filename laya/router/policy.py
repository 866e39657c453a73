"""Which checkpoint reads a state: typed-decisions workflows, language codes and hints, and the verdict of
built-in detection (`laya.lang.analyse`), each with the reason text a decision carries. Torch-free."""

from __future__ import annotations

import re
from typing import Any

TYPED = "typed-decisions"
# A question set whose ids equal one of these exactly is a typed-decisions workflow (any order).
WORKFLOW_SIGNATURES = {
    "agent_trace_observability": frozenset({"action", "needs_review", "outcome", "risk", "urgency"}),
    "customer_service": frozenset({"action", "category", "churn_risk", "needs_human", "urgency"}),
    "invoice_processing": frozenset({"discrepancy_severity", "disposition", "duplicate", "matches_order",
                                     "urgency"}),
    "security_incidents": frozenset({"credential_compromise", "disposition", "severity", "true_positive",
                                     "urgency"}),
}
NO_OPINION_LANGS = {"", "c", "posix", "und", "zxx", "mul"}
ENGLISH_LANGS = {"en", "eng", "english"}


class RouteDecision(dict):
    """The routing answer: a dict (JSON-ready) with attribute access to its keys."""

    model = property(lambda self: self["model"])
    repo = property(lambda self: self["repo"])
    reason = property(lambda self: self["reason"])
    detection = property(lambda self: self.get("detection"))
    workflow = property(lambda self: self.get("workflow"))


def match_typed_decisions_workflow(questions: Any) -> str | None:
    """The workflow whose question-id set equals the ids of `questions`, else None."""
    if not isinstance(questions, dict):
        return None
    ids = set(questions)
    return next((name for name, signature in WORKFLOW_SIGNATURES.items() if ids == signature), None)


def explicit_model(model: Any) -> bool:
    """Whether `model=` names a checkpoint (None, blank and 'auto' mean: route automatically)."""
    return model is not None and not (isinstance(model, str) and model.strip().lower() in ("", "auto"))


def primary_lang(code: str) -> str:
    """'en_US.UTF-8' -> 'en'; 'pt-BR' -> 'pt'."""
    return re.split(r"[-_.@]", code.strip(), maxsplit=1)[0].lower()


def lang_opinion(code: Any, where: str) -> str | None:
    """'english', 'multilingual' or None (no opinion) for a language code."""
    if code is None:
        return None
    if not isinstance(code, str):
        raise TypeError(f"{where} must be a language code string such as 'en' or 'es', got {type(code).__name__}")
    primary = primary_lang(code)
    if primary in NO_OPINION_LANGS:
        return None
    if not primary.isalpha():
        raise ValueError(f"{where} {code!r} is not a language code; use a code such as 'en' or 'es', or None")
    return "english" if primary in ENGLISH_LANGS else "multilingual"


def hint_reason(installed: bool, opinion: str) -> str:
    who = "Router(lang_guess=...)" if installed else "lang_guess"
    what = "English" if opinion == "english" else "non-English"
    return f"{who}: the caller identified this as {what} text"


def detection_verdict(detection: dict, default: str) -> tuple[str, str]:
    """(checkpoint name, reason) for an `analyse` result; `default` is the Router's default checkpoint."""
    if not detection.get("script_profile"):
        return default, f"no letters detected in state; using default ({default})"
    script = detection["script"]
    if script != "latin":
        share = f"{detection['non_latin_fraction']:.0%}"
        return "multilingual", (f"non-Latin script ({script}, {share} of letters); the English checkpoint cannot "
                                "read it")
    language, segment = detection.get("language"), detection.get("mixed_segment")
    if segment:
        return "multilingual", (f"Latin script, mostly English, but a line or field reads as {language!r} "
                                f"({str(segment)[:60]!r}); the English checkpoint cannot read it")
    if language is not None and language != "en":
        return "multilingual", f"Latin script but language looks like {language!r}, not English"
    if not detection["is_english"]:
        share = f"{detection['diacritic_rate']:.0%}"
        return "multilingual", (f"Latin script, language not identified but {share} non-English letters; not safe "
                                "for the English checkpoint")
    if detection["language_undecided"]:
        return default, f"Latin script, language not identified and no non-English letters; using default ({default})"
    return "english", "English Latin text"
