"""The CLI's first answer as a user feels it: whole processes, the bundled laya-mini, the triage preset.

    HF_HUB_OFFLINE=1 .venv-test/bin/python benchmarks/bench_cli_start.py [--runs 5] [--out PATH]

Each case is a fresh `laya ...` process, timed from spawn to exit (wall) with its peak RSS; the cases run
in turn (A B C A B C ...) after one untimed warm-up each, so drift on a shared box hits every case alike.
The candidate is the default path (laya-mini's shipped ONNX graph, no torch); the baseline is the same
command with `--backend eager` (torch). The ratio is taken run by run. JSON: benchmarks/results/
cli_start_cpu_<date>.json (issue 24's target: <= 2 s on the ONNX path, torch path not slower than before).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _env import save_result, wait_for_quiet  # noqa: E402

TEXT = "I was charged twice, refund me"
LAYA = os.path.join(os.path.dirname(sys.executable), "laya")
CASES = {
    "demo_default": [LAYA, "demo"],
    "demo_eager": [LAYA, "demo", "--backend", "eager"],
    "preset_default": [LAYA, TEXT, "--preset", "triage", "--model", "laya-mini-dir"],
    "preset_eager": [LAYA, TEXT, "--preset", "triage", "--model", "laya-mini-dir", "--backend", "eager"],
}
PAIRS = (("demo_default", "demo_eager"), ("preset_default", "preset_eager"))


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one whole process (its own rusage, from wait4)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from laya.registry import LAYA_MINI

    cases = {k: [LAYA_MINI if a == "laya-mini-dir" else a for a in v] for k, v in CASES.items()}
    quiet = wait_for_quiet(30.0)
    walls: dict[str, list[float]] = {k: [] for k in cases}
    peaks: dict[str, list[float]] = {k: [] for k in cases}
    for cmd in cases.values():
        timed(cmd)  # warm-up: page cache, bytecode
    for _ in range(args.runs):
        for name, cmd in cases.items():
            wall, peak = timed(cmd)
            walls[name].append(wall)
            peaks[name].append(peak)
    result = {
        "benchmark": "bench_cli_start", "issue": 24, "date": time.strftime("%Y-%m-%d"),
        "others_busy_pct_at_start": quiet, "runs": args.runs, "text": TEXT,
        "commands": {k: " ".join(os.path.basename(a) if a == LAYA else a for a in v) for k, v in cases.items()},
        "wall_s": {k: {"median": round(statistics.median(v), 3), "min": round(min(v), 3), "max": round(max(v), 3),
                       "all": [round(x, 3) for x in v]} for k, v in walls.items()},
        "peak_rss_mib_median": {k: round(statistics.median(v), 1) for k, v in peaks.items()},
        "ratio_default_over_eager": {
            a: round(statistics.median(x / y for x, y in zip(walls[a], walls[b])), 4) for a, b in PAIRS},
        "target": "<= 2 s on the ONNX path; the torch path unchanged (its code path is the same as before)",
    }
    path = save_result(result, f"cli_start_cpu_{result['date']}.json", args.out)
    for name, stats in result["wall_s"].items():
        print(f"{name:15s} median {stats['median']:.3f} s  (min {stats['min']:.3f}, max {stats['max']:.3f})")
    for name, ratio in result["ratio_default_over_eager"].items():
        print(f"{name} / eager: {ratio:.3f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
