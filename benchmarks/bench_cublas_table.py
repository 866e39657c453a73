"""Which GEMM kind of the fast path's tile table should run on cuBLAS at each token-row class (issue 26)?

    python benchmarks/bench_cublas_table.py --out benchmarks/results/cublas_table_<gpu>_<date>.json

For every class of laya.fast_tiles (at its upper bound M; the open last class at 8192 and 90112 tokens) and
every table kind, the fast path's own composition is timed against cuBLAS's, as laya.fast runs them:

  wide    encoder QKV (28 per forward) + head QKV and first FFN layer (2 each; bias, ReLU)
  geglu   encoder up-projection: the fused TileLang GEGLU vs cuBLAS into [M, 2F] + gelu * gate (TorchGeglu)
  o/down  encoder attention output / MLP down, each with the residual-add + LayerNorm that consumes it
          (the table's split-K factor and add_ln vs cuBLAS + the plain add_ln)
  narrow  head attention output and second FFN layer (2 each; bias)

TileLang uses the table's tile as it stands (its `cublas` flags ignored), cuBLAS the product's callables
(laya.cublas_gemm). Each call is timed inside a CUDA graph with its weights streamed from HBM (bench_tiles'
ring of copies). A kind's per-forward time weights each role by its count per forward. The verdict per
(kind, class): cuBLAS where its per-forward time is at least MARGIN faster. Outputs are checked against an
fp32 product. Written for ModernBERT-large (d=1024, ffn=2624, 28 layers, 2 head layers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_tiles import CALLS, RING_BYTES, checked, graph_ms, ring  # noqa: E402

from _env import environment  # noqa: E402
from laya import tl_kernels as K  # noqa: E402
from laya.cublas_gemm import TorchGeglu, TorchGemm  # noqa: E402
from laya.fast_tiles import GPU_TILES, M_CLASSES, TILE_KEYS  # noqa: E402

DEV, DT = "cuda", torch.bfloat16
D, FF, LAYERS, HEAD_LAYERS = 1024, 2624, 28, 2
LARGE_MS = (8192, 90112)  # the open last class: a mid-size batch and the ragged case d
MARGIN = 0.02  # cuBLAS must save at least this share of a kind's per-forward time
# kind -> (role, N, K, bias, act, residual consumer, count per forward)
ROLES = {
    "wide": (("qkv", 3 * D, D, False, "none", False, LAYERS), ("h_qkv", 3 * D, D, True, "none", False, HEAD_LAYERS),
             ("h_ffn1", 4 * D, D, True, "relu", False, HEAD_LAYERS)),
    "geglu": (("up", FF, D, False, "geglu", False, LAYERS),),
    "o": (("o", D, D, False, "none", True, LAYERS),),
    "down": (("down", D, FF, False, "none", True, LAYERS),),
    "narrow": (("h_o", D, D, True, "none", False, HEAD_LAYERS), ("h_ffn2", D, 4 * D, True, "none", False, HEAD_LAYERS)),
}


def class_points() -> list[tuple[int, int]]:
    """(class index, M) pairs: each bounded class at its bound, the last at LARGE_MS."""
    points = [(c, bound) for c, bound in enumerate(M_CLASSES) if bound is not None]
    return points + [(len(M_CLASSES) - 1, m) for m in LARGE_MS]


def time_role(c: int, m: int, kind: str, role: tuple) -> dict:
    """Per-call ms of the table's TileLang composition and of cuBLAS's for one role at M = m."""
    name, n, k, bias, act, residual, _ = role
    tile = GPU_TILES[kind][c]
    cfg = {key: tile[key] for key in TILE_KEYS if key in tile}
    splits = 0 if residual is False else tile.get("splits", 0)
    rows = 2 * n if act == "geglu" else n
    weights = ring(rows, k)
    calls = [weights[i % len(weights)] for i in range(CALLS)]
    a = (torch.randn(m, k, device=DEV) * 0.5).to(DT)
    b = torch.randn(n, device=DEV) * 0.1
    out = torch.empty(m, n, device=DEV, dtype=DT)
    if act == "geglu":
        tl, cu = K.gemm_geglu_kernel(n, k, dtype="bfloat16", **cfg), TorchGeglu(n)
        tl_calls = [lambda w=w: tl(a, w, out) for w in calls]
        cu_calls = [lambda w=w: cu(a, w, out) for w in calls]
        ref = a.float() @ calls[0].float().t()
        ref = F.gelu(ref[:, :n]) * ref[:, n:]
    elif residual:
        ln_tile = GPU_TILES["add_ln"][c]
        x = torch.randn(m, n, device=DEV)
        ones, zero = torch.ones(n, device=DEV), torch.zeros(n, device=DEV)
        y = torch.empty(m, n, device=DEV, dtype=DT)
        cu, plain_ln = TorchGemm(False), K.add_ln_kernel(n, splits=0, dtype="bfloat16", **ln_tile)
        cu_calls = [f for w in calls for f in (lambda w=w: cu(a, w, zero, out), lambda: plain_ln(x, out, ones, zero, y))]
        if splits:
            part = torch.empty(splits, m, n, device=DEV)
            tl = K.gemm_splitk_kernel(n, k, splits, dtype="bfloat16", **cfg)
            split_ln = K.add_ln_kernel(n, splits=splits, dtype="bfloat16", **ln_tile)
            tl_calls = [f for w in calls for f in (lambda w=w: tl(a, w, zero, part),
                                                   lambda: split_ln(x, part, ones, zero, y))]
        else:
            tl = K.gemm_kernel(n, k, dtype="bfloat16", **cfg)
            tl_calls = [f for w in calls for f in (lambda w=w: tl(a, w, zero, out),
                                                   lambda: plain_ln(x, out, ones, zero, y))]
        ref = a.float() @ calls[0].float().t()
    else:
        tl, cu = K.gemm_kernel(n, k, bias=bias, act=act, dtype="bfloat16", **cfg), TorchGemm(bias, act)
        tl_calls = [lambda w=w: tl(a, w, b, out) for w in calls]
        cu_calls = [lambda w=w: cu(a, w, b, out) for w in calls]
        ref = a.float() @ calls[0].float().t() + (b if bias else 0)
        ref = ref.relu() if act == "relu" else ref
    entry = {"role": name, "N": n, "K": k, "tile": cfg, "splits": splits,
             "tilelang_ms": graph_ms(tl_calls, per=CALLS), "cublas_ms": graph_ms(cu_calls, per=CALLS)}
    if act == "geglu" or not residual:  # each composition's own output against the fp32 product
        for label, fn in (("tilelang", tl_calls[0]), ("cublas", cu_calls[0])):
            fn()
            checked(out, ref, f"{name} {label} M={m}")
    else:
        cu(a, calls[0], zero, out)
        checked(out, ref, f"{name} cublas M={m}")
    return entry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    results, verdict = [], {}
    for c, m in class_points():
        for kind, roles in ROLES.items():
            entries = [time_role(c, m, kind, role) for role in roles]
            per_forward = {side: sum(e[f"{side}_ms"] * role[-1] for e, role in zip(entries, roles))
                           for side in ("tilelang", "cublas")}
            use = per_forward["cublas"] <= (1 - MARGIN) * per_forward["tilelang"]
            results.append({"class": c, "bound": M_CLASSES[c], "M": m, "kind": kind, "roles": entries,
                            "per_forward_ms": per_forward, "cublas_over_tilelang": per_forward["cublas"] / per_forward["tilelang"],
                            "use_cublas": use})
            verdict.setdefault(kind, {}).setdefault(c, []).append(use)
            print(f"class {c} M={m:6d} {kind:6s} tilelang {per_forward['tilelang']:.4f} ms  cublas "
                  f"{per_forward['cublas']:.4f} ms  ratio {per_forward['cublas'] / per_forward['tilelang']:.2f}"
                  f"{'  -> cuBLAS' if use else ''}", flush=True)
    # a class is given to cuBLAS only where every measured point of it agrees
    table = {kind: [all(v) for _, v in sorted(by_class.items())] for kind, by_class in verdict.items()}
    print("cuBLAS per kind and class:", json.dumps(table))
    record = {"benchmark": "benchmarks/bench_cublas_table.py", "issue": 26, "date": dt.date.today().isoformat(),
              "gpu": torch.cuda.get_device_name(), "env": environment(), "calls_per_graph": CALLS,
              "ring_bytes": RING_BYTES, "margin": MARGIN, "results": results, "cublas_table": table}
    path = args.out or os.path.join(HERE, "results", f"cublas_table_{dt.date.today().isoformat()}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
