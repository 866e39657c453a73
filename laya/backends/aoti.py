"""AOTInductor backend: the forward runs a .pt2 package instead of the model's Python forward.

    agent.set_backend("aoti", aoti_path="decision.pt2")          # or package="decision.pt2"
    laya.load(ckpt, backend="aoti", aoti_path="decision.pt2")

The package comes from `laya.export.aoti.build_package` or `scripts/check_aoti.py`; its metadata
record says which inputs it accepts (rows, marker slots, tokens in multiples of 16), on which device
it runs and which weights it was exported from. Requests are fitted into those ranges: tokens are
right-padded to a multiple of 16 (at least the minimum), marker slots to the minimum (masked), a
batch with fewer rows than the minimum gets padding rows, and one with more rows than the maximum
runs in slices of at most the maximum (rows are independent). Longer rows or more marker slots than
the package accepts are refused with a ValueError that says what to do; nothing is truncated.

`auto` never picks this backend: it needs an explicit package. A missing file is FileNotFoundError;
a package that cannot run here (wrong device, no laya record, does not load) is BackendUnavailable
(one warning and the eager forward, or an error with strict=True); a package exported from other
weights is a ValueError.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import torch

from ..export import aoti as export
from .base import Backend, BackendUnavailable, pad_to


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


class AOTIBackend(Backend):
    name = "aoti"

    def __init__(self, agent: Any, aoti_path: str | os.PathLike | None = None,
                 package: str | os.PathLike | None = None, check_weights: bool = True):
        super().__init__(agent)
        if aoti_path is not None and package is not None and os.fspath(aoti_path) != os.fspath(package):
            raise ValueError(f"give the package once: aoti_path={aoti_path!r} and package={package!r} differ")
        path = aoti_path if aoti_path is not None else package
        if path is None:
            raise ValueError("the aoti backend needs a package: set_backend('aoti', aoti_path='decision.pt2') or "
                             "laya.load(..., backend='aoti', aoti_path=...); build one with "
                             "laya.export.aoti.build_package or scripts/check_aoti.py --model CKPT")
        self.path = os.path.abspath(os.fspath(path))
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"AOTInductor package not found at {self.path!r}; build it with "
                                    "scripts/check_aoti.py --model CKPT --output-dir DIR (DIR/decision.pt2) or "
                                    "laya.export.aoti.build_package")
        self.check_weights = check_weights
        self.info: dict | None = None
        self.ranges: export.Ranges | None = None
        self.runner: Any = None
        self.load_s = 0.0
        self.warmup_s = 0.0
        self._call: Any = None
        self._dtypes: tuple[torch.dtype, ...] | None = None
        self._lock = threading.Lock()

    # ---- install ---------------------------------------------------------------------------------

    def _install(self) -> None:
        device = self.agent.device
        if device.type not in ("cpu", "cuda"):
            raise BackendUnavailable(f"AOTInductor packages run on cpu or cuda, the agent runs on {device.type}")
        try:
            info = export.read_info(self.path)
        except ValueError as e:
            raise BackendUnavailable(str(e)) from e
        if info is None:
            raise BackendUnavailable(f"the package at {self.path!r} has no laya record (ranges, device, weights); "
                                     "re-export it with laya.export.aoti.build_package or scripts/check_aoti.py")
        if info.get("format") != export.INFO_FORMAT:
            raise BackendUnavailable(f"the package record has format {info.get('format')!r}, this laya reads "
                                     f"{export.INFO_FORMAT}; re-export the package")
        if info.get("device") != device.type:
            raise BackendUnavailable(f"the package was compiled for {info.get('device')}, the agent runs on "
                                     f"{device.type}; load the agent with device='{info.get('device')}' or export "
                                     "a package on this device")
        if self.check_weights:
            mine = export.weights_fingerprint(self.model)
            if mine != info.get("weights_fingerprint"):
                raise ValueError(f"the package at {self.path!r} was exported from other weights (fingerprint "
                                 f"{info.get('weights_fingerprint')}, this model {mine}); export a package from "
                                 "this checkpoint, or pass check_weights=False if you know better")
        index = device.index if device.type == "cuda" and device.index is not None else -1
        if device.type == "cuda" and index < 0:
            index = torch.cuda.current_device()
        started = time.perf_counter()
        try:
            runner = export.load_package(self.path, device_index=index)
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - a package this torch/device cannot load: unavailable, with why
            raise BackendUnavailable(f"the package at {self.path!r} does not load here "
                                     f"(torch {torch.__version__}, built with {info.get('torch')}): "
                                     f"{_first_line(e)}") from e
        self.load_s = time.perf_counter() - started
        self.info, self.runner = info, runner
        self.ranges = export.info_ranges(info)
        self.max_len = self.ranges.tokens[1]
        names = info.get("input_dtypes") or ["int64", "int64", "int64", "bool", "int64"]
        self._dtypes = tuple(getattr(torch, n) for n in names)
        self._call = self._fast_call(runner)

    def _uninstall(self) -> None:
        self.runner = self._call = None

    @staticmethod
    def _fast_call(runner: Any) -> Any:
        """The loader's flat entry point when this torch exposes it: the public __call__ re-parses
        the in/out tree specs on every call (tens of microseconds, noticeable at GPU batch 1)."""
        loader = getattr(runner, "loader", None)
        if loader is None or not hasattr(loader, "boxed_run") or not hasattr(loader, "get_call_spec"):
            return runner
        try:
            from torch.utils import _pytree as pytree

            out_spec = pytree.treespec_loads(loader.get_call_spec()[1])
        except Exception:  # noqa: BLE001 - the public call still works
            return runner

        def call(*inputs: torch.Tensor):
            return pytree.tree_unflatten(loader.boxed_run(list(inputs)), out_spec)

        return call

    # ---- requests ----------------------------------------------------------------------------------

    @property
    def limit_advice(self) -> str | None:
        """Appended to the too-many-tokens error (Backend.check_batch checks max_len first)."""
        if self.ranges is None:
            return None
        return (f"or re-export the package with a larger token range (the package at {self.path!r} accepts "
                f"{self.ranges.tokens[0]}-{self.ranges.tokens[1]} tokens)")

    def check_request(self, tokens: int, slots: int) -> None:
        """ValueError naming what does not fit, the package's range and what to do instead."""
        assert self.ranges is not None
        problems = []
        if tokens > self.ranges.tokens[1]:
            problems.append(f"rows of {tokens} tokens (the package accepts {self.ranges.tokens[0]}-"
                            f"{self.ranges.tokens[1]} tokens, padded to multiples of {export.TOKEN_MULTIPLE}); "
                            f"pass max_len<={self.ranges.tokens[1]}")
        if slots > self.ranges.markers[1]:
            problems.append(f"{slots} marker slots, i.e. a question with {slots} options (the package accepts "
                            f"{self.ranges.markers[0]}-{self.ranges.markers[1]}); use at most "
                            f"{self.ranges.markers[1]} options")
        if problems:
            raise ValueError(f"this request does not fit the AOTInductor package at {self.path!r}: "
                             f"{'; '.join(problems)}, or use backend='eager', or re-export the package with "
                             "larger ranges (laya.export.aoti.Ranges / scripts/check_aoti.py --max-tokens/"
                             "--max-markers)")

    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype, detach_encoder=False):
        if self._call is None:
            raise RuntimeError("the aoti backend is not installed")
        n, tokens = input_ids.shape
        slots = marker_pos.shape[1]
        self.check_request(tokens, slots)
        tensors = tuple(t.to(dtype) for t, dtype in
                        zip((input_ids, attention_mask, marker_pos, marker_mask, qtype), self._dtypes))
        low, high = self.ranges.rows
        pad_id = self.agent.tok.pad_token_id
        logits_parts, act_parts = [], []
        # The package has its weights' dtype compiled in; the agent's autocast scope must not reach the
        # aten fallbacks it calls (seen harmless on the CPU, not checked for every CUDA fallback).
        with self._lock, torch.autocast(self.agent.device.type, enabled=False):
            for start in range(0, n, high):
                part = tuple(t[start:start + high] for t in tensors)
                size = part[0].shape[0]
                if size < low:
                    part = pad_to(part, low, part[0].shape[1], part[2].shape[1], pad_id, keep_one_token=True)
                part = export.fit_inputs(part, self.ranges, pad_id)
                logits, act = self._call(*part)
                logits_parts.append(logits[:size, :slots])
                act_parts.append(act[:size])
        if len(logits_parts) == 1:
            return logits_parts[0], act_parts[0]
        return torch.cat(logits_parts), torch.cat(act_parts)

    def call(self, tensors: tuple) -> tuple:
        return self.forward(*tensors)

    def warmup(self, shapes: Any = None, repeats: int | None = None) -> float:
        """One call per (rows, tokens, markers) shape: the first call of a package loads its kernels."""
        self.warmup_s = super().warmup(shapes, repeats)
        return self.warmup_s
