"""The tilelang backend (laya/fast.py on the GPU) through the Agent: numerics against fp32 and stock
16-bit eager, CUDA-graph replay, packed vs dense layouts, concurrency, limits (CUDA + tilelang, else skipped).

Numerics: the tiny test checkpoint (std 0.3 weights) amplifies 16-bit rounding (stock bf16 autocast
is ~13% of the largest logit away from fp32), so the fused forward is held to "no worse than stock
autocast": its distance to fp32 is at most 1.5x stock's plus 2% of the logit scale.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
if not torch.cuda.is_available():
    pytest.skip("the fused forward needs CUDA", allow_module_level=True)

import laya  # noqa: E402
from _compare import assert_same  # noqa: E402
from _fast_requests import make_batch, run_beside_a_wide_build  # noqa: E402
from laya import backends  # noqa: E402
from laya import fast as fast_module  # noqa: E402
from laya.cublas_gemm import TorchGeglu, TorchGemm  # noqa: E402
from laya.device import Precision  # noqa: E402
from laya.fast import FastLaya  # noqa: E402
from laya.fast_tiles import without_cublas  # noqa: E402
from laya.questions import check_questions  # noqa: E402
from laya.sequence import collate  # noqa: E402

pytestmark = [pytest.mark.fast_extra, pytest.mark.gpu]

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?"},
}
STATES = ["I want my money back.", {"message": "The app crashes on login", "tier": "gold"},
          ["hi", "cancel please"], "ok " * 200, "The invoice total is wrong again! " * 5, "Short."]


def logits_of(agent, states):
    qs = check_questions(QUESTIONS)
    rows = [r for s in states for r in agent._rows(str(s), False, qs, 256, 96)[1]]
    return np.asarray(agent._infer(collate(rows, agent.tok.pad_token_id))[0])  # a host tensor or array


def make_agent(checkpoint, dtype, backend=None):
    agent = laya.load(checkpoint, device="cuda")
    agent.precision = Precision(dtype, dtype != torch.float32)
    if backend:
        assert agent.set_backend(backend, strict=True) == backend
    return agent


@pytest.fixture(scope="module")
def fused(tiny_checkpoint):
    return make_agent(tiny_checkpoint, torch.bfloat16, "tilelang")


def test_backend_is_installed_and_auto_picks_it(fused):
    assert fused.backend == "tilelang" and isinstance(fused._fast, FastLaya)
    assert backends.auto_policy(fused) == "tilelang"
    assert fused._fast.dtype == torch.bfloat16 and fused._fast.max_len == 256


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_logits_no_worse_than_stock_autocast(tiny_checkpoint, fused, dtype):
    reference = logits_of(make_agent(tiny_checkpoint, torch.float32), STATES)
    stock = logits_of(make_agent(tiny_checkpoint, dtype), STATES)
    agent = fused if dtype == torch.bfloat16 else make_agent(tiny_checkpoint, dtype, "tilelang")
    ours = logits_of(agent, STATES)
    live = reference > -1e3
    scale = np.abs(reference[live]).max()
    stock_err = np.abs(stock - reference)[live].max()
    our_err = np.abs(ours - reference)[live].max()
    assert np.isfinite(ours).all()
    assert our_err <= 1.5 * stock_err + 0.02 * scale, (our_err, stock_err, scale)


def test_graph_replay_equals_a_plain_run(tiny_checkpoint, fused):
    plain = FastLaya(fused.model, max_len=256, use_graphs=False, dtype=torch.bfloat16,
                     pad_id=fused.tok.pad_token_id)
    qs = check_questions(QUESTIONS)
    rows = [r for s in STATES for r in fused._rows(str(s), False, qs, 256, 96)[1]]
    tensors = [t.cuda() for t in collate(rows, fused.tok.pad_token_id).tensors()]
    graphs = FastLaya(fused.model, max_len=256, dtype=torch.bfloat16, pad_id=fused.tok.pad_token_id)  # no plans yet
    runs = []
    with torch.no_grad():
        for i in range(fast_module.CAPTURE_AFTER + 2):  # eager runs, the capturing run, two replays
            runs.append(graphs(*tensors))
            assert graphs.captures == (i + 1 >= fast_module.CAPTURE_AFTER)
        direct = plain(*tensors)
    for a, b in zip(runs[-1], direct):
        assert torch.equal(a, b)
    for run in runs[:-1]:  # eager runs before the capture and replays after it: the same numbers
        for a, b in zip(run, runs[-1]):
            assert torch.equal(a, b)


def test_every_kernel_waits_for_its_predecessor(fused):
    """Programmatic dependent launch is safe only if every TileLang kernel waits (griddepcontrol.wait)
    before it touches tensor memory: a kernel launched early that did not would read unfinished results."""
    fused._fast.build_all()  # the classes a background thread may still be building
    kernel_sets = (*fused._fast.sets, fused._fast.features)  # the decision step's features kernels too
    kernels = {id(k): k for kernel_set in kernel_sets for k in kernel_set.values()
               if not isinstance(k, (TorchGemm, TorchGeglu))}.values()  # (cuBLAS classes: not TileLang)
    for kernel in kernels:
        source = kernel.get_kernel_source()
        head = source.index("__global__ void __launch_bounds__")
        signature = source[head:source.index("{", head)]
        before_wait = source[source.index("{", head):source.index("cudaGridDependencySynchronize();", head)]
        pointers = re.findall(r"\*\s*(?:__restrict__\s*)?(\w+)\s*[,)]", signature)
        for name in pointers:  # tensors passed by pointer: not read or written before the wait
            assert not re.search(rf"\b{name}\b", before_wait), (name, before_wait)
        assert "tma_load" not in before_wait and "tma_store" not in before_wait, before_wait


def test_big_plans_run_without_a_graph(fused):
    """A packed batch above GRAPH_MAX_TOKENS runs eagerly (no capture) and equals a graph-free build."""
    states = [("word " * (120 + 7 * i)) for i in range(40)]  # ~40 rows x 3 questions, > 4096 real tokens
    qs = check_questions(QUESTIONS)
    rows = [r for s in states for r in fused._rows(s, False, qs, 256, 96)[1]]
    tensors = [t.cuda() for t in collate(rows, fused.tok.pad_token_id).tensors()]
    lens = tensors[1].sum(1).cpu().numpy()
    assert fused._fast.plan(len(rows), tensors[0].shape[1], lens).tokens > fast_module.GRAPH_MAX_TOKENS
    plain = FastLaya(fused.model, max_len=256, use_graphs=False, dtype=torch.bfloat16,
                     pad_id=fused.tok.pad_token_id)
    before = fused._fast.captures
    with torch.no_grad():
        ours, reference = fused._fast(*tensors), plain(*tensors)
    assert fused._fast.captures == before
    for a, b in zip(ours, reference):
        assert torch.equal(a, b)


def test_packed_and_dense_layouts_agree(fused, monkeypatch):
    states = ["a " * 5, "word " * 180, "x y " * 30, "long text here " * 40]
    packed = logits_of(fused, states)
    monkeypatch.setattr(fast_module, "PACK_RATIO", float("inf"))
    dense = logits_of(fused, states)
    live = packed > -1e3
    assert np.abs(packed - dense)[live].max() <= 0.02 * np.abs(dense[live]).max()


def test_concurrent_predicts_match_serial(fused):
    serial = [fused.predict(s, QUESTIONS) for s in STATES]
    results: dict = {}

    def worker(i):
        results[i] = fused.predict(STATES[i % len(STATES)], QUESTIONS)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, result in results.items():
        assert_same(serial[i % len(STATES)], result, tol=0.0)


def test_concurrent_first_requests_while_plans_are_captured(tiny_checkpoint):
    """Plans get captured mid-traffic (on their CAPTURE_AFTER-th run) while other threads copy lengths to
    the host and decode: every answer still equals the serial one."""
    agent = make_agent(tiny_checkpoint, torch.bfloat16, "tilelang")
    batches = [STATES[i:i + 1 + i % 3] for i in range(len(STATES))]
    results: dict = {}

    def worker(i):
        for r in range(fast_module.CAPTURE_AFTER + 1):
            results[(i, r)] = agent.predict_batch(batches[(i + r) % len(batches)], QUESTIONS)

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        list(pool.map(worker, range(12)))  # re-raises a worker's exception here
    assert len(results) == 12 * (fast_module.CAPTURE_AFTER + 1) and agent._fast.captures >= 1
    for (i, r), got in results.items():
        want = agent.predict_batch(batches[(i + r) % len(batches)], QUESTIONS)
        for a, b in zip(want, got):
            assert_same(a, b, tol=0.0)


def test_building_a_wider_features_kernel_does_not_hold_up_other_requests(fused, monkeypatch):
    # k = 130 builds a 256-wide features kernel (nvcc, seconds) on first need, outside the forward's lock:
    # a 3-option request runs meanwhile; graph replays equal plain runs, so both match serial calls bitwise
    fast = fused.backend_object.fast
    assert 256 not in fast.features
    wide_batch, narrow_batch = make_batch([120, 140], 130, seed=130), make_batch([40], 3, seed=41)
    results = run_beside_a_wide_build(fast, wide_batch, narrow_batch, monkeypatch)
    assert 256 in fast.features
    with torch.no_grad():
        narrow_again = fast(*narrow_batch)
    for got, want in ((results["narrow"], narrow_again), (results["wide"], results["wide_again"])):
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        assert all(torch.isfinite(t).all() for t in got)


def test_request_longer_than_the_fast_path_is_refused(fused):
    with pytest.raises(ValueError, match=r"at most 256"):
        fused.predict("many words " * 400, QUESTIONS, max_len=1024)
    assert fused.predict("still works", QUESTIONS)["answers"]  # the agent keeps working


def test_deaccelerate_restores_eager(tiny_checkpoint):
    agent = make_agent(tiny_checkpoint, torch.bfloat16, "tilelang")
    before = agent.predict(STATES[0], QUESTIONS)
    agent.deaccelerate()
    assert agent.backend == "eager" and agent._fast is None
    after = agent.predict(STATES[0], QUESTIONS)
    for qid in QUESTIONS:  # same decision from the stock 16-bit forward
        assert before["answers"][qid]["type"] == after["answers"][qid]["type"]


def test_host_and_device_inputs_give_identical_outputs(fused):
    # The backend hands FastLaya the collated host batch (one staged, pinned copy); a caller with device
    # tensors gets them copied back first. Both must run the same plan on the same inputs: equal bits,
    # also after other plans have grown and reused the staging buffer in between.
    qs = check_questions(QUESTIONS)
    rows = [r for s in STATES[:3] for r in fused._rows(str(s), False, qs, 256, 96)[1]]
    batch = collate(rows, fused.tok.pad_token_id).tensors()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        host = fused._fast(*batch)
        logits_of(fused, STATES)  # other plans in between
        device = fused._fast(*[t.cuda() for t in batch])
    assert fused._backend.host_inputs
    for a, b in zip(host, device):
        assert torch.equal(a, b)


def test_background_builds_match_a_full_build(tiny_checkpoint, fused):
    full = fused._fast
    full.build_all()
    lazy = FastLaya(full.model, max_len=full.max_len, pad_id=full.pad_id, background=True)
    for lens in ([7], [200, 17], [13, 60, 33, 20, 50], [250] * 6):
        batch = make_batch(lens, 3, seed=len(lens))
        got, want = lazy(*batch), full(*batch)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), lens
    lazy.build_all()
    assert lazy.built and lazy.attn_bm == full.attn_bm


def test_a_warm_kernel_store_loads_every_kernel_and_answers_the_same(tiny_checkpoint, tmp_path):
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, sys, laya\n"
        "from laya import kernel_cache\n"
        "agent = laya.load(sys.argv[1], device='cuda', backend='tilelang')\n"
        "agent.backend_object.fast.build_all()\n"
        "r = agent.predict('The invoice total is wrong again!', laya.triage_questions())\n"
        "s = kernel_cache.active()\n"
        "print(json.dumps({'r': r, 'hits': s.hits, 'misses': s.misses}, default=str))\n")
    env = dict(os.environ, LAYA_KERNEL_CACHE=str(tmp_path / "kernels"), HF_HUB_OFFLINE="1")
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script, str(tiny_checkpoint)], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["misses"] > 0 and warm["misses"] == 0 and warm["hits"] == cold["misses"]
    assert cold["r"] == warm["r"]


def test_cublas_classes_run_torch_gemms_and_match_the_tilelang_only_table(fused, monkeypatch):
    # The shipped table gives some classes' GEMMs to cuBLAS (laya.cublas_gemm): those classes hold torch
    # callables, the rest TileLang kernels, and both compositions give the same answers within bf16 error.
    full = fused._fast
    full.build_all()
    for c, kernels in enumerate(full.sets):
        for name, kind in (("qkv", "wide"), ("o", "o"), ("down", "down"), ("h_o", "narrow"), ("up", "geglu")):
            on_cublas = fast_module.GPU_TILES[kind][c].get("cublas", False)
            assert isinstance(kernels[name], (TorchGemm, TorchGeglu)) == on_cublas, (c, name)
    monkeypatch.setattr(fast_module, "GPU_TILES", without_cublas(fast_module.GPU_TILES))
    plain = FastLaya(full.model, max_len=full.max_len, pad_id=full.pad_id, background=False)
    assert not any(isinstance(k, (TorchGemm, TorchGeglu)) for s in plain.sets for k in s.values())
    for lens in ([40], [250] * 12):  # a cuBLAS head GEMM (class 0); cuBLAS encoder GEMMs (class 7)
        batch = make_batch(lens, 3, seed=len(lens))
        with torch.no_grad():
            got, want = full(*batch), plain(*batch)
        for a, b in zip(got, want):
            assert torch.isfinite(a).all()
            assert (a.float() - b.float()).abs().max() <= 0.02 * b.float().abs().max() + 1e-3, lens
