"""`compile=True` bf16 on the CPU with the encoder on real tokens only (laya.packed_encoder) against the same
compiled path over every padded token (issue 30).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_packed.py [--shape base] [--rounds 3]
        [--calls 8] [--checkpoint-dir DIR] [--out PATH]

Each arm runs in a fresh process, as a user's worker would: one `compile=True` agent with LAYA_CPU_AMP=bf16,
packing on (the shipped path) or off (`forward_backend.packed = False`). The child compiles on its first call
(reported), warms up, then times bench_cpu's 1 state x 3 questions `predict` and 16 x 3 `predict_batch`
(medians of --calls each). Arms alternate within a round and the order flips between rounds; the report gives
each arm's median over rounds and the speed-up padded / packed.
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
KEYS = ("first_call_s", "ms_1x3", "ms_16x3")


def median_ms(call, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def child(checkpoint: str, arm: str, calls: int) -> dict:
    import bench_cpu as B

    agent = B.inductor_runner(checkpoint)
    agent.forward_backend.packed = arm == "packed"
    start = time.perf_counter()
    agent.predict(B.STATE, B.QUESTIONS)
    first = time.perf_counter() - start
    for _ in range(2):
        agent.predict(B.STATE, B.QUESTIONS)
        agent.predict_batch(B.STATES16, B.QUESTIONS)
    return {"first_call_s": first, "ms_1x3": median_ms(lambda: agent.predict(B.STATE, B.QUESTIONS), calls),
            "ms_16x3": median_ms(lambda: agent.predict_batch(B.STATES16, B.QUESTIONS), calls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="base", choices=("tiny", "base"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--checkpoint-dir", default=os.environ.get("LAYA_BENCH_CKPT", "/tmp/laya-bench-ckpt"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs=2, default=None, metavar=("CHECKPOINT", "ARM"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.calls)))
        return 0
    checkpoint = bench_checkpoint(args.shape, args.checkpoint_dir)
    runs: dict = {arm: [] for arm in ARMS}
    for r in range(args.rounds):
        for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
            out = subprocess.run([sys.executable, __file__, "--child", checkpoint, arm, "--calls", str(args.calls)],
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            runs[arm].append(res)
            print(f"round {r} {arm:6s} first call {res['first_call_s']:5.1f} s  1x3 {res['ms_1x3']:6.1f} ms  "
                  f"16x3 {res['ms_16x3']:6.0f} ms", flush=True)
    median = {arm: {k: statistics.median(r[k] for r in rs) for k in KEYS} for arm, rs in runs.items()}
    speedup = {case: median["padded"][case] / median["packed"][case] for case in ("ms_1x3", "ms_16x3")}
    print(f"16x3 padded {median['padded']['ms_16x3']:.0f} -> packed {median['packed']['ms_16x3']:.0f} ms "
          f"({speedup['ms_16x3']:.2f}x); 1x3 {median['padded']['ms_1x3']:.1f} -> {median['packed']['ms_1x3']:.1f} ms "
          f"({speedup['ms_1x3']:.2f}x)")
    record = {"benchmark": "benchmarks/bench_cpu_packed.py", "issue": 30, "date": dt.date.today().isoformat(),
              "shape": args.shape, "checkpoint": checkpoint, "rounds": args.rounds, "calls": args.calls,
              "runs": runs, "median": median, "speedup_padded_over_packed": speedup}
    path = save_result(record, f"cpu_packed_{record['date']}.json", args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
