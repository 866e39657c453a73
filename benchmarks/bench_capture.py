"""What a plan's CUDA-graph capture costs the request that triggers it, against its eager runs and its replays.

    PYTHONPATH=$PWD python benchmarks/bench_capture.py --model DIR [--shapes 1x130,2x150,...] [--out PATH]

Each shape (rows x mean tokens, ragged rows as a served batch has them) is a new plan of the tilelang fast
path: its first CAPTURE_AFTER - 1 calls run eagerly, the next one captures the graph before replaying it,
and later calls replay. Every call is timed whole (FastLaya's __call__ ends with the result on the host), so
`capture_call_ms - replay_ms` is the stall a server's request sees when its forward is the one that captures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _env import save_result  # noqa: E402

SHAPES = "1x130,1x260,2x140,3x150,4x150,6x140,8x150,16x140,32x130"


def ragged(rows: int, tokens: int, markers: int = 3) -> tuple:
    g = torch.Generator().manual_seed(rows * 1000 + tokens)
    lens = [max(markers + 2, tokens + (r * 37) % 41 - 20) for r in range(rows)]
    width = max(lens)
    ids = torch.randint(1000, 3000, (rows, width), generator=g)
    mask = torch.zeros_like(ids)
    for r, n in enumerate(lens):
        mask[r, :n] = 1
    pos = torch.arange(1, markers + 1).repeat(rows, 1)
    return ids, mask, pos, torch.ones_like(pos, dtype=torch.bool), torch.zeros(rows, dtype=torch.long)


def timed(fast, batch) -> float:
    start = time.perf_counter()
    fast(*batch)
    return (time.perf_counter() - start) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    import laya
    from laya.fast import CAPTURE_AFTER, FastLaya
    from laya.sequence import config_max_len

    agent = laya.Agent(args.model, device=args.device, backend="eager")
    fast = FastLaya(agent.model, max_len=config_max_len(agent.cfg), dtype=agent.dtype, pad_id=agent.tok.pad_token_id,
                    background=False, cpu=args.device == "cpu")  # every class built first: only captures are timed
    fast.warmup()
    rows = []
    for shape in args.shapes.split(","):
        n, tokens = map(int, shape.split("x"))
        batch = ragged(n, tokens)
        plan = fast.plan(n, batch[0].shape[1], batch[1].sum(1).numpy() if n > 1 else None)
        captures = fast.captures
        eager = [timed(fast, batch) for _ in range(CAPTURE_AFTER - 1)]
        capture = timed(fast, batch)
        replay = statistics.median(timed(fast, batch) for _ in range(args.replays))
        row = {"shape": shape, "plan": str(plan), "real_tokens": int(batch[1].sum()), "eager_ms": [round(x, 2) for x in eager],
               "capture_call_ms": round(capture, 2), "replay_ms": round(replay, 3),
               "captured": fast.captures - captures, "stall_ms": round(capture - replay, 2)}
        rows.append(row)
        print(f"{shape:>8} {str(plan):40s} eager {row['eager_ms']} capture call {row['capture_call_ms']} ms "
              f"replay {row['replay_ms']} ms", flush=True)
    record = {"benchmark": "benchmarks/bench_capture.py", "date": dt.date.today().isoformat(),
              "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device, "model": os.path.basename(os.path.normpath(args.model)),
              "capture_after": CAPTURE_AFTER, "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING"),
              "rows": rows,
              "median_stall_ms": round(statistics.median(r["stall_ms"] for r in rows), 2)}
    print("median stall", record["median_stall_ms"], "ms;", save_result(record, f"capture_h200_{record['date']}.json",
                                                                        args.out))


if __name__ == "__main__":
    main()
