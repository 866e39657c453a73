"""AOTInductor packages of a DecisionModel: export, compile to a .pt2, load, and fit requests to it.

Recipe (seed notes, "AOTInductor"): export a separate eval copy with explicit weight dtypes outside
autocast (a program captured under autocast carries dtype asserts that fail outside it), declare the
token axis as 16 * Dim(...) (a plain range trips the exporter's L % 8 mask-alignment guard), and let
rows and marker slots vary independently. The package only covers the exported ranges and the
>= 2 marker-slot branch; `fit_inputs` pads a request into them or refuses it with a clear error.

Every package built here carries a small JSON record in the package's own metadata (`package_info`:
ranges, device, dtype, a fingerprint of the source weights, versions), so a loader (the `aoti`
backend, laya.backends.aoti) knows what it may feed the package without a sidecar file; `read_info`
reads it back from the .pt2 archive without loading the compiled code.
Nothing here imports laya's request path: the `aoti` backend and scripts share it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from dataclasses import dataclass

import torch

from ..backends.base import INPUT_NAMES, pad_to
from ..parallel_layout import eager_only

TOKEN_MULTIPLE = 16
METADATA_KEY = "laya_aoti"  # key of the JSON record in the package metadata
INFO_FORMAT = 1
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


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


def weights_fingerprint(model: torch.nn.Module, samples: int = 64) -> str:
    """A short digest of the weights: every parameter's name, shape and up to `samples` evenly spaced
    values (as fp32). Cheap on any device (one host copy), and different for different checkpoints,
    so a package is never run with a model it was not exported from."""
    names, picks = [], []
    with torch.no_grad():
        for name, param in model.named_parameters():
            flat = param.detach().reshape(-1)
            count = min(samples, flat.numel())
            # float64 on the host: the same indices whatever device the weights are on
            index = torch.linspace(0, flat.numel() - 1, count, dtype=torch.float64).long().to(flat.device)
            names.append(f"{name}{tuple(param.shape)}")
            picks.append(flat.index_select(0, index).float())
        values = torch.cat(picks).cpu().numpy().tobytes() if picks else b""
    digest = hashlib.sha256("\n".join(names).encode())
    digest.update(values)
    return digest.hexdigest()[:24]


def package_info(model: torch.nn.Module, ranges: Ranges, dtype: torch.dtype, device: str | torch.device,
                 example: tuple[torch.Tensor, ...] | None = None) -> dict:
    """The record stored in a package: what it accepts and what it was built from. `model` is the
    source model (the fp32 weights the agent loads), not the explicit-dtype copy."""
    config = getattr(getattr(model, "encoder", None), "config", None)
    return {
        "format": INFO_FORMAT,
        "ranges": {"rows": list(ranges.rows), "markers": list(ranges.markers), "tokens": list(ranges.tokens)},
        "token_multiple": TOKEN_MULTIPLE,
        "device": torch.device(device).type,
        "dtype": DTYPE_NAMES.get(dtype, str(dtype)),
        "input_names": list(INPUT_NAMES),
        "input_dtypes": None if example is None else [str(t.dtype).replace("torch.", "") for t in example],
        "weights_fingerprint": weights_fingerprint(model),
        "model_type": getattr(config, "model_type", None),
        "vocab_size": getattr(config, "vocab_size", None),
        "torch": torch.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def compile_package(program, path: str, info: dict | None = None) -> str:
    """AOTInductor-compile the exported program into a .pt2 package at `path`; `info` (package_info)
    goes into the package metadata under METADATA_KEY."""
    import torch._inductor

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    configs = {} if info is None else {"aot_inductor.metadata": {METADATA_KEY: json.dumps(info, sort_keys=True)}}
    return torch._inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=configs)


def default_example(ranges: Ranges, vocab_size: int, pad_id: int = 0,
                    device: str | torch.device = "cpu") -> tuple[torch.Tensor, ...]:
    """The export example: 3 rows x 64 tokens x 4 marker slots, moved inside `ranges` where needed
    (three different sizes, so the exporter cannot tie two dynamic axes together)."""
    from .examples import example_inputs

    def inside(value: int, bounds: tuple[int, int]) -> int:
        return min(max(value, bounds[0]), bounds[1])

    rows, markers = inside(3, ranges.rows), inside(4, ranges.markers)
    tokens = inside(64, ranges.tokens)
    if tokens < markers + 2:
        tokens = min(ranges.tokens[1], -(-(markers + 2) // TOKEN_MULTIPLE) * TOKEN_MULTIPLE)
    return tuple(t.to(device) for t in example_inputs(rows, tokens, markers, vocab_size, seed=0, pad_id=pad_id))


def build_package(model: torch.nn.Module, path: str, ranges: Ranges | None = None, dtype: torch.dtype | None = None,
                  device: str | torch.device | None = None, pad_id: int = 0) -> dict:
    """Export `model` (untouched: an explicit-dtype copy is exported) and package it at `path`.

    Defaults: the model's device; bf16 weights on CUDA, fp32 on the CPU; `Ranges()`. Returns the
    stored info plus export/package seconds and the package size.
    """
    eager_only(getattr(model, "option_layout", None), "an AOTInductor package")
    ranges = ranges or Ranges()
    device = torch.device(device) if device is not None else next(model.parameters()).device
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    reason = missing_capability(device.type)
    if reason is not None:
        raise RuntimeError(f"cannot build an AOTInductor package for {device.type}: {reason}")
    vocab = int(getattr(model.encoder.config, "vocab_size", 1000))
    example = default_example(ranges, vocab, pad_id, device)
    info = package_info(model, ranges, dtype, device, example)
    explicit = explicit_copy(model, dtype, device)
    started = time.perf_counter()
    program = export_program(explicit, example, ranges)
    export_s = time.perf_counter() - started
    del explicit
    started = time.perf_counter()
    compile_package(program, path, info)
    return {**info, "path": os.path.abspath(path), "example_shape": [example[0].shape[0], example[0].shape[1],
                                                                     example[2].shape[1]], "export_s": export_s,
            "package_s": time.perf_counter() - started, "package_bytes": os.path.getsize(path)}


def read_info(path: str) -> dict | None:
    """The laya record of a package, read from the archive without loading its code (None when the
    package has none, e.g. one built before records existed or by other tools)."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{path!r} is not a .pt2 package (not a zip archive: {e})") from e
    with archive:
        for name in archive.namelist():
            if not name.endswith("_metadata.json") and not name.endswith("/metadata.json"):
                continue
            try:
                meta = json.loads(archive.read(name))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(meta, dict) and METADATA_KEY in meta:
                return json.loads(meta[METADATA_KEY])
    return None


def info_ranges(info: dict) -> Ranges:
    r = info["ranges"]
    return Ranges(rows=tuple(r["rows"]), markers=tuple(r["markers"]), tokens=tuple(r["tokens"]))


# Loads a package in a fresh interpreter and exits; argv: path, device index.
_PROBE_SCRIPT = ("import sys, torch._inductor as i; p, d = sys.argv[1], int(sys.argv[2]); "
                 "i.aoti_load_package(p) if d < 0 else i.aoti_load_package(p, device_index=d)")


def probe_load(path: str, device_index: int = -1, timeout: float = 900.0) -> str | None:
    """Load the package once in a fresh interpreter; None when it loads, else why not.

    Some torch builds crash (SIGSEGV) inside the package loader instead of raising: on the lent H200
    (torch 2.11.0+cu130, 2026-11-29) every CUDA package did, a two-layer MLP included
    (scripts/aoti_cuda_smoke.py). In-process, such a crash would take the caller's whole process down,
    so CUDA packages are probed first (the cost: one extra load, seconds)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE_SCRIPT, path, str(device_index)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"loading it in a fresh process took more than {timeout:.0f} s"
    if proc.returncode == 0:
        return None
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return (f"loading it crashed a fresh process ({name}) in torch {torch.__version__}'s package loader; "
                "this torch build cannot run AOTInductor packages on this device")
    tail = proc.stderr.strip().splitlines()
    return f"loading it failed in a fresh process: {tail[-1] if tail else f'exit status {proc.returncode}'}"


def load_package(path: str, device_index: int = -1, probe: bool | None = None):
    """A callable runner(*inputs) -> (logits, act_logits) from a .pt2 package (no model code needed).

    `probe` (default: for CUDA packages) loads it in a fresh process first (probe_load) and raises
    RuntimeError instead of letting a loader crash end this process."""
    import torch._inductor

    if not os.path.isfile(path):
        raise FileNotFoundError(f"AOTInductor package not found at {path!r}; build it with scripts/check_aoti.py")
    if probe is None:
        info = read_info(path)
        probe = info is not None and info.get("device") == "cuda"
    if probe:
        reason = probe_load(path, device_index)
        if reason is not None:
            raise RuntimeError(f"the AOTInductor package at {path!r} does not load: {reason}")
    if device_index < 0:
        return torch._inductor.aoti_load_package(path)
    return torch._inductor.aoti_load_package(path, device_index=device_index)


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
    return pad_to(tensors, rows, width, max(slots, ranges.markers[0]), pad_id)
