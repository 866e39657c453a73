"""Peak memory and time of one ONNX `predict_batch` of many long rows, per row-chunk budget (CPU).

    HF_HUB_OFFLINE=1 .venv-test/bin/python benchmarks/bench_onnx_row_chunks.py --model DIR --graph G.onnx
        [--cells 0,16777216,8388608] [--preset email] [--json PATH]

The batch is parity.py's 12 states of one preset (many of them truncated at the checkpoint's max_len),
the rows the ONNXAgent's forward gets. Each arm runs in its own process (peak RSS is per process) with
laya.backends.onnx.ATTENTION_CELLS set to the arm's value (0: one session run for the whole batch, the
baseline); the arms' logits are compared for bit-identity with the baseline's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def child(model: str, graph: str, preset: str, cells: int) -> dict:
    sys.path[:0] = [ROOT, HERE]
    import numpy as np

    import laya.backends.onnx as onnx_backend
    from laya import presets
    from laya.onnx_agent import ONNXAgent
    from parity import PRESET_ORDER, SNIPPETS, make_states

    onnx_backend.ATTENTION_CELLS = cells or 2 ** 62
    p = PRESET_ORDER.index(preset)
    states = make_states()[p * len(SNIPPETS):(p + 1) * len(SNIPPETS)]
    shapes, digest = [], hashlib.sha256()
    real_run = onnx_backend.OnnxBackend.run

    def run(self, batch):  # records the batch and the exact logits
        out = real_run(self, batch)
        shapes.append(list(batch.input_ids.shape))
        for a in out:
            digest.update(np.ascontiguousarray(a).tobytes())
        return out

    onnx_backend.OnnxBackend.run = run
    with ONNXAgent(model, onnx_path=graph) as agent:
        opened = time.perf_counter()
        agent.predict_batch(states, presets.PRESETS[preset]())
        seconds = time.perf_counter() - opened
    return {"cells": cells, "seconds": round(seconds, 2), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "batches": shapes, "logits_sha256": digest.hexdigest()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--cells", default=f"0,{2 ** 24},{2 ** 23}", help="ATTENTION_CELLS per arm (0: unchunked)")
    ap.add_argument("--preset", default="email")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.model, args.graph, args.preset, args.child)))
        return
    sys.path.insert(0, HERE)
    from _env import save_result

    arms = []
    for cells in (int(c) for c in args.cells.split(",")):
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--graph", args.graph,
                              "--preset", args.preset, "--child", str(cells)], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"arm {cells} failed (rc {out.returncode}):\n{out.stderr[-3000:]}")
        arms.append(json.loads(out.stdout.strip().splitlines()[-1]))
        base = arms[0]
        arm = arms[-1]
        arm["same_bits_as_unchunked"] = arm["logits_sha256"] == base["logits_sha256"]
        arm["speedup_vs_unchunked"] = round(base["seconds"] / arm["seconds"], 3)
        print(f"cells {cells:>10}: {arm['seconds']:7.2f} s  peak {arm['peak_rss_mb']:6d} MB  "
              f"x{arm['speedup_vs_unchunked']:.2f}  same bits {arm['same_bits_as_unchunked']}", flush=True)
    record = {"benchmark": "benchmarks/bench_onnx_row_chunks.py", "issue": 30, "date": dt.date.today().isoformat(),
              "model": args.model, "graph": os.path.basename(args.graph), "preset": args.preset,
              "arms": arms}
    print("wrote", save_result(record, f"onnx_row_chunks_cpu_{dt.date.today().isoformat()}.json", args.json))


if __name__ == "__main__":
    main()
