"""Public hook classes: BaseHook / Hook / PredictHook subclasses, AsyncHook, OptionStabilityHook."""

import asyncio
import threading
import time

import pytest

import laya
from laya.hooks import EVENTS, AsyncHook, BaseHook, Hook, OptionStabilityHook, PredictContext, PredictHook

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
    "team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech", "sales", "hr", "legal"]},
    "single": {"type": "choice", "instructions": "Pick one", "criteria": ["only"]},
}
STATES = ["I want my money back for order 1234.", {"message": "The app crashes on login"}, "Thanks, all good now."]


# ---- base classes ------------------------------------------------------------------------------------


def test_base_classes_shape():
    assert Hook is BaseHook and issubclass(BaseHook, PredictHook)
    for event in EVENTS:
        assert getattr(BaseHook(), event)(PredictContext([], {})) is None
    assert {e for e in EVENTS if hasattr(PredictHook, e)} == {"on_predict_start", "on_predict_end", "on_error"}


def test_base_hook_subclass_overrides_one_event(agent):
    class Tag(BaseHook):
        def on_predict_end(self, ctx):
            ctx.results = [{**r, "tag": "seen"} for r in ctx.results]

    plain = agent.predict(STATES[0], QUESTIONS)
    r = agent.predict(STATES[0], QUESTIONS, hooks=Tag())
    assert r.pop("tag") == "seen" and r == plain
    with agent.hooks_installed(Tag()):
        assert agent.predict_batch(STATES, QUESTIONS)[2]["tag"] == "seen"


def test_predict_hook_subclass_rewrites_questions(agent):
    class OnlyIntent(PredictHook):
        def on_predict_start(self, ctx):
            ctx.questions = {"intent": ctx.questions["intent"]}

    r = agent.predict(STATES[0], QUESTIONS, hooks=OnlyIntent())
    assert list(r["answers"]) == ["intent"]
    assert r["answers"]["intent"] == agent.predict(STATES[0], QUESTIONS)["answers"]["intent"]


# ---- AsyncHook ---------------------------------------------------------------------------------------


class AsyncTagger:
    def __init__(self):
        self.threads = []

    async def on_predict_end(self, ctx):
        await asyncio.sleep(0)
        self.threads.append(threading.current_thread().name)
        ctx.results = [{**r, "async_tag": len(ctx.results)} for r in ctx.results]


class AsyncBoom:
    async def on_predict_start(self, ctx):
        await asyncio.sleep(0)
        raise RuntimeError("async boom")


def test_async_hook_rewrites_results_on_private_loop(agent):
    inner = AsyncTagger()
    hook = AsyncHook(inner)
    assert callable(hook.on_predict_end) and not hasattr(hook, "on_predict_start")
    try:
        out = agent.predict_batch(STATES, QUESTIONS, hooks=hook)
        assert [r.pop("async_tag") for r in out] == [3, 3, 3]
        assert out == agent.predict_batch(STATES, QUESTIONS)
        assert inner.threads == ["laya-async-hook"]
    finally:
        hook.close()


def test_async_hook_runs_on_given_running_loop(agent):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="callers-loop", daemon=True)
    thread.start()
    inner = AsyncTagger()
    try:
        r = agent.predict(STATES[1], QUESTIONS, hooks=AsyncHook(inner, loop=loop))
        assert r["async_tag"] == 1 and inner.threads == ["callers-loop"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_async_hook_called_from_inside_a_running_loop(agent):
    inner = AsyncTagger()

    async def caller():
        # predict is synchronous: called from a coroutine, the hook must not wait on this very loop
        return agent.predict(STATES[0], QUESTIONS, hooks=AsyncHook(inner, loop=asyncio.get_running_loop()))

    assert asyncio.run(caller())["async_tag"] == 1 and inner.threads == ["laya-async-hook"]


def test_async_hook_exceptions(agent):
    with pytest.raises(RuntimeError, match="async boom"):
        agent.predict(STATES[0], QUESTIONS, hooks=AsyncHook(AsyncBoom()), hooks_raise=True)
    with pytest.warns(RuntimeWarning, match=r"^laya: hook AsyncHook\.on_predict_start failed: async boom"):
        r = agent.predict(STATES[0], QUESTIONS, hooks=AsyncHook(AsyncBoom()), hooks_raise=False)
    assert r == agent.predict(STATES[0], QUESTIONS)


def test_async_hook_sync_methods_and_timeout(agent):
    class Mixed:
        def on_predict_start(self, ctx):
            ctx.questions = {"urgent": ctx.questions["urgent"]}

        async def on_predict_end(self, ctx):
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError, match=r"^laya: hook AsyncHook\.on_predict_end exceeded 0\.2s$"):
        agent.predict(STATES[0], QUESTIONS, hooks=AsyncHook(Mixed()), hooks_raise=True, hooks_timeout=0.2)


def test_async_hook_refuses_non_hooks():
    with pytest.raises(TypeError, match="hook methods"):
        AsyncHook(object())
    with pytest.raises(TypeError, match="event loop"):
        AsyncHook(AsyncTagger(), loop="nope")


# ---- OptionStabilityHook (compat-0.4.15 R-HK-6: the published design replaced ours; the tests of the
# earlier agreement/mean_prob block now pin the published reliability block) -----------------------------

RELIABILITY_KEYS = ["probes", "option_layout", "decision", "soft_stability", "stability", "reorder_stability",
                    "rename_stability", "n_variants", "distinct_choices", "variant_choices", "variant_support"]


def _without_reliability(result):
    return {**result, "answers": {q: {k: v for k, v in a.items() if k != "reliability"}
                                  for q, a in result["answers"].items()}}


@pytest.mark.parametrize("variants", ["full", "fast", ["reversed", "letters"]])
def test_option_stability_structure(agent, variants):
    hook = OptionStabilityHook(accept=0.8, escalate=0.4, seed=3, variants=variants)
    caller_questions = {q: dict(d) for q, d in QUESTIONS.items()}
    out = agent.predict_batch(STATES, caller_questions, hooks=hook)
    assert caller_questions == QUESTIONS  # the caller's dict is not rewritten
    plain = agent.predict_batch(STATES, QUESTIONS)
    for r, p in zip(out, plain):
        assert list(r["answers"]) == list(QUESTIONS)  # no variant ids, original order
        for qid, a in r["answers"].items():
            if a["type"] != "choice":
                assert "reliability" not in a
                continue
            rel = a["reliability"]
            assert list(rel) == RELIABILITY_KEYS
            if qid == "single":
                assert rel["probes"] == [] and rel["decision"] is None and rel["soft_stability"] is None
                continue
            assert rel["probes"] == ["reorder", "rename"] and rel["option_layout"] == "sequential"
            assert 0.0 <= rel["soft_stability"] <= 1.0 and 0.0 <= rel["stability"] <= 1.0
            assert rel["decision"] == ("ACCEPT" if rel["soft_stability"] >= 0.8 else
                                       "ESCALATE" if rel["soft_stability"] < 0.4 else "VERIFY")
            assert rel["variant_choices"]["original"] == a["choice"] and rel["n_variants"] == len(rel["variant_choices"])
            assert rel["soft_stability"] == pytest.approx(sum(rel["variant_support"].values()) / rel["n_variants"])
            if variants == "fast":
                assert set(rel["variant_choices"]) == {"original", "reversed", "letters_reversed"}
        # the probes leave the original answers exactly as a plain predict gives them
        assert _without_reliability(r)["answers"] == p["answers"]
        assert r["usage"]["input_tokens"] > p["usage"]["input_tokens"]  # the variant rows ran
        assert {k: v for k, v in r["usage"].items() if k != "input_tokens"} == \
            {k: v for k, v in p["usage"].items() if k != "input_tokens"}


def test_option_stability_is_seeded(agent):
    def run(seed):
        return agent.predict_batch(STATES, QUESTIONS, hooks=OptionStabilityHook(accept=0.9, escalate=0.5, seed=seed))

    assert run(11) == run(11)

    def variant_defs(seed, state="s"):
        ctx = PredictContext(states=[state], questions=QUESTIONS)
        OptionStabilityHook(accept=0.9, escalate=0.5, seed=seed).on_predict_start(ctx)
        return {q: d for q, d in ctx.questions.items() if q not in QUESTIONS}

    assert variant_defs(11) == variant_defs(11)
    assert variant_defs(11) != variant_defs(12)  # 5 options: the shuffles differ
    assert variant_defs(None, "one state") == variant_defs(None, "one state")  # keyed by the single state
    assert variant_defs(None, "one state") != variant_defs(None, "another state")


def test_option_stability_variants_answered_in_same_forward(agent, monkeypatch):
    calls = []
    infer = agent._infer

    def counting(batch):
        calls.append(batch)
        return infer(batch)

    monkeypatch.setattr(agent, "_infer", counting)
    hook = OptionStabilityHook(accept=0.7, escalate=0.3, seed=0, probes="reorder", n_shuffles=2)
    r = agent.predict(STATES[0], {"team": QUESTIONS["team"], "urgent": QUESTIONS["urgent"]}, hooks=hook)
    assert len(calls) == 1 and len(calls[0].rows) == 2 + 3  # original rows + reversed, shuffle1, shuffle2
    assert "reliability" in r["answers"]["team"] and "reliability" not in r["answers"]["urgent"]
    rel = r["answers"]["team"]["reliability"]
    assert rel["probes"] == ["reorder"] and rel["rename_stability"] is None and rel["n_variants"] == 4


def test_option_stability_sees_probes_only_inside(agent):
    seen = {}

    class Spy(BaseHook):
        def on_predict_start(self, ctx):
            seen["start"] = list(ctx.questions)

        def on_predict_end(self, ctx):
            seen["end"] = list(ctx.results[0]["answers"])

    # start hooks after the stability hook see the variants; end hooks after it see the cleaned results
    agent.predict(STATES[0], QUESTIONS, hooks=[OptionStabilityHook(accept=0.5, escalate=0.5, seed=1), Spy()])
    assert any("::rel" in str(q) for q in seen["start"]) and seen["start"][:len(QUESTIONS)] == list(QUESTIONS)
    assert seen["end"] == list(QUESTIONS)


def test_option_stability_reliability_arithmetic():
    hook = OptionStabilityHook(accept=0.6, escalate=0.3, seed=0, n_shuffles=0, probes="reorder")
    q = {"c": {"type": "choice", "instructions": "x", "criteria": ["a", "b", "c"]}}
    ctx = PredictContext(states=["s"], questions=q)
    hook.on_predict_start(ctx)
    assert list(ctx.questions) == ["c", "c::rel1"]
    assert ctx.questions["c::rel1"]["criteria"] == ["c", "b", "a"]  # reversed

    def ans(choice, probs, labels="abc"):
        return {"type": "choice", "choice": choice, "probabilities": dict(zip(labels, probs))}

    ctx.results = [{"model": "m", "answers": {"c": ans("a", [0.5, 0.3, 0.2]),
                                              "c::rel1": ans("b", [0.1, 0.6, 0.3], "cba")},
                    "usage": {"input_tokens": 40, "output_tokens": 0, "truncated": True,
                              "truncated_questions": ["c", "c::rel1"], "options": {"c::rel1": {"total": 3}}}}]
    hook.on_predict_end(ctx)
    r = ctx.results[0]
    assert list(r["answers"]) == ["c"]
    assert r["answers"]["c"]["reliability"] == {
        "probes": ["reorder"], "option_layout": "sequential", "decision": "VERIFY", "soft_stability": 0.4,
        "stability": 0.0, "reorder_stability": 0.0, "rename_stability": None, "n_variants": 2,
        "distinct_choices": ["a", "b"], "variant_choices": {"original": "a", "reversed": "b"},
        "variant_support": {"original": 0.5, "reversed": 0.3}}
    assert r["usage"] == {"input_tokens": 40, "output_tokens": 0, "truncated": True, "truncated_questions": ["c"]}


def test_option_stability_relabel_maps_back():
    hook = OptionStabilityHook(accept=0.5, escalate=None, probes="rename", variants=["letters_reversed"])
    q = {"c": {"type": "choice", "instructions": "x", "criteria": {"refund": "money back", "bug": " "}}}
    ctx = PredictContext(states=["s"], questions=q)
    hook.on_predict_start(ctx)
    assert ctx.questions["c::rel1"]["criteria"] == {"A": "bug", "B": "money back"}  # blank description -> label
    ctx.results = [{"answers": {"c": {"type": "choice", "choice": "bug", "probabilities": {"refund": 0.4, "bug": 0.6}},
                                "c::rel1": {"type": "choice", "choice": "A", "probabilities": {"A": 0.7, "B": 0.3}}},
                    "usage": {"input_tokens": 1}}]
    hook.on_predict_end(ctx)
    rel = ctx.results[0]["answers"]["c"]["reliability"]
    assert rel["variant_choices"] == {"original": "bug", "letters_reversed": "bug"}
    assert rel["variant_support"] == {"original": 0.6, "letters_reversed": 0.7}
    assert rel["soft_stability"] == pytest.approx(0.65) and rel["decision"] == "ACCEPT"
    assert rel["rename_stability"] == 1.0 and rel["reorder_stability"] is None


def test_option_stability_rename_limit_and_reserved_ids():
    hook = OptionStabilityHook(accept=0.5, escalate=0.5, seed=0, rename_max_options=2)
    ctx = PredictContext(states=["s"], questions={"c": {"type": "choice", "instructions": "x", "criteria": ["a", "b", "c"]}})
    hook.on_predict_start(ctx)
    assert all(isinstance(d["criteria"], list) for q, d in ctx.questions.items())  # 3 options > 2: no rename
    bad = PredictContext(states=["s"], questions={"a::rel1": {"type": "noul", "instructions": "x"}})
    with pytest.raises(ValueError, match=r"^question id 'a::rel1' must not contain '::rel'$"):
        hook.on_predict_start(bad)


def test_option_stability_validation():
    with pytest.raises(TypeError):
        OptionStabilityHook()  # accept and escalate are required
    ok = dict(accept=0.5, escalate=0.1)
    for kwargs, error in [
        (dict(accept=0.3, escalate=0.6), ValueError), (dict(accept=1.5, escalate=0.1), ValueError),
        (dict(accept=True, escalate=0.1), ValueError), (dict(accept=float("nan"), escalate=None), ValueError),
        (dict(accept=0.5, escalate=1.01), ValueError), ({**ok, "n_shuffles": -1}, ValueError),
        ({**ok, "n_shuffles": 1.5}, ValueError), ({**ok, "relabel": 1}, TypeError),
        ({**ok, "rename_max_options": 1}, ValueError), ({**ok, "variants": "some"}, ValueError),
        ({**ok, "variants": []}, ValueError), ({**ok, "variants": ["shuffle9"]}, ValueError),
        ({**ok, "variants": 3}, TypeError), ({**ok, "probes": "x"}, ValueError), ({**ok, "probes": []}, ValueError),
        ({**ok, "probes": ["reorder", "other"]}, ValueError), ({**ok, "probes": 3}, TypeError),
    ]:
        with pytest.raises(error):
            OptionStabilityHook(**kwargs)
    OptionStabilityHook(accept=1.01, escalate=1.0, n_shuffles=0, probes="all", variants=("letters",))
    OptionStabilityHook(accept=None, escalate=None, probes="auto")


def test_option_stability_cache_skip_passes_through(agent):
    cached = agent.predict(STATES[0], QUESTIONS)

    class Cache(BaseHook):
        def on_predict_start(self, ctx):
            ctx.skip([cached])

    r = agent.predict(STATES[0], QUESTIONS, hooks=[Cache(), OptionStabilityHook(accept=0.5, escalate=0.2, seed=0)])
    assert r == cached


def test_public_names_importable_without_torch():
    import subprocess
    import sys

    code = ("import sys, laya.hooks as h, laya.email as e; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "[getattr(h, n) for n in ('AsyncHook', 'BaseHook', 'Hook', 'OptionStabilityHook', 'PredictHook')]; "
            "[getattr(e, n) for n in ('clean_email_body', 'email_state')]")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert laya is not None


def test_async_hooks_share_one_loop_thread(agent):
    """Wrappers made per call cost no thread: every AsyncHook without a caller loop uses one daemon loop."""
    class Tag:
        async def on_predict_end(self, ctx):
            ctx.results[0]["tag"] = 1

    for _ in range(5):
        assert agent.predict(STATES[0], QUESTIONS, hooks=AsyncHook(Tag()))["tag"] == 1
    assert sum(t.name == "laya-async-hook" for t in threading.enumerate()) == 1


def test_async_hook_on_a_stopped_loop_raises_instead_of_hanging():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    class Slow:
        async def on_predict_end(self, ctx):
            await asyncio.sleep(30)

    hook = AsyncHook(Slow(), loop=loop)
    threading.Timer(0.2, lambda: loop.call_soon_threadsafe(loop.stop)).start()
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="stopped before the hook finished"):
        hook.on_predict_end(object())
    assert time.perf_counter() - started < 5
    thread.join(timeout=5)
    pending = asyncio.all_tasks(loop)  # the abandoned coroutine: cancel it before closing the loop
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


def test_option_stability_fired_twice_in_one_call_probes_once(agent):
    """The same instance as a process default and a per-call hook: one set of probes, none leak."""
    hook = OptionStabilityHook(accept=0.8, escalate=0.4, seed=3)
    laya.hooks.add_default_hook(hook)
    try:
        out = agent.predict(STATES[0], QUESTIONS, hooks=hook)
    finally:
        laya.hooks.clear_default_hooks()
    once = agent.predict(STATES[0], QUESTIONS, hooks=hook)
    assert list(out["answers"]) == list(QUESTIONS)
    assert out == once
