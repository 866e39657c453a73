"""The compile backend's cold start, cached restart and memory, against eager, on one GPU.

    python benchmarks/bench_compile_defaults.py [--shape large] [--max-len 1024] [--out PATH]

Each measurement runs in its own process (a restart is a new process by definition):
  eager    load time, request times, peak memory at 32 rows x max_len tokens
  cold     backend="compile" with an empty Inductor cache: load, warm-up, requests, graphs, memory
  restart  the same with the cache the cold process left behind
  legacy   compile=True (stock ModernBERT masks) at the same 32-row request, for the mask-memory story
Requests repeat (answers must be identical on repeats). Each process also reports its compiler phase
seconds (Dynamo, AOT autograd, Inductor, cache loads), to show where a cached restart's warm-up goes.
JSON under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _workload import ticket_questions  # noqa: E402

REQUESTS = ((1, 3), (4, 3), (8, 5), (1, 3), (16, 3), (4, 3))  # (states, questions) in call order
BIG_ROWS = 32


def ticket(i: int, words: int) -> str:
    vocab = ("refund order invoice charged twice login crash app password cancel plan support please today "
             "account billing error screen update broken slow help angry again week").split()
    return " ".join(vocab[(i * 7 + j * 3) % len(vocab)] for j in range(words))


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.used,memory.total,utilization.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unavailable"


def compile_phase_seconds() -> dict:
    """Seconds per timed compiler phase (Dynamo tracing, AOT autograd, Inductor, cache loads, CUDA-graph
    recording), summed over the process: where a cached restart's remaining warm-up goes."""
    from torch._dynamo.utils import compile_times

    try:
        names, values = compile_times(repr="csv", aggregate=True)
    except Exception as e:  # noqa: BLE001 - a private API: report, do not fail the run
        return {"error": f"{type(e).__name__}: {e}"}
    return {name: float(value) for name, value in zip(names, values) if float(value) >= 0.01}


def measure(mode: str, checkpoint: str, max_len: int) -> dict:
    """One process's numbers (called in a child)."""
    import torch
    from torch._dynamo.utils import counters

    import laya

    out = {"mode": mode, "smi_start": nvidia_smi()}
    t0 = time.perf_counter()
    if mode == "eager":
        agent = laya.load(checkpoint, device="cuda")
    elif mode == "legacy":
        agent = laya.load(checkpoint, device="cuda", compile=True, compile_warmup=False)
    else:
        agent = laya.load(checkpoint, device="cuda", backend="compile")
    torch.cuda.synchronize()
    out["load_s"] = time.perf_counter() - t0
    out["backend"] = agent.backend
    backend = agent.backend_object
    out["warmup_s"] = getattr(backend, "warmup_s", None)
    out["cache_dir"] = getattr(backend, "cache_dir", None)
    weights = torch.cuda.memory_allocated()
    out["weights_bytes"] = weights

    timings, same = [], True
    if mode != "legacy":
        first_answers = {}
        for rep in range(3):
            for idx, (n_states, k) in enumerate(REQUESTS):
                states = [ticket(i, 40 + 11 * i) for i in range(n_states)]
                torch.cuda.synchronize()
                t = time.perf_counter()
                result = agent.predict_batch(states, ticket_questions(k))
                torch.cuda.synchronize()
                timings.append({"rep": rep, "states": n_states, "questions": k, "ms": (time.perf_counter() - t) * 1e3})
                if rep == 0:
                    first_answers[idx] = result
                elif result != first_answers[idx]:
                    same = False
    out["requests"] = timings
    out["answers_identical_on_repeats"] = same

    # 32 rows x max_len tokens: one state per row, each long enough to fill the row
    big = [ticket(i, 2 * max_len) for i in range(BIG_ROWS)]
    q1 = ticket_questions(1)
    agent.predict_batch(big[:2], q1, max_len=max_len)  # compile/record at this width first
    agent.predict_batch(big, q1, max_len=max_len)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    agent.predict_batch(big, q1, max_len=max_len)
    torch.cuda.synchronize()
    out["big_request_ms"] = (time.perf_counter() - t) * 1e3
    out["big_peak_over_weights_bytes"] = torch.cuda.max_memory_allocated() - weights
    out["unique_graphs"] = counters["stats"].get("unique_graphs", 0)
    out["inductor_counters"] = {k: v for k, v in counters["inductor"].items()
                                if "cache" in k or "cudagraph" in k or "graph" in k}
    out["aot_autograd_counters"] = dict(counters["aot_autograd"])
    out["compile_phase_s"] = compile_phase_seconds()
    out["smi_end"] = nvidia_smi()
    return out


def child(mode: str, checkpoint: str, max_len: int, cache_dir: str) -> dict:
    env = dict(os.environ, LAYA_INDUCTOR_CACHE_DIR=cache_dir, TORCHINDUCTOR_CACHE_DIR=cache_dir,
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, "--child", mode, "--checkpoint", checkpoint,
                           "--max-len", str(max_len)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"mode": mode, "error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_checkpoint(shape: str, max_len: int, folder: str) -> str:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from make_checkpoint import make_checkpoint

    path = make_checkpoint(os.path.join(folder, shape), shape, "wordpiece", seed=0)
    cfg_path = os.path.join(path, "rl_agent_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["max_len"] = max_len  # the typed-decisions checkpoint runs ModernBERT-large at 1024
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    return path


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else float("nan")


def write_report(args, runs: dict, build_s: float) -> None:
    import torch
    import transformers

    summary = {}
    for mode, r in runs.items():
        if "error" in r:
            continue
        later = [x["ms"] for x in r["requests"] if x["rep"] > 0]
        summary[mode] = {"load_s": r["load_s"], "warmup_s": r["warmup_s"], "median_request_ms_after_first_pass": median(later),
                         "big_request_ms": r["big_request_ms"], "big_peak_over_weights_MiB": r["big_peak_over_weights_bytes"] / 2**20}
    ratios = {}
    if "cold" in summary and "restart" in summary:
        ratios["restart_vs_cold_warmup"] = summary["restart"]["warmup_s"] / summary["cold"]["warmup_s"]
        ratios["restart_vs_cold_load"] = summary["restart"]["load_s"] / summary["cold"]["load_s"]
    if "eager" in summary:
        for mode in ("cold", "restart", "legacy"):
            if mode in summary:
                ratios[f"{mode}_peak_vs_eager"] = summary[mode]["big_peak_over_weights_MiB"] / summary["eager"]["big_peak_over_weights_MiB"]
                ratios[f"{mode}_big_request_speedup_vs_eager"] = summary["eager"]["big_request_ms"] / summary[mode]["big_request_ms"]
        if "restart" in summary:
            ratios["restart_median_request_speedup_vs_eager"] = (summary["eager"]["median_request_ms_after_first_pass"]
                                                                 / summary["restart"]["median_request_ms_after_first_pass"])
    report = {"benchmark": "compile_defaults", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "transformers": transformers.__version__,
              "shape": args.shape, "max_len": args.max_len, "big_request": [BIG_ROWS, args.max_len],
              "requests": REQUESTS, "checkpoint_build_s": build_s, "summary": summary, "ratios": ratios,
              "goal": "compile peak memory within 1.2x of eager at 32 x max_len", "runs": runs}
    out = args.out or os.path.join(ROOT, "benchmarks", "results",
                                   f"compile_defaults_{datetime.date.today().isoformat()}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({"summary": summary, "ratios": ratios}, indent=2))
    print(f"wrote {out}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="large")
    parser.add_argument("--max-len", type=int, default=1024)
    parser.add_argument("--modes", default="eager,cold,restart,legacy")
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", default=None)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.checkpoint, args.max_len)))
        return 0

    work = tempfile.mkdtemp(prefix="laya-bench-compile-")
    t = time.perf_counter()
    checkpoint = args.checkpoint or build_checkpoint(args.shape, args.max_len, work)
    build_s = time.perf_counter() - t
    cache = os.path.join(work, "inductor-cache")
    runs = {}
    for mode in args.modes.split(","):
        runs[mode] = child(mode, checkpoint, args.max_len, cache if mode in ("cold", "restart") else
                           os.path.join(work, f"cache-{mode}"))
        r = runs[mode]
        print(f"{mode:8s} " + ("ERROR " + r["error"][-400:] if "error" in r else
              f"load {r['load_s']:.1f}s warmup {r['warmup_s'] or 0:.1f}s big {r['big_request_ms']:.1f}ms "
              f"peak+{r['big_peak_over_weights_bytes'] / 2**20:.0f}MiB graphs {r['unique_graphs']}"), flush=True)
        write_report(args, runs, build_s)  # after every mode: a killed run still leaves its numbers

    return 0


if __name__ == "__main__":
    raise SystemExit(main())
