"""`compile=True` bf16 on the CPU with the encoder on real tokens only (laya.packed_encoder) against the same
compiled path over every padded token (issue 30); or, with --baseline-tree, this tree against another checkout.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_packed.py [--shape base] [--rounds 3]
        [--calls 8] [--baseline-tree PATH] [--checkpoint-dir DIR] [--out PATH]

Each arm runs in a fresh process, as a user's worker would: one `compile=True` agent with LAYA_CPU_AMP=bf16,
packing on (the shipped path) or off (`forward_backend.packed = False`); with --baseline-tree the arms are
this tree's laya and PATH's (e.g. `git worktree add /tmp/base HEAD~1`), both as shipped. The child reports
its first call and its first 16 x 3 (a second compile where that batch needs a graph of its own), warms up,
then times bench_cpu's 1 state x 3 questions `predict` and 16 x 3 `predict_batch` (medians of --calls each).
Arms alternate within a round and the order flips between rounds; the report gives each arm's median over
rounds, per-round ratios and the speed-up of the first arm.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _env import bench_checkpoint, save_result  # noqa: E402

ARMS = ("packed", "padded")
TREE_ARMS = ("candidate", "baseline")
KEYS = ("first_call_s", "first_16x3_s", "ms_1x3", "ms_16x3")


def median_ms(call, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def child(checkpoint: str, arm: str, calls: int, tree: str | None) -> dict:
    if tree:  # that checkout's laya, imported before bench_cpu puts this one first on sys.path
        sys.path.insert(0, tree)
        import laya

        assert os.path.dirname(os.path.dirname(os.path.abspath(laya.__file__))) == os.path.abspath(tree)
    import bench_cpu as B

    agent = B.inductor_runner(checkpoint)
    if arm in ARMS:
        agent.forward_backend.packed = arm == "packed"
    start = time.perf_counter()
    agent.predict(B.STATE, B.QUESTIONS)
    first = time.perf_counter() - start
    start = time.perf_counter()
    agent.predict_batch(B.STATES16, B.QUESTIONS)  # the first 16 x 3: another compile where it needs its own graph
    first_batch = time.perf_counter() - start
    for _ in range(2):
        agent.predict(B.STATE, B.QUESTIONS)
        agent.predict_batch(B.STATES16, B.QUESTIONS)
    return {"first_call_s": first, "first_16x3_s": first_batch,
            "ms_1x3": median_ms(lambda: agent.predict(B.STATE, B.QUESTIONS), calls),
            "ms_16x3": median_ms(lambda: agent.predict_batch(B.STATES16, B.QUESTIONS), calls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="base", choices=("tiny", "base"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--checkpoint-dir", default=os.environ.get("LAYA_BENCH_CKPT", "/tmp/laya-bench-ckpt"))
    ap.add_argument("--baseline-tree", default=None, help="time this tree's laya against this checkout's")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=2, default=None, metavar=("CHECKPOINT", "ARM"), help=argparse.SUPPRESS)
    ap.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.calls, args.tree)))
        return 0
    checkpoint = bench_checkpoint(args.shape, args.checkpoint_dir)
    arms = TREE_ARMS if args.baseline_tree else ARMS
    trees = {"baseline": os.path.abspath(args.baseline_tree)} if args.baseline_tree else {}
    runs: dict = {arm: [] for arm in arms}
    for r in range(args.rounds):
        for arm in arms if r % 2 == 0 else arms[::-1]:
            tree = ["--tree", trees[arm]] if arm in trees else []
            out = subprocess.run([sys.executable, __file__, "--child", checkpoint, arm, "--calls", str(args.calls),
                                  *tree], capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            runs[arm].append(res)
            print(f"round {r} {arm:9s} first call {res['first_call_s']:5.1f} s, first 16x3 "
                  f"{res['first_16x3_s']:5.1f} s  1x3 {res['ms_1x3']:6.1f} ms  "
                  f"16x3 {res['ms_16x3']:6.0f} ms", flush=True)
    new, old = arms
    median = {arm: {k: statistics.median(r[k] for r in rs) for k in KEYS} for arm, rs in runs.items()}
    cases = ("ms_1x3", "ms_16x3")
    speedup = {case: median[old][case] / median[new][case] for case in cases}
    per_round = {case: [o[case] / n[case] for n, o in zip(runs[new], runs[old])] for case in cases}
    print(f"16x3 {old} {median[old]['ms_16x3']:.0f} -> {new} {median[new]['ms_16x3']:.0f} ms "
          f"({speedup['ms_16x3']:.2f}x; rounds {', '.join(f'{x:.2f}' for x in per_round['ms_16x3'])}); "
          f"1x3 {median[old]['ms_1x3']:.1f} -> {median[new]['ms_1x3']:.1f} ms "
          f"({speedup['ms_1x3']:.2f}x; rounds {', '.join(f'{x:.2f}' for x in per_round['ms_1x3'])})")
    record = {"benchmark": "benchmarks/bench_cpu_packed.py", "issue": 30, "date": dt.date.today().isoformat(),
              "shape": args.shape, "checkpoint": checkpoint, "rounds": args.rounds, "calls": args.calls,
              "arms": arms, "trees": trees, "runs": runs, "median": median, f"speedup_{old}_over_{new}": speedup,
              "per_round_speedup": per_round}
    path = save_result(record, f"cpu_packed_{record['date']}.json", args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
