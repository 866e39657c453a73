"""Which device an agent runs on and in which precision (the autocast policy of the published library)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import torch

MPS_AMP_MIN_ROWS_DEFAULT = 5


def _cpu_because(message: str) -> torch.device:
    warnings.warn(f"Warning: {message}. Falling back to CPU.", RuntimeWarning, stacklevel=4)
    return torch.device("cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """An explicit device when it exists (else CPU with a RuntimeWarning); None/'auto' = CUDA, MPS, XPU, CPU."""
    if isinstance(device, str) and device.strip().lower() == "auto":
        device = None
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return torch.device("xpu")
        return torch.device("cpu")
    try:
        dev = torch.device(device.strip() if isinstance(device, str) else device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device {device!r} is not a device name; use 'cpu', 'cuda', 'cuda:0', 'mps', "
                         f"'xpu' or 'auto' ({e})") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return _cpu_because("CUDA requested but not available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            return _cpu_because(f"CUDA device {dev} not found ({torch.cuda.device_count()} visible)")
    elif dev.type == "mps":
        if getattr(torch.backends, "mps", None) is None or not torch.backends.mps.is_available():
            return _cpu_because("MPS requested but not available")
    elif dev.type == "xpu":
        if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
            return _cpu_because("XPU requested but not available")
    return dev


def _named_half(value: str | None) -> torch.dtype | None:
    v = (value or "").strip().lower()
    if v in ("fp16", "float16"):
        return torch.float16
    if v in ("bf16", "bfloat16"):
        return torch.bfloat16
    return None


def amp_dtype(name: str | None) -> torch.dtype:
    """The autocast dtype a config names: "bf16" -> bfloat16, anything else float16."""
    return torch.bfloat16 if name == "bf16" else torch.float16


def mps_amp_min_rows() -> int:
    try:
        return max(1, int(os.environ.get("LAYA_MPS_AMP_MIN_ROWS", MPS_AMP_MIN_ROWS_DEFAULT)))
    except ValueError:
        return MPS_AMP_MIN_ROWS_DEFAULT


@dataclass
class Precision:
    dtype: torch.dtype
    amp_enabled: bool
    mps_amp_min_rows: int = MPS_AMP_MIN_ROWS_DEFAULT
    reason: str = field(default="", compare=False)  # why this precision (shown by the CLI; CPU only)

    def dtype_for(self, device: torch.device, rows: int) -> torch.dtype:
        """The precision a call with `rows` rows actually runs in."""
        if not self.amp_enabled:
            return torch.float32
        if device.type == "mps" and rows < self.mps_amp_min_rows:
            return torch.float32
        return self.dtype


def precision_policy(device: torch.device, cfg: dict) -> Precision:
    """Parameters stay fp32; this picks the autocast dtype (or none) per device, as the spec's table."""
    if device.type == "cuda":
        try:
            major, _ = torch.cuda.get_device_capability(device)
        except Exception:  # noqa: BLE001 - any driver error means: assume an old GPU
            warnings.warn("Warning: could not query CUDA capability; assuming fp16 defaults.",
                          RuntimeWarning, stacklevel=3)
            return Precision(torch.float16, True)
        if major < 8:
            return Precision(torch.float16, True)
        env = _named_half(os.environ.get("LAYA_CUDA_AMP"))
        if env is not None:
            return Precision(env, True)
        return Precision(torch.bfloat16 if cfg.get("amp_dtype", "fp16") == "bf16" else torch.float16, True)
    if device.type == "mps":
        return Precision(torch.float16, True, mps_amp_min_rows())
    if device.type == "xpu":
        return Precision(torch.bfloat16, True)
    return cpu_precision(os.environ.get("LAYA_CPU_AMP"))


def cpu_precision(setting: str | None) -> Precision:
    """LAYA_CPU_AMP: unset (or anything else) fp32, the published default; "bf16"/"bfloat16" bf16
    autocast; "auto" bf16 autocast only where the CPU multiplies bf16 natively (AMX or AVX-512 BF16)."""
    from .cpu_features import features

    cpu = features()
    value = (setting or "").strip().lower()
    if value == "auto":
        if cpu.native_bf16:
            return Precision(torch.bfloat16, True, reason=f"LAYA_CPU_AMP=auto, native bf16 ({cpu.best_isa})")
        return Precision(torch.float32, False, reason=f"LAYA_CPU_AMP=auto, no native bf16 ({cpu.best_isa})")
    if _named_half(value) is torch.bfloat16:
        if not cpu.native_bf16:
            warnings.warn(f"Warning: LAYA_CPU_AMP={setting} on a CPU without native bf16 ({cpu.best_isa}); "
                          "bf16 is emulated there and usually slower than float32. Unset it (or use 'auto').",
                          RuntimeWarning, stacklevel=4)
        return Precision(torch.bfloat16, True, reason=f"LAYA_CPU_AMP={setting}")
    return Precision(torch.float32, False, reason="default")


def describe(precision: Precision, device: torch.device) -> str:
    """One line for people: the dtype a request runs in on `device`, and why."""
    name = str(precision.dtype).replace("torch.", "")
    what = f"{name} autocast" if precision.amp_enabled else "float32"
    return f"{device.type}: {what}" + (f" ({precision.reason})" if precision.reason else "")
