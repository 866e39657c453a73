"""CPU bf16 `predict` with transformers' rotary embedding (A) against laya.rotary's (B), interleaved in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_rotary.py [--checkpoint-dir DIR] [--rounds 8] [--out PATH]

One eager agent on the `base` shape (mmBERT-base geometry, random weights; bench_cpu.py's checkpoint and
requests), LAYA_CPU_AMP=bf16. Each round runs the 1 x 3 request `--calls` times per arm and the 16 x 3 batch
once per arm, the arms alternating (order swapped every round), so drift hits both alike; arm A replaces
`laya.rotary.scope` by a null context (the forward before the change). The results of the two arms must be
identical (the rotary is the same bits). Reports medians and B's speed-up; JSON under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _env import bench_checkpoint, save_result  # noqa: E402
from bench_cpu import QUESTIONS, STATE, STATES16  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", default=None, help="where the base checkpoint is built or reused")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5, help="1 x 3 calls per arm and round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    os.environ["LAYA_CPU_AMP"] = "bf16"
    import torch

    import laya
    from laya import rotary

    path = bench_checkpoint("base", args.checkpoint_dir)
    agent = laya.load(path, device="cpu")
    if agent.dtype is not torch.bfloat16:
        raise SystemExit(f"this CPU gave the agent {agent.dtype}, not bfloat16: nothing to compare")
    ours = rotary.scope
    arms = {"A_transformers": contextlib.nullcontext, "B_laya": ours}
    cases = {"1x3": lambda: agent.predict(STATE, QUESTIONS), "16x3": lambda: agent.predict_batch(STATES16, QUESTIONS)}
    times: dict = {arm: {case: [] for case in cases} for arm in arms}
    answers: dict = {arm: {} for arm in arms}
    try:
        for r in range(args.rounds + 1):  # round 0 warms both arms up, untimed
            for arm in (list(arms) if r % 2 else list(arms)[::-1]):
                rotary.scope = arms[arm]
                for case, call in cases.items():
                    for _ in range(args.calls if case == "1x3" else 1):
                        start = time.perf_counter()
                        answers[arm][case] = call()
                        if r:
                            times[arm][case].append((time.perf_counter() - start) * 1e3)
    finally:
        rotary.scope = ours
    summary = {case: {arm: round(statistics.median(times[arm][case]), 1) for arm in arms} for case in cases}
    for case, s in summary.items():
        s["speedup_B_over_A"] = round(s["A_transformers"] / s["B_laya"], 3)
    same = all(answers["A_transformers"][c] == answers["B_laya"][c] for c in cases)
    record = {"benchmark": "benchmarks/bench_cpu_rotary.py", "issue": 30, "date": dt.date.today().isoformat(),
              "shape": "base", "checkpoint": path, "dtype": "bfloat16", "rounds": args.rounds, "calls": args.calls,
              "rotary_matches_installed_transformers": rotary.matches_installed(), "same_answers": same,
              "median_ms": summary, "times_ms": times}
    out = save_result(record, f"cpu_rotary_{record['date']}.json", args.out)
    for case, s in summary.items():
        print(f"{case}: transformers {s['A_transformers']} ms, laya.rotary {s['B_laya']} ms, "
              f"{s['speedup_B_over_A']}x")
    print(f"same answers: {same}; {out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
