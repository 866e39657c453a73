"""AOTInductor packages of a DecisionModel: export, compile to a .pt2, load, and fit requests to it.

Recipe (seed notes, "AOTInductor"): export a separate eval copy with explicit weight dtypes outside
autocast (a program captured under autocast carries dtype asserts that fail outside it), declare the
token axis as 16 * Dim(...) (a plain range trips the exporter's L % 8 mask-alignment guard), and let
rows and marker slots vary independently. The package only covers the exported ranges and the
>= 2 marker-slot branch; `fit_inputs` pads a request into them or refuses it with a clear error.
Nothing here imports laya's request path: a future `aoti` backend and scripts share it.
"""

from __future__ import annotations

import copy
import importlib
import os
import shutil
import sysconfig
from dataclasses import dataclass

import torch

TOKEN_MULTIPLE = 16


@dataclass(frozen=True)
class Ranges:
    """Inclusive ranges the package accepts; tokens are multiples of TOKEN_MULTIPLE."""

    rows: tuple[int, int] = (1, 8)
    markers: tuple[int, int] = (2, 8)
    tokens: tuple[int, int] = (32, 512)

    def __post_init__(self) -> None:
        lo, hi = self.tokens
        if lo % TOKEN_MULTIPLE or hi % TOKEN_MULTIPLE or not 0 < lo <= hi:
            raise ValueError(f"token range {self.tokens} must be multiples of {TOKEN_MULTIPLE} with min <= max")
        if self.markers[0] < 2:
            raise ValueError(f"marker range {self.markers} must start at >= 2: the one-slot branch needs its own export")
        if not 1 <= self.rows[0] <= self.rows[1] or self.markers[0] > self.markers[1]:
            raise ValueError(f"bad ranges rows={self.rows} markers={self.markers}; use 1 <= min <= max")


def compiler() -> str | None:
    """The C++ compiler Inductor would call, when one is on PATH."""
    names = [os.environ.get("CXX"), sysconfig.get_config_var("CXX"), "g++", "c++", "clang++"]
    for name in names:
        if name and shutil.which(name.split()[0]):
            return shutil.which(name.split()[0])
    return None


def missing_capability(device: str) -> str | None:
    """Why an AOTInductor package cannot be built for `device` here, or None when it can."""
    if device not in ("cpu", "cuda"):
        return f"device {device!r} is not supported; use 'cpu' or 'cuda'"
    if device == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available to this torch build"
    try:
        inductor = importlib.import_module("torch._inductor")
    except ImportError as e:
        return f"torch._inductor cannot be imported ({e})"
    for name in ("aoti_compile_and_package", "aoti_load_package"):
        if not hasattr(inductor, name):
            return f"torch._inductor.{name} is missing from torch {torch.__version__}"
    if not hasattr(torch, "export"):
        return f"torch.export is missing from torch {torch.__version__}"
    if compiler() is None:
        return "no C++ compiler (g++, c++ or clang++; or $CXX) on PATH"
    return None


def explicit_copy(model: torch.nn.Module, dtype: torch.dtype, device: str | torch.device) -> torch.nn.Module:
    """A separate eval copy with every parameter in `dtype` (the caller's model is untouched)."""
    return copy.deepcopy(model).to(device=device, dtype=dtype).eval()


def dynamic_shapes(ranges: Ranges) -> dict:
    from torch.export import Dim

    rows = Dim("rows", min=ranges.rows[0], max=ranges.rows[1])
    markers = Dim("markers", min=ranges.markers[0], max=ranges.markers[1])
    tokens = TOKEN_MULTIPLE * Dim("tokens16", min=ranges.tokens[0] // TOKEN_MULTIPLE,
                                  max=ranges.tokens[1] // TOKEN_MULTIPLE)
    return {"input_ids": {0: rows, 1: tokens}, "attention_mask": {0: rows, 1: tokens},
            "marker_pos": {0: rows, 1: markers}, "marker_mask": {0: rows, 1: markers}, "qtype": {0: rows}}


def export_program(model: torch.nn.Module, example: tuple[torch.Tensor, ...], ranges: Ranges):
    """torch.export of an explicit-dtype eval model, outside autocast, with the dynamic ranges."""
    if torch.is_autocast_enabled("cpu") or (torch.cuda.is_available() and torch.is_autocast_enabled("cuda")):
        raise RuntimeError("export_program was called under autocast; the package would carry autocast dtype "
                           "asserts. Export an explicit-dtype copy (explicit_copy) outside autocast")
    with torch.no_grad():
        return torch.export.export(model, tuple(example), dynamic_shapes=dynamic_shapes(ranges), strict=False)


def compile_package(program, path: str) -> str:
    """AOTInductor-compile the exported program into a .pt2 package at `path`."""
    import torch._inductor

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return torch._inductor.aoti_compile_and_package(program, package_path=path)


def load_package(path: str):
    """A callable runner(*inputs) -> (logits, act_logits) from a .pt2 package (no model code needed)."""
    import torch._inductor

    if not os.path.isfile(path):
        raise FileNotFoundError(f"AOTInductor package not found at {path!r}; build it with scripts/check_aoti.py")
    return torch._inductor.aoti_load_package(path)


def fit_inputs(tensors: tuple[torch.Tensor, ...], ranges: Ranges, pad_id: int) -> tuple[torch.Tensor, ...]:
    """Pad one collated batch into the package's ranges: tokens up to a multiple of 16 (at least the
    minimum), marker slots up to the minimum (masked, so they get probability 0). Padded tokens are
    masked keys, so valid positions see the same attention. Refuses batches outside the ranges."""
    ids, mask, pos, live, qtype = tensors
    rows, length = ids.shape
    slots = pos.shape[1]
    problems = []
    if not ranges.rows[0] <= rows <= ranges.rows[1]:
        problems.append(f"rows={rows} outside {ranges.rows}")
    if length > ranges.tokens[1]:
        problems.append(f"tokens={length} above {ranges.tokens[1]}")
    if slots > ranges.markers[1]:
        problems.append(f"marker slots={slots} above {ranges.markers[1]}")
    if problems:
        raise ValueError(f"request does not fit the AOTInductor package ({'; '.join(problems)}); split it into "
                         "smaller batches, lower max_len, or export a package with wider ranges")
    width = max(ranges.tokens[0], -(-length // TOKEN_MULTIPLE) * TOKEN_MULTIPLE)
    if width > length:
        ids = torch.cat([ids, ids.new_full((rows, width - length), pad_id)], dim=1)
        mask = torch.cat([mask, mask.new_zeros((rows, width - length))], dim=1)
    if slots < ranges.markers[0]:
        extra = ranges.markers[0] - slots
        pos = torch.cat([pos, pos.new_zeros((rows, extra))], dim=1)
        live = torch.cat([live, live.new_zeros((rows, extra))], dim=1)
    return ids, mask, pos, live, qtype
