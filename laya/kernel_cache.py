"""The fast path's persistent kernel cache: a second process loads its TileLang kernels, never re-traces them.

TileLang's own disk cache already skips the compile, but it is keyed by the traced PrimFunc, so every
process still runs each kernel's Python DSL (~100 ms a kernel, 74 kernels for a large checkpoint:
benchmarks/results/start_profile_h200_2026-12-02.json).  This store keys by the factory request instead
(the factory, its arguments with defaults applied, the target) and keeps the traced PrimFunc as TVM JSON;
TileLang's cache, kept under the same root, holds the compiled library for it.

Layout under the root (``LAYA_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/laya/kernels``, else
``~/.cache/laya/kernels``; ``LAYA_KERNEL_CACHE=off`` disables the store):

* ``<namespace>/<key>.json``  one entry: the request, the PrimFunc JSON and its sha256.  The namespace is a
  hash of everything that changes the binary besides the request: the kernel source, TileLang's version,
  the GPU architecture and CUDA version (or the C compiler flags and the CPU, for the CPU specialisation).
* ``tilelang/``               TileLang's cache (laya sets ``TILELANG_CACHE_DIR`` to it when it compiles; a
  read-only store keeps serving its binaries, and the kernels it lacks go to TileLang's previous cache).

Entries are written to a temporary file and renamed into place, so racing processes each publish a whole
entry; one that does not parse, or whose PrimFunc does not match its hash, is removed and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import threading
import uuid
import warnings
from typing import Any

from .atomic_file import write_json_atomic

ENV = "LAYA_KERNEL_CACHE"
FORMAT = 1  # bump when the entry layout changes: older entries then live in another namespace
_OFF = ("off", "0", "false", "no", "none")


def default_root() -> str | None:
    """The store's directory from the environment, or None where ``LAYA_KERNEL_CACHE`` turns it off."""
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF or not value.strip() else os.path.abspath(os.path.expanduser(value))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "laya", "kernels")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kernel_source_hash() -> str:
    """sha256 of the kernel definitions (tl_kernels.py): any edit there is a new namespace."""
    from . import tl_kernels

    with open(tl_kernels.__file__, "rb") as f:
        return _sha256(f.read())


def _cuda_stamp() -> dict:
    import torch

    index = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return {"arch": f"sm_{major}{minor}", "torch_cuda": torch.version.cuda, "nvcc": _nvcc_version()}


def _nvcc_version() -> str | None:
    """The CUDA toolkit TileLang compiles with, from its version.json (no nvcc subprocess)."""
    try:
        from tilelang import env

        with open(os.path.join(env.CUDA_HOME or "", "version.json")) as f:
            return json.load(f).get("cuda", {}).get("version")
    except (OSError, ValueError, ImportError, AttributeError):
        return None


def _cpu_stamp(compile_flags: list) -> dict:
    # -march=native makes the binary specific to this processor's features
    flags = ""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    return {"compile_flags": list(compile_flags), "machine": platform.machine(), "cpu_flags": _sha256(flags.encode())}


def environment_stamp(target: str, compile_flags: list | None = None) -> dict:
    """Everything besides the request that changes a kernel's binary, for `target` ("cuda" or "c")."""
    import tilelang

    stamp = {"format": FORMAT, "kernel_source": kernel_source_hash(), "tilelang": tilelang.__version__,
             "target": target}
    stamp.update(_cuda_stamp() if target == "cuda" else _cpu_stamp(compile_flags or []))
    return stamp


def namespace_of(stamp: dict) -> str:
    return "v%d-%s" % (FORMAT, _sha256(json.dumps(stamp, sort_keys=True).encode())[:24])


def request_key(factory: str, arguments: tuple, pass_configs: dict | None = None) -> str:
    """The entry name of one factory request (arguments: the bound (name, value) pairs, defaults applied)."""
    text = json.dumps({"factory": factory, "arguments": [[k, repr(v)] for k, v in arguments],
                       "pass_configs": {str(k): repr(v) for k, v in sorted((pass_configs or {}).items())}},
                      sort_keys=True)
    return _sha256(text.encode())[:40]


def _load_json(text: str):
    """TVM's JSON loader without tvm.ir.load_json's re-indenting pass (10x slower on a kernel's PrimFunc)."""
    try:
        from tvm.runtime import _ffi_node_api
    except ImportError:
        import tvm

        return tvm.ir.load_json(text)
    return _ffi_node_api.LoadJSON(text)


class KernelStore:
    """Traced PrimFuncs on disk, one namespace per environment stamp (see the module docstring)."""

    def __init__(self, root: str):
        self.root = os.path.abspath(os.path.expanduser(root))
        self._namespaces: dict[tuple, str] = {}
        self.hits = self.misses = self.rebuilt = 0
        self.tilelang_dir = os.path.join(self.root, "tilelang")
        self._writable: bool | None = None
        self._degraded = False  # a read-only store lacked a kernel: TileLang compiles into its own cache
        self._tilelang_before: str | None = None  # TILELANG_CACHE_DIR before this store took it over
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KernelStore({self.root!r})"

    @property
    def writable(self) -> bool:
        """Whether entries and TileLang's binaries can be written under the root (probed once)."""
        with self._lock:
            if self._writable is None:
                self._writable = self.write_error() is None
            return self._writable

    def write_error(self) -> str | None:
        """Why nothing can be written under the root (a probe file in TileLang's folder), or None."""
        probe = os.path.join(self.tilelang_dir, f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(os.path.dirname(probe), exist_ok=True)
            with open(probe, "w"):
                pass
            os.remove(probe)
        except OSError as e:
            return f"{type(e).__name__}: {e.strerror or e}"
        return None

    def _lacks_kernels(self) -> None:
        """A kernel this read-only store lacks is being built: warn once, and let TileLang compile into the cache
        it had before (it cannot save into this store's folder)."""
        with self._lock:
            if self._degraded:
                return
            self._degraded = True
            if self._tilelang_before is not None:
                os.environ["TILELANG_CACHE_DIR"] = self._tilelang_before
            elif os.environ.get("TILELANG_CACHE_DIR") == self.tilelang_dir:
                os.environ.pop("TILELANG_CACHE_DIR")
        warnings.warn(f"laya: the kernel store {self.root} cannot be written ({self.write_error()}) and lacks "
                      "kernels this forward needs; they are built into TileLang's own cache and not saved. Point "
                      f"{ENV} at a writable directory (or 'off'), or prebuild that store completely.",
                      RuntimeWarning, stacklevel=3)

    def namespace(self, target: str, compile_flags: list | None = None) -> str:
        key = (target, tuple(compile_flags or ()))
        ns = self._namespaces.get(key)
        if ns is None:
            ns = self._namespaces[key] = namespace_of(environment_stamp(target, compile_flags))
        return ns

    def entry_path(self, key: str, target: str, compile_flags: list | None = None) -> str:
        return os.path.join(self.root, self.namespace(target, compile_flags), key + ".json")

    def load(self, key: str, target: str, compile_flags: list | None = None):
        """The stored PrimFunc of `key`, or None (absent; or corrupt, which is removed so it is rebuilt)."""
        path = self.entry_path(key, target, compile_flags)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:  # absent, or a store that cannot be read here (a miss: the kernel is traced instead)
            self.misses += 1
            return None
        try:
            import tvm

            entry = json.loads(raw)
            prim_json = entry["prim"]
            if entry.get("key") != key or _sha256(prim_json.encode()) != entry["prim_sha256"]:
                raise ValueError("the entry does not match its key or hash")
            prim = _load_json(prim_json)
        except Exception:  # noqa: BLE001 - any unreadable entry is rebuilt, never trusted
            with contextlib.suppress(OSError):
                os.remove(path)
            self.rebuilt += 1
            return None
        self.hits += 1
        return prim

    def save(self, key: str, target: str, prim: Any, describe: dict, compile_flags: list | None = None) -> None:
        """Publish `prim` under `key` atomically (a temporary file renamed into place)."""
        import tvm

        if not self.writable:
            self._lacks_kernels()
            return
        path = self.entry_path(key, target, compile_flags)
        prim_json = tvm.ir.save_json(prim)
        entry = {"key": key, "request": describe, "prim_sha256": _sha256(prim_json.encode()), "prim": prim_json}
        with contextlib.suppress(OSError):  # a read-only or full cache costs a re-trace next time, never a failure
            write_json_atomic(path, entry)

    def hold_tilelang_binaries(self) -> None:
        """Point TileLang's own disk cache under this root.  The variable is process-wide and stays set
        (restoring it would race with compiles in other threads).  A read-only store's folder is used while it
        has every kernel asked for (a prebuilt image), never where it does not exist."""
        usable = self.writable or os.path.isdir(self.tilelang_dir)  # (the probe makes the folder where it can)
        with self._lock:
            if self._degraded or not usable:
                return
            current = os.environ.get("TILELANG_CACHE_DIR")
            if current != self.tilelang_dir:
                self._tilelang_before = current
                os.environ["TILELANG_CACHE_DIR"] = self.tilelang_dir


def directory_bytes(root: str) -> int:
    """Bytes of the files under `root` (a store's size on disk)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(folder, name))
    return total


_active: KernelStore | None = None
_active_set = False


def active() -> KernelStore | None:
    """The store the kernel factories use: the one `use` set, else the environment's default."""
    global _active, _active_set
    if not _active_set:
        root = default_root()
        _active, _active_set = (KernelStore(root) if root else None), True
    return _active


def use(root: str | None) -> KernelStore | None:
    """Point the kernel factories at `root` (None: no persistent store).  Returns the store."""
    global _active, _active_set
    _active, _active_set = (KernelStore(root) if root else None), True
    return _active
