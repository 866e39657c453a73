"""CPU flash SDPA (bf16) at a batch's own token length against the same batch padded to a multiple of 16
(laya.packed_encoder.ATTENTION_ALIGN, issue 30).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_sdpa_lengths.py [--rows 16,48] [--lengths 40:260:4]
        [--calls 15] [--out PATH]

For each row count N and length L: q, k, v [N, 12, L, 64] in the [N, L, 12, 64] memory layout the packed
encoder hands SDPA, the last 3 keys of every row masked; the candidate is the same batch with L grown to the
next multiple of 16 by masked keys (a key mask only: the global layers' form). Medians of --calls back-to-back
calls, the own length then the padded one at each length. The outputs on the real rows are compared (the padded keys carry zero weight).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _env import save_result  # noqa: E402

from laya.packed_encoder import ATTENTION_ALIGN  # noqa: E402


def batch(rows: int, length: int, width: int, gen: torch.Generator) -> tuple:
    """q, k, v of `length` real positions laid out over `width` slots, with the key mask for them."""
    q, k, v = (torch.zeros(rows, width, 12, 64, dtype=torch.bfloat16) for _ in range(3))
    for t in (q, k, v):
        t[:, :length] = torch.randn(rows, length, 12, 64, generator=gen).bfloat16()
    mask = torch.zeros(rows, 1, 1, width, dtype=torch.bool)
    mask[..., :length - 3] = True
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask


def median_ms(args: tuple, calls: int) -> float:
    for _ in range(3):
        F.scaled_dot_product_attention(*args[:3], attn_mask=args[3])
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        F.scaled_dot_product_attention(*args[:3], attn_mask=args[3])
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="16,48")
    ap.add_argument("--lengths", default="40:260:4", help="start:stop:step")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    start, stop, step = (int(x) for x in args.lengths.split(":"))
    gen = torch.Generator().manual_seed(0)
    cases = []
    for rows in (int(r) for r in args.rows.split(",")):
        for length in range(start, stop, step):
            width = -(-length // ATTENTION_ALIGN) * ATTENTION_ALIGN
            own, grown = batch(rows, length, length, gen), batch(rows, length, width, gen)
            for t_own, t_grown in zip(own[:3], grown[:3]):
                t_grown[:, :, :length].copy_(t_own)
            grown[3][..., :length].copy_(own[3])
            with torch.no_grad():
                want = F.scaled_dot_product_attention(*own[:3], attn_mask=own[3])
                got = F.scaled_dot_product_attention(*grown[:3], attn_mask=grown[3])[:, :, :length]
                own_ms, grown_ms = median_ms(own, args.calls), median_ms(grown, args.calls)
            cases.append({"rows": rows, "length": length, "padded_length": width, "own_ms": own_ms,
                          "padded_ms": grown_ms, "speedup": own_ms / grown_ms,
                          "max_abs_diff": (got.float() - want.float()).abs().max().item()})
            print(f"N {rows:3d} L {length:3d} -> {width:3d}: {own_ms:6.2f} -> {grown_ms:6.2f} ms "
                  f"({own_ms / grown_ms:.2f}x)", flush=True)
    unaligned = [c["speedup"] for c in cases if c["length"] != c["padded_length"]]
    if not unaligned:
        ap.error("every length given is already a multiple of 16: nothing to compare")
    summary = {"unaligned_cases": len(unaligned), "speedup_min": min(unaligned), "speedup_median":
               statistics.median(unaligned), "speedup_max": max(unaligned),
               "max_abs_diff": max(c["max_abs_diff"] for c in cases)}
    print(f"unaligned lengths: padded / own speed-up min {summary['speedup_min']:.2f}x, median "
          f"{summary['speedup_median']:.2f}x, max {summary['speedup_max']:.2f}x; outputs within "
          f"{summary['max_abs_diff']:.1e}")
    record = {"benchmark": "benchmarks/bench_cpu_sdpa_lengths.py", "issue": 30, "date": dt.date.today().isoformat(),
              "align": ATTENTION_ALIGN, "threads": torch.get_num_threads(), "heads": 12, "head_dim": 64,
              "dtype": "bfloat16", "calls": args.calls, "summary": summary, "cases": cases}
    path = save_result(record, f"cpu_sdpa_lengths_{record['date']}.json", args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
