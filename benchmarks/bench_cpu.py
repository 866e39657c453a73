"""The CPU paths end to end through `predict`: fp32 eager (baseline) vs eager bf16 autocast, ONNX fp32, ONNX INT8.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu.py [--shapes tiny,base] [--exporter dynamo|legacy]
        [--no-int8] [--int8-per-tensor] [--int8-last-layers N] [--no-bf16] [--unfused] [--inductor]
        [--checkpoint-dir DIR] [--out PATH] [--wait-quiet S] [--rounds-scale F] [--threads N]

Cases: 1 state x 3 questions (`predict`) and 16 states x 3 questions (`predict_batch`), on the `tiny`
and `base` (mmBERT-base shape, ~600 MB fp16) random checkpoints of scripts/make_checkpoint.py, built
with their graphs in a temporary directory (or --checkpoint-dir, to reuse them; never inside the
repository). Each runner is warmed up, then the runners are timed in interleaved rounds (order
rotated every round) so that drift and other load on the machine hit them alike; medians per runner,
and the speed-up as fp32-eager median / runner median plus the median of the per-round ratios. The
JSON (benchmarks/results/cpu_fastest_<date>.json by default) records the CPU's features
(laya.cpu_features: which of AMX / AVX-512 BF16 / VNNI / AVX2 it has, so which path each runner
took), cores, versions, shapes, parity of the answers, the INT8 graph's settings and the load
average plus other processes' CPU share around each case, so noisy runs can be told apart.

Targets (issue 30), base shape on the 2-core CI machine: 1x3 <= 250 ms (>= 3x fp32 eager in the same
run), 16x3 <= 4 s (>= 5x). Random weights answer near-uniformly: the parity here only catches a
broken graph; benchmarks/parity_cpu.py judges precision on a trained checkpoint.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)  # time the working tree's laya
sys.path.insert(0, os.path.join(REPO, "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, HERE)
from _env import cpu_model, cpu_sample, cpu_share, save_result  # noqa: E402  (one definition for every benchmark)

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
STATE = ("Hello, I ordered a laptop three weeks ago (order 88123) and it still has not arrived. The tracking "
         "page has said 'in transit' for ten days and nobody answers my emails. I want a refund or a "
         "replacement shipped by express, otherwise I will dispute the charge with my bank.")
TOPICS = ["refund for a broken blender", "login fails after the update", "invoice shows the wrong VAT",
          "cancel the premium plan", "package arrived damaged", "charged twice this month",
          "password reset mail never comes", "app crashes when uploading photos"]
STATES16 = [f"Ticket {i}: {TOPICS[i % len(TOPICS)]}. " + "Customer writes at length about the problem. " * (1 + i % 4)
            for i in range(16)]
# Timed rounds per (shape, case): enough for a stable median without hours on a 2-core box.
ROUNDS = {("tiny", "1x3"): 40, ("tiny", "16x3"): 20, ("base", "1x3"): 10, ("base", "16x3"): 3}
# Warm-up calls per runner: the eager Agent takes ~4 calls at a new shape to settle (measured on tiny:
# 545, 464, 318, 46, 32 ms); one base 16x3 call costs up to 20 s, so it gets one.
WARMUP = {("tiny", "1x3"): 5, ("tiny", "16x3"): 4, ("base", "1x3"): 4, ("base", "16x3"): 1}
BASELINE = "eager_fp32"
TARGETS = {"base": {"1x3": {"max_ms": 250.0, "min_speedup": 3.0}, "16x3": {"max_ms": 4000.0, "min_speedup": 5.0}}}


def load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def environment() -> dict:
    import numpy
    import onnxruntime
    import torch
    import transformers

    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    return {"cpu_model": cpu_model(), "logical_cores": os.cpu_count(), "usable_cores": cores,
            "platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
            "threads_both_runtimes": torch.get_num_threads(), "onnxruntime": onnxruntime.__version__,
            "transformers": transformers.__version__, "numpy": numpy.__version__, "laya_commit": commit,
            "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def wait_quiet(limit_s: float, threshold: float = 0.7) -> float | None:
    """Wait (up to limit_s) for the 1-minute load average to drop below threshold; returns it."""
    deadline = time.time() + limit_s
    while time.time() < deadline and (load1() or 0.0) >= threshold:
        time.sleep(5)
    return load1()


def has_fused_attention(path: str) -> bool:
    import onnx

    return any(n.op_type == "MultiHeadAttention" for n in onnx.load(path, load_external_data=False).graph.node)


def prepare(shape: str, root: str, exporter: str, int8: bool, per_tensor: bool = False, unfused: bool = False,
            last_layers: int | None = None) -> dict:
    """Checkpoint + graphs for one shape (reused when already in `root`): laya.onnx as export_module
    writes it (attention fused), its INT8 copies, and with `unfused` the exporter's own graph too."""
    import laya
    from laya.export import onnx as export
    from make_checkpoint import make_checkpoint

    ckpt = os.path.join(root, shape)
    info: dict = {"checkpoint": ckpt}
    if not os.path.isfile(os.path.join(ckpt, "rl_agent_config.json")):
        started = time.perf_counter()
        make_checkpoint(ckpt, shape, "wordpiece", seed=0)
        info["build_checkpoint_s"] = time.perf_counter() - started
    folder = os.path.join(root, f"{shape}-{exporter}")
    graph, plain = os.path.join(folder, "laya.onnx"), os.path.join(folder, "laya.unfused.onnx")
    if not os.path.isfile(graph) or (unfused and not os.path.isfile(plain)):
        eager = laya.load(ckpt, device="cpu")
        started = time.perf_counter()
        if not os.path.isfile(plain):
            export.export_module(eager.model, plain, exporter=exporter, fuse=False)
        if not os.path.isfile(graph) and not export.fuse_graph(eager.model, plain, graph):
            shutil.copyfile(plain, graph)  # what export_module gives where fusion does not apply
        info["export_s"] = time.perf_counter() - started
        del eager
    info["graphs"] = {"onnx_fp32": graph}
    info["attention_fused"] = {"onnx_fp32": has_fused_attention(graph)}
    if unfused:
        info["graphs"]["onnx_fp32_unfused"] = plain
    if int8:
        variants = {"onnx_int8": (graph, export.int8_output_path(graph), True, None)}
        if unfused:
            variants["onnx_int8_unfused"] = (plain, export.int8_output_path(plain), True, None)
        if per_tensor:
            variants["onnx_int8_per_tensor"] = (graph, graph.replace(".onnx", ".int8pt.onnx"), False, None)
        if last_layers:
            variants[f"onnx_int8_last{last_layers}"] = (graph, graph.replace(".onnx", f".int8last{last_layers}.onnx"),
                                                        True, last_layers)
        for name, (src, q, per_channel, last) in variants.items():
            settings = export.int8_settings(q) if os.path.isfile(q) else {}
            if (settings.get("per_channel"), settings.get("last_layers")) != (str(per_channel), str(last or "all")):
                started = time.perf_counter()
                export.quantize_model(src, q, per_channel=per_channel, last_layers=last)
                info.setdefault("quantize_s", {})[name] = time.perf_counter() - started
            info["graphs"][name] = q
            info.setdefault("int8_settings", {})[name] = export.int8_settings(q)
    info["graph_bytes"] = {k: os.path.getsize(v) for k, v in info["graphs"].items()}
    return info


def probabilities(result: dict) -> dict:
    out = {}
    for qid, a in result["answers"].items():
        out[qid] = dict(a.get("probabilities") or {"true": a["noul"]})
    return out


def parity(reference: list[dict], other: list[dict]) -> dict:
    """Max probability delta and how many answers agree (choice label / score argmax / noul side)."""
    worst, agree, total = 0.0, 0, 0
    for r, o in zip(reference, other):
        pr, po = probabilities(r), probabilities(o)
        for qid in pr:
            worst = max(worst, max(abs(pr[qid][k] - po[qid][k]) for k in pr[qid]))
            total += 1
            agree += max(pr[qid], key=pr[qid].get) == max(po[qid], key=po[qid].get)
    return {"max_abs_prob": worst, "argmax_agree": agree, "answers": total}


def run_case(runners: dict, call, rounds: int, warmup: int) -> dict:
    """Interleaved timing: each round times every runner once, starting from a rotated position."""
    names = list(runners)
    for name in names:
        for _ in range(warmup):
            call(runners[name])
    samples: dict[str, list[float]] = {n: [] for n in names}
    loads = [load1()]
    before = cpu_sample()
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            started = time.perf_counter()
            call(runners[name])
            samples[name].append((time.perf_counter() - started) * 1e3)
        loads.append(load1())
    med = {n: statistics.median(v) for n, v in samples.items()}
    out = {"rounds": rounds, "warmup": warmup, "load1_min_max": [min(x for x in loads if x is not None),
                                                                  max(x for x in loads if x is not None)]
           if any(x is not None for x in loads) else None, "cpu_share": cpu_share(before, cpu_sample()),
           "runners": {}}
    for n in names:
        paired = [e / s for e, s in zip(samples[BASELINE], samples[n])]
        out["runners"][n] = {"median_ms": med[n], "min_ms": min(samples[n]), "samples_ms": samples[n],
                             "speedup_vs_eager": med[BASELINE] / med[n], "paired_speedup_median": statistics.median(paired)}
    return out


def eager_runner(checkpoint: str, amp: str | None, **load_options):
    """A torch Agent with LAYA_CPU_AMP=amp at load (None: unset, the fp32 default)."""
    import laya

    saved = os.environ.pop("LAYA_CPU_AMP", None)
    try:
        if amp:
            os.environ["LAYA_CPU_AMP"] = amp
        return laya.load(checkpoint, device="cpu", **load_options)
    finally:
        os.environ.pop("LAYA_CPU_AMP", None)
        if saved is not None:
            os.environ["LAYA_CPU_AMP"] = saved


def inductor_runner(checkpoint: str):
    """eager bf16 under `compile=True`: Inductor's CPU graph with the weights frozen in (laya's own settings)."""
    return eager_runner(checkpoint, "bf16", compile=True, compile_warmup=False)


def targets_met(shape: str, cases: dict) -> dict:
    """Per case and runner: is the issue-30 target (time and ratio vs fp32 eager) met in this run?"""
    out = {}
    for case, goal in TARGETS.get(shape, {}).items():
        if case in cases:
            out[case] = {n: {"max_ms": r["median_ms"] <= goal["max_ms"],
                             "min_speedup": r["speedup_vs_eager"] >= goal["min_speedup"]}
                         for n, r in cases[case]["runners"].items() if n != BASELINE}
    return out


def bench_shape(shape: str, root: str, args: argparse.Namespace) -> dict:
    from laya.cpu_features import features
    from laya.device import describe
    from laya.onnx_agent import ONNXAgent

    info = prepare(shape, root, args.exporter, not args.no_int8, args.int8_per_tensor, args.unfused,
                   args.int8_last_layers)
    import torch

    threads = torch.get_num_threads()  # the same thread count for both runtimes
    runners = {BASELINE: eager_runner(info["checkpoint"], None)}
    if not args.no_bf16:
        runners["eager_bf16"] = eager_runner(info["checkpoint"], "bf16")
    if args.inductor:
        runners["inductor_bf16"] = inductor_runner(info["checkpoint"])
        started = time.perf_counter()
        runners["inductor_bf16"].predict(STATE, QUESTIONS)  # the compile, at this request's shapes
        info["inductor_first_call_s"] = time.perf_counter() - started
    info["eager_precision"] = {n: describe(r.precision, r.device) for n, r in runners.items()}
    info["bf16_native"] = features().native_bf16  # False: the bf16 runner is emulated, expect it slow
    for name, graph in info["graphs"].items():
        started = time.perf_counter()
        runners[name] = ONNXAgent(info["checkpoint"], onnx_path=graph, threads=threads)
        info.setdefault("session_s", {})[name] = time.perf_counter() - started
    info["threads"] = threads
    # Answers first: a speed-up of a graph that answers differently would mean nothing.
    eager = runners[BASELINE]
    ref = [eager.predict(STATE, QUESTIONS), *eager.predict_batch(STATES16, QUESTIONS)]
    info["parity_vs_eager"] = {n: parity(ref, [r.predict(STATE, QUESTIONS), *r.predict_batch(STATES16, QUESTIONS)])
                               for n, r in runners.items() if n != BASELINE}
    probe = eager.predict(STATE, QUESTIONS)["usage"]
    info["tokens_per_row_1x3"] = probe["input_tokens"] / 3
    info["cases"] = {}
    cases = {"1x3": lambda r: r.predict(STATE, QUESTIONS), "16x3": lambda r: r.predict_batch(STATES16, QUESTIONS)}
    for case, call in cases.items():
        if args.wait_quiet:
            wait_quiet(args.wait_quiet)
        rounds = max(2, round(ROUNDS[(shape, case)] * args.rounds_scale))
        info["cases"][case] = run_case(runners, call, rounds, warmup=WARMUP[(shape, case)])
        line = ", ".join(f"{n} {v['median_ms']:.1f} ms ({v['speedup_vs_eager']:.2f}x, paired "
                         f"{v['paired_speedup_median']:.2f}x)" for n, v in info["cases"][case]["runners"].items())
        print(f"[{shape} {case}] {line}; load {info['cases'][case]['load1_min_max']}, "
              f"others {info['cases'][case]['cpu_share']}", flush=True)
    info["targets"] = TARGETS.get(shape)
    info["targets_met"] = targets_met(shape, info["cases"])
    for r in runners.values():
        r.close()
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="tiny,base")
    parser.add_argument("--exporter", default="dynamo", choices=("dynamo", "legacy"))
    parser.add_argument("--no-int8", action="store_true")
    parser.add_argument("--int8-per-tensor", action="store_true", help="also time an INT8 graph with per-tensor scales")
    parser.add_argument("--int8-last-layers", type=int, default=None, metavar="N",
                        help="also time an INT8 graph quantised in its last N encoder layers only (the rest fp32)")
    parser.add_argument("--no-bf16", action="store_true", help="skip the eager bf16 autocast runner")
    parser.add_argument("--unfused", action="store_true",
                        help="also time the graphs without the attention fusion (fp32 and INT8)")
    parser.add_argument("--inductor", action="store_true",
                        help="also time eager bf16 under compile=True (Inductor, frozen weights)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both torch and ORT (default: usable cores); 1 is far less sensitive to "
                             "other load on a small machine")
    parser.add_argument("--checkpoint-dir", default=None, help="reuse checkpoints/graphs here (outside the repo)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--wait-quiet", type=float, default=0.0, help="wait up to S s for a quiet machine per case")
    parser.add_argument("--rounds-scale", type=float, default=1.0, help="multiply the timed rounds (e.g. 0.25 quick)")
    args = parser.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    bad = [s for s in shapes if s not in ("tiny", "base")]
    if bad:
        parser.error(f"unknown shapes {bad}; use tiny and/or base")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        import torch
        torch.set_num_threads(args.threads)
    root = args.checkpoint_dir or tempfile.mkdtemp(prefix="laya-bench-cpu-")
    if os.path.realpath(root).startswith(os.path.realpath(REPO) + os.sep):
        parser.error(f"--checkpoint-dir {root} is inside the repository; the base checkpoint is ~600 MB, use /tmp")
    os.makedirs(root, exist_ok=True)
    from laya.cpu_features import features

    result = {"benchmark": "bench_cpu", "baseline": BASELINE, "targets": TARGETS, "exporter": args.exporter,
              "cpu_features": features().as_dict(), "run_environment": environment(), "questions": list(QUESTIONS),
              "shapes": {}}
    from make_checkpoint import SHAPES
    for shape in shapes:
        result["shapes"][shape] = {"dims": SHAPES[shape], **bench_shape(shape, root, args)}
    from laya.cpu_malloc import keep_freed_buffers

    result["glibc_thresholds_raised"] = keep_freed_buffers()  # (the first CPU Agent decided it for every runner)
    path = save_result(result, f"cpu_fastest_{dt.date.today().isoformat()}.json", args.out)
    print(f"cpu: {features().best_isa} (native bf16 {features().native_bf16}, int8 dot {features().int8_dot}, "
          f"{features().physical_cores} physical cores); wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
