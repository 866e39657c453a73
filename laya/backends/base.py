"""The backend contract: a backend replaces the model's forward and nothing else.

`forward(input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False)` must return
`(logits [N, K] fp32, act_logits [N, n_act])` with the stock shapes and meaning, on the agent's device
or already on the host (the agent's request path takes either; tilelang returns host tensors, copied
out in its forward's one device-to-host copy). Installing sets an
instance-level `model.forward`; uninstalling restores whatever was there before.
"""

from __future__ import annotations

from typing import Any

DYNAMIC_MAX_L = 256  # token buckets are multiples of 16 up to here...
LONG_BUCKET = 64  # ...and multiples of 64 beyond (fewer shapes for long requests)
TOKEN_ALIGN = 16


class BackendUnavailable(RuntimeError):
    """This backend cannot run here (missing device, package or support); the message says why."""


class Backend:
    name = "base"
    warmup_repeats = 1  # Agent.warmup runs each synthetic shape this many times
    host_inputs = False  # True: the forward takes the collated batch on the host and moves it itself
    own_precision = False  # True: the forward runs in the agent's 16-bit dtype itself: no autocast around it

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
        self.agent._fast = getattr(self, "fast", None)  # the FastLaya object for tilelang (spec 5.1)
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
        self.agent._fast = None
        self.installed = False

    def stock_forward(self, *args: Any, **kwargs: Any):
        """The model class's own forward, whatever is installed on the instance."""
        return type(self.model).forward(self.model, *args, **kwargs)

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False):
        return self.stock_forward(input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder)

    def warmup(self, shapes: Any = None) -> float:
        return 0.0


def bucket_rows(n: int) -> int:
    """Next power of two >= n (1 stays 1): few distinct row counts, little padding."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def bucket_tokens(length: int, max_len: int | None = None) -> int:
    step = TOKEN_ALIGN if length <= DYNAMIC_MAX_L else LONG_BUCKET
    padded = -(-length // step) * step
    return min(padded, max_len) if max_len else padded


def pad_batch(input_ids, attention_mask, marker_pos, marker_mask, qtype, max_len: int | None,
              pad_id: int = 0, keep_one_token: bool = False):
    """Pad to the bucket shape. Padding rows: pad ids, empty attention (or token 0 live with
    `keep_one_token`, since SDPA turns all-masked rows into NaN that poisons CUDA-graph replays),
    marker 0 at position 0 live, qtype 0. Returns the padded tensors and the original (N, L)."""
    n, length = input_ids.shape
    rows, width = bucket_rows(n), max(bucket_tokens(length, max_len), length)
    if (rows, width) == (n, length):
        return (input_ids, attention_mask, marker_pos, marker_mask, qtype), (n, length)
    ids = input_ids.new_full((rows, width), pad_id)
    ids[:n, :length] = input_ids
    mask = attention_mask.new_zeros((rows, width))
    mask[:n, :length] = attention_mask
    if keep_one_token:
        mask[n:, 0] = 1
    pos = marker_pos.new_zeros((rows, marker_pos.shape[1]))
    pos[:n] = marker_pos
    live = marker_mask.new_zeros((rows, marker_mask.shape[1]))
    live[:n] = marker_mask
    live[n:, 0] = True
    types = qtype.new_zeros(rows)
    types[:n] = qtype
    return (ids, mask, pos, live, types), (n, length)
