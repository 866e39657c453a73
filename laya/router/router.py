"""Router: pick a checkpoint for each request before any forward pass, and keep a few agents loaded.

Torch-free until an agent is actually loaded: `route()` only reads the registry and `laya.lang`.
Which checkpoint answers matters more than anything else here -- the English checkpoint collapses on
other languages while staying confident -- so the precedence of `route()` is fixed and documented.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Callable

from .. import hooks as hooks_mod
from .. import lang as lang_mod
from ..answers import check_flag, positive_int
from ..confidence import check_min_confidence
from ..hooks import HookRegistry, PredictContext
from ..structured import StructuredDecisions
from . import policy
from .batch import BatchRun, check_requests, request_lang
from .calls import HookRun, answer_one, call_agent
from .digests import check_digest_argument, env_digests, merged_digests
from .policy import TYPED, RouteDecision
from .pool import AgentPool
from .registry import (DEFAULT_MODELS, CheckpointRegistry, agent_class, check_agent_kwargs, check_name,
                       check_source, source_text, warn_near_builtin)


_ABSENT = object()  # not resident (an attached agent may be None)


def _questions_error(questions: Any) -> TypeError:
    return TypeError(f"questions must be a dict of question id -> definition, got {type(questions).__name__}")


class Router(HookRegistry, StructuredDecisions):
    """Routes requests to named checkpoints and keeps at most `max_loaded` agents resident (LRU).

    Predict hooks compose as process defaults -> installed on the router -> per call, and run once per
    request with `ctx.router` and `ctx.decision` set. Agents are called through their public methods
    (`system_one`, `predict_batch`, `predict_long`); the `min_confidence` gate is applied here, never by
    the agent. Evicting or unloading an agent only drops the router's reference.
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
        for arg, value, what in (("models", models, "checkpoint name -> source"),
                                 ("revisions", revisions, "checkpoint name -> revision (a str or None)")):
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"{arg} must be a dict of {what}, got {type(value).__name__}")
        for name, value in (revisions or {}).items():
            if value is not None and not isinstance(value, str):
                raise TypeError(f"revisions[{name!r}] must be a revision string (a commit, branch or tag) or None, "
                                f"got {value!r}")
        self._check_lang_guess(lang_guess, "lang_guess")
        check_agent_kwargs(agent_kwargs)
        self.hooks = hooks_mod.normalise_hooks(hooks, on_predict_start, on_predict_end)
        self.hooks_raise, self.hooks_concurrent = hooks_raise, hooks_concurrent
        self.hooks_timeout = hooks_mod.validate_timeout(hooks_timeout)
        self._hooks_lock = None if hooks_concurrent else threading.RLock()
        self.device, self.token, self.revision = device, token, revision
        self.auto_task_detection = bool(auto_task_detection)
        self.lang_guess = lang_guess
        self.agent_kwargs = dict(agent_kwargs or {})
        self._pool = AgentPool(max(1, max_loaded), self._fire_lifecycle)  # spec: "min 1"
        self._registry = CheckpointRegistry(standalone_repos)
        self._env_digests = env_digests()
        self.sha256_digests: dict[str, Any] = {}
        if self._env_digests is not None:  # a model-keyed env masks a flat one for every checkpoint
            self.sha256_digests = {n: self._env_digests.get(n, {}) for n in self._registry.sources}
        for name, source in (models or {}).items():
            self.register(name, source)
        self.revisions = {self.resolve(n): (str(v).strip() or None) if v is not None else None
                          for n, v in (revisions or {}).items()}
        for name, files in check_digest_argument(sha256_digests).items():
            key = self.resolve(name)
            self.sha256_digests[key] = {**(self.sha256_digests.get(key) or {}), **(files or {})}
        self.default = self.resolve(default)
        if preload:
            self.preload()

    # ---- registry --------------------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        """The registered name for a name or alias (any case); ValueError listing the names otherwise."""
        return self._registry.resolve(name)

    @property
    def models(self) -> dict:
        """{name: source} of every checkpoint this Router knows, built-ins first."""
        return self._registry.models()

    @property
    def descriptions(self) -> dict:
        return {n: d for n, d in self._registry.descriptions.items() if d is not None}

    @property
    def registered(self) -> dict:
        """The caller's registrations: {name: {"source": text, "description": text or None}}."""
        return self._registry.registered()

    def describe(self, name: str) -> str | None:
        return self._registry.descriptions.get(self.resolve(name))

    def register(self, name: str, source: Any, description: str | None = None) -> str:
        """Point a built-in name (or alias) at another source, or add a new checkpoint name."""
        key = check_name(name)
        stored = check_source(key, source)
        if self._registry.find(key) is None:  # only a new name is warned about (R-RT-11)
            warn_near_builtin(key)
        with self._pool.lock:
            repointed = self._registry.add(key, stored, description)
            if self._env_digests is not None:
                self.sha256_digests.setdefault(key, self._env_digests.get(key, {}))
        if repointed:
            self._pool.discard(key)
        return key

    def unregister(self, name: str) -> None:
        """Remove a caller's registration (never a built-in, nor the Router's default)."""
        key = self.resolve(name)
        if key in DEFAULT_MODELS:
            raise ValueError(f"{key!r} is a built-in checkpoint and cannot be unregistered")
        if key == self.default:
            raise ValueError(f"{key!r} is this Router's default checkpoint; set another default before "
                             "unregistering it")
        with self._pool.lock:
            self._registry.remove(key)
            self.sha256_digests.pop(key, None)
            self.revisions.pop(key, None)
        self._pool.discard(key, wait=True)

    @staticmethod
    def _check_lang_guess(value: Any, where: str) -> None:
        if value is not None and not isinstance(value, str) and not callable(value):
            raise TypeError(f"{where} must be a language code, a callable(state) -> code, or None; "
                            f"got {type(value).__name__}")

    # ---- loading ---------------------------------------------------------------------------------

    def _load_arguments(self, name: str) -> dict:
        """Agent(...) keywords for `name`: only what is set (a revision pin, digests, agent_kwargs)."""
        repo, subfolder = self._registry.spec(name)
        kwargs = {"model_id_or_path": repo, "device": self.device, "token": self.token, "subfolder": subfolder}
        pin = self.revisions.get(name) or self.revision
        if isinstance(pin, str):
            pin = pin.strip()
        if pin:
            kwargs["revision"] = pin
        kwargs.update(self.agent_kwargs)
        digests = merged_digests(self.agent_kwargs.get("expected_sha256"), self.sha256_digests.get(name),
                                 name in self.sha256_digests)
        kwargs.pop("expected_sha256", None)
        if digests is not None:
            kwargs["expected_sha256"] = digests
        return kwargs

    def _create_agent(self, name: str, arguments: dict) -> Any:
        """Build one agent (subclasses may override, e.g. to build a fake in tests)."""
        arguments = dict(arguments)
        repo = arguments.pop("model_id_or_path")
        if "onnx_path" in arguments or str(arguments.get("backend") or "").strip().lower() == "onnx":
            from ..loading import load  # the exported-graph runtime is built by laya.load (no torch)

            return load(repo, **arguments)
        return agent_class()(repo, **arguments)

    def load(self, name: str) -> Any:
        """The agent for `name`, building it once even when several threads ask at the same time."""
        return self._load(self.resolve(name), report_errors=True)

    def _load_for_call(self, name: str) -> Any:
        """`load` inside a predict call: a failure is reported to that call's hooks instead."""
        return self._load(name, report_errors=False)

    def _load(self, name: str, report_errors: bool) -> Any:
        agent = self._pool.resident(name, _ABSENT)
        if agent is not _ABSENT:
            return agent
        if self._registry.spec(name) is None:
            raise ValueError(f"checkpoint {name!r} has no source to load from: it was attached as a built Agent "
                             "and is no longer resident; attach it again, or register a path or repo")
        return self._pool.get(name, lambda: self._create_agent(name, self._load_arguments(name)), report_errors)

    def attach(self, name: str, agent: Any) -> Any:
        """Use an object built elsewhere as the agent for `name` (an unknown name is registered without a
        source); max_loaded grows so it evicts nothing. Returns the object."""
        key = self._registry.find(name)
        if key is None:
            key = check_name(name)
            warn_near_builtin(key)
            with self._pool.lock:
                self._registry.add(key, None, None)
        self._pool.attach(key, agent)
        return agent

    def preload(self, names: list | None = None) -> "Router":
        """Load these checkpoints (default: every one with a source) without evicting a resident one."""
        if names is None:
            names = [n for n, s in self._registry.sources.items() if s is not None]
        wanted = list(dict.fromkeys(self.resolve(n) for n in names))
        self._pool.reserve(wanted)
        for name in wanted:
            self.load(name)
        return self

    def unload(self, name: str | None = None) -> None:
        """Forget one loaded agent (or all). Requests already running on it finish normally."""
        self._pool.unload(None if name is None else self.resolve(name))

    @property
    def max_loaded(self) -> int:
        return self._pool.max_loaded

    @max_loaded.setter
    def max_loaded(self, value: int) -> None:
        self._pool.max_loaded = value

    @property
    def loaded(self) -> list[str]:
        """Loaded model names, least recently used first."""
        return self._pool.names()

    def agents(self) -> dict[str, Any]:
        """The loaded agents by name, least recently used first: a snapshot that loads nothing and does not
        touch the LRU order (what /health and /v1/models read)."""
        return self._pool.snapshot()

    @property
    def loaded_revisions(self) -> dict:
        return {n: getattr(a, "revision", None) for n, a in self._pool.snapshot().items()}

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unload()

    # ---- hooks -----------------------------------------------------------------------------------

    def _compose_hooks(self, hooks: Any, on_start: Any = None, on_end: Any = None) -> list:
        return hooks_mod.compose_hooks(self.hooks, hooks, on_start, on_end)

    def _timeout(self, hooks_timeout: Any) -> float | None:
        """This call's hooks_timeout, checked (None: the Router's)."""
        return self.hooks_timeout if hooks_timeout is None else hooks_mod.validate_timeout(hooks_timeout)

    def _hook_run(self, hooks: Any, on_start: Any, on_end: Any, hooks_raise: Any, hooks_timeout: Any,
                  threshold: Any) -> HookRun:
        return HookRun(self._compose_hooks(hooks, on_start, on_end),
                       self.hooks_raise if hooks_raise is None else hooks_raise, self._timeout(hooks_timeout),
                       self._hooks_lock, threshold)

    def _fire_lifecycle(self, event: str, name: str, agent: Any, error: BaseException | None = None) -> None:
        """on_load / on_evict / on_error outside a predict call; failures there never undo the load."""
        call_hooks = self._compose_hooks(None)
        if not any(callable(getattr(h, event, None)) for h in call_hooks):
            return
        ctx = PredictContext(states=[], questions={}, model=name, agent=agent, router=self, error=error)
        hooks_mod.fire(call_hooks, event, ctx, False, self.hooks_timeout, self._hooks_lock)

    # ---- routing ---------------------------------------------------------------------------------

    def _decision(self, name: str, reason: str, detection: dict | None = None,
                  workflow: str | None = None) -> RouteDecision:
        return RouteDecision(model=name, repo=source_text(self._registry.sources[name]), reason=reason,
                             detection=detection, workflow=workflow)

    def _decision_model(self, decision: Any) -> str:
        """The checkpoint a decision (maybe a dict an on_route hook returned) names."""
        if not isinstance(decision, dict) or "model" not in decision:
            raise ValueError(f"a routing decision must be a dict with a 'model' key, got {decision!r:.200}")
        return self.resolve(decision["model"])

    def _route_once(self, state: Any, questions: Any, model: Any, task: Any, lang: Any, lang_guess: Any,
                    explain: bool) -> RouteDecision:
        if policy.explicit_model(model):
            return self._decision(self.resolve(model), f"explicit model={model!r}")
        if task is not None and str(task).strip():
            key = str(task).strip().lower()
            name = TYPED if key.replace("_", "-") == TYPED else self.resolve(key)
            return self._decision(name, f"explicit task={task!r}")
        workflow = policy.match_typed_decisions_workflow(questions)
        if self.auto_task_detection and workflow is not None:
            return self._decision(TYPED, f"question ids match the {workflow!r} typed-decisions workflow",
                                  workflow=workflow)
        opinion = policy.lang_opinion(lang, "lang")
        if opinion is not None:
            return self._decision(opinion, f"explicit lang={lang!r}", workflow=workflow)
        for guess, installed in ((lang_guess, False), (self.lang_guess, True)):
            if guess is None:
                continue
            where = "Router(lang_guess=)" if installed else "lang_guess"
            code = guess(state) if callable(guess) else guess
            opinion = policy.lang_opinion(code, f"{where} result" if callable(guess) else where)
            if opinion is not None:
                return self._decision(opinion, policy.hint_reason(installed, opinion), workflow=workflow)
        detection = lang_mod.analyse(state, explain=explain)
        name, reason = policy.detection_verdict(detection, self.default)
        return self._decision(name, reason, detection, workflow)

    def route(self, state: Any, questions: dict | None = None, model: str | None = None, task: str | None = None,
              lang: str | None = None, lang_guess: Any = None, hooks: Any = None, hooks_raise: bool | None = None,
              hooks_timeout: float | None = None, *, explain: bool = False) -> RouteDecision:
        """Which checkpoint should answer? Never loads one.

        Precedence: explicit `model`; explicit `task`; with auto_task_detection, question ids equal to a
        WORKFLOW_SIGNATURES entry (typed-decisions); explicit `lang`; `lang_guess` (this call's, then the
        router's); built-in detection (no letters or undecided Latin -> `default`, non-Latin, foreign Latin or
        a foreign line/field -> multilingual, else english). `on_route` hooks may then replace the decision.
        """
        if questions is not None and not isinstance(questions, dict):
            raise _questions_error(questions)
        check_flag(explain, "explain")
        self._check_lang_guess(lang_guess, "lang_guess")
        timeout = self._timeout(hooks_timeout)
        decision = self._route_once(state, questions, model, task, lang, lang_guess, explain)
        call_hooks = self._compose_hooks(hooks)
        if not any(callable(getattr(h, "on_route", None)) for h in call_hooks):
            return decision
        ctx = PredictContext(states=[state], questions=questions or {}, decision=decision, model=decision.model,
                             router=self)
        hooks_mod.fire(call_hooks, "on_route", ctx, self.hooks_raise if hooks_raise is None else hooks_raise,
                       timeout, self._hooks_lock)
        return self._hook_decision(ctx.decision, decision)

    def _hook_decision(self, replaced: Any, original: RouteDecision) -> Any:
        """An on_route hook may put any dict (returned as it is) or a model name in ctx.decision."""
        if replaced is original or isinstance(replaced, dict):
            return replaced
        if isinstance(replaced, str):
            name = self.resolve(replaced)
            return self._decision(name, f"on_route hook chose {replaced!r}", original.get("detection"),
                                  original.get("workflow"))
        raise TypeError(f"an on_route hook set ctx.decision to {type(replaced).__name__}; use a model name or a "
                        "decision dict")

    def route_batch(self, requests: list, hooks_timeout: float | None = None, *, hooks: Any = None,
                    hooks_raise: bool | None = None, explain: bool = False) -> list:
        checked = check_requests(requests)
        self._timeout(hooks_timeout)
        check_flag(explain, "explain")
        return [self.route(r["state"], r["questions"], r.get("model"), r.get("task"), r.get("lang"),
                           r.get("lang_guess"), hooks, hooks_raise, hooks_timeout, explain=explain) for r in checked]

    # ---- answering -------------------------------------------------------------------------------

    @staticmethod
    def _threshold(min_confidence: Any) -> Any:
        return None if min_confidence is None else check_min_confidence(min_confidence)

    def _answer_routed(self, run: HookRun, ctx: PredictContext, route: Callable[[], Any], answer: Any) -> dict:
        """route -> load -> start hooks -> answer(agent, state, questions) -> gate -> end hooks, with
        on_error then the end hooks when routing, loading or answering fails."""
        try:
            decision = route()
            ctx.decision = decision
            ctx.model = self._decision_model(decision)
            ctx.agent = self._load_for_call(ctx.model)
        except Exception as e:
            ctx.agent = None
            run.fail(ctx, e)
            raise
        if not run.start(ctx):
            if len(ctx.states) != 1 or ctx.states[0] is None:
                raise ValueError(f"an on_predict_start hook must leave exactly one state, got {len(ctx.states)}")
            try:
                result = answer(ctx.agent, ctx, decision)
            except Exception as e:
                run.fail(ctx, e)
                raise
            ctx.results, ctx.usage = [result], hooks_mod.aggregate_usage([result])
        run.finish(ctx)
        return run.with_routing(ctx, decision)

    def predict(self, state: Any, questions: dict, model: str | None = None, task: str | None = None,
                lang: str | None = None, lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None,
                on_predict_end: Any = None, hooks_raise: bool | None = None, hooks_timeout: float | None = None,
                max_len: int | None = None, head_max_len: int | None = None, min_confidence: Any = None) -> dict:
        """Route, load and answer one state; `routing` is added to the result."""
        if state is None:
            raise TypeError("state must not be None; pass a string, dict, or list")
        if not isinstance(questions, dict):
            raise _questions_error(questions)
        run = self._hook_run(hooks, on_predict_start, on_predict_end, hooks_raise, hooks_timeout,
                             self._threshold(min_confidence))
        ctx = run.context(states=[state], questions=questions, router=self, max_len=max_len,
                          head_max_len=head_max_len)

        def answer(agent: Any, ctx: PredictContext, decision: dict) -> dict:
            return answer_one(agent, ctx.states[0], ctx.questions, request_lang({"lang": lang}, decision),
                              ctx.max_len, ctx.head_max_len)

        return self._answer_routed(run, ctx, lambda: self.route(state, questions, model, task, lang, lang_guess, hooks,
                                                                hooks_raise, hooks_timeout), answer)

    system_one = predict

    def predict_long(self, state: Any, questions: dict, model: str | None = None, task: str | None = None,
                     lang: str | None = None, lang_guess: Any = None, window: int | None = None,
                     stride: int | None = None, aggregate: str = "auto", batch_size: int | None = None,
                     hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                     hooks_raise: bool | None = None, hooks_timeout: float | None = None) -> dict:
        """Route like `predict`, then scan with the routed agent's `predict_long` (sliding windows)."""
        if state is None:
            raise TypeError("state must not be None; pass a string, dict, or list")
        if not isinstance(questions, dict):
            raise _questions_error(questions)
        run = self._hook_run(hooks, on_predict_start, on_predict_end, hooks_raise, hooks_timeout, None)
        ctx = run.context(states=[state], questions=questions, router=self)

        def answer(agent: Any, ctx: PredictContext, decision: dict) -> dict:
            scan = getattr(agent, "predict_long", None)
            if not callable(scan):
                raise TypeError(f"the agent for {ctx.model!r} ({type(agent).__name__}) has no predict_long; "
                                "route this state to a laya Agent, or use predict()")
            options = {k: v for k, v in (("window", window), ("stride", stride), ("batch_size", batch_size))
                       if v is not None}
            return dict(call_agent(scan, (ctx.states[0], ctx.questions),
                                   {"aggregate": aggregate, "lang": request_lang({"lang": lang}, decision), **options}))

        return self._answer_routed(run, ctx, lambda: self.route(state, questions, model, task, lang, lang_guess, hooks,
                                                                hooks_raise, hooks_timeout), answer)

    def predict_batch(self, requests: list, batch_size: int | None = None, hooks_timeout: float | None = None,
                      min_confidence: Any = None, sort_by_length: bool = False, *, hooks: Any = None,
                      on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: bool | None = None,
                      diagnostics: dict | None = None) -> list[dict]:
        """Route every request, answer each (checkpoint, questions, budgets, lang) group in one agent
        call, and return results in input order with `routing` attached. Hooks run per request."""
        checked = check_requests(requests)
        threshold = self._threshold(min_confidence)
        self._timeout(hooks_timeout)
        if diagnostics is not None and not isinstance(diagnostics, dict):
            raise TypeError("diagnostics must be a dict to fill in, or None")
        if batch_size is not None:
            batch_size = positive_int(batch_size, "batch_size")
        check_flag(sort_by_length, "sort_by_length")
        if not checked:
            return []
        run = self._hook_run(hooks, on_predict_start, on_predict_end, hooks_raise, hooks_timeout, threshold)
        decisions = []
        for r in checked:
            try:
                decisions.append(self.route(r["state"], r["questions"], r.get("model"), r.get("task"), r.get("lang"),
                                            r.get("lang_guess"), hooks, hooks_raise, hooks_timeout))
            except Exception as e:
                run.fail(run.context(states=[r["state"]], questions=r["questions"], router=self,
                                     max_len=r.get("max_len"), head_max_len=r.get("head_max_len")), e)
                raise
        batch = BatchRun(self, checked, decisions, run, batch_size, sort_by_length)
        out = batch.answer()
        report = batch.sort_report()
        if diagnostics is not None and report is not None:
            diagnostics["sort_by_length"] = report
        return out

    def __repr__(self) -> str:
        return f"Router(models={list(self.models)}, loaded={self.loaded}, default={self.default!r})"
