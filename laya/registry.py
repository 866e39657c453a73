"""Checkpoint names and aliases -> (Hub repo, subfolder). Torch-free; the Router builds on it."""

from __future__ import annotations

import os

BUNDLE_REPO = "convaiinnovations/laya"
DEFAULT_MODELS = {
    "english": (BUNDLE_REPO, None),
    "multilingual": (BUNDLE_REPO, "multilingual"),
    "typed-decisions": (BUNDLE_REPO, "typed-decisions"),
}
ALIASES = {
    "en": "english", "laya": "english", "default": "english",
    "multi": "multilingual", "ml": "multilingual", "laya-multilingual": "multilingual",
    "typed": "typed-decisions", "typed_decisions": "typed-decisions",
    "laya-typed-decisions": "typed-decisions", "decisions": "typed-decisions",
}
CONFIG_FILE = "rl_agent_config.json"


def canonical_name(name: str) -> str | None:
    """The registry name for a name or alias (case-insensitive, trimmed), else None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in DEFAULT_MODELS else None


def looks_local(arg: str) -> bool:
    """Paths and anything with a separator are passed through unchanged (so 'org/repo' is too)."""
    if arg.startswith((".", "~")) or "/" in arg or "\\" in arg or os.sep in arg:
        return True
    return os.path.isdir(arg) and os.path.exists(os.path.join(arg, CONFIG_FILE))


def resolve_model_spec(name: str) -> tuple[str, str | None] | None:
    """(repo, subfolder) for a registry name or alias, else None."""
    key = canonical_name(name)
    return DEFAULT_MODELS[key] if key else None


# laya-mini: the small trained checkpoint that ships inside the package (all-MiniLM-L6-v2 fine-tuned on
# this project's synthetic typed-decision data; README "laya-mini"), so `laya demo` and quick tries run
# offline. `laya.load()` with no arguments still means the published convaiinnovations/laya.
LAYA_MINI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "laya_mini")
