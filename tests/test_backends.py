"""The backend layer on the CPU: names, auto, buckets, padding, fallback, switching, compile rules."""

import os
import threading
import time
import warnings

import pytest
import torch

import laya
from laya import backends
from laya.backends.base import Backend, BackendUnavailable, bucket_rows, bucket_tokens, pad_batch

QUESTIONS = {"q": {"type": "choice", "instructions": "Which?", "criteria": ["a", "b", "c"]},
             "n": {"type": "noul", "instructions": "Urgent?"}}


@pytest.fixture()
def fresh(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cpu")


def test_names_and_aliases():
    assert backends.NAMES == ("auto", "eager", "compile", "tilelang", "onnx")  # spec §5.1, exactly
    assert backends.EXTRA_NAMES == ("aoti",) and "aoti" not in backends.NAMES
    assert set(backends.known_names()) == set(backends.NAMES) | set(backends.EXTRA_NAMES)
    for given, want in [(None, "eager"), (" Fast ", "tilelang"), ("torch", "eager"), ("torch.compile", "compile"),
                        ("inductor", "compile"), ("AUTO", "auto")]:
        assert backends.normalise(given) == want
    with pytest.raises(ValueError, match=r"unknown backend 'tensorrt'; use one of auto, eager, compile, tilelang, aoti, onnx"):
        backends.normalise("tensorrt")


def test_auto_is_eager_on_cpu(fresh):
    assert backends.auto_policy(fresh) == "eager"
    assert fresh.set_backend("auto") == "eager" and fresh.backend == "eager"


def test_a_refused_backend_request_keeps_the_working_backend(fresh):
    # a typo in an option, or a bad option value, is an error naming it; the backend in use stays
    fresh.set_backend("eager")
    working, before = fresh.predict("x", QUESTIONS), fresh.backend_object
    with pytest.raises(TypeError, match=r"^backend 'eager' takes no option 'bogus'; its options: none$"):
        fresh.set_backend("eager", bogus=1)
    with pytest.raises(TypeError, match=r"^backend 'compile' takes no option 'moed'; its options: mode, warmup$"):
        fresh.set_backend("compile", moed="default")
    assert fresh.backend_object is before  # refused before anything was detached
    with pytest.raises(ValueError, match="compile_mode 'max'"):
        fresh.set_backend("compile", mode="max")
    restored = fresh.backend_object  # refused while installing: the previous request is installed again
    assert type(restored).__name__ == "EagerBackend" and restored is not before
    assert fresh.backend == "eager" and fresh.predict("x", QUESTIONS) == working


def test_a_failed_restore_warns_and_keeps_the_callers_error(fresh, monkeypatch):
    fresh.set_backend("eager")

    def refuse(*args, **kwargs):
        raise RuntimeError("no memory")

    monkeypatch.setattr(backends, "install", refuse)
    with pytest.warns(RuntimeWarning, match="previous backend 'eager' could not be restored \\(no memory\\)"):
        with pytest.raises(RuntimeError, match="^no memory$"):
            fresh.set_backend("eager")
    assert fresh.backend_object is None


@pytest.mark.parametrize("rows,tokens,max_len,want", [(1, 5, None, (1, 16)), (3, 70, None, (4, 80)),
                                                      (5, 256, None, (8, 256)), (2, 257, None, (2, 320)),
                                                      (1, 1000, 512, (1, 512)), (16, 16, None, (16, 16))])
def test_buckets(rows, tokens, max_len, want):
    assert (bucket_rows(rows), bucket_tokens(tokens, max_len)) == want


def test_padding_rows_stay_finite_and_real_rows_unchanged(fresh):
    from laya.questions import check_questions
    from laya.sequence import collate
    rows = [r for s in ("refund me", "the app is broken and crashes") for r in fresh._rows(s, False, check_questions(QUESTIONS), 512, 192)[1]]
    batch = collate(rows[:3], 0)
    (ids, mask, pos, live, qt), (n, length) = pad_batch(*batch.tensors(), max_len=512, keep_one_token=True)
    assert ids.shape == (4, 32) and (n, length) == (3, batch.input_ids.shape[1])
    assert mask[3].tolist() == [1] + [0] * 31 and live[3].tolist() == [True, False, False] and qt[3] == 0
    with torch.no_grad():
        logits, act = fresh.model(ids, mask, pos, live, qt)
        ref, ref_act = fresh.model(*batch.tensors())
    assert torch.isfinite(logits).all() and torch.isfinite(act).all()
    torch.testing.assert_close(logits[:3], ref, atol=1e-4, rtol=0)  # token padding only reorders sums
    (_, empty_mask, *_), _ = pad_batch(*batch.tensors(), max_len=512)
    assert empty_mask[3].sum() == 0


def test_unavailable_backend_warns_once_and_strict_raises(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh.set_backend("compile") == "eager"
    assert [str(w.message) for w in caught] == [
        "laya: backend 'compile' is unavailable (it is CUDA-only, the agent runs on cpu (compile=True still "
        "compiles on the CPU)); using the eager forward instead."]
    with pytest.raises(BackendUnavailable, match="CUDA"):
        fresh.set_backend("tilelang", strict=True)
    with pytest.warns(RuntimeWarning, match="backend 'tilelang' is unavailable"):
        assert fresh.accelerate() is False and fresh.backend == "eager"
    with pytest.raises(BackendUnavailable, match="separate|own agent"):
        fresh.set_backend("onnx", strict=True)


class SlowBackend(Backend):
    name = "slow"
    installs = 0

    def _install(self):
        SlowBackend.installs += 1

    def forward(self, *args, **kwargs):
        time.sleep(0.4)
        self.finished = time.perf_counter()
        return self.stock_forward(*args, **kwargs)


@pytest.fixture()
def slow_registered(monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, "slow", f"{__name__}:SlowBackend")
    return SlowBackend


def test_custom_backend_install_uninstall_idempotent(fresh, slow_registered):
    before = fresh.predict("hello", QUESTIONS)
    assert fresh.set_backend("slow") == "slow" and fresh.backend_object.installed
    obj = fresh.backend_object
    obj.install()
    assert SlowBackend.installs >= 1 and fresh.model.forward == obj.forward
    assert fresh.predict("hello", QUESTIONS) == before
    assert fresh.warmup(shapes=((1, 16, 2),)) > 0
    fresh.deaccelerate()
    obj.uninstall()
    assert fresh.backend == "eager" and fresh.backend_object is None and "forward" not in fresh.model.__dict__


def test_switching_waits_for_inference_in_flight(fresh, slow_registered):
    fresh.set_backend("slow")
    obj = fresh.backend_object
    worker = threading.Thread(target=fresh.predict, args=("hello", QUESTIONS))
    worker.start()
    time.sleep(0.1)  # the slow forward is now running
    fresh.set_backend("eager")
    switched = time.perf_counter()
    worker.join()
    assert obj.finished <= switched and fresh.backend == "eager"


def test_compile_mode_validation(tiny_checkpoint):
    with pytest.raises(ValueError, match="compile_mode 'max-autotune' is not supported"):
        laya.load(tiny_checkpoint, device="cpu", compile=True, compile_mode="max-autotune", compile_warmup=False)


def test_compile_cache_environment_rules(tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    laya.load(tiny_checkpoint, device="cpu", compile=False, compile_cache=True)
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # eager loads leave the environment alone
    agent = laya.load(tiny_checkpoint, device="cpu", compile=True, compile_cache=True, compile_warmup=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "xdg" / "laya" / "torchinductor")
    assert os.path.isdir(os.environ["TORCHINDUCTOR_CACHE_DIR"]) and agent.backend == "compile"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")
    laya.load(tiny_checkpoint, device="cpu", compile=True, compile_cache=True, compile_warmup=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "home" / ".cache" / "laya" / "torchinductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    laya.load(tiny_checkpoint, device="cpu", compile=True, compile_cache=True, compile_warmup=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")  # an existing setting wins
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what importing torch._dynamo leaves
    laya.load(tiny_checkpoint, device="cpu", compile=True, compile_cache=True, compile_warmup=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "home" / ".cache" / "laya" / "torchinductor")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    with pytest.raises(OSError):
        laya.load(tiny_checkpoint, device="cpu", compile=True, compile_cache=True, compile_warmup=False)


def test_explicit_backend_wins_over_legacy_flags(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu", compile=True, backend="eager", compile_warmup=False)
    assert agent.backend == "eager" and not agent._compiled


def test_dynamo_one_graph_for_many_shapes(fresh):
    """Independent dims: eight shapes, one dynamo graph, outputs within 1e-4 of eager."""
    from laya.compiled import independent_dims

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    model = fresh.model
    compiled = torch.compile(model, dynamic=True, backend=counting_backend)
    gen = torch.Generator().manual_seed(1234)
    for rows, tokens, markers in [(4, 40, 4), (4, 57, 4), (3, 70, 4), (5, 33, 2), (2, 90, 3), (8, 130, 5),
                                  (6, 61, 6), (7, 45, 3)]:
        ids = torch.randint(1000, 20000, (rows, tokens), generator=gen)
        mask = torch.ones(rows, tokens, dtype=torch.long)
        mask[0, tokens // 2:] = 0
        pos = torch.arange(1, markers + 1).repeat(rows, 1)
        live = torch.ones(rows, markers, dtype=torch.bool)
        qtype = torch.randint(0, 3, (rows,), generator=gen)
        with torch.no_grad(), independent_dims():
            got = compiled(ids, mask, pos, live, qtype)
        with torch.no_grad():
            want = model(ids, mask, pos, live, qtype)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=0)
    assert len(graphs) == 1


def test_compile_backend_gives_one_row_batches_the_many_row_graph(fresh):
    """1-row and 1-block (<= 16 tokens) batches are padded to 2, so the compile backend traces one Dynamo graph."""
    from laya.backends.compile import MIN_BLOCKS, MIN_ROWS, CompileBackend
    from laya.backends.base import TOKEN_ALIGN
    from laya.questions import check_questions
    from laya.sequence import collate

    graphs, rows_seen = [], []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def recording(ids16, *rest):
        rows_seen.append(tuple(ids16.shape[:2]))
        return compiled(ids16, *rest)

    torch._dynamo.reset()
    backend = CompileBackend(fresh, mode="default", warmup=False)
    backend.max_len = 512
    compiled = torch.compile(backend._aligned_forward, dynamic=True, backend=counting_backend)
    backend.compiled = recording
    all_rows = [r for t in ("refund me", "the app crashes on login", "hello, is anyone there?")
                for r in fresh._rows(t, False, check_questions(QUESTIONS), 512, 192)[1]]
    short = {"q": {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]}}
    all_rows += fresh._rows("hi", False, check_questions(short), 512, 192)[1]
    sizes = []
    hi = len(all_rows) - 1
    for rows in ([0], [0, 1, 2], [2], [hi], [hi, hi]):
        batch = collate([all_rows[i] for i in rows], 0)
        sizes.append(tuple(batch.input_ids.shape))
        with torch.no_grad():
            got = backend.forward(*batch.tensors())
            want = fresh.model(*batch.tensors())
        for g, w in zip(got, want):
            assert g.shape == w.shape
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-5)  # token padding reorders sums of ~100s
    assert [n for n, _ in sizes] == [1, 3, 1, 1, 2] and sizes[3][1] <= TOKEN_ALIGN  # "hi": one block of tokens
    assert [n for n, _ in rows_seen] == [MIN_ROWS, 4, MIN_ROWS, MIN_ROWS, 2]
    assert min(b for _, b in rows_seen) == MIN_BLOCKS and len(graphs) == 1


def test_compile_settings_global_fallback_restores_once(monkeypatch):
    """Where torch's config patches are global, overlapping forwards (exiting out of order) restore both
    settings only when the last one leaves."""
    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config

    import laya.backends.compile as compile_backend

    monkeypatch.setattr(compile_backend, "_PER_THREAD", False)
    before = (dynamo_config.specialize_float, fx_config.use_duck_shape)
    assert before != (True, False)
    first, second = compile_backend.compile_settings(), compile_backend.compile_settings()
    try:
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert (dynamo_config.specialize_float, fx_config.use_duck_shape) == (True, False)
        with pytest.raises(RuntimeError):
            with compile_backend.compile_settings():
                raise RuntimeError("a failing forward")
        assert (dynamo_config.specialize_float, fx_config.use_duck_shape) == (True, False)
        second.__exit__(None, None, None)
        assert (dynamo_config.specialize_float, fx_config.use_duck_shape) == before
    finally:
        dynamo_config.specialize_float, fx_config.use_duck_shape = before


def test_cpu_graphs_freeze_weights_while_running_and_see_weight_changes():
    import torch._inductor.config as inductor_config

    from laya.backends.compile import frozen_weights, weights_version

    before = inductor_config.freezing
    with frozen_weights():
        assert inductor_config.freezing is True
    assert inductor_config.freezing == before
    layer = torch.nn.Linear(2, 2)
    seen = weights_version(layer)
    assert weights_version(layer) == seen
    with torch.no_grad():
        layer.weight.add_(1.0)  # an optimizer step or load_state_dict
    assert weights_version(layer) != seen
    seen = weights_version(layer)
    layer.bias = torch.nn.Parameter(torch.zeros(2))  # a replaced parameter
    assert weights_version(layer) != seen


def test_cpu_graphs_hold_frozen_weights_until_the_graphs_are_dropped():
    import gc
    import sys

    from laya.backends.compile import drop_compiled_graphs, run_compiled

    def frozen_weight_holders():
        return [name for name, module in list(sys.modules.items())
                if any(str(key).startswith("_frozen_param") for key in list(vars(module)))]

    drop_compiled_graphs()
    compiled = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8)).eval(), dynamic=True)
    with torch.no_grad():
        run_compiled(compiled, (torch.randn(3, 8),), on_cuda=False, mark_steps=False)
    assert frozen_weight_holders()  # the CPU graph was traced with its weights as constants
    drop_compiled_graphs()
    gc.collect()
    assert not frozen_weight_holders()


def test_run_compiled_passes_keyword_options_to_the_forward():
    from laya.backends.compile import run_compiled

    index = torch.arange(3)
    assert run_compiled(lambda *t, **options: options, (torch.zeros(1),), on_cuda=False, mark_steps=False,
                        token_index=index) == {"token_index": index}


def test_compiled_cpu_calls_run_packed_in_eval_and_stock_in_training(tiny_checkpoint, monkeypatch):
    """The packed forward is eval-only: a model left in training mode (e.g. after finetuning) runs the stock one."""
    import laya.backends.compile as compile_backend

    agent = laya.load(tiny_checkpoint, device="cpu", compile=True, compile_warmup=False)
    seen = []
    monkeypatch.setattr(compile_backend, "run_compiled", lambda fn, tensors, *a, **options: seen.append(options))
    tensors = (torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 1, 1, 0]]))
    agent.forward_backend.call(tensors)
    assert set(seen[-1]) == {"token_index", "rotary"} and seen[-1]["token_index"].tolist() == [0, 1, 2]
    agent.model.train()
    agent.forward_backend.call(tensors)
    assert seen[-1] == {}


def test_legacy_compile_runs_on_the_cpu_and_matches_eager(tiny_checkpoint, fresh, monkeypatch):
    """compile=True keeps working on the CPU (Inductor C++) on the real tokens only (laya.packed_encoder); one
    graph serves both multi-row shapes. The slowest test here (~1 min on 2 cores): lazy compilation, a single graph."""
    from torch._dynamo.utils import counters

    import laya.backends.compile as compile_backend

    packed_calls, real_tokens = [], compile_backend.real_tokens  # outside the graph: no guard on the spy
    widths = []
    monkeypatch.setattr(compile_backend, "real_tokens", lambda mask: widths.append(mask.shape[1]) or
                        packed_calls.append(real_tokens(mask)) or packed_calls[-1])
    torch._dynamo.reset()
    counters.clear()
    agent = laya.load(tiny_checkpoint, device="cpu", compile=True, compile_warmup=False)
    assert agent.backend == "compile"
    from torch._inductor.utils import run_and_get_code

    codes = []
    for states in (["refund my order", "the app crashes"], ["hello", "x " * 60, "cancel it"]):
        if codes:
            got = agent.predict_batch(states, QUESTIONS)
        else:  # the compile
            got, codes = run_and_get_code(agent.predict_batch, states, QUESTIONS)
        want = fresh.predict_batch(states, QUESTIONS)
        for g, w in zip(got, want):
            for qid in QUESTIONS:
                assert g["answers"][qid]["confidence"] == pytest.approx(w["answers"][qid]["confidence"], abs=2e-4)
    got, want = agent.predict("refund my order", QUESTIONS), fresh.predict("refund my order", QUESTIONS)
    for qid in QUESTIONS:
        assert got["answers"][qid]["confidence"] == pytest.approx(want["answers"][qid]["confidence"], abs=2e-4)
    assert len(packed_calls) == 3  # every batch on its real tokens, in one graph (below)
    assert all(w % compile_backend.ATTENTION_ALIGN == 0 for w in widths), widths  # CPU SDPA's fast lengths
    # the rotary tables come in made (laya.packed_encoder.rotary_tables): no kernel recomputes cos or sin
    assert len(codes) == 1 and "cpp_fused" in codes[0]
    assert not any(f in codes[0] for f in (".cos()", ".sin()", "std::cos", "std::sin")), "rotary made in-graph"
    # each graph traced once: a symbolic Python float would make Inductor restart the analysis (2 traces)
    assert counters["aot_autograd"]["total"] == counters["stats"]["unique_graphs"] == 1, dict(counters["aot_autograd"])
    # the CPU graph holds the weights as constants: a weight stepped in place after the compile is still seen
    states = ["refund my order", "the app crashes"]
    before = agent.predict_batch(states, QUESTIONS)
    for model in (agent.model, fresh.model):
        with torch.no_grad():
            {n.removeprefix("_orig_mod."): t for n, t in model.named_parameters()}["scorer.3.weight"].mul_(3.0)
    got, want = agent.predict_batch(states, QUESTIONS), fresh.predict_batch(states, QUESTIONS)
    assert got != before
    for g, w in zip(got, want):
        for qid in QUESTIONS:
            assert g["answers"][qid]["confidence"] == pytest.approx(w["answers"][qid]["confidence"], abs=2e-4)
    assert agent.set_backend("eager") == "eager" and not agent._compiled  # the wrapper is unwrapped
    assert type(agent.model).__name__ == "DecisionModel"


def test_load_routes_onnx_to_the_onnx_agent(tiny_checkpoint, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here.onnx"):
        laya.load(tiny_checkpoint, backend="onnx", onnx_path=str(tmp_path / "nothing-here.onnx"), device="cuda")


def test_compile_backend_settings_from_the_environment(tmp_path, monkeypatch):
    from laya.backends.compile import configure_inductor_cache, warmup_enabled

    for value, want in [("0", False), ("off", False), (" No ", False), ("FALSE", False), ("1", True), ("", True)]:
        monkeypatch.setenv("LAYA_COMPILE_WARMUP", value)
        assert warmup_enabled(None) is want
    assert warmup_enabled(True) is True and warmup_enabled(False) is False  # warmup= wins over the env
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("LAYA_INDUCTOR_CACHE_DIR", f"  {tmp_path / 'ind'}  ")
    assert configure_inductor_cache() == str(tmp_path / "ind") == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.delenv("LAYA_INDUCTOR_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert configure_inductor_cache() == str(tmp_path / "home" / ".cache" / "laya" / "inductor")


def test_inductor_cache_dir_replaces_only_inductors_own_default(tmp_path, monkeypatch):
    """Importing torch._dynamo writes Inductor's temporary default into TORCHINDUCTOR_CACHE_DIR: laya's
    persistent directory replaces that value, never one the user chose."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from laya.backends.compile import configure_inductor_cache

    monkeypatch.setenv("LAYA_INDUCTOR_CACHE_DIR", str(tmp_path / "laya"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    assert configure_inductor_cache() == str(tmp_path / "laya") == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert configure_inductor_cache() == str(tmp_path / "mine")


def test_broadcast_masks_match_the_stock_modernbert_masks(fresh):
    """The compile backend's pre-built masks give the encoder the same output as its own mask path."""
    from laya.model import broadcast_masks

    encoder = fresh.model.encoder
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(1000, 20000, (3, 50), generator=gen)
    mask = torch.ones(3, 50, dtype=torch.long)
    mask[1, 30:] = 0
    mask[2, 7:] = 0
    with torch.no_grad():
        stock = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        lean = encoder(input_ids=ids, attention_mask=broadcast_masks(mask, encoder.config.sliding_window)).last_hidden_state
    valid = mask.bool()
    torch.testing.assert_close(lean[valid], stock[valid], atol=1e-5, rtol=1e-5)
    masks = broadcast_masks(mask, 8)
    assert masks["full_attention"].shape == (3, 1, 1, 50) and masks["sliding_attention"].shape == (3, 1, 50, 50)
    assert masks["sliding_attention"][0, 0, 20, 28] and not masks["sliding_attention"][0, 0, 20, 29]


class AutocastProbe(Backend):
    """Records whether the agent's autocast was on around its forward."""
    name = "probe"
    seen: list = []

    def forward(self, *args, **kwargs):
        AutocastProbe.seen.append(torch.is_autocast_enabled("cpu"))
        return self.stock_forward(*args, **kwargs)


class OwnPrecisionProbe(AutocastProbe):
    name = "own"
    own_precision = True


def test_the_agent_enters_no_autocast_around_a_backend_with_its_own_precision(tiny_checkpoint, monkeypatch):
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")  # a 16-bit agent on the CPU: its requests run under autocast
    agent = laya.load(tiny_checkpoint, device="cpu")
    monkeypatch.setitem(backends.REGISTRY, "probe", f"{__name__}:AutocastProbe")
    monkeypatch.setitem(backends.REGISTRY, "own", f"{__name__}:OwnPrecisionProbe")
    AutocastProbe.seen = []
    for name in ("probe", "own"):
        agent.set_backend(name, strict=True)
        agent.predict("hello", QUESTIONS)
    assert AutocastProbe.seen == [True, False]
