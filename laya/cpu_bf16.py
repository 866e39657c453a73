"""bf16 copies of the Linear weights for CPU bf16 autocast, made once instead of on every forward.

CPU autocast casts every fp32 weight to bf16 again in each autocast region (its cast cache lives only
as long as one region): on the mmBERT-base shape that is ~1/3 of a bf16 `predict`. Inside `scope()`,
`F.linear` (every nn.Linear, and the head attention's in-projection) gets this cache's bf16 copy of
its fp32 weight and bias; autocast then casts only the input, so the same bf16 numbers go into the
same op and the products are bit-identical to the per-call cast (ModernBERT's Wqkv copies may hold their q/k
rows in rotation-pair order: laya.rotary; q.k is then summed in another order). A TorchFunctionMode (thread-local,
entered only around the eager backend's autocast forward) rather than patched modules: module types,
state_dict keys and the compiled/exported paths stay as they were.

The fp32 parameters stay the model's weights: state_dict, fp32 calls and the fp32 retry after an
autocast failure never see a copy. A copy is rebuilt when its parameter was written in place (its
version counter: load_state_dict, optimiser steps, `copy_` under no_grad) or got new storage
(`.data = ...`, a device move); writes through `param.data` bypass the version counter and are not
seen (call `clear()` after such a write). Costs: 2 bytes per Linear weight/bias element while the
model lives, from the first bf16 call on (250.5 MB for mmBERT-base: 112 tensors); and ~1.7 us of
Python on each torch call inside the scope (~1,400 calls, ~2 ms, in an mmBERT-base 1 x 3 predict).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from .rotary import mark_paired, pairs_side_by_side


class Bf16Weights:
    """The bf16 copies of one model's parameters that go into `F.linear`, keyed weakly by parameter."""

    def __init__(self) -> None:
        self._copies = WeakIdKeyDictionary()  # parameter -> (storage, data_ptr, version, bf16 copy)
        self._paired = WeakIdKeyDictionary()  # the same for ModernBERT Wqkv copies with rotation pairs side by side
        self._lock = threading.Lock()

    def scope(self, device: torch.device, dtype: torch.dtype, paired: dict | None = None) -> Any:
        """The context to run a forward in, inside `torch.autocast(device, dtype)`; a no-op unless CPU bf16.
        `paired` = {id(Wqkv weight or bias): head_dim}: those go in as `laya.rotary.pairs_side_by_side` copies and
        their products are marked for `laya.rotary.apply_rotary` (only where it is transformers' function)."""
        if device.type == "cpu" and dtype is torch.bfloat16:
            return _CachedLinears(self, paired or {})
        return contextlib.nullcontext()

    def copy_of(self, param: torch.Tensor, head_dim: int = 0) -> torch.Tensor:
        """The bf16 copy of an fp32 CPU parameter (head_dim > 0: a Wqkv one with paired rows), made (again) when
        the parameter changed since."""
        copies = self._paired if head_dim else self._copies
        entry = copies.get(param)
        ptr, version = param.data_ptr(), param._version
        # the entry keeps the old storage alive, so an equal data_ptr means the same storage
        if entry is not None and entry[1] == ptr and entry[2] == version:
            return entry[3]
        copy = param.detach().to(torch.bfloat16)  # the cast autocast makes (round to nearest even)
        if head_dim:
            copy = pairs_side_by_side(copy, head_dim)
        with self._lock:
            copies[param] = (param.untyped_storage(), ptr, version, copy)
        return copy

    def clear(self) -> None:
        with self._lock:
            self._copies = WeakIdKeyDictionary()
            self._paired = WeakIdKeyDictionary()

    @property
    def nbytes(self) -> int:
        """Bytes the copies hold now."""
        return sum(entry[3].nbytes for copies in (self._copies, self._paired) for entry in list(copies.values()))

    def __len__(self) -> int:
        return len(self._copies) + len(self._paired)


def _cacheable(t: Any) -> bool:
    return (isinstance(t, torch.nn.Parameter) and t.dtype is torch.float32 and t.device.type == "cpu"
            and not t.is_inference())


class _CachedLinears(TorchFunctionMode):
    """Under CPU bf16 autocast and no_grad, `F.linear` takes cached bf16 copies of fp32 parameters."""

    def __init__(self, weights: Bf16Weights, paired: dict):
        super().__init__()
        self.weights = weights
        self.paired = paired

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            cast = not torch.is_grad_enabled() and torch.is_autocast_enabled("cpu") \
                and torch.get_autocast_dtype("cpu") is torch.bfloat16
            if cast or self.paired:
                weight = args[1] if len(args) > 1 else kwargs.get("weight")
                args, kwargs = self._swapped(args, kwargs, cast)
                out = func(*args, **kwargs)
                if weight is not None and id(weight) in self.paired:
                    mark_paired(out)  # its q/k rows are in rotation pairs: laya.rotary rotates them so
                return out
        return func(*args, **kwargs)

    def _swapped(self, args: tuple, kwargs: dict, cast: bool) -> tuple[tuple, dict]:
        """(input, weight, bias) with the fp32 parameters among weight and bias replaced by their copies (`cast`),
        and paired Wqkv parameters in paired row order whether cast or not (laya.rotary rotates that layout)."""
        args = list(args)
        for index, name in ((1, "weight"), (2, "bias")):
            t = args[index] if index < len(args) else kwargs.get(name)
            head_dim = self.paired.get(id(t), 0) if t is not None else 0
            if cast and _cacheable(t):
                t = self.weights.copy_of(t, head_dim)
            elif head_dim:
                t = pairs_side_by_side(t, head_dim)
            else:
                continue
            if index < len(args):
                args[index] = t
            else:
                kwargs = {**kwargs, name: t}
        return tuple(args), kwargs
