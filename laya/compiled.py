"""torch.compile plumbing shared by `compile=True` and the compile backend.

- `independent_dims()`: rows, tokens and markers must not be tied by duck sizing (rows == markers in
  one call would otherwise specialise the graph and recompile on the next shape).
- `COMPILE_LOCK` + `run_compiled`: CUDA-graph replays overwrite their output buffers, so each compiled
  CUDA forward is one marked step under a process-wide lock and its outputs are cloned before release.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import torch

COMPILE_LOCK = threading.RLock()
_duck_lock = threading.Lock()
_duck_users = 0


def _patch_is_per_thread() -> bool:
    """torch versions whose config overrides live in ContextVars can patch per thread."""
    import torch.fx.experimental._config as fx_config

    seen = []
    with fx_config.patch(use_duck_shape=not fx_config.use_duck_shape):
        probe = threading.Thread(target=lambda: seen.append(fx_config.use_duck_shape))
        probe.start()
        probe.join()
    return seen[0] == fx_config.use_duck_shape


_PER_THREAD = None


@contextlib.contextmanager
def independent_dims() -> Iterator[None]:
    global _PER_THREAD, _duck_users
    import torch.fx.experimental._config as fx_config

    if _PER_THREAD is None:
        _PER_THREAD = _patch_is_per_thread()
    if _PER_THREAD:
        with fx_config.patch(use_duck_shape=False):
            yield
        return
    with _duck_lock:  # a global flag: refcount it so overlapping forwards restore it once
        if _duck_users == 0:
            independent_dims.saved = fx_config.use_duck_shape
            fx_config.use_duck_shape = False
        _duck_users += 1
    try:
        yield
    finally:
        with _duck_lock:
            _duck_users -= 1
            if _duck_users == 0:
                fx_config.use_duck_shape = independent_dims.saved


def compile_model(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
    return torch.compile(model, dynamic=True, **kwargs)


def check_compile_mode(mode: str) -> None:
    if mode not in ("default", "reduce-overhead"):
        raise ValueError(f"compile_mode {mode!r} is not supported; use 'default' or 'reduce-overhead'")
    if mode == "reduce-overhead" and not hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        raise RuntimeError("compile_mode='reduce-overhead' needs torch.compiler.cudagraph_mark_step_begin, which "
                           f"torch {torch.__version__} lacks; upgrade torch or use compile_mode='default'")


def run_compiled(fn: Callable, tensors: tuple, on_cuda: bool, mark_steps: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if not on_cuda:
        with independent_dims():
            return fn(*tensors)
    with COMPILE_LOCK, independent_dims():
        if mark_steps:
            torch.compiler.cudagraph_mark_step_begin()
        logits, act = fn(*tensors)
        return logits.clone(), act.clone()
