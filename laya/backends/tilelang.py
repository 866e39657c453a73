"""The TileLang fast path as a backend: fused kernels, bf16/fp16 (or FP8 encoder GEMMs), CUDA only."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import torch

from ..export.aoti import DTYPE_NAMES
from ..sequence import config_max_len
from .base import Backend, BackendUnavailable


PRECISIONS = (None, "fp8")  # None: the agent's 16-bit dtype


class TileLangBackend(Backend):
    name = "tilelang"
    host_inputs = True  # FastLaya writes a request into pinned host buffers, one async copy each
    own_precision = True  # 16-bit kernels, and the decision step under FastLaya's own autocast

    def __init__(self, agent: Any, use_graphs: bool = True, verbose: bool = False, kernel_cache: str | None = None,
                 background: bool = True, precision: str | None = None):
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r} is not one the tilelang backend runs; pass None (the agent's "
                             "16-bit dtype) or 'fp8' (8-bit encoder GEMMs on Hopper, bf16 around them)")
        super().__init__(agent)
        self.requested_precision = precision
        self.precision: str | None = None  # what runs once installed: 'bf16', 'fp16' or 'fp8'
        self.use_graphs = use_graphs
        self.verbose = verbose
        self.kernel_cache = kernel_cache  # a directory for the persistent kernel store (laya.kernel_cache)
        self.background = background  # build the kernels the warm-up shapes do not need in the background
        self._fast = None

    @property
    def fast(self) -> Any:
        return self._fast

    def _install(self) -> None:
        agent = self.agent
        if agent.device.type != "cuda":
            raise BackendUnavailable(f"it needs a CUDA device, the agent runs on {agent.device.type}")
        if agent.dtype not in (torch.bfloat16, torch.float16):
            raise BackendUnavailable(f"it runs in bf16 or fp16, the agent's dtype is {agent.dtype}")
        model_type = getattr(agent.model.encoder.config, "model_type", None)
        if model_type != "modernbert":
            raise BackendUnavailable(f"its kernels implement ModernBERT, this encoder is {model_type!r}")
        try:
            importlib.import_module("tilelang")
        except Exception as e:  # noqa: BLE001
            raise BackendUnavailable(f"tilelang does not import ({type(e).__name__}: {e}); "
                                     "install the 'fast' extra: pip install 'laya[fast]'") from None
        try:
            fast_module = importlib.import_module("laya.fast")
        except ImportError as e:
            raise BackendUnavailable(f"the fused forward (laya.fast) does not import: {e}") from None
        if self.kernel_cache is not None:
            importlib.import_module("laya.kernel_cache").use(self.kernel_cache)
        fp8 = self.requested_precision == "fp8" and self._fp8_runs_here()
        options = dict(max_len=config_max_len(agent.cfg), use_graphs=self.use_graphs, verbose=self.verbose,
                       dtype=torch.bfloat16 if fp8 else agent.dtype, pad_id=agent.tok.pad_token_id,
                       background=self.background, fp8=fp8)
        try:
            self._fast = fast_module.FastLaya(agent.model, **options)
        except ValueError as e:  # an encoder the kernels do not implement (biases, activation, sizes)
            raise BackendUnavailable(str(e)) from None
        except Exception:  # noqa: BLE001 - tilelang's JIT cache sometimes fails once; the retry decides
            try:
                self._fast = fast_module.FastLaya(agent.model, **options)
            except Exception as e:  # noqa: BLE001 - twice: report it as unavailable (warning + eager)
                raise BackendUnavailable(f"building the fused forward failed: {type(e).__name__}: {e}") from e
        self.max_len = self._fast.max_len
        self.precision = "fp8" if fp8 else DTYPE_NAMES[agent.dtype]

    def _fp8_runs_here(self) -> bool:
        """Whether FP8 GEMMs run on this GPU; if not: raise under strict=True, else the one warning (bf16 runs)."""
        why = importlib.import_module("laya.fp8").supported(self.agent.device)
        if why is None:
            return True
        if self.strict:
            raise BackendUnavailable(f"precision='fp8' cannot run here: {why}")
        warnings.warn(f"laya: tilelang precision 'fp8' is unavailable ({why}); using bf16 instead.",
                      RuntimeWarning, stacklevel=6)
        return False

    def _uninstall(self) -> None:
        self._fast = None

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False):
        return self._fast(input_ids, attention_mask, marker_pos, marker_mask, qtype)

    def call(self, tensors: tuple) -> tuple:
        return self._fast(*tensors)

    @property
    def warmup_repeats(self) -> int:
        """The fast path captures a plan's CUDA graph on its capture_after-th run."""
        return getattr(self._fast, "capture_after", 1)
