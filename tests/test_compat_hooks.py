"""compat-0.4.15 §8: laya.hooks helpers, PredictContext, timeouts and warnings, AsyncHook /
run_coroutine_sync, and the OptionStabilityHook helpers (make_variants, decide/calibrate_reliability)."""

import asyncio
import contextvars
import dataclasses
import random
import threading
import time
import types
import warnings
import zlib

import pytest

import laya
import laya.hooks as hooks
from laya.hooks import (ALL_VARIANTS, HOOK_EVENTS, VARIANT_PRESETS, AsyncHook, BaseHook, OptionStabilityHook,
                        PredictContext, aggregate_usage, calibrate_reliability, compose_hooks, decide_reliability,
                        dispatch, make_variants, normalise_hooks, run_coroutine_sync, validate_timeout)


class Audit:
    def on_predict_end(self, ctx):
        pass


def test_predict_context_fields_and_skip():
    names = [f.name for f in dataclasses.fields(PredictContext)]
    assert names == ["states", "questions", "run_id", "results", "decision", "model", "agent", "router", "max_len",
                     "head_max_len", "usage", "started_at", "elapsed_ms", "error"]
    before = time.perf_counter()
    ctx = PredictContext(["a", "b", "c"], {})
    assert before <= ctx.started_at <= time.perf_counter() and ctx.usage is None and len(ctx.run_id) == 32
    assert ctx != PredictContext(["a", "b", "c"], {}) and ctx == ctx
    one = [{"answers": {}}]
    ctx.skip(one)
    assert ctx.results is one and ctx.skipped  # stored as given
    with pytest.raises(ValueError) as e:
        ctx.skip([{}, {}])
    assert str(e.value) == ("ctx.skip() takes one result for the whole call or one per state in ctx.states (3); "
                            "got 2")


def test_normalise_hooks_messages():
    assert normalise_hooks() == [] and normalise_hooks(None) == []
    a = Audit()
    assert normalise_hooks(a) == [a] and normalise_hooks((a, a)) == [a, a]
    out = normalise_hooks([a], on_predict_start=len, on_predict_end=print)
    assert out[0] is a and out[1].on_predict_start is len and out[2].on_predict_end is print
    cases = [
        (dict(hooks=Audit), "hooks entries must be instances, not classes; got Audit. Instantiate it first."),
        (dict(hooks=[lambda ctx: None]), "hooks entries must implement at least one of on_predict_start, "
         "on_predict_end, on_route, on_load, on_evict, on_error; got function. Pass a plain callable as "
         "on_predict_start=/on_predict_end= instead."),
        (dict(hooks=types.SimpleNamespace(on_route="x")), "hooks entry SimpleNamespace.on_route must be callable, got str"),
        (dict(on_predict_start=3), "on_predict_start must be callable, got int"),
        (dict(on_predict_end="f"), "on_predict_end must be callable, got str"),
    ]
    for kwargs, text in cases:
        with pytest.raises(TypeError) as e:
            normalise_hooks(**kwargs)
        assert str(e.value) == text


def test_normalise_names_the_class_of_a_bad_event():
    class Bad:
        on_predict_end = print
        on_route = "x"

    with pytest.raises(TypeError, match=r"^hooks entry Bad\.on_route must be callable, got str$"):
        normalise_hooks(Bad())


def test_validate_timeout():
    assert validate_timeout(None) is None and validate_timeout("0.5") == 0.5 and validate_timeout(2) == 2.0
    with pytest.raises(ValueError) as e:
        validate_timeout(True)
    assert str(e.value) == "hooks_timeout must be a positive finite number or None, not a bool; got True"
    for bad, shown in ((0, "0"), (-1.5, "-1.5"), (float("inf"), "inf"), (float("nan"), "nan")):
        with pytest.raises(ValueError) as e:
            validate_timeout(bad)
        assert str(e.value) == f"hooks_timeout must be a positive finite number or None; got {shown}"
    with pytest.raises(ValueError, match="hooks_timeout"):
        validate_timeout("soon")


def test_timeout_message_and_context_variables():
    var = contextvars.ContextVar("who", default="nobody")
    seen = []

    class Slow:
        def on_predict_start(self, ctx):
            seen.append(var.get())
            time.sleep(1.0)

    var.set("caller")
    ctx = PredictContext(["s"], {})
    with pytest.raises(TimeoutError) as e:
        dispatch([Slow()], "on_predict_start", ctx, timeout=0.1)
    assert str(e.value) == "laya: hook test_timeout_message_and_context_variables.<locals>.Slow.on_predict_start exceeded 0.1s"
    assert seen == ["caller"]


def test_failing_hook_warning_text_and_awaitables():
    class Boom:
        def on_predict_end(self, ctx):
            raise RuntimeError("kaput")

    class Coro:
        async def on_predict_end(self, ctx):
            await asyncio.sleep(0)
            ctx.results = ["awaited"]

    ctx = PredictContext(["s"], {})
    with pytest.warns(RuntimeWarning) as caught:
        dispatch([Boom()], "on_predict_end", ctx, raise_errors=False)
    assert str(caught[0].message) == "laya: hook Boom.on_predict_end failed: kaput"
    with pytest.raises(RuntimeError, match="kaput"):
        dispatch([Boom()], "on_predict_end", ctx)
    dispatch([Coro()], "on_predict_end", ctx)
    assert ctx.results == ["awaited"]


def test_dispatch_broadcasts_one_skipped_result():
    class Cache:
        def on_predict_start(self, ctx):
            ctx.results = [{"cached": True}]  # set directly, not through skip()

    ctx = PredictContext(["a", "b"], {})
    dispatch([Cache()], "on_predict_start", ctx)
    assert ctx.skipped and ctx.results == [{"cached": True}, {"cached": True}]


def test_agent_timeout_validated_at_construction_and_per_call(agent):
    with pytest.raises(ValueError, match="hooks_timeout must be a positive finite number or None; got 0"):
        agent.predict("hello", {"u": {"type": "noul", "instructions": "x"}}, hooks_timeout=0)
    with pytest.raises(ValueError, match="not a bool"):
        agent.predict_batch(["hello"], {"u": {"type": "noul", "instructions": "x"}}, hooks_timeout=True)
    assert agent.predict("hello", {"u": {"type": "noul", "instructions": "x"}}, hooks_timeout="5")


def test_async_hook_and_run_coroutine_sync():
    with pytest.raises(TypeError) as e:
        AsyncHook(Audit)
    assert str(e.value) == "AsyncHook wraps an instance, not a class; got Audit"
    with pytest.raises(TypeError):
        AsyncHook(object())

    async def answer():
        await asyncio.sleep(0)
        return 42

    assert run_coroutine_sync(answer()) == 42

    async def inside():
        return run_coroutine_sync(answer())  # a loop runs in this thread: a background loop runs it

    assert asyncio.run(inside()) == 42
    stopped = asyncio.new_event_loop()
    coro = answer()
    with pytest.raises(ValueError, match="^run_coroutine_sync: the loop passed is not running$"):
        run_coroutine_sync(coro, loop=stopped)
    assert coro.cr_frame is None  # closed: no "never awaited" warning
    stopped.close()

    async def same_loop():
        c = answer()
        with pytest.raises(ValueError, match="^run_coroutine_sync: the loop passed is not running$"):
            run_coroutine_sync(c, loop=asyncio.get_running_loop())
        return c.cr_frame is None

    assert asyncio.run(same_loop())
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        assert run_coroutine_sync(answer(), loop=loop) == 42
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_module_names_and_composition():
    assert HOOK_EVENTS == ("on_predict_start", "on_predict_end", "on_route", "on_load", "on_evict", "on_error")
    assert hooks.HookArg is not None and hooks.PredictHookArg is not None
    for name in ("set_default_hooks", "add_default_hook", "clear_default_hooks", "default_hooks"):
        assert callable(getattr(hooks, name))
        assert name not in laya.__all__
    for name in ("set_default_hooks", "add_default_hook", "clear_default_hooks"):
        assert not hasattr(laya, name)
    assert aggregate_usage([{"usage": {"input_tokens": 3, "output_tokens": 1}}, {"usage": {"input_tokens": 2}}, {}]) \
        == {"input_tokens": 5, "output_tokens": 1}
    default, installed, per_call = Audit(), Audit(), Audit()
    hooks.set_default_hooks(default)
    try:
        assert hooks.default_hooks() == [default]
        out = compose_hooks([installed], per_call, on_predict_end=print)
        assert out[:3] == [default, installed, per_call] and out[3].on_predict_end is print
    finally:
        hooks.clear_default_hooks()
    assert compose_hooks([installed]) == [installed]


# ---- OptionStabilityHook helpers ----------------------------------------------------------------------


def test_variant_constants():
    assert ALL_VARIANTS == ("reversed", "shuffle1", "shuffle2", "shuffle3", "letters", "letters_reversed",
                            "letters_shuffle")
    assert VARIANT_PRESETS == {"full": None, "fast": ("reversed", "letters_reversed")}
    assert issubclass(OptionStabilityHook, BaseHook) and hooks.OptionStabilityHook is OptionStabilityHook


def test_make_variants_order_and_draws():
    labels = ["a", "b", "c", "d"]
    rng = random.Random(zlib.crc32("key|q".encode("utf-8")))
    shuffles = []
    for _ in range(4):
        order = [0, 1, 2, 3]
        rng.shuffle(order)
        shuffles.append(order)
    out = make_variants(labels, "key|q")
    expected = [("original", [0, 1, 2, 3], False), ("reversed", [3, 2, 1, 0], False),
                ("shuffle1", shuffles[0], False), ("shuffle2", shuffles[1], False), ("shuffle3", shuffles[2], False),
                ("letters", [0, 1, 2, 3], True), ("letters_reversed", [3, 2, 1, 0], True),
                ("letters_shuffle", shuffles[3], True)]
    seen, unique = set(), []
    for v in expected:
        if (tuple(v[1]), v[2]) not in seen:
            seen.add((tuple(v[1]), v[2]))
            unique.append(v)
    assert out == unique
    assert [v[0] for v in make_variants(labels, "k", include=("letters", "reversed"))] == ["original", "reversed", "letters"]
    assert [v[0] for v in make_variants(labels, "k", relabel=False, n_shuffles=0)] == ["original", "reversed"]
    assert [v[0] for v in make_variants(labels, "k", reorder=False)][:3] == ["original", "letters", "letters_reversed"]
    assert all(not v[2] for v in make_variants([str(i) for i in range(27)], "k"))  # > 26 labels: no relabel
    two = make_variants(["x", "y"], "k", n_shuffles=3)
    assert len({(tuple(o), r) for _, o, r in two}) == len(two)  # duplicates dropped


def test_decide_reliability():
    assert decide_reliability(0.9, None) is None
    assert decide_reliability(0.8, 0.8) == "ACCEPT" and decide_reliability(0.79, 0.8) == "VERIFY"
    assert decide_reliability(0.2, 0.8, 0.3) == "ESCALATE" and decide_reliability(0.3, 0.8, 0.3) == "VERIFY"


def test_calibrate_reliability():
    scores = [0.1, 0.2, 0.3, 0.6, 0.8, 0.9, 0.95]
    correct = [False, False, True, True, True, True, True]
    # >= 0.3: 5/5 right -> accept 0.3 (0.2 gives 5/6 < 0.9); below 0.3: [0.1, 0.2] 0/2 right; highest such: 0.2
    assert calibrate_reliability(scores, correct) == (0.3, 0.2)
    assert calibrate_reliability([0.5, 0.6], [False, False]) == (1.01, 0.6)
    assert calibrate_reliability([0.5], [True], target_accuracy=1.0) == (0.5, 0.0)
    for args, error in [(([0.5], [True, False]), ValueError), (([], []), ValueError), (([1.5], [True]), ValueError),
                        (([float("nan")], [True]), ValueError), (([True], [True]), ValueError),
                        (([0.5], [1]), TypeError)]:
        with pytest.raises(error):
            calibrate_reliability(*args)
    with pytest.raises(ValueError):
        calibrate_reliability([0.5], [True], target_accuracy=2)
    with pytest.raises(ValueError):
        calibrate_reliability([0.5], [True], max_escalate_accuracy=-0.1)


def test_parallel_layout_probes_rename_only():
    q = {"c": {"type": "choice", "instructions": "x", "criteria": ["a", "b", "c"]}}
    parallel = types.SimpleNamespace(cfg={"option_layout": "parallel"})
    ctx = PredictContext(["s"], q, agent=parallel)
    OptionStabilityHook(accept=0.5, escalate=None).on_predict_start(ctx)
    assert all(set(d["criteria"]) <= {"A", "B", "C"} for qid, d in ctx.questions.items() if qid != "c")
    ctx.results = [{"answers": {qid: {"type": "choice", "choice": "A" if qid != "c" else "a",
                                      "probabilities": {"A": 1.0} if qid != "c" else {"a": 1.0}}
                                for qid in ctx.questions}}]
    hook = OptionStabilityHook(accept=0.5, escalate=None, relabel=False)
    none = PredictContext(["s"], q, agent=parallel)
    hook.on_predict_start(none)
    assert list(none.questions) == ["c"]  # parallel without relabel: no probe at all


def test_option_stability_end_to_end_decisions(agent):
    q = {"c": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech", "sales"]}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = agent.predict("my invoice is wrong", q, hooks=OptionStabilityHook(accept=None, escalate=None))
    rel = r["answers"]["c"]["reliability"]
    assert rel["decision"] is None and rel["probes"] == ["reorder", "rename"] and rel["n_variants"] >= 2
    always = agent.predict("x", q, hooks=OptionStabilityHook(accept=0.0, escalate=None))
    assert always["answers"]["c"]["reliability"]["decision"] == "ACCEPT"
    never = agent.predict("x", q, hooks=OptionStabilityHook(accept=1.01, escalate=1.0))
    assert never["answers"]["c"]["reliability"]["decision"] == "ESCALATE"
