"""What this CPU offers for inference: matrix instruction sets and physical cores, probed once.

The CPU paths pick their precision and thread count from this (ONNX Runtime session set-up,
benchmarks/bench_cpu.py), and record it, so a number measured on an AMX box is never read as one
from an AVX2 box. Linux reads /proc/cpuinfo; elsewhere torch's capability string (when torch is
loaded) is the only source, and the flags it cannot tell are reported False.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import asdict, dataclass

# /proc/cpuinfo flag -> field name; the kernel spells some with underscores, some without.
FLAGS = {"amx_bf16": "amx_bf16", "amx_int8": "amx_int8", "amx_tile": "amx_tile", "avx512_bf16": "avx512_bf16",
         "avx512_vnni": "avx512_vnni", "avx_vnni": "avx_vnni", "avx512f": "avx512f", "avx2": "avx2", "fma": "fma"}


@dataclass(frozen=True)
class CpuFeatures:
    model: str
    logical_cores: int  # CPUs this process may run on
    physical_cores: int  # distinct cores among them (SMT siblings counted once)
    amx_bf16: bool
    amx_int8: bool
    amx_tile: bool
    avx512_bf16: bool
    avx512_vnni: bool
    avx_vnni: bool
    avx512f: bool
    avx2: bool
    fma: bool
    torch_capability: str | None  # torch.backends.cpu.get_cpu_capability(): what ATen dispatches to
    source: str  # "cpuinfo" or "torch"

    @property
    def native_bf16(self) -> bool:
        """bf16 matrix products in hardware (AMX tiles or AVX-512 BF16 dot products)."""
        return self.amx_bf16 or self.avx512_bf16

    @property
    def int8_dot(self) -> bool:
        """u8 x s8 dot-product instructions (VNNI or AMX) that make INT8 matmuls ~4x fp32 throughput."""
        return self.amx_int8 or self.avx512_vnni or self.avx_vnni

    @property
    def best_isa(self) -> str:
        """The widest matrix path, for reports: amx, avx512_bf16, avx512_vnni, avx512, avx2 or baseline."""
        for name in ("amx_bf16", "avx512_bf16", "avx512_vnni", "avx512f", "avx2"):
            if getattr(self, name):
                return {"amx_bf16": "amx", "avx512f": "avx512"}.get(name, name)
        return "baseline"

    def as_dict(self) -> dict:
        return {**asdict(self), "native_bf16": self.native_bf16, "int8_dot": self.int8_dot, "best_isa": self.best_isa}


def parse_cpuinfo(text: str) -> tuple[str, set[str], dict[int, tuple[str, str]]]:
    """(model name, flags of the first processor, {cpu: (physical id, core id)}) from /proc/cpuinfo text."""
    model, flags, topo = "", set(), {}
    cpu, phys, core = None, "0", None
    for line in text.splitlines() + [""]:
        if not line.strip():  # a blank line ends one processor's block
            if cpu is not None:
                topo[cpu] = (phys, core if core is not None else str(cpu))
            cpu, phys, core = None, "0", None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor" and value.isdigit():
            cpu = int(value)
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
        elif key == "model name" and not model:
            model = value
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags, topo


def _affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _torch_capability() -> str | None:
    """torch's dispatch level, only when torch is already loaded: the ONNX path must not import it."""
    if "torch" not in sys.modules:
        return None
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - torch absent (the ONNX-only install) or too old
        return None


def probe(cpuinfo_text: str | None = None, allowed: set[int] | None = None,
          torch_capability: str | None = None) -> CpuFeatures:
    """The features of this machine, or of the given /proc/cpuinfo text and CPU set (for tests)."""
    if cpuinfo_text is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo_text = f.read()
        except OSError:
            cpuinfo_text = ""
        allowed = _affinity() if allowed is None else allowed
        torch_capability = torch_capability or _torch_capability()
    model, flags, topo = parse_cpuinfo(cpuinfo_text)
    if allowed is None:
        allowed = set(topo) or set(range(os.cpu_count() or 1))
    logical = len(allowed) or 1
    cores = {topo[c] for c in allowed if c in topo}
    physical = len(cores) if cores else logical
    if flags:
        found = {field: flag in flags for flag, field in FLAGS.items()}
        source = "cpuinfo"
    else:  # no cpuinfo (macOS, Windows): torch's dispatch level is all we know
        cap = (torch_capability or "").upper()
        found = {field: False for field in FLAGS.values()}
        found["avx2"] = found["fma"] = cap in ("AVX2", "AVX512")
        found["avx512f"] = cap == "AVX512"
        source = "torch"
    import platform

    return CpuFeatures(model=model or platform.processor() or platform.machine() or "unknown",
                       logical_cores=logical, physical_cores=max(1, min(physical, logical)),
                       torch_capability=torch_capability, source=source, **found)


@functools.lru_cache(maxsize=1)
def features() -> CpuFeatures:
    """This machine's features, probed once per process."""
    return probe()


def physical_cores() -> int:
    return features().physical_cores
