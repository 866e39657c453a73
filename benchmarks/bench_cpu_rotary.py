"""CPU bf16 `predict` with transformers' rotary embedding (A) against laya.rotary's (B), interleaved in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_rotary.py [--checkpoint-dir DIR] [--rounds 8] [--out PATH]
        [--compare pairs]

`--compare pairs`: laya.rotary on q/k heads as transformers lays them out (A) against the same rotation on Wqkv
rows reordered into rotation pairs (B, the default); the answers then differ by q.k's summation order, so the
record gives their max |dp| instead of requiring them equal.

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
    parser.add_argument("--compare", choices=("transformers", "pairs"), default="transformers")
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
    if args.compare == "pairs":
        return compare_pairs(agent, args, path)
    arms = {"A_transformers": contextlib.nullcontext, "B_laya": ours}
    cases = {"1x3": lambda: agent.predict(STATE, QUESTIONS), "16x3": lambda: agent.predict_batch(STATES16, QUESTIONS)}
    try:
        rotary._pair_heads = False  # (this comparison is of the bit-identical rotation alone)
        times, answers = interleaved(arms, lambda scope: setattr(rotary, "scope", scope), cases, args)
    finally:
        rotary.scope, rotary._pair_heads = ours, True
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


def interleaved(arms: dict, use, cases: dict, args) -> tuple[dict, dict]:
    """(times in ms per arm and case, each arm's last answers): `use(arms[arm])` switches an arm on; round 0
    warms both up untimed, then the arms alternate, the order swapped every round, so drift hits both alike."""
    times: dict = {arm: {case: [] for case in cases} for arm in arms}
    answers: dict = {arm: {} for arm in arms}
    for r in range(args.rounds + 1):
        for arm in (list(arms) if r % 2 else list(arms)[::-1]):
            use(arms[arm])
            for case, call in cases.items():
                for _ in range(args.calls if case == "1x3" else 1):
                    start = time.perf_counter()
                    answers[arm][case] = call()
                    if r:
                        times[arm][case].append((time.perf_counter() - start) * 1e3)
    return times, answers


def probabilities(results: list) -> list[float]:
    """Every probability of a list of predict results, in order."""
    out: list[float] = []
    for result in results:
        for answer in result["answers"].values():
            out += list(answer.get("probabilities", {}).values())
            out += [answer[k] for k in ("noul", "score") if isinstance(answer.get(k), float)]
    return out


def compare_pairs(agent, args, path: str) -> int:
    from laya import rotary

    arms = {"A_halves": False, "B_pairs": True}
    cases = {"1x3": lambda: [agent.predict(STATE, QUESTIONS)], "16x3": lambda: agent.predict_batch(STATES16, QUESTIONS)}
    try:
        times, answers = interleaved(arms, lambda on: setattr(rotary, "_pair_heads", on), cases, args)
    finally:
        rotary._pair_heads = True
    summary = {case: {arm: round(statistics.median(times[arm][case]), 1) for arm in arms} for case in cases}
    for case, s in summary.items():
        s["speedup_B_over_A"] = round(s["A_halves"] / s["B_pairs"], 3)
    max_dp = max(abs(a - b) for c in cases for a, b in zip(probabilities(answers["A_halves"][c]),
                                                           probabilities(answers["B_pairs"][c])))
    record = {"benchmark": "benchmarks/bench_cpu_rotary.py --compare pairs", "issue": 30,
              "date": dt.date.today().isoformat(), "shape": "base", "checkpoint": path, "dtype": "bfloat16",
              "rounds": args.rounds, "calls": args.calls, "max_dp_between_arms": round(max_dp, 5),
              "median_ms": summary, "times_ms": times}
    out = save_result(record, f"cpu_rotary_pairs_{record['date']}.json", args.out)
    for case, s in summary.items():
        print(f"{case}: halves {s['A_halves']} ms, pairs {s['B_pairs']} ms, {s['speedup_B_over_A']}x")
    print(f"max |dp| between the arms: {max_dp:.5f}; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
