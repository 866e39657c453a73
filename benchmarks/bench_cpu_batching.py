"""Row grouping on the CPU: 16 states x 3 questions in one batch (the default) vs `predict_batch(...,
batch_size=B, sort_by_length=True)`, fp32 and bf16 eager (and bf16 under compile=True with --inductor),
interleaved rounds in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_batching.py [--shape base] [--sizes 8,4,2]
        [--rounds 3] [--no-bf16] [--inductor] [--unsorted] [--out PATH]

Each runner is an (agent, batch settings) pair; one agent per precision serves all its settings. Reports
medians, the speed-up against the one-batch call of the same precision (and against fp32 one-batch, the
published default), the answers' max |dp| against that one-batch call, and the padding each grouping
makes (real vs padded encoder tokens, from the agent's own collation). JSON:
benchmarks/results/cpu_batching_<date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_cpu import (BASELINE, QUESTIONS, STATES16, eager_runner, environment, inductor_runner,  # noqa: E402
                       parity, run_case)
from _env import bench_checkpoint, save_result  # noqa: E402


def answers_and_padding(agent, options: dict) -> tuple[list, dict]:
    """One `predict_batch` with `options`: its answers, and the real and padded encoder tokens of the
    batches it sent the forward."""
    backend, seen = agent.forward_backend, []
    forward = backend.run

    def recording(batch):
        seen.append((int(batch.input_ids.numel()), int(batch.attention_mask.sum())))
        return forward(batch)

    backend.run = recording
    try:
        answers = agent.predict_batch(STATES16, QUESTIONS, **options)
    finally:
        del backend.run
    padded, real = sum(p for p, _ in seen), sum(r for _, r in seen)
    return answers, {"forwards": len(seen), "real_tokens": real, "padded_tokens": padded,
                     "waste": round(1 - real / padded, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="base")
    ap.add_argument("--sizes", default="8,4,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--inductor", action="store_true", help="also group rows under compile=True bf16")
    ap.add_argument("--unsorted", action="store_true", help="also time each size in input order")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    path = bench_checkpoint(args.shape)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    agents = {"eager_fp32": eager_runner(path, None)}
    if not args.no_bf16:
        agents["eager_bf16"] = eager_runner(path, "bf16")
    if args.inductor:
        agents["compiled_bf16"] = inductor_runner(path)
    runners = {}
    for kind, agent in agents.items():
        runners[kind] = (agent, {})
        for b in sizes:
            runners[f"{kind} bs{b} sorted"] = (agent, {"batch_size": b, "sort_by_length": True})
            if args.unsorted:  # separates the padding saved from the smaller forward itself
                runners[f"{kind} bs{b}"] = (agent, {"batch_size": b})
    assert BASELINE in runners
    measured = {name: answers_and_padding(agent, kw) for name, (agent, kw) in runners.items()}
    case = run_case(runners, lambda r: r[0].predict_batch(STATES16, QUESTIONS, **r[1]), args.rounds, warmup=1)
    for name in runners:
        own = name.split(" ")[0]
        row = case["runners"][name]
        row["speedup_vs_own_one_batch"] = case["runners"][own]["median_ms"] / row["median_ms"]
        row["paired_vs_own_one_batch"] = statistics.median(
            a / b for a, b in zip(case["runners"][own]["samples_ms"], row["samples_ms"]))
        row["parity_vs_own_one_batch"] = parity(measured[own][0], measured[name][0])
        row["padding"] = measured[name][1]
    record = {"benchmark": "benchmarks/bench_cpu_batching.py", "issue": 30, "date": dt.date.today().isoformat(),
              "shape": args.shape, "checkpoint": path, "states": len(STATES16), "questions": list(QUESTIONS),
              "arguments": vars(args),
              "run_environment": environment(), "case": case}
    out = save_result(record, f"cpu_batching_{record['date']}.json", args.out)
    for name, row in case["runners"].items():
        print(f"{name:<28}{row['median_ms']:>9.0f} ms  x{row['speedup_vs_own_one_batch']:.2f} own "
              f"(paired {row['paired_vs_own_one_batch']:.2f})  x{row['speedup_vs_eager']:.2f} fp32  "
              f"waste {row['padding']['waste']:.0%}  dp {row['parity_vs_own_one_batch']['max_abs_prob']:.1e}")
    print(out)


if __name__ == "__main__":
    main()
