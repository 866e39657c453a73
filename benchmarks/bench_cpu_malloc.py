"""glibc's allocator as laya sets it for CPU inference (laya.cpu_malloc) against glibc's defaults (issue 30).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_malloc.py [--shape base] [--rounds 4]
        [--amps bf16,fp32] [--checkpoint-dir DIR] [--out PATH]

The allocator's settings are per process, so every arm runs in its own fresh process: an eager Agent on the
CPU with LAYA_CPU_AMP=<amp> and LAYA_CPU_MALLOC unset (laya's thresholds) or =default (glibc's own), warmed
up, then bench_cpu's 1 state x 3 questions `predict` (median of --calls) and 16 x 3 `predict_batch` (best of
two). Arms alternate within a round and the order rotates between rounds, so drift hits them alike; the
report gives each arm's median over rounds, the speed-up default / laya, and the process's resident memory
after the calls (what keeping freed buffers costs).
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
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _env import bench_checkpoint, cpu_model, save_result  # noqa: E402

ARMS = ("laya", "default")  # LAYA_CPU_MALLOC unset / =default


def child(checkpoint: str, amp: str, calls: int) -> dict:
    """One arm in this process (LAYA_CPU_MALLOC already set by the parent)."""
    import bench_cpu as B

    from laya import cpu_malloc

    agent = B.eager_runner(checkpoint, None if amp == "fp32" else amp)
    for _ in range(4):
        agent.predict(B.STATE, B.QUESTIONS)
    one = []
    for _ in range(calls):
        start = time.perf_counter()
        agent.predict(B.STATE, B.QUESTIONS)
        one.append(time.perf_counter() - start)
    batch = []
    for _ in range(2):
        start = time.perf_counter()
        agent.predict_batch(B.STATES16, B.QUESTIONS)
        batch.append(time.perf_counter() - start)
    with open("/proc/self/statm") as f:
        rss_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return {"thresholds_raised": cpu_malloc.keep_freed_buffers(), "ms_1x3": statistics.median(one) * 1e3,
            "ms_16x3": min(batch) * 1e3, "rss_mb_after": round(rss_mb)}


def run_arm(arm: str, amp: str, checkpoint: str, calls: int) -> dict:
    env = dict(os.environ)
    env.pop("LAYA_CPU_MALLOC", None)
    if arm == "default":
        env["LAYA_CPU_MALLOC"] = "default"
    out = subprocess.run([sys.executable, __file__, "--child", checkpoint, "--amps", amp, "--calls", str(calls)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="base", choices=("tiny", "base"))
    ap.add_argument("--amps", default="bf16,fp32")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--checkpoint-dir", default=os.environ.get("LAYA_BENCH_CKPT", "/tmp/laya-bench-ckpt"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.amps, args.calls)))
        return 0
    checkpoint = bench_checkpoint(args.shape, args.checkpoint_dir)
    amps = [a.strip() for a in args.amps.split(",") if a.strip()]
    runs: dict = {amp: {arm: [] for arm in ARMS} for amp in amps}
    for r in range(args.rounds):
        for amp in amps:
            for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
                res = run_arm(arm, amp, checkpoint, args.calls)
                runs[amp][arm].append(res)
                print(f"round {r} {amp:4s} {arm:7s} 1x3 {res['ms_1x3']:7.1f} ms  16x3 {res['ms_16x3']:7.0f} ms  "
                      f"rss {res['rss_mb_after']} MB  raised {res['thresholds_raised']}", flush=True)
    summary = {}
    for amp, arms in runs.items():
        med = {arm: {k: statistics.median(r[k] for r in rs) for k in ("ms_1x3", "ms_16x3", "rss_mb_after")}
               for arm, rs in arms.items()}
        summary[amp] = {"median": med, "speedup_1x3": med["default"]["ms_1x3"] / med["laya"]["ms_1x3"],
                        "speedup_16x3": med["default"]["ms_16x3"] / med["laya"]["ms_16x3"]}
        print(f"{amp:4s} 1x3 {med['default']['ms_1x3']:.1f} -> {med['laya']['ms_1x3']:.1f} ms "
              f"({summary[amp]['speedup_1x3']:.2f}x); 16x3 {med['default']['ms_16x3']:.0f} -> "
              f"{med['laya']['ms_16x3']:.0f} ms ({summary[amp]['speedup_16x3']:.2f}x); rss "
              f"{med['default']['rss_mb_after']:.0f} -> {med['laya']['rss_mb_after']:.0f} MB")
    record = {"benchmark": "benchmarks/bench_cpu_malloc.py", "issue": 30, "date": dt.date.today().isoformat(),
              "cpu": cpu_model(), "cores": os.cpu_count(), "shape": args.shape, "rounds": args.rounds,
              "calls_1x3": args.calls, "runs": runs, "summary": summary}
    print(f"wrote {save_result(record, f'cpu_malloc_{dt.date.today().isoformat()}.json', args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
