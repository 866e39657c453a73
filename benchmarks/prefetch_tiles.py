"""Print a `bench_latency.py --tiles` JSON: the shipped table's classes with the weight prefetch switched on.

    python benchmarks/prefetch_tiles.py G CLASSES [release-only]

Every TileLang GEMM kind of the classes gets `prefetch=G` (its first G blocks prefetch the weights into L2
before the PDL wait), and the kernels that run ahead of a GEMM (add_ln, attention, GEGLU) `release=True`.
`release-only` leaves the prefetch off (what the early launch alone costs).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laya.fast_tiles import GPU_TILES  # noqa: E402

GEMM_KINDS = ("wide", "o", "down", "geglu", "narrow")
AHEAD_OF_A_GEMM = ("add_ln", "attn_full", "attn_window", "geglu")


def prefetch_tiles(blocks: int, classes: list[int], prefetch: bool = True) -> dict:
    out: dict = {}
    for kind in GEMM_KINDS + AHEAD_OF_A_GEMM:
        for c in classes:
            tile = dict(GPU_TILES[kind][c])
            if kind in GEMM_KINDS and prefetch:
                tile["prefetch"] = blocks
            if kind in AHEAD_OF_A_GEMM:
                tile["release"] = True
            out.setdefault(kind, {})[str(c)] = tile
    return out


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print(json.dumps(prefetch_tiles(int(sys.argv[1]), [int(c) for c in sys.argv[2].split(",")],
                                    prefetch=sys.argv[3:] != ["release-only"])))
