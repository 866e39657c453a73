"""glibc's allocator settings for CPU inference: freed tensor buffers stay in the heap for the next request.

Above its mmap threshold glibc maps each large block fresh and unmaps it on free, and it trims the heap top
back to the OS; a CPU forward allocates and frees the same large activations layer after layer, so each one
pays page faults and zeroing again. ``keep_freed_buffers`` raises both thresholds once per process (an Agent
on the CPU calls it): the process keeps its peak activation memory mapped instead of returning it between
requests. ``LAYA_CPU_MALLOC=default`` leaves the allocator as it is (``keep``, or unset, raises them); other
allocators (jemalloc, tcmalloc or mimalloc preloaded) and other C libraries are left alone.
Measured: benchmarks/results/cpu_malloc_*.json.
"""

from __future__ import annotations

import ctypes
import os
import threading

ENV = "LAYA_CPU_MALLOC"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 1 << 30  # free heap top kept before trimming

_lock = threading.Lock()
_state: dict = {}  # "applied": bool, once decided for this process


def _glibc():
    """The process's own C library (its loaded symbols) if it is glibc with mallopt, else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        return libc if hasattr(libc, "mallopt") else None
    except (OSError, AttributeError):
        return None


def _other_allocator_preloaded() -> bool:
    preload = os.environ.get("LD_PRELOAD", "")
    return any(name in preload for name in ("jemalloc", "tcmalloc", "mimalloc"))


def keep_freed_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds, once per process; returns whether they are raised.  Not done
    when LAYA_CPU_MALLOC=default, when another allocator is preloaded, or when the C library is not glibc."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting not in ("", "keep", "default"):
        raise ValueError(f"{ENV}={os.environ[ENV]!r} is not a setting: use 'keep' (the default: raise glibc's "
                         "mmap and trim thresholds) or 'default' (leave the allocator alone)")
    with _lock:
        if "applied" not in _state:
            wanted = setting != "default"
            libc = _glibc() if wanted and not _other_allocator_preloaded() else None
            _state["applied"] = bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                                     and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        return _state["applied"]
