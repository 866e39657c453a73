"""The compile backend's start: an empty Inductor cache, then restarts on the cache it left, fresh interpreters.

    HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python benchmarks/bench_cold_start_compile.py [--device cuda|cpu]
        [--shape large] [--checkpoint DIR] [--runs 2] [--baseline-root TREE] [--out PATH]

cuda: ``cold`` is `laya prebuild --backend compile --cache-dir D` (the compile warm-up plus the Inductor
mega-cache file), ``restart`` is `laya.Agent(path, device="cuda", backend="compile")` with
LAYA_INDUCTOR_CACHE_DIR=D. cpu (the compile backend is CUDA-only): ``cold`` and ``restart`` are
`laya.load(path, device="cpu", compile=True)` with TORCHINDUCTOR_CACHE_DIR=D, empty then filled.
cpu-graph (a diagnostic, no GPU needed): the compile backend's own graph and warm-up shapes, compiled
by Inductor for the CPU, answering through an eager agent.
Every case times process start to the first triage answer, then the p50 of 40 one-question predicts
(the steady 1-row latency), and records the compiler's counters (graphs,
AOT traces, FX-graph cache hits) and phase seconds. --baseline-root runs the same cases on another tree
(e.g. `git archive` of the previous commit) in the same run, restarts interleaved with the candidate's,
and the ratios compare the two.
JSON: benchmarks/results/cold_start_compile_<device>_<date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _env import bench_checkpoint, save_result  # noqa: E402
from bench_cold_start import BYTECODE_NOTE, TEXT, bytecode_env, run_script, same_answers, warm_bytecode  # noqa: E402

CHILD = r"""
import json, sys, time
t0 = float(sys.argv[1]); device, path, text = sys.argv[2:5]
marks = {"interpreter": time.time() - t0}
import laya
marks["import_laya"] = time.time() - t0
if device == "cuda":
    agent = laya.Agent(path, device="cuda", backend="compile")
elif device == "cpu":
    agent = laya.load(path, device="cpu", compile=True)
else:  # cpu-graph: the compile backend's own graph, built and warmed up on the CPU (a diagnostic)
    import torch
    from laya.backends.compile import CompileBackend, configure_inductor_cache
    agent = laya.Agent(path, device="cpu", backend="eager")
    configure_inductor_cache()
    graph = CompileBackend(agent, warmup=False)  # its default mode, reduce-overhead (CUDA graphs skipped here)
    graph.max_len = agent.cfg["max_len"]
    graph.compiled = torch.compile(graph._aligned_forward, dynamic=True, mode=graph.mode)
    graph.warmup()
    agent.backend_object.call, agent.backend_object.warmup_s = graph.call, graph.warmup_s
marks["agent_ready"] = time.time() - t0
result = agent.predict(text, laya.triage_questions())
marks["first_answer"] = time.time() - t0
one, laps = dict(list(laya.triage_questions().items())[:1]), []
for _ in range(40):  # steady state after the start: one state, one question (a 1-row batch), p50
    lap = time.perf_counter()
    agent.predict(text, one)
    laps.append(time.perf_counter() - lap)
marks["predict_p50_ms"] = sorted(laps)[len(laps) // 2] * 1e3
from torch._dynamo.utils import compile_times, counters
names, values = compile_times(repr="csv", aggregate=True)
print("BENCH " + json.dumps({"marks": marks, "backend": agent.backend,
    "warmup_s": getattr(agent.backend_object, "warmup_s", None),
    "counters": {"unique_graphs": counters["stats"].get("unique_graphs", 0),
                 "aot_traces": counters["aot_autograd"].get("total", 0),
                 **{k: v for k, v in counters["inductor"].items() if "cache" in k},
                 **{k: v for k, v in counters["aot_autograd"].items() if "cache" in k}},
    "phase_s": {n: round(float(v), 2) for n, v in zip(names, values) if float(v) >= 0.05},
    "laya": laya.__file__, "answer": {n: a.get(a["type"]) for n, a in result["answers"].items()}}))
"""

PREBUILD = r"""
import sys, time
t0 = float(sys.argv[1])
from laya.prebuild import main
rc = main(["--model", sys.argv[2], "--backend", "compile", "--cache-dir", sys.argv[3]])
print("BENCH {\"marks\": {\"prebuilt\": %.3f}, \"rc\": %d}" % (time.time() - t0, rc))
"""


def tree_env(root: str, cache: str) -> dict:
    """A child's environment: `root`'s laya first on the path, the Inductor cache in `cache`, offline."""
    env = bytecode_env(dict(os.environ, HF_HUB_OFFLINE="1", LAYA_INDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache,
                            PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)))
    env.pop("TRITON_CACHE_DIR", None)
    return env


def cold_start(root: str, device: str, path: str, cache: str) -> dict:
    """The empty-cache case of one tree, filling `cache`."""
    env = tree_env(root, cache)
    if device != "cuda":
        return run_script(CHILD, [device, path, TEXT], env, root, timeout=1800, label=f"cold start of {root}")
    cold = run_script(PREBUILD, [path, cache], env, root, timeout=1800, label=f"prebuild of {root}")
    if cold["rc"] != 0:
        raise RuntimeError(f"laya prebuild failed on {root}: {cold['stderr_tail']}")
    return cold


def run_trees(roots: dict, device: str, path: str, runs: int, scratch: str) -> dict:
    """Each tree's cold start, then their restarts interleaved (round by round), so drift hits them alike."""
    caches = {name: tempfile.mkdtemp(prefix=f"inductor-{name}-", dir=scratch) for name in roots}
    for name, root in roots.items():
        warm_bytecode(tree_env(root, caches[name]), [root])
    trees = {name: {"root": root, "cold": cold_start(root, device, path, caches[name]), "restart": []}
             for name, root in roots.items()}
    for _ in range(runs):
        for name, root in roots.items():
            trees[name]["restart"].append(run_script(CHILD, [device, path, TEXT], tree_env(root, caches[name]), root,
                                                     timeout=1800, label=f"restart of {root}"))
    for tree in trees.values():
        marks = tree["cold"]["marks"]
        tree["summary"] = {
            "cold_s": round(marks.get("first_answer", marks.get("prebuilt")), 2),
            "restart_first_answer_s": round(statistics.median(r["marks"]["first_answer"] for r in tree["restart"]), 2),
            "restart_agent_ready_s": round(statistics.median(r["marks"]["agent_ready"] for r in tree["restart"]), 2),
            "predict_p50_ms": round(statistics.median(r["marks"]["predict_p50_ms"] for r in tree["restart"]), 3)}
    return trees


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu", "cpu-graph"))
    ap.add_argument("--shape", default="large")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--baseline-root", default=None, help="another tree's root, measured the same way")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    path = args.checkpoint or bench_checkpoint(args.shape)
    import torch

    scratch = tempfile.mkdtemp(prefix="laya-cold-compile-")
    try:
        roots = {"candidate": REPO}
        if args.baseline_root:
            roots["baseline"] = os.path.abspath(args.baseline_root)
        trees = run_trees(roots, args.device, path, args.runs, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = {"benchmark": "benchmarks/bench_cold_start_compile.py", "issue": 24, "date": dt.date.today().isoformat(),
              "device": args.device, "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
              "shape": args.shape, "checkpoint": path, "runs": args.runs, "bytecode": BYTECODE_NOTE,
              "target": {"cuda_restart_first_answer_s": 30}, "trees": trees,
              "same_answers_in_every_restart": same_answers([r for t in trees.values() for r in t["restart"]])}
    if "baseline" in trees:
        base, cand = trees["baseline"]["summary"], trees["candidate"]["summary"]
        record["ratios"] = {"restart_baseline_over_candidate": round(base["restart_first_answer_s"]
                                                                      / cand["restart_first_answer_s"], 2),
                            "cold_baseline_over_candidate": round(base["cold_s"] / cand["cold_s"], 2),
                            "predict_p50_baseline_over_candidate": round(base["predict_p50_ms"]
                                                                         / cand["predict_p50_ms"], 3)}
    out = save_result(record, f"cold_start_compile_{args.device}_{record['date']}.json", args.out)
    for name, tree in trees.items():
        print(name, tree["summary"], tree["restart"][-1]["counters"])
    print(record.get("ratios"), "same answers:", record["same_answers_in_every_restart"])
    print(out)


if __name__ == "__main__":
    main()
