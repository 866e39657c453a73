"""torch.compile backend (CUDA): dynamic shapes, bucket padding, CUDA graphs, persistent Inductor cache.

Two choices keep memory near eager's: token counts reach the compiled graph as `16 * n` (ids arrive
as [N, n, 16]), so Inductor can prove attention-mask rows are aligned and keep them as views; and the
ModernBERT masks are passed pre-built in broadcast form (`broadcast_masks`), never as rows x heads x L x L.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import torch

from ..compiled import check_compile_mode, run_compiled
from ..model import broadcast_masks
from .base import TOKEN_ALIGN, Backend, BackendUnavailable, pad_batch

WARMUP_SHAPES = ((1, 64, 3), (4, 128, 5), (8, 256, 6))
CALLS_PER_SHAPE = 3  # CUDA-graph trees record on the second call and replay from the third
OFF_VALUES = ("0", "false", "no", "off")


def configure_inductor_cache() -> str:
    """Persistent FX-graph cache (default ~/.cache/laya/inductor); an existing setting wins."""
    chosen = os.environ.get("LAYA_INDUCTOR_CACHE_DIR", "").strip() or \
        os.path.join(os.path.expanduser("~"), ".cache", "laya", "inductor")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", chosen)
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]


def warmup_enabled(explicit: bool | None) -> bool:
    if explicit is not None:
        return explicit
    return os.environ.get("LAYA_COMPILE_WARMUP", "1").strip().lower() not in OFF_VALUES


class CompileBackend(Backend):
    name = "compile"

    def __init__(self, agent: Any, mode: str = "reduce-overhead", warmup: bool | None = None):
        super().__init__(agent)
        check_compile_mode(mode)
        self.mode = mode
        self.do_warmup = warmup_enabled(warmup)
        self.warmup_s = 0.0
        self.cache_dir: str | None = None
        self.compiled = None
        self._lock = threading.RLock()
        config = agent.model.encoder.config
        # broadcast masks are a ModernBERT mask mapping; other encoders get the stock 2-D mask
        self.sliding_window = getattr(config, "sliding_window", None) \
            if getattr(config, "model_type", None) == "modernbert" else None

    def _install(self) -> None:
        if self.agent.device.type != "cuda":
            raise BackendUnavailable(f"it is CUDA-only, the agent runs on {self.agent.device.type} "
                                     "(compile=True still compiles on the CPU)")
        if not hasattr(torch, "compile"):
            raise BackendUnavailable(f"torch {torch.__version__} has no torch.compile")
        self.cache_dir = configure_inductor_cache()
        self.max_len = int(self.agent.cfg.get("max_len", 512))
        kwargs = {} if self.mode == "default" else {"mode": self.mode}
        self.compiled = torch.compile(self._aligned_forward, dynamic=True, **kwargs)
        if self.do_warmup:
            try:
                self.warmup()
            except Exception as e:  # noqa: BLE001 - reported as unavailable, with the compiler's words
                self.compiled = None
                raise BackendUnavailable(f"warm-up failed: {type(e).__name__}: {e}") from e

    def _uninstall(self) -> None:
        self.compiled = None

    def _aligned_forward(self, ids16, mask16, marker_pos, marker_mask, qtype):
        n = ids16.shape[0]
        input_ids, attention_mask = ids16.reshape(n, -1), mask16.reshape(n, -1)
        encoder_mask = None if self.sliding_window is None else broadcast_masks(attention_mask, self.sliding_window)
        return self.stock_forward(input_ids, attention_mask, marker_pos, marker_mask, qtype,
                                  encoder_mask=encoder_mask)

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False):
        tensors, (n, _) = pad_batch(input_ids, attention_mask, marker_pos, marker_mask, qtype, self.max_len,
                                    pad_id=self.agent.tok.pad_token_id, keep_one_token=True)
        ids, mask, pos, live, types = tensors
        rows = ids.shape[0]
        ids16, mask16 = ids.reshape(rows, -1, TOKEN_ALIGN), mask.reshape(rows, -1, TOKEN_ALIGN)
        with self._lock:
            logits, act = run_compiled(self.compiled, (ids16, mask16, pos, live, types), on_cuda=True,
                                       mark_steps=self.mode == "reduce-overhead")
        return logits[:n], act[:n]

    def warmup(self, shapes: Any = None) -> float:
        start = time.perf_counter()
        agent = self.agent
        for rows, tokens, markers in shapes or WARMUP_SHAPES:
            length = max(min(tokens, self.max_len), markers + 2)
            ids = torch.full((rows, length), agent.tok.cls_token_id, dtype=torch.long, device=agent.device)
            pos = torch.arange(1, markers + 1, device=agent.device).repeat(rows, 1)
            args = (ids, torch.ones_like(ids), pos, torch.ones_like(pos, dtype=torch.bool),
                    torch.zeros(rows, dtype=torch.long, device=agent.device))
            with torch.no_grad(), torch.autocast("cuda", dtype=agent.dtype, enabled=agent.amp_enabled):
                for _ in range(CALLS_PER_SHAPE):
                    self.forward(*args)
        torch.cuda.synchronize(agent.device)
        self.warmup_s = time.perf_counter() - start
        return self.warmup_s
