"""Checkpoint names for one Router: name rules, built-ins, the caller's registrations, their sources.

Torch-free. `canonical_name` / `normalise_name` / `check_agent_kwargs` are the module-level rules;
`CheckpointRegistry` holds one Router's names and sources.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any

from ..registry import ALIASES, BUNDLE_REPO, DEFAULT_MODELS, resolve_model_spec  # noqa: F401 - public here

STANDALONE_MODELS = {"english": "convaiinnovations/laya", "multilingual": "convaiinnovations/laya-multilingual",
                     "typed-decisions": "convaiinnovations/laya-typed-decisions"}
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Names the Router passes to Agent(...) itself (or handles itself: hooks); agent_kwargs may not set them.
OWNED_AGENT_ARGS = frozenset({"model_id_or_path", "device", "token", "subfolder", "revision", "hooks",
                              "on_predict_start", "on_predict_end", "hooks_raise", "hooks_concurrent",
                              "hooks_timeout"})
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def canonical_name(name: str) -> str:
    """Trimmed, lowercased, an alias replaced by its checkpoint name; whether it exists is not checked."""
    if not isinstance(name, str):
        raise TypeError(f"a checkpoint name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    return ALIASES.get(key, key)


def unknown_model(name: Any, known: Any) -> ValueError:
    return ValueError(f"unknown model {name!r}; choose one of {sorted(known)} (or an alias: {sorted(ALIASES)})")


def normalise_name(name: str) -> str:
    """The built-in checkpoint a name or alias means; ValueError listing the built-ins otherwise."""
    key = canonical_name(name) if isinstance(name, str) else None
    if key not in DEFAULT_MODELS:
        raise unknown_model(name, DEFAULT_MODELS)
    return key


def check_name(name: Any) -> str:
    """The canonical name a registration stores under, or the ValueError that refuses it."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key == "auto":
        raise ValueError(f"invalid checkpoint name {name!r}: 'auto' means automatic routing in every model= argument")
    if key is None or not NAME_PATTERN.match(key):
        raise ValueError(f"invalid checkpoint name {name!r}: use lowercase letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return ALIASES.get(key, key)


def _expand(path: str) -> str:
    path = path.strip()
    return os.path.expanduser(path) if path.startswith("~") else path


def check_source(name: str, source: Any) -> Any:
    """The source as stored: None, a repo id or path (a leading ~ expanded), or a (repo, subfolder) pair."""
    if source is None:
        return None
    if isinstance(source, str):
        if not source.strip():
            raise ValueError(f"checkpoint source for {name!r} is blank; pass a repo id, a local path or a "
                             "(repo, subfolder) pair")
        return _expand(source)
    if isinstance(source, (tuple, list)):
        repo, sub = (source[0], source[1]) if len(source) == 2 else (None, None)
        if not isinstance(repo, str) or not repo.strip() or not (sub is None or isinstance(sub, str)):
            raise ValueError(f"checkpoint source for {name!r} must be a (repo, subfolder) pair of strings, "
                             f"got {source!r}")
        return type(source)((_expand(repo), sub.strip().strip("/") or None if sub else None))
    raise TypeError(f"checkpoint source for {name!r} must be a repo id, a local path or a (repo, subfolder) pair, "
                    f"got {type(source).__name__}")


def source_spec(source: Any) -> tuple[str, str | None] | None:
    """(repo or path, subfolder) of a stored source; None for a source-less (attached) checkpoint."""
    if source is None:
        return None
    if isinstance(source, str):
        return source, None
    return source[0], source[1]


def source_text(source: Any) -> str | None:
    """'repo', 'repo/subfolder' or the path: how decisions and `registered` show a source."""
    spec = source_spec(source)
    if spec is None:
        return None
    return f"{spec[0]}/{spec[1]}" if spec[1] else spec[0]


def one_edit_apart(a: str, b: str) -> bool:
    """True when a and b differ by one insertion, deletion, substitution or swap of two adjacent characters."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


def caller_stacklevel() -> int:
    """The warnings stacklevel of the first frame outside this package (the caller's own line)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def warn_near_builtin(key: str) -> None:
    """A new name one edit from a built-in is still registered, with a RuntimeWarning at the caller's line."""
    if key in DEFAULT_MODELS:
        return
    near = next((b for b in DEFAULT_MODELS if one_edit_apart(key, b)), None)
    if near is not None:
        warnings.warn(f"laya: checkpoint name {key!r} is one edit from the built-in {near!r}; it is registered as "
                      f"a separate checkpoint and {near!r} is unchanged.", RuntimeWarning,
                      stacklevel=caller_stacklevel())


def agent_class() -> Any:
    """laya.router.Agent when a caller replaced it there, else laya.agent.Agent (imports torch)."""
    replaced = vars(sys.modules[__package__]).get("Agent")
    if replaced is not None:
        return replaced
    from ..agent import Agent

    return Agent


def agent_parameters() -> set[str] | None:
    """Keyword names the Agent class the Router builds accepts (None: any, it takes **kwargs); for laya's
    Agent also `laya.load`'s (a torch-free constant, pinned against the signatures by tests)."""
    import inspect

    agent_module = f"{__package__.rsplit('.', 1)[0]}.agent"
    if vars(sys.modules[__package__]).get("Agent") is None and agent_module not in sys.modules:
        from ..loading import LOAD_PARAMETERS

        return set(LOAD_PARAMETERS)
    cls = agent_class()
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    names = set(params)
    laya_agent = sys.modules.get(f"{__package__.rsplit('.', 1)[0]}.agent")
    if laya_agent is not None and cls is getattr(laya_agent, "Agent", None):
        names |= set(inspect.signature(laya_agent.load).parameters)
    return names - {"self"}


def check_agent_kwargs(agent_kwargs: Any) -> None:
    """Refuse agent_kwargs the Router sets itself, and names Agent(...) does not take."""
    if agent_kwargs is None:
        return
    if not isinstance(agent_kwargs, dict):
        raise TypeError(f"agent_kwargs must be a dict of Agent(...) arguments, got {type(agent_kwargs).__name__}")
    owned = sorted(k for k in agent_kwargs if k in OWNED_AGENT_ARGS)
    if owned:
        raise ValueError(f"Router sets {', '.join(map(repr, owned))} itself; pass them to Router(...) instead of "
                         "in agent_kwargs")
    accepted = agent_parameters() if agent_kwargs else None
    if accepted is not None:
        unknown = sorted(k for k in agent_kwargs if k not in accepted)
        if unknown:
            raise ValueError(f"Agent accepts none of {', '.join(map(repr, unknown))}; it accepts {sorted(accepted)}")


class CheckpointRegistry:
    """One Router's checkpoints: the built-ins first (never removed), then the caller's registrations."""

    def __init__(self, standalone_repos: bool = False):
        self.builtins = {n: (STANDALONE_MODELS[n], None) for n in DEFAULT_MODELS} if standalone_repos \
            else dict(DEFAULT_MODELS)
        self.sources: dict[str, Any] = dict(self.builtins)  # name -> stored source (None: attached only)
        self.descriptions: dict[str, Any] = {}

    def find(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        key = canonical_name(name)
        return key if key in self.sources else None

    def resolve(self, name: Any) -> str:
        found = self.find(name)
        if found is None:
            raise unknown_model(name, self.sources)
        return found

    def spec(self, name: str) -> tuple[str, str | None] | None:
        return source_spec(self.sources[name])

    def add(self, key: str, source: Any, description: Any) -> bool:
        """Store a checked registration; True when an existing name now points somewhere else."""
        repointed = key in self.sources and self.sources[key] != source
        self.sources[key] = source
        self.descriptions[key] = description
        return repointed

    def remove(self, key: str) -> None:
        del self.sources[key]
        self.descriptions.pop(key, None)

    def models(self) -> dict:
        return dict(self.sources)

    def registered(self) -> dict:
        return {n: {"source": source_text(s), "description": self.descriptions.get(n)}
                for n, s in self.sources.items() if n not in DEFAULT_MODELS}
