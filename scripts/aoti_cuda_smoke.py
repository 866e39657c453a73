"""Can this torch build load AOTInductor packages at all? A two-layer MLP, packaged and loaded.

    python scripts/aoti_cuda_smoke.py [--device cuda] [--out DIR]

Separates toolchain failures from laya's: no laya model, no laya metadata (one variant adds a record
like laya's, to rule it out). Each package is loaded in a fresh process (laya.export.aoti.probe_load),
so a loader crash is reported, not suffered. On the lent H200 (torch 2.11.0+cu130, 2026-11-29) every
variant crashed with SIGSEGV inside the loader, which is why laya probes CUDA packages before loading.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from laya.export.aoti import METADATA_KEY, probe_load  # noqa: E402


def package_mlp(path: str, device: str, metadata: dict | None) -> float:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device).eval()
    example = torch.randn(4, 64, device=device)
    program = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("rows", min=1, max=64)},))
    started = time.perf_counter()
    torch._inductor.aoti_compile_and_package(program, package_path=path,
                                             inductor_configs={"aot_inductor.metadata": metadata} if metadata else {})
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cpu", "cuda"))
    parser.add_argument("--out", default=None, help="where the packages go (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="aoti-smoke-")
    os.makedirs(out, exist_ok=True)
    variants = {"plain": None, "laya_record": {METADATA_KEY: json.dumps({"format": 1, "device": args.device})}}
    report = {"torch": torch.__version__, "device": args.device,
              "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None, "variants": {}}
    for name, metadata in variants.items():
        path = os.path.join(out, f"{name}.pt2")
        package_s = package_mlp(path, args.device, metadata)
        reason = probe_load(path, 0 if args.device == "cuda" else -1)
        report["variants"][name] = {"package_s": round(package_s, 1), "loads": reason is None, "reason": reason}
        print(f"{name:12s} packaged in {package_s:.1f} s: " + ("loads" if reason is None else reason), flush=True)
    print(json.dumps(report))
    return 0 if all(v["loads"] for v in report["variants"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
