"""Router: pick a checkpoint for each request before any forward pass, and keep a few agents loaded.

Torch-free until an agent is actually loaded: `route()` only reads the registry and `laya.lang`.
Which checkpoint answers matters more than anything else here -- the English checkpoint collapses on
other languages while staying confident -- so the precedence of `route()` is fixed and documented.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import threading
import time
import warnings
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable

from . import hooks as hooks_mod
from . import lang as lang_mod
from .answers import positive_int
from .hooks import HookRegistry, PredictContext
from .registry import ALIASES, BUNDLE_REPO, DEFAULT_MODELS, resolve_model_spec  # noqa: F401 - public here (§1.5)
from .structured import StructuredDecisions

__all__ = ["BUNDLE_REPO", "DEFAULT_MODELS", "STANDALONE_MODELS", "WORKFLOW_SIGNATURES", "RouteDecision", "Router"]

STANDALONE_MODELS = {"english": "convaiinnovations/laya", "multilingual": "convaiinnovations/laya-multilingual",
                     "typed-decisions": "convaiinnovations/laya-typed-decisions"}
TYPED = "typed-decisions"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# The spec names the four typed-decisions workflows but not their question ids; these are ours.
# A question set whose ids equal one of them exactly routes to typed-decisions (auto_task_detection).
WORKFLOW_SIGNATURES = {
    "agent_trace_observability": frozenset({"task_completed", "tool_error", "hallucination", "loop_detected",
                                            "failure_stage"}),
    "customer_service": frozenset({"intent", "sentiment", "urgency", "escalate", "refund_eligible"}),
    "invoice_processing": frozenset({"document_type", "amount_matches_po", "duplicate_invoice", "approval_level",
                                     "payment_terms"}),
    "security_incidents": frozenset({"incident_type", "severity", "data_exfiltration", "needs_containment",
                                     "false_positive"}),
}
NO_OPINION_LANGS = {"", "c", "posix", "und", "zxx", "mul"}
ENGLISH_LANGS = {"en", "eng", "english"}
# Names the Router passes itself; agent_kwargs may not set them.
OWNED_AGENT_ARGS = ("model_id_or_path", "device", "token", "subfolder", "revision", "hooks", "on_predict_start",
                    "on_predict_end", "hooks_raise", "hooks_concurrent", "hooks_timeout")
REQUEST_KEYS = ("state", "questions", "model", "task", "lang", "lang_guess", "max_len", "head_max_len")
# One checkpoint build at a time in the process: two concurrent builds double peak memory.
_BUILD_LOCK = threading.Lock()


class RouteDecision(dict):
    """The routing answer: a dict (JSON-ready) with attribute access to its keys."""

    model = property(lambda self: self["model"])
    repo = property(lambda self: self["repo"])
    reason = property(lambda self: self["reason"])
    detection = property(lambda self: self.get("detection"))
    workflow = property(lambda self: self.get("workflow"))


def _one_edit_apart(a: str, b: str) -> bool:
    """True when a and b differ by exactly one insertion, deletion or substitution."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)):] == b[i + 1:]


def primary_lang(code: str) -> str:
    """'en_US.UTF-8' -> 'en'; 'pt-BR' -> 'pt'."""
    return re.split(r"[-_.@]", code.strip(), maxsplit=1)[0].lower()


def _check_source(name: str, source: Any) -> tuple[str, str | None]:
    """(repo or path, subfolder) from a Hub id, a local directory, or a (repo, subfolder) pair."""
    if isinstance(source, (tuple, list)) and len(source) == 2:
        repo, sub = source
        if isinstance(repo, str) and repo.strip() and (sub is None or isinstance(sub, str)):
            return repo.strip(), (sub.strip("/") or None) if sub else None
    elif isinstance(source, (str, os.PathLike)) and str(source).strip():
        return str(source).strip(), None
    raise ValueError(f"model {name!r}: source {source!r} is not a Hub id, a local directory or a "
                     "(repo, subfolder) pair")


def _repo_text(spec: tuple[str, str | None]) -> str:
    return f"{spec[0]}/{spec[1]}" if spec[1] else spec[0]


def _agent_parameters() -> set[str]:
    """Keyword names `laya.load` / `Agent(...)` accept (imports torch: only called with agent_kwargs)."""
    from . import agent as agent_mod

    names = set(inspect.signature(agent_mod.Agent.__init__).parameters) - {"self"}
    names |= set(inspect.signature(agent_mod.load).parameters)
    return names


class _RoutedHook:
    """A predict hook seen through the Router: stamps router/decision on the context first."""

    def __init__(self, hook: Any, router: "Router", decision: RouteDecision):
        self._hook, self._router, self._decision = hook, router, decision

    def __getattr__(self, event: str) -> Callable:
        fn = getattr(self._hook, event, None) if event in hooks_mod.EVENTS else None
        if not callable(fn):
            raise AttributeError(event)

        def call(ctx: PredictContext) -> None:
            ctx.router, ctx.decision = self._router, self._decision
            fn(ctx)
        return call


class Router(HookRegistry, StructuredDecisions):
    """Routes requests to named checkpoints and keeps at most `max_loaded` agents resident (LRU).

    Predict hooks compose as process defaults -> installed on the router -> per call, and run once per
    request with `ctx.router` and `ctx.decision` set. The agents it builds carry no hooks of their own;
    an attached agent's installed hooks are not run under the router (the router's are). Evicting or
    unloading an agent only drops the router's reference: a request still running on it finishes.
    """

    def __init__(self, models: dict | None = None, device: Any = None, token: str | None = None,
                 revision: str | None = None, revisions: dict | None = None, max_loaded: int = 2,
                 default: str = "multilingual", auto_task_detection: bool = False, standalone_repos: bool = False,
                 preload: bool = False, lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None,
                 on_predict_end: Any = None, hooks_raise: bool = True, hooks_concurrent: bool = True,
                 hooks_timeout: float | None = None, agent_kwargs: dict | None = None,
                 sha256_digests: dict | None = None):
        if isinstance(max_loaded, bool) or not isinstance(max_loaded, int):
            raise ValueError(f"max_loaded must be an integer (the most agents kept loaded), got {max_loaded!r}")
        self._check_lang_guess(lang_guess, "lang_guess")
        self.hooks = hooks_mod.with_callables(hooks_mod.as_hooks(hooks), on_predict_start, on_predict_end)
        self.hooks_raise, self.hooks_concurrent, self.hooks_timeout = hooks_raise, hooks_concurrent, hooks_timeout
        self._hooks_lock = None if hooks_concurrent else threading.RLock()
        self.device, self.token, self.revision = device, token, revision
        self.max_loaded = max(1, max_loaded)  # spec: "min 1", the same clamp as LAYA_MPS_AMP_MIN_ROWS
        self.auto_task_detection = bool(auto_task_detection)
        self.lang_guess = lang_guess
        self._lock = threading.RLock()
        self._agents: OrderedDict[str, Any] = OrderedDict()  # LRU order, most recent last
        self._pending: dict[str, Future] = {}
        self._generation: dict[str, int] = {}  # bumped when a name is re-pointed: stale builds are dropped
        self._descriptions: dict[str, str | None] = {}
        builtins = {n: (STANDALONE_MODELS[n], None) for n in DEFAULT_MODELS} if standalone_repos \
            else dict(DEFAULT_MODELS)
        self._builtins = dict(builtins)
        self._sources: dict[str, tuple[str, str | None]] = dict(builtins)
        for name, source in (models or {}).items():
            self.register(name, source)
        self.agent_kwargs = self._check_agent_kwargs(agent_kwargs)
        self.revisions = {self.resolve(n): (str(v).strip() or None) if v is not None else None
                          for n, v in (revisions or {}).items()}
        self.sha256_digests = self._digest_map(sha256_digests)
        self.default = self.resolve(default)
        if preload:
            self.preload()

    # ---- registry --------------------------------------------------------------------------------

    def _canonical(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        key = name.strip().lower()
        key = ALIASES.get(key, key)
        return key if key in self._sources else None

    def resolve(self, name: str) -> str:
        """The registered name for a name or alias (any case); ValueError listing the names otherwise."""
        found = self._canonical(name)
        if found is None:
            raise ValueError(f"unknown model {name!r}; registered: {', '.join(self.registered)} (aliases: "
                             f"{', '.join(sorted(ALIASES))}); register it with Router(models={{name: source}})")
        return found

    @property
    def registered(self) -> list[str]:
        return list(self._sources)

    def describe(self, name: str) -> str | None:
        return self._descriptions.get(self.resolve(name))

    def register(self, name: str, source: Any, description: str | None = None) -> str:
        """Point a built-in name (or alias) at another source, or add a new checkpoint name."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"model name must be a non-empty string, got {name!r}")
        key = ALIASES.get(name.strip().lower(), name.strip().lower())
        if key == "auto":
            raise ValueError("'auto' is reserved (it means: route automatically); choose another model name")
        if not NAME_PATTERN.match(key):
            raise ValueError(f"model name {name!r} must match {NAME_PATTERN.pattern} after lowercasing, "
                             "e.g. 'support-v2'")
        if key not in DEFAULT_MODELS:
            near = [b for b in DEFAULT_MODELS if _one_edit_apart(key, b)]
            if near:
                warnings.warn(f"laya: model name {key!r} is one edit away from the built-in {near[0]!r}; "
                              "registering it as a new checkpoint", UserWarning, stacklevel=2)
        spec = _check_source(key, source)
        with self._lock:
            self._sources[key] = spec
            self._descriptions[key] = description
            self._generation[key] = self._generation.get(key, 0) + 1
            stale = self._agents.pop(key, None)
        if stale is not None:
            self._fire_lifecycle("on_evict", key, stale)
        return key

    def unregister(self, name: str) -> None:
        """Remove a custom name; a built-in goes back to its default source."""
        key = self.resolve(name)
        if key == self.default and key not in self._builtins:
            raise ValueError(f"model {key!r} is the router's default; set another default before unregistering it")
        with self._lock:
            if key in self._builtins:
                self._sources[key] = self._builtins[key]
            else:
                del self._sources[key]
            self._descriptions.pop(key, None)
            self._generation[key] = self._generation.get(key, 0) + 1
            stale = self._agents.pop(key, None)
        if stale is not None:
            self._fire_lifecycle("on_evict", key, stale)

    # ---- construction checks ---------------------------------------------------------------------

    @staticmethod
    def _check_lang_guess(value: Any, where: str) -> None:
        if value is not None and not isinstance(value, str) and not callable(value):
            raise TypeError(f"{where} must be a language code, a callable(state) -> code, or None; "
                            f"got {type(value).__name__}")

    def _check_agent_kwargs(self, agent_kwargs: dict | None) -> dict:
        if agent_kwargs is None:
            return {}
        if not isinstance(agent_kwargs, dict):
            raise TypeError(f"agent_kwargs must be a dict of Agent(...) arguments, got {type(agent_kwargs).__name__}")
        owned = [k for k in agent_kwargs if k in OWNED_AGENT_ARGS]
        if owned:
            raise ValueError(f"agent_kwargs may not set {owned}: the Router passes these itself (use Router("
                             "device=, token=, revision=, revisions=, hooks=...) instead)")
        if agent_kwargs:
            unknown = sorted(set(agent_kwargs) - _agent_parameters())
            if unknown:
                raise ValueError(f"agent_kwargs {unknown} are not arguments of laya.load/Agent; check the names")
        return dict(agent_kwargs)

    def _digest_map(self, sha256_digests: dict | None) -> dict:
        """{name: {relpath: hex}}: a model-keyed LAYA_SHA256_DIGESTS first, the argument over it."""
        out: dict[str, dict] = {}
        self._env_digests_by_model = False
        raw = os.environ.get("LAYA_SHA256_DIGESTS", "").strip()
        if raw:
            try:
                env = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ValueError(f"LAYA_SHA256_DIGESTS is not valid JSON ({e})") from None
            if isinstance(env, dict) and env and all(isinstance(v, dict) for v in env.values()):
                self._env_digests_by_model = True  # a flat {relpath: hex} map is left to Agent
                for name, files in env.items():
                    key = self._canonical(name)
                    if key is not None:
                        out[key] = dict(files)
        if sha256_digests is not None:
            if not isinstance(sha256_digests, dict):
                raise TypeError("sha256_digests must be {model name: {relative path: sha256 hex}}")
            for name, files in sha256_digests.items():
                if not isinstance(files, dict):
                    raise TypeError(f"sha256_digests[{name!r}] must be {{relative path: sha256 hex}}, "
                                    f"got {type(files).__name__}")
                key = self.resolve(name)
                out[key] = {**out.get(key, {}), **files}
        return out

    # ---- loading ---------------------------------------------------------------------------------

    def _load_arguments(self, name: str) -> dict:
        repo, subfolder = self._sources[name]
        kwargs = dict(self.agent_kwargs)
        per_model = self.sha256_digests.get(name)
        if per_model is not None or self._env_digests_by_model:
            # an explicit (maybe empty) map also keeps Agent from reading a model-keyed env as flat
            kwargs["expected_sha256"] = {**(kwargs.get("expected_sha256") or {}), **(per_model or {})}
        revision = self.revisions.get(name) or self.revision
        return dict(kwargs, model_id_or_path=repo, subfolder=subfolder, device=self.device, token=self.token,
                    revision=revision)

    def _create_agent(self, name: str, arguments: dict) -> Any:
        """Build one agent (subclasses may override, e.g. to build a fake in tests)."""
        from . import agent as agent_mod

        load_params = set(inspect.signature(agent_mod.load).parameters)
        if set(arguments) <= load_params:
            return agent_mod.load(**arguments)
        return agent_mod.Agent(**arguments)

    def load(self, name: str) -> Any:
        """The agent for `name`, building it once even when several threads ask at the same time."""
        name = self.resolve(name)
        while True:
            with self._lock:
                if name in self._agents:
                    self._agents.move_to_end(name)
                    return self._agents[name]
                pending = self._pending.get(name)
                builder = pending is None
                if builder:
                    pending = self._pending[name] = Future()
                    generation = self._generation.get(name, 0)
                    arguments = self._load_arguments(name)
            if not builder:
                agent = pending.result()  # re-raises the builder's error
                if agent is not None:
                    return agent
                continue  # the name was re-pointed during the build: look again
            try:
                with _BUILD_LOCK:
                    agent = self._create_agent(name, arguments)
            except BaseException as e:
                with self._lock:
                    self._pending.pop(name, None)
                pending.set_exception(e)
                self._fire_lifecycle("on_error", name, None, error=e)
                raise
            with self._lock:
                self._pending.pop(name, None)
                fresh = self._generation.get(name, 0) == generation
                evicted = self._store(name, agent) if fresh else []
            pending.set_result(agent if fresh else None)
            if not fresh:
                continue
            self._fire_lifecycle("on_load", name, agent)
            for old_name, old_agent in evicted:
                self._fire_lifecycle("on_evict", old_name, old_agent)
            return agent

    def _store(self, name: str, agent: Any) -> list[tuple[str, Any]]:
        """Insert as most recent and drop least-recently-used agents beyond max_loaded (lock held)."""
        self._agents[name] = agent
        self._agents.move_to_end(name)
        evicted = []
        while len(self._agents) > self.max_loaded:
            evicted.append(self._agents.popitem(last=False))
        return evicted

    def attach(self, name: str, agent: Any) -> None:
        """Use an agent built elsewhere for `name` (it counts toward max_loaded like any other)."""
        if not callable(getattr(agent, "predict", None)) or not callable(getattr(agent, "predict_batch", None)):
            raise TypeError(f"attach() needs an agent with predict/predict_batch, got {type(agent).__name__}")
        name = self.resolve(name)
        with self._lock:
            previous = self._agents.pop(name, None)
            evicted = self._store(name, agent)
        if previous is not None and previous is not agent:
            evicted.insert(0, (name, previous))
        for old_name, old_agent in evicted:
            self._fire_lifecycle("on_evict", old_name, old_agent)

    def preload(self, names: list | None = None) -> list[str]:
        """Load these models (default: every registered one), raising max_loaded so they all stay."""
        wanted = [self.resolve(n) for n in (names if names is not None else self.registered)]
        wanted = list(dict.fromkeys(wanted))
        with self._lock:
            self.max_loaded = max(self.max_loaded, len(wanted))
        for name in wanted:
            self.load(name)
        return wanted

    def unload(self, name: str | None = None) -> None:
        """Forget one loaded agent (or all). Requests already running on it finish normally."""
        with self._lock:
            if name is None:
                dropped = list(self._agents.items())
                self._agents.clear()
            else:
                key = self.resolve(name)
                dropped = [(key, self._agents.pop(key))] if key in self._agents else []
        for old_name, old_agent in dropped:
            self._fire_lifecycle("on_evict", old_name, old_agent)

    @property
    def loaded(self) -> list[str]:
        """Loaded model names, least recently used first."""
        with self._lock:
            return list(self._agents)

    def agents(self) -> dict[str, Any]:
        """The loaded agents by name, least recently used first: a snapshot that loads nothing and does not
        touch the LRU order (what /health and /v1/models read)."""
        with self._lock:
            return dict(self._agents)

    @property
    def loaded_revisions(self) -> dict:
        with self._lock:
            return {n: getattr(a, "revision", None) for n, a in self._agents.items()}

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unload()

    # ---- hooks -----------------------------------------------------------------------------------

    def _call_hooks(self, hooks: Any, on_start: Any = None, on_end: Any = None) -> list:
        return [*hooks_mod.default_hooks(), *self.hooks,
                *hooks_mod.with_callables(hooks_mod.as_hooks(hooks), on_start, on_end)]

    def _fire_lifecycle(self, event: str, name: str, agent: Any, error: BaseException | None = None) -> None:
        """on_load / on_evict / on_error outside a predict call; failures there never undo the load."""
        call_hooks = self._call_hooks(None)
        if not any(callable(getattr(h, event, None)) for h in call_hooks):
            return
        ctx = PredictContext(states=[], questions={}, model=name, agent=agent, router=self, error=error)
        hooks_mod.fire(call_hooks, event, ctx, False, self.hooks_timeout, self._hooks_lock)

    # ---- routing ---------------------------------------------------------------------------------

    def _decision(self, name: str, reason: str, detection: dict | None = None,
                  workflow: str | None = None) -> RouteDecision:
        return RouteDecision(model=name, repo=_repo_text(self._sources[name]), reason=reason, detection=detection,
                             workflow=workflow)

    def _lang_opinion(self, code: Any, where: str) -> str | None:
        """'english', 'multilingual' or None (no opinion) for a language code."""
        if code is None:
            return None
        if not isinstance(code, str):
            raise TypeError(f"{where} must be a language code string such as 'en' or 'es', got {type(code).__name__}")
        primary = primary_lang(code)
        if primary.lower() in NO_OPINION_LANGS:
            return None
        if not primary.isalpha():
            raise ValueError(f"{where} {code!r} is not a language code; use a code such as 'en' or 'es', or None")
        return "english" if primary in ENGLISH_LANGS else "multilingual"

    def _named_route(self, opinion: str, why: str, detection: dict | None = None) -> RouteDecision:
        name = self._canonical(opinion) or self.default
        return self._decision(name, why, detection)

    def _workflow(self, questions: Any) -> str | None:
        if not isinstance(questions, dict):
            return None
        ids = set(map(str, questions))
        return next((w for w, sig in WORKFLOW_SIGNATURES.items() if ids == sig), None)

    def _route_once(self, state: Any, questions: Any, model: Any, task: Any, lang: Any, lang_guess: Any,
                    explain: bool) -> RouteDecision:
        if model is not None and not (isinstance(model, str) and model.strip().lower() in ("", "auto")):
            name = self.resolve(model)
            return self._decision(name, f"explicit model {model!r}")
        if task is not None and str(task).strip():
            key = str(task).strip().lower()
            name = TYPED if key.replace("_", "-") == TYPED else self.resolve(key)
            return self._decision(self.resolve(name), f"explicit task {task!r}")
        if self.auto_task_detection:
            workflow = self._workflow(questions)
            if workflow is not None:
                return self._decision(self.resolve(TYPED), f"question ids match the {workflow} workflow",
                                      workflow=workflow)
        opinion = self._lang_opinion(lang, "lang")
        if opinion is not None:
            return self._named_route(opinion, f"explicit lang {lang!r}")
        for guess, where in ((lang_guess, "lang_guess"), (self.lang_guess, "Router(lang_guess=)")):
            if guess is None:
                continue
            code = guess(state) if callable(guess) else guess
            opinion = self._lang_opinion(code, f"{where} result" if callable(guess) else where)
            if opinion is not None:
                return self._named_route(opinion, f"{where} said {code!r}")
        detection = lang_mod.analyse(state, explain=explain)
        if not detection["script_profile"]:
            return self._decision(self.default, "no letters in the state: router default", detection)
        if detection["script"] != "latin":
            return self._named_route("multilingual", f"non-Latin script ({detection['script']})", detection)
        if detection["mixed_segment"] is not None:
            seg = detection["mixed_segment"]
            reason = f"a non-English line/field (#{seg['index']}, {seg['language'] or seg['script']})"
            return self._named_route("multilingual", reason, detection)
        if detection["language_undecided"]:
            return self._decision(self.default, "Latin script, language undecided: router default", detection)
        if not detection["is_english"]:
            what = detection["language"] or "non-English Latin text"
            return self._named_route("multilingual", f"Latin script, reads as {what}", detection)
        return self._named_route("english", "reads as English", detection)

    def route(self, state: Any, questions: dict | None = None, model: str | None = None, task: str | None = None,
              lang: str | None = None, lang_guess: Any = None, hooks: Any = None, hooks_raise: bool | None = None,
              hooks_timeout: float | None = None, *, explain: bool = False) -> RouteDecision:
        """Which checkpoint should answer? Never loads one.

        Precedence: explicit `model`; explicit `task`; with auto_task_detection, question ids equal to a
        WORKFLOW_SIGNATURES entry (typed-decisions); explicit `lang`; `lang_guess` (this call's, then the
        router's); built-in detection (no letters or undecided Latin -> `default`, non-Latin, foreign Latin or
        a foreign line/field -> multilingual, else english). `on_route` hooks may then replace the decision.
        """
        if state is None:
            raise TypeError("state must be a str, dict or list, got None")
        self._check_lang_guess(lang_guess, "lang_guess")
        decision = self._route_once(state, questions, model, task, lang, lang_guess, explain)
        call_hooks = self._call_hooks(hooks)
        if any(callable(getattr(h, "on_route", None)) for h in call_hooks):
            ctx = PredictContext(states=[state], questions=questions or {}, decision=decision,
                                 model=decision.model, router=self)
            hooks_mod.fire(call_hooks, "on_route", ctx, self.hooks_raise if hooks_raise is None else hooks_raise,
                           self.hooks_timeout if hooks_timeout is None else hooks_timeout, self._hooks_lock)
            decision = self._hook_decision(ctx.decision, decision)
        return decision

    def _hook_decision(self, replaced: Any, original: RouteDecision) -> RouteDecision:
        """An on_route hook may put a model name or a decision dict in ctx.decision."""
        if replaced is original:
            return original
        if isinstance(replaced, str):
            name = self.resolve(replaced)
            return self._decision(name, f"on_route hook chose {replaced!r}", original.get("detection"))
        if isinstance(replaced, dict) and "model" in replaced:
            name = self.resolve(replaced["model"])
            out = self._decision(name, str(replaced.get("reason") or "on_route hook"),
                                 replaced.get("detection", original.get("detection")), replaced.get("workflow"))
            return out
        raise TypeError(f"an on_route hook set ctx.decision to {type(replaced).__name__}; use a model name or a "
                        "dict with a 'model' key")

    def route_batch(self, requests: list, hooks_timeout: float | None = None, *, hooks: Any = None,
                    hooks_raise: bool | None = None, explain: bool = False) -> list[RouteDecision]:
        checked = self._check_requests(requests)
        return [self.route(r["state"], r["questions"], r.get("model"), r.get("task"), r.get("lang"),
                           r.get("lang_guess"), hooks, hooks_raise, hooks_timeout, explain=explain) for r in checked]

    # ---- answering -------------------------------------------------------------------------------

    @staticmethod
    def _check_requests(requests: Any) -> list[dict]:
        if isinstance(requests, (str, bytes, dict)) or not hasattr(requests, "__iter__"):
            raise TypeError(f"requests must be a list of dicts with 'state' and 'questions', got "
                            f"{type(requests).__name__}")
        out = []
        for i, r in enumerate(requests):
            if not isinstance(r, dict):
                raise TypeError(f"request {i} must be a dict with 'state' and 'questions', got {type(r).__name__}")
            unknown = [k for k in r if k not in REQUEST_KEYS]
            if unknown:
                raise ValueError(f"request {i} has unknown keys {unknown}; allowed: {', '.join(REQUEST_KEYS)}")
            if r.get("state") is None:
                raise TypeError(f"request {i}: 'state' is required (a str, dict or list)")
            if not isinstance(r.get("questions"), dict):
                raise TypeError(f"request {i}: 'questions' must be a dict {{id: definition}}")
            out.append(r)
        return out

    def predict(self, state: Any, questions: dict, model: str | None = None, task: str | None = None,
                lang: str | None = None, lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None,
                on_predict_end: Any = None, hooks_raise: bool | None = None, hooks_timeout: float | None = None,
                max_len: int | None = None, head_max_len: int | None = None, min_confidence: Any = None) -> dict:
        if state is None:
            raise TypeError("state must be a str, dict or list, got None")
        request = {"state": state, "questions": questions, "model": model, "task": task, "lang": lang,
                   "lang_guess": lang_guess, "max_len": max_len, "head_max_len": head_max_len}
        return self.predict_batch([request], hooks_timeout=hooks_timeout, min_confidence=min_confidence,
                                  hooks=hooks, on_predict_start=on_predict_start, on_predict_end=on_predict_end,
                                  hooks_raise=hooks_raise)[0]

    system_one = predict

    def predict_long(self, state: Any, questions: dict, model: str | None = None, task: str | None = None,
                     lang: str | None = None, lang_guess: Any = None, **kwargs: Any) -> dict:
        decision = self.route(state, questions, model, task, lang, lang_guess)
        agent = self.load(decision.model)
        if not callable(getattr(agent, "predict_long", None)):
            raise NotImplementedError(f"the agent for {decision.model!r} has no predict_long in this build")
        effective = lang if lang is not None else (decision.detection or {}).get("language")
        result = dict(agent.predict_long(state, questions, lang=effective, **kwargs))
        result["routing"] = dict(decision)
        return result

    def predict_batch(self, requests: list, batch_size: int | None = None, hooks_timeout: float | None = None,
                      min_confidence: Any = None, sort_by_length: bool = False, *, hooks: Any = None,
                      on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: bool | None = None,
                      diagnostics: dict | None = None, explain: bool = False) -> list[dict]:
        """Route every request, answer each (checkpoint, questions, budgets, lang) group in one agent
        call, and return results in input order with `routing` attached. Hooks run per request."""
        from .answers import check_min_confidence  # numpy; kept out of `import laya`

        checked = self._check_requests(requests)
        min_confidence = check_min_confidence(min_confidence)
        if diagnostics is not None and not isinstance(diagnostics, dict):
            raise TypeError("diagnostics must be a dict to fill in, or None")
        raise_errors = self.hooks_raise if hooks_raise is None else hooks_raise
        timeout = self.hooks_timeout if hooks_timeout is None else hooks_timeout
        decisions = [self.route(r["state"], r["questions"], r.get("model"), r.get("task"), r.get("lang"),
                                r.get("lang_guess"), hooks, hooks_raise, hooks_timeout, explain=explain)
                     for r in checked]
        call_hooks = self._call_hooks(hooks, on_predict_start, on_predict_end)
        contexts, groups = [], {}
        for i, (r, decision) in enumerate(zip(checked, decisions)):
            routed = [_RoutedHook(h, self, decision) for h in call_hooks]
            ctx = PredictContext(states=[r["state"]], questions=r["questions"], model=decision.model,
                                 router=self, decision=decision, max_len=r.get("max_len"),
                                 head_max_len=r.get("head_max_len"))
            hooks_mod.fire(routed, "on_predict_start", ctx, raise_errors, timeout, self._hooks_lock)
            contexts.append((ctx, routed))
            if ctx.skipped:
                continue
            if len(ctx.states) != 1 or ctx.states[0] is None:
                raise ValueError(f"request {i}: an on_predict_start hook must leave exactly one state, "
                                 f"got {len(ctx.states)}")
            lang = r.get("lang") if r.get("lang") is not None else (decision.detection or {}).get("language")
            key = (decision.model, json.dumps(ctx.questions, ensure_ascii=False, default=repr), ctx.max_len,
                   ctx.head_max_len, lang)
            groups.setdefault(key, []).append(i)
        for (name, _, max_len, head_max_len, lang), members in groups.items():
            agent = self.load(name)
            first = contexts[members[0]][0]
            for i in members:
                contexts[i][0].agent = agent
            try:
                results = self._answer(agent, [contexts[i][0].states[0] for i in members], first.questions,
                                       batch_size, lang, max_len, head_max_len, sort_by_length, min_confidence)
            except Exception as e:
                for i in members:
                    ctx, routed = contexts[i]
                    ctx.error = e
                    hooks_mod.fire(routed, "on_error", ctx, False, timeout, self._hooks_lock)
                raise
            for i, result in zip(members, results):
                ctx = contexts[i][0]
                ctx.results = [result]
                ctx.usage = {k: result.get("usage", {}).get(k, 0) for k in ("input_tokens", "output_tokens")}
        out = []
        for (ctx, routed), decision in zip(contexts, decisions):
            ctx.elapsed_ms = (time.time() - ctx.started_at) * 1000.0
            hooks_mod.fire(routed, "on_predict_end", ctx, raise_errors, timeout, self._hooks_lock)
            result = dict(ctx.results[0])
            result["routing"] = dict(decision)
            out.append(result)
        if diagnostics is not None:
            diagnostics["groups"] = [{"model": k[0], "size": len(v)} for k, v in groups.items()]
            diagnostics["skipped"] = sum(ctx.skipped for ctx, _ in contexts)
        return out

    def _answer(self, agent: Any, states: list, questions: dict, batch_size: Any, lang: Any, max_len: Any,
                head_max_len: Any, sort_by_length: bool, min_confidence: Any) -> list[dict]:
        """One agent call for a group. Hooks already ran here, so the agent's own predict hooks are bypassed
        when it offers the shared request path (Predictor._answer); other agents get a plain predict_batch."""
        if callable(getattr(agent, "_answer", None)):
            if batch_size is not None:
                positive_int(batch_size, "batch_size")
            return agent._answer(states, questions, batch_size, lang, max_len, head_max_len, sort_by_length,
                                 min_confidence)
        return agent.predict_batch(states, questions, batch_size=batch_size, lang=lang, max_len=max_len,
                                   head_max_len=head_max_len, sort_by_length=sort_by_length,
                                   min_confidence=min_confidence)

    def __repr__(self) -> str:
        return f"Router(registered={self.registered}, loaded={self.loaded}, default={self.default!r})"
