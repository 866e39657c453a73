"""The TileLang fast path as a backend: fused kernels, bf16/fp16, CUDA only."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from ..sequence import config_max_len
from .base import Backend, BackendUnavailable


class TileLangBackend(Backend):
    name = "tilelang"
    host_inputs = True  # FastLaya writes a request into pinned host buffers, one async copy each
    own_precision = True  # 16-bit kernels, and the decision step under FastLaya's own autocast

    def __init__(self, agent: Any, use_graphs: bool = True, verbose: bool = False, kernel_cache: str | None = None,
                 background: bool = True):
        super().__init__(agent)
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
        options = dict(max_len=config_max_len(agent.cfg), use_graphs=self.use_graphs, verbose=self.verbose,
                       dtype=agent.dtype, pad_id=agent.tok.pad_token_id, background=self.background)
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
