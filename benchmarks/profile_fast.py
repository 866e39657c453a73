"""Where the fused forward's time goes (GPU): per-kernel CUDA time, graph vs host time.

    python benchmarks/profile_fast.py [--model DIR]

For a 1 x 128-token request and a ragged 64 x 5 batch (as bench_latency's cases a128 and d) it prints
the CUDA kernels of one forward grouped by name (torch.profiler), the GPU time of the graph replay
alone (CUDA events), and the host time of each stage of `FastLaya.__call__`.  The ragged batch also
runs with packing off, to measure what packing gains.  (Tile choices are swept kernel by kernel in
benchmarks/bench_tiles.py.)  The kernels open with a programmatic-dependent-launch wait, so a kernel's
profiled duration includes the time it waited for the one before it: for each kind's share of a graph,
use benchmarks/bench_replay.py --knockout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]

def request(agent, rows: int, tokens: int, markers: int, seed: int, ragged: bool = False):
    import torch

    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(60, tokens + 1, (rows,), generator=g) if ragged else torch.full((rows,), tokens)
    width = int(lens.max())
    ids = torch.zeros(rows, width, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for i, n in enumerate(lens.tolist()):
        ids[i, :n] = torch.randint(1000, 30000, (n,), generator=g)
        mask[i, :n] = 1
    pos = torch.arange(1, markers + 1).repeat(rows, 1)
    live = torch.ones(rows, markers, dtype=torch.bool)
    qtype = torch.zeros(rows, dtype=torch.long)
    return [t.cuda() for t in (ids, mask, pos, live, qtype)], int(lens.sum())


def kernel_table(fast, tensors, calls: int = 5) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), torch.autocast("cuda", dtype=fast.dtype):
        for _ in range(fast.capture_after):  # capture the plan's graph first: profile replays only
            fast(*tensors)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fast(*tensors)
            torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total <= 0:
            continue
        rows.append({"kernel": event.key[:70], "calls_per_forward": event.count / calls,
                     "us_per_forward": total / calls})
    rows.sort(key=lambda r: -r["us_per_forward"])
    return rows


def stage_times(fast, tensors, repeats: int = 50) -> dict:
    """GPU time of the forward (events around FastLaya._run: copies, encoder, decision step) and host
    time of the stages of FastLaya.__call__: fill, the graphs' replay calls, the whole run."""
    import numpy as np
    import torch

    n, length = tensors[0].shape
    out = {"replay_gpu_ms": [], "fill_host_ms": [], "replay_host_ms": [], "run_ms": [], "call_ms": []}
    with torch.no_grad(), torch.autocast("cuda", dtype=fast.dtype):
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fast(*tensors)
            out["call_ms"].append(1e3 * (time.perf_counter() - t0))
            ids, mask, markers, live, types = (t.cpu().numpy() for t in tensors)
            lens = mask.sum(1, dtype=np.int64)
            plan = fast.plan(n, length, lens if n > 1 else None)
            slot = fast._slot(plan)
            head = fast._head(plan, slot, markers.shape[1])
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            extent = fast._fill(plan, slot, head, ids, lens, markers, live, types)
            t1 = time.perf_counter()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t2 = time.perf_counter()
            fast._run(plan, slot, head, extent)  # ends synchronised
            t3 = time.perf_counter()
            end.record()
            torch.cuda.synchronize()
            out["fill_host_ms"].append(1e3 * (t1 - t0))
            out["run_ms"].append(1e3 * (t3 - t2))
            out["replay_gpu_ms"].append(start.elapsed_time(end))
            if slot.graph is not None and head.graph is not None:  # the replay calls alone (no sync)
                t0 = time.perf_counter()
                slot.graph.replay()
                head.graph.replay()
                out["replay_host_ms"].append(1e3 * (time.perf_counter() - t0))
                torch.cuda.synchronize()
    return {k: float(np.median(v)) if v else float("nan") for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    import laya
    from _env import bench_checkpoint, environment
    from laya import fast as fast_module

    agent = laya.load(args.model or bench_checkpoint("large"), device="cuda")
    agent.set_backend("tilelang", strict=True)
    fast = agent._fast
    report = {"env": environment(), "gpu": torch.cuda.get_device_name(), "cases": {}}
    cases = {"a128": request(agent, 1, 128, 1, 0), "d": request(agent, 320, 494, 5, 1, ragged=True)}
    for name, (tensors, real) in cases.items():
        fast(*tensors)
        table = kernel_table(fast, tensors)
        stages = stage_times(fast, tensors, 50 if name == "a128" else 5)
        report["cases"][name] = {"real_tokens": real, "kernels": table, "stages": stages}
        print(f"\n== {name}: {real} real tokens; stages (median ms): "
              + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()))
        total = sum(r["us_per_forward"] for r in table)
        print(f"{'kernel':70} {'calls':>6} {'us':>9} {'share':>6}")
        for r in table[:18]:
            print(f"{r['kernel']:70} {r['calls_per_forward']:6.0f} {r['us_per_forward']:9.1f} "
                  f"{100 * r['us_per_forward'] / total:5.1f}%")
        print(f"{'all kernels':70} {'':6} {total:9.1f}")
    # The packing gain on the ragged batch: the same request with packing off (every row padded).
    saved, fast_module.PACK_RATIO = fast_module.PACK_RATIO, float("inf")
    dense = stage_times(fast, cases["d"][0], 5)
    fast_module.PACK_RATIO = saved
    packed = report["cases"]["d"]["stages"]
    report["d_dense_vs_packed"] = {"dense": dense, "packed": packed,
                                   "speedup": dense["call_ms"] / packed["call_ms"]}
    print(f"ragged d: dense {dense['call_ms']:.1f} ms, packed {packed['call_ms']:.1f} ms: packing "
          f"{dense['call_ms'] / packed['call_ms']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
