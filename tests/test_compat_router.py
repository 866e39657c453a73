"""compat-0.4.15 §5 (Router API and routing texts), R-GATE-3 (the Router applies min_confidence) and R-P2-7
(laya.router names). Stub agents only: nothing here loads a checkpoint."""

import os
import warnings

import pytest

import laya
import laya.lang
import laya.router
from laya.router import (BUNDLE_REPO, DEFAULT_MODELS, STANDALONE_MODELS, RouteDecision, Router, canonical_name,
                         check_agent_kwargs, match_typed_decisions_workflow, normalise_name, resolve_model_spec)

Q = {"ok": {"type": "noul", "instructions": "ok?"}}
ALIAS_LIST = ("['decisions', 'default', 'en', 'laya', 'laya-multilingual', 'laya-typed-decisions', 'ml', 'multi', "
              "'typed', 'typed_decisions']")


def answer(conf=0.3, **extra):
    return {"type": "noul", "noul": conf, "confidence": conf, "answer_confidence": conf, **extra}


class Stub:
    """An attached agent that records how it is called and ignores min_confidence."""

    def __init__(self, conf=0.3, lang_temperatures=None):
        self.conf, self.calls = conf, []
        if lang_temperatures is not None:
            self.lang_temperatures = lang_temperatures

    def _result(self, state, questions):
        return {"model": "stub", "answers": {q: answer(self.conf) for q in questions},
                "usage": {"input_tokens": 1, "output_tokens": 0}, "state": state}

    def system_one(self, state, questions, **kw):
        self.calls.append(("system_one", state, kw))
        return self._result(state, questions)

    def predict_batch(self, states, questions, **kw):
        self.calls.append(("predict_batch", list(states), kw))
        return [self._result(s, questions) for s in states]

    def predict_long(self, state, questions, **kw):
        self.calls.append(("predict_long", state, kw))
        return self._result(state, questions)


def stub_router(stub=None, **kw):
    r = Router(**kw)
    stub = stub or Stub()
    for name in ("english", "multilingual", "typed-decisions"):
        r.attach(name, stub)
    return r, stub


class Recorder:
    def __init__(self):
        self.events = []

    def __getattr__(self, event):
        if event not in ("on_predict_start", "on_predict_end", "on_error", "on_route", "on_load", "on_evict"):
            raise AttributeError(event)
        return lambda ctx: self.events.append((event, ctx))


# ---- R-GATE-3: the Router gates, the agent never sees min_confidence ------------------------------

def test_predict_gates_below_threshold_and_end_hooks_see_the_flags():
    r, stub = stub_router()
    seen = []
    out = r.predict("Could you please send me the invoice again", Q, min_confidence=0.5,
                    on_predict_end=lambda ctx: seen.append(dict(ctx.results[0]["answers"]["ok"])))
    a = out["answers"]["ok"]
    assert a["low_confidence"] is True and a["abstention"] == "abstained" and a["abstention_threshold"] == 0.5
    assert seen[0]["low_confidence"] is True  # gated before on_predict_end
    assert all("min_confidence" not in kw for _, _, kw in stub.calls)
    passed = r.predict("Could you please send me the invoice again", Q, min_confidence=0.2)["answers"]["ok"]
    assert passed["abstention"] == "passed" and "low_confidence" not in passed
    assert "abstention" not in r.predict("x", Q)["answers"]["ok"]  # no threshold: nothing written


def test_batch_gates_every_request_and_skipped_results():
    r, stub = stub_router()

    def cache(ctx):
        if ctx.states[0] == "cached":
            ctx.skip([{"model": "cache", "answers": {"ok": answer(0.1)}, "usage": {}}])

    ends = []
    out = r.predict_batch([{"state": "send me the invoice", "questions": Q}, {"state": "cached", "questions": Q}],
                          min_confidence=0.5, on_predict_start=cache,
                          on_predict_end=lambda ctx: ends.append(ctx.results[0]["answers"]["ok"].get("abstention")))
    assert [o["answers"]["ok"]["low_confidence"] for o in out] == [True, True] and ends == ["abstained"] * 2
    assert all("min_confidence" not in kw for _, _, kw in stub.calls)
    skipped = r.predict("cached", Q, min_confidence=0.5, on_predict_start=cache)
    assert skipped["answers"]["ok"]["abstention"] == "abstained" and skipped["model"] == "cache"


@pytest.mark.parametrize("bad", [1.5, -0.1, True, "0.5", {"nope": 0.5}])
def test_min_confidence_is_checked_before_routing_or_loading(bad):
    r = Router(models={"x": "org/x"})
    r._create_agent = lambda *a: pytest.fail("loaded")
    routed = []
    with pytest.raises(ValueError):
        r.predict("x", Q, model="x", min_confidence=bad, hooks=type("H", (), {"on_route": routed.append})())
    with pytest.raises(ValueError):
        r.predict_batch([{"state": "x", "questions": Q, "model": "x"}], min_confidence=bad)
    assert routed == [] and r.loaded == []


def test_batch_failure_gates_results_already_produced():
    class Failing(Stub):
        def predict_batch(self, states, questions, **kw):
            raise RuntimeError("boom")

    r, _ = stub_router(Failing())
    ends, errors = [], []

    def cache(ctx):
        if ctx.states[0] == "cached":
            ctx.skip([{"answers": {"ok": answer(0.1)}}])

    with pytest.raises(RuntimeError, match="boom"):
        r.predict_batch([{"state": "cached", "questions": Q}, {"state": "send it", "questions": Q}],
                        min_confidence=0.5, on_predict_start=cache, hooks=type("E", (), {
                            "on_error": lambda self, ctx: errors.append(ctx.states[0]),
                            "on_predict_end": lambda self, ctx: ends.append(ctx.results)})())
    assert errors == ["send it"]
    assert ends[0] is None and ends[1][0]["answers"]["ok"]["abstention"] == "abstained"  # reverse start order


# ---- R-RT-1 / R-RT-2: reasons and decision keys ----------------------------------------------------

def detection(script="latin", profile=None, language=None, is_english=True, undecided=True, rate=0.0, nlf=0.0,
              segment=None):
    return {"script": script, "script_profile": {"latin": 1.0} if profile is None else profile,
            "language": language, "is_english": is_english, "language_undecided": undecided,
            "diacritic_rate": rate, "non_latin_fraction": nlf, "mixed_segment": segment}


LONG = "O boleto venceu (ontem) e preciso de outro agora, antes das cinco da tarde de hoje"
REASONS = [
    (detection(script="unknown", profile={}), "multilingual", "no letters detected in state; using default (multilingual)"),
    (detection(script="cyrillic", profile={"cyrillic": 1.0}, is_english=False, nlf=1.0), "multilingual",
     "non-Latin script (cyrillic, 100% of letters); the English checkpoint cannot read it"),
    (detection(script="greek", profile={"latin": 0.7347, "greek": 0.2653}, is_english=False, nlf=0.2653),
     "multilingual", "non-Latin script (greek, 27% of letters); the English checkpoint cannot read it"),
    (detection(language="pt", is_english=False, undecided=False, segment=LONG), "multilingual",
     f"Latin script, mostly English, but a line or field reads as 'pt' ({LONG[:60]!r}); the English checkpoint "
     "cannot read it"),
    (detection(language="fr", is_english=False, undecided=False), "multilingual",
     "Latin script but language looks like 'fr', not English"),
    (detection(is_english=False, rate=0.3636), "multilingual",
     "Latin script, language not identified but 36% non-English letters; not safe for the English checkpoint"),
    (detection(), "multilingual",
     "Latin script, language not identified and no non-English letters; using default (multilingual)"),
    (detection(language="en", undecided=False), "english", "English Latin text"),
]


@pytest.mark.parametrize("found,model,reason", REASONS)
def test_detection_reasons(monkeypatch, found, model, reason):
    monkeypatch.setattr(laya.lang, "analyse", lambda state, explain=False: dict(found))
    d = Router().route("anything")
    assert (d.model, d.reason, d.detection) == (model, reason, found)


def test_default_named_in_reasons(monkeypatch):
    monkeypatch.setattr(laya.lang, "analyse", lambda state, explain=False: detection(script="unknown", profile={}))
    d = Router(default="english").route("#4471-22")
    assert d.model == "english" and d.reason == "no letters detected in state; using default (english)"


def test_explicit_and_hint_reasons():
    r = Router(lang_guess="en")
    wf = dict.fromkeys(["action", "category", "churn_risk", "needs_human", "urgency"], {"type": "noul"})
    assert r.route("x", model="ML").reason == "explicit model='ML'"
    assert r.route("x", task="typed_decisions").reason == "explicit task='typed_decisions'"
    assert r.route("x", lang="en_US.UTF-8").reason == "explicit lang='en_US.UTF-8'"
    assert r.route("x", lang_guess="fr").reason == "lang_guess: the caller identified this as non-English text"
    assert r.route("x", lang_guess=lambda s: "en").reason == "lang_guess: the caller identified this as English text"
    assert r.route("x").reason == "Router(lang_guess=...): the caller identified this as English text"
    auto = Router(auto_task_detection=True).route("x", wf, lang="fr")
    assert auto.reason == "question ids match the 'customer_service' typed-decisions workflow"
    assert (auto.model, auto.workflow, auto.detection) == ("typed-decisions", "customer_service", None)
    assert auto.repo == "convaiinnovations/laya/typed-decisions"
    standalone = Router(auto_task_detection=True, standalone_repos=True).route("x", wf)
    assert standalone.repo == "convaiinnovations/laya-typed-decisions"
    assert r.route("x", wf).workflow == "customer_service"  # named even when the hint decided
    assert r.route("x", wf, model="en").workflow is None and r.route("x", wf, task="typed").workflow is None
    d = r.route("x")
    assert isinstance(d, RouteDecision) and list(d) == ["model", "repo", "reason", "detection", "workflow"]


def test_workflow_signatures():
    sigs = {"agent_trace_observability": {"action", "needs_review", "outcome", "risk", "urgency"},
            "customer_service": {"action", "category", "churn_risk", "needs_human", "urgency"},
            "invoice_processing": {"discrepancy_severity", "disposition", "duplicate", "matches_order", "urgency"},
            "security_incidents": {"credential_compromise", "disposition", "severity", "true_positive", "urgency"}}
    for name, ids in sigs.items():
        assert match_typed_decisions_workflow({i: {} for i in reversed(sorted(ids))}) == name
        assert match_typed_decisions_workflow({i: {} for i in list(ids)[:4]}) is None
        assert match_typed_decisions_workflow({**{i: {} for i in ids}, "extra": {}}) is None
    assert match_typed_decisions_workflow(None) is None and match_typed_decisions_workflow(["action"]) is None


# ---- R-RT-4: explain ---------------------------------------------------------------------------------

def test_explain_runs_detection_once_and_only_when_needed(monkeypatch):
    calls = []
    real = laya.lang.analyse

    def counting(state, explain=False):
        calls.append(explain)
        return real(state, explain=explain)

    monkeypatch.setattr(laya.lang, "analyse", counting)
    r = Router()
    for kw in ({"model": "en"}, {"task": "typed"}, {"lang": "de"}, {"lang_guess": "en"}):
        assert r.route("Hallo Welt wie geht es", explain=True, **kw).detection is None
    assert calls == []
    asked = []
    d = r.route("Could you please send me the invoice again", explain=True,
                lang_guess=lambda s: asked.append(s) or None)
    assert len(asked) == 1 and calls == [True] and set(d.detection["diagnostic"]) == {"stage", "reason", "source"}
    assert "diagnostic" not in r.route("Could you please send me the invoice again").detection


def test_on_route_hook_sees_the_diagnostic_and_may_return_any_dict():
    seen = []

    class Swap:
        def on_route(self, ctx):
            seen.append(ctx.decision["detection"]["diagnostic"])
            ctx.decision = {"model": "english", "note": "mine"}

    r = Router(hooks=Swap())
    assert r.route("hola amigo", explain=True) == {"model": "english", "note": "mine"}
    assert seen and "stage" in seen[0]


def test_route_batch_explain_equals_route():
    r = Router()
    reqs = [{"state": "Could you please send me the invoice again", "questions": Q},
            {"state": "Je voudrais annuler ma commande pour demain", "questions": Q}]
    assert r.route_batch(reqs, explain=True) == [r.route(q["state"], Q, explain=True) for q in reqs]
    assert all("diagnostic" not in d.detection for d in r.route_batch(reqs))


# ---- R-RT-5 / R-RT-6: input validation --------------------------------------------------------------

def test_route_and_predict_argument_errors():
    r, _ = stub_router()
    with pytest.raises(TypeError) as e:
        r.route("x", ["a"])
    assert str(e.value) == "questions must be a dict of question id -> definition, got list"
    assert r.route(None).model == "multilingual"
    with pytest.raises(TypeError) as e:
        r.predict(None, Q)
    assert str(e.value) == "state must not be None; pass a string, dict, or list"
    with pytest.raises(TypeError) as e:
        r.predict("x", [1])
    assert str(e.value) == "questions must be a dict of question id -> definition, got list"


BATCH_ERRORS = [
    (None, TypeError, "requests must be a sequence of request dictionaries"),
    ({"state": "x", "questions": Q}, TypeError, "requests must be a sequence of request dictionaries"),
    ("xy", TypeError, "requests must be a sequence of request dictionaries"),
    (b"xy", TypeError, "requests must be a sequence of request dictionaries"),
    (5, TypeError, "requests must be a sequence of request dictionaries"),
    ([{"state": "a", "questions": Q}, {"state": "b", "questions": Q}, "c"], TypeError,
     "request 2 must be a dict, got str"),
    ([{"questions": Q}], ValueError, "request 0 is missing required key 'state'"),
    ([{"state": None, "questions": Q}], TypeError,
     "request 0 'state' must not be None; pass a string, dict, or list"),
    ([{"state": "x"}], ValueError, "request 0 is missing required key 'questions'"),
    ([{"state": "x", "questions": Q}, {"state": "x", "questions": ["a"]}], TypeError,
     "request 1 'questions' must be a dict, got list"),
]


@pytest.mark.parametrize("requests,error,text", BATCH_ERRORS)
def test_batch_input_errors(requests, error, text):
    r, stub = stub_router()
    for call in (r.route_batch, r.predict_batch):
        with pytest.raises(error) as e:
            call(requests)
        assert str(e.value) == text
    assert stub.calls == [] and r.predict_batch([]) == [] and r.route_batch([]) == []


# ---- R-RT-7 .. R-RT-11: registry ----------------------------------------------------------------------

def test_models_registered_and_descriptions():
    r = Router(models={"support": "/models/support-v2"})
    r.register("desk", ("org/desk", "v1"), description="help desk")
    assert r.models == {**DEFAULT_MODELS, "support": "/models/support-v2", "desk": ("org/desk", "v1")}
    assert r.registered == {"support": {"source": "/models/support-v2", "description": None},
                            "desk": {"source": "org/desk/v1", "description": "help desk"}}
    assert r.descriptions["desk"] == "help desk"
    assert Router().registered == {}
    assert r.register("home", "~/ckpt") == "home" and r.models["home"] == os.path.expanduser("~/ckpt")


def test_resolve_error_lists_names_and_aliases():
    r = Router(models={"support": "/m"})
    with pytest.raises(ValueError) as e:
        r.resolve("gpt4")
    assert str(e.value) == ("unknown model 'gpt4'; choose one of ['english', 'multilingual', 'support', "
                            f"'typed-decisions'] (or an alias: {ALIAS_LIST})")


@pytest.mark.parametrize("name,text", [
    ("Bad/Name", "invalid checkpoint name 'Bad/Name': use lowercase letters, digits, '.', '_' or '-', starting with "
                 "a letter or digit"),
    ("auto", "invalid checkpoint name 'auto': 'auto' means automatic routing in every model= argument"),
])
def test_register_name_errors(name, text):
    r = Router()
    with pytest.raises(ValueError) as e:
        r.register(name, "org/x")
    assert str(e.value) == text and r.registered == {}


def test_register_source_error_leaves_the_router_unchanged():
    r = Router(models={"x": "org/x"})
    before = (r.models, r.registered)
    with pytest.raises(TypeError) as e:
        r.register("x", 5)
    assert str(e.value) == ("checkpoint source for 'x' must be a repo id, a local path or a (repo, subfolder) pair, "
                            "got int")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            r.register("englsh", 5)  # refused before the near-typo warning
    assert caught == [] and (r.models, r.registered) == before


def test_reregistering_unloads_only_on_a_new_source():
    events = Recorder()
    r = Router(models={"x": "org/x"}, hooks=events)
    a = Stub()
    r.attach("x", a)
    r.register("x", "org/x")  # same source: keeps the agent, fires nothing
    assert r.loaded == ["x"] and events.events == []
    r.register("y", "org/y")  # a new name unloads nothing
    assert r.loaded == ["x"]
    r.register("x", "org/x2")
    assert r.loaded == [] and [(e, c.model, c.agent) for e, c in events.events] == [("on_evict", "x", a)]


def test_unregister_rules():
    events = Recorder()
    r = Router(models={"support": "/m", "home": "/h"}, default="support", hooks=events)
    with pytest.raises(ValueError) as e:
        r.unregister("ML")
    assert str(e.value) == "'multilingual' is a built-in checkpoint and cannot be unregistered"
    with pytest.raises(ValueError) as e:
        r.unregister("support")
    assert str(e.value) == ("'support' is this Router's default checkpoint; set another default before "
                            "unregistering it")
    with pytest.raises(ValueError, match="unknown model 'nope'; choose one of"):
        r.unregister("nope")
    stub = r.attach("home", Stub())
    r.unregister("home")
    assert "home" not in r.models and r.loaded == []
    assert [(ev, c.model, c.agent) for ev, c in events.events] == [("on_evict", "home", stub)]


@pytest.mark.parametrize("name,builtin", [("englsh", "english"), ("englissh", "english"), ("englesh", "english"),
                                          ("enlgish", "english"), ("multilingaul", "multilingual"),
                                          ("typed-decision", "typed-decisions")])
def test_near_typo_names_warn_at_the_callers_line(name, builtin):
    text = (f"laya: checkpoint name {name!r} is one edit from the built-in {builtin!r}; it is registered as a "
            f"separate checkpoint and {builtin!r} is unchanged.")
    for make in (lambda: Router(models={name: "org/x"}), lambda: Router().register(name, "org/x"),
                 lambda: Router().attach(name, Stub())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make()
        assert [(w.category, str(w.message), w.filename) for w in caught] == [(RuntimeWarning, text, __file__)]


def test_only_a_new_near_typo_name_warns():
    r = Router()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.register("englsh", "org/x")
        r.register("englsh", "org/y")  # re-pointing a name already registered
        r.attach("englsh", Stub())
    assert len(caught) == 1 and r.models["englsh"] == "org/y"


@pytest.mark.parametrize("name", ["enlgsih", "mlx", "multii", "english", "en", "support"])
def test_no_typo_warning(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Router(models={name: "org/x"})
    assert caught == []


# ---- R-RT-12 .. R-RT-14: attach, preload, eviction order ------------------------------------------

def test_attach_any_object_and_sourceless_names():
    r = Router(max_loaded=1)
    thing = object()
    assert r.attach("english", thing) is thing and r.attach("mine", Stub()) is not None
    assert r.max_loaded == 2 and sorted(r.loaded) == ["english", "mine"]
    assert r.registered == {"mine": {"source": None, "description": None}} and r.models["mine"] is None
    r.unload("mine")
    assert r.attach("none", None) is None and r.load("none") is None  # any object: None too is resident
    with pytest.raises(ValueError) as e:
        r.load("mine")
    assert str(e.value) == ("checkpoint 'mine' has no source to load from: it was attached as a built Agent and is no "
                            "longer resident; attach it again, or register a path or repo")


class Building(Router):
    def __init__(self, *a, **kw):
        self.builds = []
        super().__init__(*a, **kw)

    def _create_agent(self, name, arguments):
        self.builds.append(name)
        return Stub()


def test_preload_returns_the_router_and_keeps_residents():
    r = Building(models={"a": "org/a", "b": "org/b"}, max_loaded=1)
    mine = r.attach("english", Stub())
    assert r.preload([]) is r and r.builds == []
    assert r.preload(["A", "a", "b"]) is r and r.max_loaded == 3 and r.builds == ["a", "b"]
    assert r.load("english") is mine
    everything = Building(models={"a": "org/a"})
    everything.attach("gone", Stub())
    everything.preload()
    assert everything.builds == ["english", "multilingual", "typed-decisions", "a"]
    assert everything.max_loaded == 5 and "gone" in everything.loaded


def test_evict_fires_before_load():
    events = Recorder()
    r = Building(models={"a": "org/a", "b": "org/b"}, max_loaded=1, hooks=events)
    r.load("a")
    r.load("b")
    assert [(e, c.model) for e, c in events.events] == [("on_load", "a"), ("on_evict", "a"), ("on_load", "b")]


# ---- R-RT-15 / R-RT-16: agent construction -------------------------------------------------------------

class FakeAgentClass:
    made = []

    def __init__(self, *args, **kwargs):
        FakeAgentClass.made.append((args, kwargs))


def test_agent_construction_passes_only_what_is_set(monkeypatch):
    monkeypatch.delenv("LAYA_SHA256_DIGESTS", raising=False)
    monkeypatch.setattr(laya.router, "Agent", FakeAgentClass)
    FakeAgentClass.made.clear()
    Router().load("ml")
    Router(device="cpu", token="t", revision=" ", revisions={"english": None}).load("english")
    Router(revision="main", revisions={"english": "abc", "ml": ""}).preload(["en", "ml"])
    Router(agent_kwargs={"compile": False, "expected_sha256": {"a": "1"}},
           sha256_digests={"english": {"b": "2", "a": "3"}, "ml": None}).preload(["en", "ml"])
    base = {"device": None, "token": None}
    assert FakeAgentClass.made == [
        ((BUNDLE_REPO,), {**base, "subfolder": "multilingual"}),
        ((BUNDLE_REPO,), {"device": "cpu", "token": "t", "subfolder": None}),
        ((BUNDLE_REPO,), {**base, "subfolder": None, "revision": "abc"}),
        ((BUNDLE_REPO,), {**base, "subfolder": "multilingual", "revision": "main"}),
        ((BUNDLE_REPO,), {**base, "subfolder": None, "compile": False, "expected_sha256": {"a": "3", "b": "2"}}),
        ((BUNDLE_REPO,), {**base, "subfolder": "multilingual", "compile": False, "expected_sha256": {"a": "1"}}),
    ]


def test_nested_env_digests_seed_every_checkpoint(monkeypatch):
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", '{"multi": {"x.json": "1"}, "later": {"y.json": "2"}}')
    r = Router(sha256_digests={"en": None})
    assert r._load_arguments("multilingual")["expected_sha256"] == {"x.json": "1"}
    assert r._load_arguments("english")["expected_sha256"] == {}  # masks the env, no files of its own
    assert r._load_arguments("typed-decisions")["expected_sha256"] == {}
    r.register("later", "org/later")
    assert r._load_arguments("later")["expected_sha256"] == {"y.json": "2"}
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", '{"multi": {"x.json": "1"}, "x.json": "2"}')
    with pytest.raises(ValueError, match="LAYA_SHA256_DIGESTS"):
        Router()


def test_agent_kwargs_errors():
    with pytest.raises(ValueError) as e:
        Router(agent_kwargs={"device": "cpu"})
    assert str(e.value) == "Router sets 'device' itself; pass them to Router(...) instead of in agent_kwargs"
    with pytest.raises(ValueError) as e:
        check_agent_kwargs({"token": "t", "hooks": [], "compile": True})
    assert str(e.value) == "Router sets 'hooks', 'token' itself; pass them to Router(...) instead of in agent_kwargs"
    with pytest.raises(ValueError) as e:
        Router(agent_kwargs={"bogus": 1})
    assert str(e.value).startswith("Agent accepts none of 'bogus'; it accepts [") and "'compile'" in str(e.value)
    assert check_agent_kwargs(None) is None and check_agent_kwargs({"compile": False}) is None


def test_agent_kwargs_are_checked_against_the_agent_class_the_router_builds(monkeypatch):
    class Narrow:
        def __init__(self, model_id_or_path, device=None, token=None, subfolder=None, fast=False):
            self.kwargs = {"device": device, "token": token, "subfolder": subfolder, "fast": fast}

    monkeypatch.setattr(laya.router, "Agent", Narrow)
    with pytest.raises(ValueError) as e:
        Router(agent_kwargs={"compile": True})
    assert str(e.value) == ("Agent accepts none of 'compile'; it accepts ['device', 'fast', 'model_id_or_path', "
                            "'subfolder', 'token']")
    assert Router(agent_kwargs={"fast": True}).load("en").kwargs["fast"] is True
    monkeypatch.setattr(laya.router, "Agent", FakeAgentClass)  # takes **kwargs: any name is accepted
    assert check_agent_kwargs({"anything": 1}) is None


# ---- R-RT-17 .. R-RT-20: inference calls ----------------------------------------------------------------

def test_predict_calls_system_one_with_lang_and_set_budgets():
    r, stub = stub_router()
    out = r.predict("Je voudrais annuler ma commande pour demain", Q, max_len=64)
    assert stub.calls[-1] == ("system_one", "Je voudrais annuler ma commande pour demain",
                              {"lang": out["routing"]["detection"]["language"], "max_len": 64})
    r.predict("x", Q, lang="de", head_max_len=32)
    assert stub.calls[-1][2] == {"lang": "de", "head_max_len": 32}
    r.predict("x", Q, model="en")
    assert stub.calls[-1][2] == {"lang": None}
    assert out["routing"] == dict(r.route("Je voudrais annuler ma commande pour demain", Q))


def test_predict_retries_without_lang_for_an_older_agent():
    class Old:
        calls = []

        def system_one(self, state, questions, max_len=None):
            self.calls.append(max_len)
            return {"answers": {}}

    r = Router()
    r.attach("english", Old())
    assert r.predict("x", Q, model="en", max_len=8)["routing"]["model"] == "english" and Old.calls == [8]


def test_skip_keeps_its_routing_and_lifecycle_on_failures():
    r, stub = stub_router()
    kept = r.predict("x", Q, on_predict_start=lambda ctx: ctx.skip([{"answers": {}, "routing": "mine"}]))
    assert kept["routing"] == "mine" and stub.calls == []
    rec = Recorder()
    with pytest.raises(ValueError, match="unknown model"):
        r.predict("x", Q, model="nope", hooks=rec)
    assert [e for e, _ in rec.events] == ["on_error", "on_predict_end"]
    ctx = rec.events[0][1]
    assert (ctx.decision, ctx.model, ctx.agent) == (None, None, None) and rec.events[1][1] is ctx
    broken = Building(models={"gone": "org/gone"})
    broken._create_agent = lambda *a: (_ for _ in ()).throw(OSError("cannot build"))
    rec = Recorder()
    with pytest.raises(OSError):
        broken.predict("x", Q, model="gone", hooks=rec)
    assert [e for e, _ in rec.events] == ["on_route", "on_error", "on_predict_end"]
    rec.events.pop(0)
    ctx = rec.events[0][1]
    assert ctx.decision["model"] == ctx.model == "gone" and ctx.agent is None


def test_batch_groups_and_calls():
    plain = Stub()
    r = Router(models={"other": "org/o"})
    r.attach("english", plain)
    r.attach("other", Stub(lang_temperatures={"fr": {"temperature": [1, 1, 1]}}))
    q2 = {"b": {"type": "noul", "instructions": "b?"}, "a": {"type": "noul", "instructions": "a?"}}
    q2_reordered = {"a": q2["a"], "b": q2["b"]}
    reqs = [{"state": "s0", "questions": Q, "model": "en", "lang": "fr"},
            {"state": "s1", "questions": Q, "model": "other", "lang": "fr"},
            {"state": "s2", "questions": Q, "model": "en", "lang": "de"},
            {"state": "s3", "questions": q2, "model": "en"},
            {"state": "s4", "questions": q2_reordered, "model": "en", "max_len": 32},
            {"state": "s5", "questions": Q, "model": "other", "lang": "de"}]
    out = r.predict_batch(reqs, batch_size=4, sort_by_length=True)
    assert [o["state"] for o in out] == ["s0", "s1", "s2", "s3", "s4", "s5"]
    assert plain.calls == [("predict_batch", ["s0", "s2"], {"batch_size": 4, "sort_by_length": True}),
                           ("predict_batch", ["s3"], {"batch_size": 4, "sort_by_length": True}),
                           ("predict_batch", ["s4"], {"batch_size": 4, "max_len": 32, "sort_by_length": True})]
    other = r.agents()["other"].calls
    assert other == [("predict_batch", ["s1"], {"batch_size": 4, "lang": "fr", "sort_by_length": True}),
                     ("predict_batch", ["s5"], {"batch_size": 4, "lang": "de", "sort_by_length": True})]
    r.predict_batch(reqs[:1])
    assert plain.calls[-1][2] == {"batch_size": None}


def test_batch_end_hooks_run_in_reverse_start_order_within_a_group():
    r, _ = stub_router()
    order = []
    reqs = [{"state": f"s{i}", "questions": Q, "model": m} for i, m in enumerate(["en", "ml", "en", "ml"])]
    r.predict_batch(reqs, on_predict_start=lambda ctx: order.append(("start", ctx.states[0])),
                    on_predict_end=lambda ctx: order.append(("end", ctx.states[0])))
    assert order == [("start", "s0"), ("start", "s2"), ("end", "s2"), ("end", "s0"),
                     ("start", "s1"), ("start", "s3"), ("end", "s3"), ("end", "s1")]


def test_batch_retries_without_rejected_keywords_and_checks_counts():
    class Old:
        def __init__(self):
            self.calls, self.lang_temperatures = [], {"fr": {}}

        def predict_batch(self, states, questions, batch_size=None):
            self.calls.append(batch_size)
            return [{"answers": {}} for _ in states]

    old = Old()
    r = Router()
    r.attach("english", old)
    assert len(r.predict_batch([{"state": "x", "questions": Q, "model": "en", "lang": "fr"}], batch_size=2,
                               sort_by_length=True)) == 1
    assert old.calls == [2]  # the two refused calls never reached the body

    class Short(Stub):
        def predict_batch(self, states, questions, **kw):
            return []

    r.attach("english", Short())
    with pytest.raises(RuntimeError, match="returned 0 results for 2 states"):
        r.predict_batch([{"state": "x", "questions": Q, "model": "en"}] * 2)


def test_sort_by_length_diagnostics():
    r, _ = stub_router()
    qa, qb = Q, {"b": {"type": "noul", "instructions": "b?"}}
    reqs = [{"state": f"s{i}", "questions": qa if i < 2 else qb, "model": "en"} for i in range(6)]
    d = {}
    r.predict_batch(reqs, batch_size=3, sort_by_length=True, diagnostics=d)
    assert d == {"sort_by_length": {"groups": 2, "reordered": 1, "smallest": 2, "largest": 4}}
    untouched = {"mine": 1}
    r.predict_batch(reqs, batch_size=3, diagnostics=untouched)
    assert untouched == {"mine": 1}


def test_predict_long_routes_and_scans():
    r, stub = stub_router()
    starts = []
    out = r.predict_long("x", Q, model="en", window=64, on_predict_start=lambda ctx: starts.append(ctx.model))
    assert out["routing"]["model"] == "english" and starts == ["english"]
    assert stub.calls[-1] == ("predict_long", "x", {"aggregate": "auto", "lang": None, "window": 64})
    r.attach("english", object())
    with pytest.raises(TypeError, match="predict_long"):
        r.predict_long("x", Q, model="en", hooks_raise=False)


def test_predict_long_retries_without_lang_for_an_older_agent():
    class OldScanner:
        def predict_long(self, state, questions, window=None, stride=None, aggregate="auto", batch_size=None):
            return {"answers": {}, "usage": {}, "seen": (state, window, aggregate)}

    r = Router()
    r.attach("multilingual", OldScanner())
    out = r.predict_long("Je voudrais annuler ma commande pour demain", Q, window=32)
    assert out["seen"] == ("Je voudrais annuler ma commande pour demain", 32, "auto")
    assert out["routing"]["model"] == "multilingual"


# ---- R-P2-7: module names ---------------------------------------------------------------------------------

def test_module_names():
    assert canonical_name(" ML ") == "multilingual" and canonical_name("Support") == "support"
    assert normalise_name("Typed_Decisions") == "typed-decisions"
    with pytest.raises(ValueError) as e:
        normalise_name("support")
    assert str(e.value) == ("unknown model 'support'; choose one of ['english', 'multilingual', 'typed-decisions'] "
                            f"(or an alias: {ALIAS_LIST})")
    assert resolve_model_spec("ml") == (BUNDLE_REPO, "multilingual") and resolve_model_spec("nope") is None
    assert STANDALONE_MODELS["typed-decisions"] == "convaiinnovations/laya-typed-decisions"
    assert laya.Router is Router and laya.RouteDecision is RouteDecision


# ---- §4.11 route column (real detection) and hooks_timeout (R-HK-3 on the Router) -------------------------

ROUTE_EXAMPLES = [
    ("Cancel my order", "multilingual"),
    ("blorp zyx wibble quork", "multilingual"),
    ("Could you please send me the invoice again", "english"),
    ("Je voudrais annuler ma commande pour demain", "multilingual"),
    ("hittar inte kvittot", "multilingual"),
    ("LOS ANGELES EL PASO LAS VEGAS", "multilingual"),
    ("ñandú ñandú ñu", "multilingual"),
    ("Заказ не пришёл", "multilingual"),
    ("#4471-22", "multilingual"),
    ("Please email us at help@example.com about this order", "english"),
    ("Please forward this to Дмитрий Петров in accounting today", "english"),
    ("Please ask γιώργος και μαρία about the invoice before Friday", "multilingual"),
    ("Set α to 0.05 before the run", "english"),
    ("Please refund the café order today", "english"),
    ("Please refund the café order from José today", "multilingual"),
    ("東京駅の近くで財布を落としました", "multilingual"),
]


@pytest.mark.parametrize("state,model", ROUTE_EXAMPLES)
def test_published_route_examples(state, model):
    assert Router().route(state).model == model


def test_english_default_takes_the_undecided_states():
    r = Router(default="english")
    assert r.route("Cancel my order").model == "english" and r.route("#4471-22").model == "english"
    assert r.route("Заказ не пришёл").model == "multilingual"


def test_hooks_timeout_is_checked_at_construction_and_per_call():
    with pytest.raises(ValueError, match="hooks_timeout must be a positive finite number or None; got 0"):
        Router(hooks_timeout=0)
    r, _ = stub_router()
    with pytest.raises(ValueError, match="not a bool"):
        r.route("x", hooks_timeout=True)
    with pytest.raises(ValueError, match="hooks_timeout"):
        r.route_batch([{"state": "x", "questions": Q}], hooks_timeout=-1)
    with pytest.raises(ValueError, match="hooks_timeout"):
        r.predict_batch([{"state": "x", "questions": Q}], hooks_timeout=float("inf"))
    assert r.predict_batch([{"state": "x", "questions": Q}], hooks_timeout="0.5")[0]["routing"]
    assert Router(hooks_timeout="2").hooks_timeout == 2.0


def test_signatures_match_the_published_ones():
    import inspect

    def params(fn):
        return [(p.name, p.kind.name[:3], p.default) for p in list(inspect.signature(fn).parameters.values())[1:]]

    E = inspect.Parameter.empty
    assert params(Router.predict_batch) == [
        ("requests", "POS", E), ("batch_size", "POS", None), ("hooks_timeout", "POS", None),
        ("min_confidence", "POS", None), ("sort_by_length", "POS", False), ("hooks", "KEY", None),
        ("on_predict_start", "KEY", None), ("on_predict_end", "KEY", None), ("hooks_raise", "KEY", None),
        ("diagnostics", "KEY", None)]
    assert [p[0] for p in params(Router.predict)] == [
        "state", "questions", "model", "task", "lang", "lang_guess", "hooks", "on_predict_start", "on_predict_end",
        "hooks_raise", "hooks_timeout", "max_len", "head_max_len", "min_confidence"]
    assert [p[0] for p in params(Router.predict_long)] == [
        "state", "questions", "model", "task", "lang", "lang_guess", "window", "stride", "aggregate", "batch_size",
        "hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout"]
    assert Router.system_one is Router.predict


def test_an_agent_returning_no_result_is_named():
    class Quiet:
        def predict(self, state, questions, **kw):
            return None

    r = Router()
    r.attach("english", Quiet())
    with pytest.raises(TypeError, match="Quiet returned NoneType from predict"):
        r.predict("x", Q, model="en")


def test_constructor_mappings_are_checked_by_name():
    # a bad argument is a clear error naming it, not an AttributeError from deep inside (reference §1.5)
    for kwargs, text in (({"models": "abc"}, "models must be a dict of checkpoint name -> source, got str"),
                         ({"models": [("a", "b")]}, "models must be a dict of checkpoint name -> source, got list"),
                         ({"revisions": ["a"]}, "revisions must be a dict of checkpoint name -> revision"),
                         ({"revisions": {"english": 5}}, "revisions['english'] must be a revision string")):
        with pytest.raises(TypeError) as e:
            Router(**kwargs)
        assert str(e.value).startswith(text)
    assert Router(revisions={"english": " abc "}).revisions == {"english": "abc"}
