"""Does torch's cuBLASLt preference pick faster kernels than its default cuBLAS for the GEMMs the fast path gives
cuBLAS (issue 26)?  Case d's shapes at 90112 rows, bf16, each timed inside a CUDA graph with its weights streamed
from HBM (bench_tiles' ring of copies), the two libraries alternating for three rounds; writes JSON.

    python benchmarks/bench_blas_preference.py --out benchmarks/results/cublaslt_preference_<gpu>_<date>.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_tiles import graph_ms, ring  # noqa: E402

from _env import save_result  # noqa: E402

M = 90112
SHAPES = {"qkv": (3072, 1024), "o": (1024, 1024), "down": (1024, 2624), "up2F": (5248, 1024), "h_ffn2": (1024, 4096)}
LIBRARIES = ("cublas", "cublaslt")
ROUNDS, CALLS = 3, 8


def time_shape(n: int, k: int) -> dict:
    weights = ring(n, k)
    a = torch.randn(M, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(M, n, device="cuda", dtype=torch.bfloat16)
    calls = [weights[i % len(weights)] for i in range(CALLS)]
    times: dict = {lib: [] for lib in LIBRARIES}
    outputs = {}
    for _ in range(ROUNDS):
        for lib in LIBRARIES:
            torch.backends.cuda.preferred_blas_library(lib)  # read when the graph is captured
            torch.mm(a, calls[0].t(), out=out)
            outputs[lib] = out.clone()
            times[lib].append(graph_ms([lambda w=w: torch.mm(a, w.t(), out=out) for w in calls], per=CALLS))
    med = {lib: statistics.median(v) for lib, v in times.items()}
    return {"N": n, "K": k, "ms": med, "raw_ms": times, "default_over_lt": med["cublas"] / med["cublaslt"],
            "tflops": {lib: 2 * M * n * k / v / 1e9 for lib, v in med.items()},
            "max_abs_diff": (outputs["cublas"].float() - outputs["cublaslt"].float()).abs().max().item()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    results = {}
    try:
        for name, (n, k) in SHAPES.items():
            results[name] = time_shape(n, k)
            r = results[name]
            print(f"{name}: cublas {r['ms']['cublas']:.4f} ms, cublaslt {r['ms']['cublaslt']:.4f} ms, "
                  f"default/lt {r['default_over_lt']:.3f}", flush=True)
    finally:
        torch.backends.cuda.preferred_blas_library("cublas")
    record = {"benchmark": "bench_blas_preference", "issue": 26, "date": dt.date.today().isoformat(),
              "gpu": torch.cuda.get_device_name(), "M": M, "rounds": ROUNDS,
              "calls_per_graph": CALLS, "results": results}
    print("wrote", save_result(record, f"cublaslt_preference_{dt.date.today().isoformat()}.json", args.out))


if __name__ == "__main__":
    main()
