"""The backend contract: a backend owns the forward of one agent.

`run(batch)` is the one call the agent makes: it takes a collated `Batch` on the host and returns
`(logits [N, K], act_logits [N, n_act])` on any device. Every device, precision, padding, host-vs-device
input and length decision lives here or in a subclass. `install()` also sets an instance-level
`model.forward` (spec 5.2), so code that calls the model directly gets the backend's forward too;
uninstalling restores whatever was there before.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np

from ..parallel_layout import call_model
from ..sequence import WARMUP_SHAPES, Batch, config_max_len, warmup_batch

DYNAMIC_MAX_L = 256  # token buckets are multiples of 16 up to here...
LONG_BUCKET = 64  # ...and multiples of 64 beyond (fewer shapes for long requests)
TOKEN_ALIGN = 16
INPUT_NAMES = ("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype")  # Batch.tensors(), in order
AMP_RETRY_DEVICES = ("cpu", "mps")  # an autocast failure there reruns the request in fp32


class BackendUnavailable(RuntimeError):
    """This backend cannot run here (missing device, package or support); the message says why."""


def is_oom(error: BaseException, device: Any) -> bool:
    if device.type == "cpu":
        return False
    import torch

    return isinstance(error, torch.cuda.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "memory" in str(error))


class Backend:
    name = "base"
    warmup_shapes = WARMUP_SHAPES
    warmup_repeats = 1  # runs of each warm-up shape a forward needs to be ready (graph capture)
    host_inputs = False  # True: the forward takes the collated batch on the host and moves it itself
    own_precision = False  # True: the forward runs in the agent's 16-bit dtype itself: no autocast around it
    casts_weights_once = False  # True: the eager module tree runs, so CPU bf16 autocast uses cached bf16 weights
    runs_parallel_layout = False  # the parallel option layout (spec 3.9) runs on the eager forward only
    strict = False  # set by backends.install: an option this machine cannot honour raises instead of warning

    def __init__(self, agent: Any):
        self.agent = agent
        self.model = agent.model
        self.max_len: int | None = None  # None = no limit beyond the agent's own
        self.installed = False
        self._previous_forward: Any = None

    # subclasses override these two
    def _install(self) -> None:
        pass

    def _uninstall(self) -> None:
        pass

    def install(self) -> "Backend":
        if self.installed:
            return self
        self._previous_forward = self.model.__dict__.get("forward")
        self._install()
        self.model.forward = self.forward
        self.installed = True
        return self

    def uninstall(self) -> None:
        if not self.installed:
            return
        if self._previous_forward is not None:
            self.model.forward = self._previous_forward
        else:
            self.model.__dict__.pop("forward", None)
        self._uninstall()
        self.installed = False

    @property
    def fast(self) -> Any:
        """The fused-forward object behind this backend (tilelang's FastLaya), else None."""
        return None

    def stock_forward(self, *args: Any, **kwargs: Any):
        """The model class's own forward, whatever is installed on the instance."""
        return type(self.model).forward(self.model, *args, **kwargs)

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False):
        return self.stock_forward(input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder)

    # ---- the agent's one call ------------------------------------------------------------------

    @property
    def limit_advice(self) -> str | None:
        """Appended to the too-many-tokens error."""
        return None

    def check_batch(self, batch: Batch) -> None:
        length = batch.input_ids.shape[1]
        if self.max_len is not None and length > self.max_len:
            advice = self.limit_advice
            raise ValueError(f"this request has rows of {length} tokens but the {self.name} backend was built "
                             f"for at most {self.max_len}; pass max_len<={self.max_len} or use backend='eager'"
                             + (f", {advice}" if advice else ""))
        if batch.position_ids is not None and not self.runs_parallel_layout:
            raise ValueError(f"a parallel-layout batch cannot run on {self.described}; only the eager backend "
                             "runs the parallel option layout: set_backend('eager')")

    @property
    def described(self) -> str:
        return f"the {self.name} backend"

    def inputs(self, batch: Batch) -> tuple:
        """The forward's input tensors: the five of the contract, plus the parallel layout's two ids."""
        tensors = batch.tensors()
        if batch.position_ids is not None:
            tensors = (*tensors, batch.position_ids, batch.option_ids)
        device = self.agent.device
        if device.type == "cpu" or self.host_inputs:
            return tensors
        return tuple(t.to(device, non_blocking=True) for t in tensors)

    def call(self, tensors: tuple) -> tuple:
        return call_model(self.model, tensors)

    def run(self, batch: Batch) -> tuple[Any, Any]:
        """(logits, act_logits) of a collated host batch, under no_grad and the agent's precision."""
        import torch

        self.check_batch(batch)
        tensors = self.inputs(batch)
        agent = self.agent
        dtype = agent.dtype_for(batch.input_ids.shape[0])
        with torch.no_grad():
            # Autocast is never entered when off (entering it on some devices raises even if disabled).
            if dtype == torch.float32 or self.own_precision:
                return self.call(tensors)
            device = agent.device
            try:
                with torch.autocast(device.type, dtype=dtype), self.weights_scope(dtype):
                    out = self.call(tensors)
            except Exception as e:
                # CUDA failures and OOM go to the agent's CPU retry; on MPS/CPU rerun in fp32 and count it
                if device.type not in AMP_RETRY_DEVICES or is_oom(e, device):
                    raise
                out = self.call(tensors)
                agent.amp_failed(e)
                return out
            agent.amp_succeeded()
            return out

    def weights_scope(self, dtype: Any) -> Any:
        """Around the autocast forward: the agent's bf16 weight copies (laya.cpu_bf16) where they apply, and on
        the CPU in bf16 the rotary embedding in fewer passes (laya.rotary), on q/k heads in rotation-pair order
        where the copies can give it (Wqkv rows reordered once, each product marked; q.k is then summed in another
        order)."""
        if not self.casts_weights_once:
            return contextlib.nullcontext()
        import torch

        from .. import rotary
        from ..cpu_bf16 import Bf16Weights
        from . import is_modernbert

        weights = self.agent.bf16_weights
        if self.agent.device.type != "cpu" or dtype is not torch.bfloat16 or not is_modernbert(self.agent):
            return weights.scope(self.agent.device, dtype)
        with contextlib.ExitStack() as stack:  # (if entering one fails, the others are left again)
            patched = stack.enter_context(rotary.scope())
            # q/k rows in rotation pairs only where laya.rotary rotates them (it marks and checks each product)
            paired = patched and rotary._pair_heads and isinstance(weights, Bf16Weights) and self._wqkv_head_dims()
            if paired:
                stack.enter_context(weights.scope(self.agent.device, dtype, paired))
            else:
                stack.enter_context(weights.scope(self.agent.device, dtype))
            return stack.pop_all()

    def _wqkv_head_dims(self) -> dict:
        """{id(parameter): head_dim} of the Wqkv weights and biases of the agent's ModernBERT attention layers that
        are plain nn.Linear modules without hooks (a hook would see, or rewrite, q/k in pair order)."""
        import torch

        found = {}
        for module in self.agent.model.modules():
            wqkv = getattr(module, "Wqkv", None)
            if type(module).__name__ != "ModernBertAttention" or type(wqkv) is not torch.nn.Linear \
                    or not isinstance(getattr(module, "head_dim", None), int) \
                    or wqkv._forward_hooks or wqkv._forward_pre_hooks:
                continue
            for param in (wqkv.weight, wqkv.bias):
                if param is not None:
                    found[id(param)] = module.head_dim
        return found

    # ---- warm-up -----------------------------------------------------------------------------------

    def warmup_batches(self, shapes: Any = None, repeats: int | None = None) -> list[Batch]:
        """The synthetic batches that make this forward ready, each `repeats` (default warmup_repeats) times."""
        cap = self.max_len or config_max_len(self.agent.cfg)
        fill = self.agent.tok.cls_token_id
        repeats = self.warmup_repeats if repeats is None else repeats
        return [warmup_batch(rows, tokens, markers, fill, cap)
                for rows, tokens, markers in shapes or self.warmup_shapes for _ in range(repeats)]

    def warmup(self, shapes: Any = None, repeats: int | None = None) -> float:
        """Run the warm-up batches through `run`; seconds taken."""
        start = time.perf_counter()
        for batch in self.warmup_batches(shapes, repeats):
            self.run(batch)
        if self.agent.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.agent.device)
        return time.perf_counter() - start


def bucket_rows(n: int) -> int:
    """Next power of two >= n (1 stays 1): few distinct row counts, little padding."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def bucket_tokens(length: int, max_len: int | None = None) -> int:
    step = TOKEN_ALIGN if length <= DYNAMIC_MAX_L else LONG_BUCKET
    padded = -(-length // step) * step
    return min(padded, max_len) if max_len else padded


def bucket_shape(n_rows: int, n_tokens: int, max_len: int | None) -> tuple[int, int]:
    """(rows, tokens) a batch is padded to: bucket_rows and bucket_tokens."""
    return bucket_rows(n_rows), bucket_tokens(n_tokens, max_len)


def pad_to(tensors: tuple, rows: int, width: int, slots: int, pad_id: int, keep_one_token: bool = False) -> tuple:
    """The one pad helper: (ids, mask, marker_pos, marker_mask, qtype) grown to `rows` x `width` tokens x
    `slots` markers. New tokens are pad ids with mask 0; new marker slots are masked; padding rows have
    pad ids, an empty mask (token 0 live with `keep_one_token`, since SDPA turns all-masked rows into NaN),
    marker 0 live at position 0 and qtype 0. Nothing is copied when the shape already fits."""
    ids, mask, pos, live, qtype = tensors
    n, length = ids.shape
    k = pos.shape[1]
    if (rows, width, slots) == (n, length, k):
        return tensors
    new_ids = _full(ids, (rows, width), pad_id)
    new_ids[:n, :length] = ids
    new_mask = _full(mask, (rows, width), 0)
    new_mask[:n, :length] = mask
    if keep_one_token:
        new_mask[n:, 0] = 1
    new_pos = _full(pos, (rows, slots), 0)
    new_pos[:n, :k] = pos
    new_live = _full(live, (rows, slots), 0)
    new_live[:n, :k] = live
    new_live[n:, 0] = True
    new_qtype = _full(qtype, (rows,), 0)
    new_qtype[:n] = qtype
    return new_ids, new_mask, new_pos, new_live, new_qtype


def _full(like: Any, shape: tuple, value: int) -> Any:
    """A new array or tensor like `like` (dtype, device) filled with `value`."""
    if isinstance(like, np.ndarray):
        return np.full(shape, value, dtype=like.dtype)
    return like.new_full(shape, value)


def pad_batch(input_ids, attention_mask, marker_pos, marker_mask, qtype, max_len: int | None,
              pad_id: int = 0, keep_one_token: bool = False):
    """Pad to the bucket shape (`pad_to`); returns the padded tensors and the original (N, L)."""
    n, length = input_ids.shape
    rows, width = bucket_shape(n, length, max_len)
    tensors = (input_ids, attention_mask, marker_pos, marker_mask, qtype)
    return pad_to(tensors, rows, max(width, length), marker_pos.shape[1], pad_id, keep_one_token), (n, length)
