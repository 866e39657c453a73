"""torch.compile: the compile backend (CUDA) and the legacy `compile=True` agent (any device).

The backend: dynamic shapes, bucket padding, CUDA graphs, persistent Inductor cache.

Two choices keep memory near eager's: token counts reach the compiled graph as `16 * n` (ids arrive
as [N, n, 16]), so Inductor can prove attention-mask rows are aligned and keep them as views; and the
ModernBERT masks are passed pre-built in broadcast form (`broadcast_masks`), never as rows x heads x L x L.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from typing import Any, Callable, Iterator

import torch

from ..model import broadcast_masks
from ..packed_encoder import ATTENTION_ALIGN, packable, real_tokens, rotary_tables
from ..sequence import WARMUP_SHAPES as AGENT_WARMUP_SHAPES, config_max_len
from .base import TOKEN_ALIGN, Backend, BackendUnavailable, pad_batch, pad_to

WARMUP_SHAPES = (*AGENT_WARMUP_SHAPES, (8, 256, 6))
CACHE_DIR_ENV = "LAYA_INDUCTOR_CACHE_DIR"
WARMUP_ENV = "LAYA_COMPILE_WARMUP"
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "laya", "inductor")
CALLS_PER_SHAPE = 3  # CUDA-graph trees record on the second call and replay from the third
MIN_ROWS, MIN_BLOCKS = 2, 2  # Dynamo specialises sizes 0/1: 1 row or 1 token block would get a graph of its own
OFF_VALUES = ("0", "false", "no", "off")

COMPILE_LOCK = threading.RLock()
_settings_lock = threading.Lock()
_settings_users: dict = {}  # (config module name, setting) -> [forwards inside it, value saved on entry]


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
def _config_set(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name = value` for the duration: a per-thread patch where torch has them, else a global
    set refcounted under a lock so overlapping forwards restore it once."""
    global _PER_THREAD

    if _PER_THREAD is None:
        with _settings_lock:  # the probe flips a setting: never while another forward is tracing
            if _PER_THREAD is None:
                _PER_THREAD = _patch_is_per_thread()
    if _PER_THREAD:
        with module.patch(**{name: value}):
            yield
        return
    key = (module.__name__, name)
    with _settings_lock:
        entry = _settings_users.setdefault(key, [0, None])
        if entry[0] == 0:
            entry[1] = getattr(module, name)
            setattr(module, name, value)
        entry[0] += 1
    try:
        yield
    finally:
        with _settings_lock:
            entry[0] -= 1
            if entry[0] == 0:
                setattr(module, name, entry[1])


def independent_dims() -> contextlib.AbstractContextManager:
    """No duck shapes: equal-sized dims (rows == markers) are not tied, so one graph serves many shapes."""
    import torch.fx.experimental._config as fx_config

    return _config_set(fx_config, "use_duck_shape", False)


def constant_floats() -> contextlib.AbstractContextManager:
    """Python floats traced as constants: under reduce-overhead Inductor specialises symbolic floats by
    restarting the analysis, which redoes the Dynamo and AOT traces of every graph, cached restarts
    included (issue 24)."""
    import torch._dynamo.config as dynamo_config

    if not hasattr(dynamo_config, "specialize_float"):  # torch < 2.4 always traced floats as constants
        return contextlib.nullcontext()
    return _config_set(dynamo_config, "specialize_float", True)


@contextlib.contextmanager
def compile_settings() -> Iterator[None]:
    """What every laya torch.compile forward traces under."""
    with independent_dims(), constant_floats():
        yield


def frozen_weights() -> contextlib.AbstractContextManager:
    """Inductor folds a CPU graph's parameters in as constants, their bf16 autocast casts included, so no
    weight is cast or re-laid out per call (base 1 x 3 bf16: 2.24x -> 3.67x fp32 eager on an AMX box,
    cpu_fastest_2026-12-07_compile_amx.json). Dynamo reads the setting too, so it is set while tracing, not
    passed as a compile option."""
    import torch._inductor.config as inductor_config

    return _config_set(inductor_config, "freezing", True)


def weights_version(model: torch.nn.Module) -> tuple:
    """Identity and in-place version of every parameter and buffer: changes when weights are replaced, loaded
    (load_state_dict) or stepped by an optimizer; writes through `.data` are not counted by torch."""
    return tuple((id(t), t._version) for t in (*model.parameters(), *model.buffers()))


def drop_compiled_graphs() -> None:
    """Every compiled graph in the process dropped (each re-traces on its next call), and the modules Inductor
    generated for them let go: they hold frozen weights as globals, which torch._dynamo.reset() alone keeps."""
    torch._dynamo.reset()
    try:
        from torch._inductor.codecache import PyCodeCache
    except ImportError:
        return
    generated = [*getattr(PyCodeCache, "modules", ()), *getattr(PyCodeCache, "modules_no_attr", {}).values()]
    for module in generated:
        if sys.modules.get(module.__name__) is module:
            del sys.modules[module.__name__]
    PyCodeCache.cache_clear()


def compile_model(model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
    return torch.compile(model, dynamic=True, **kwargs)


def check_compile_mode(mode: str) -> None:
    if mode not in ("default", "reduce-overhead"):
        raise ValueError(f"compile_mode {mode!r} is not supported; use 'default' or 'reduce-overhead'")
    if mode == "reduce-overhead" and not hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        raise RuntimeError("compile_mode='reduce-overhead' needs torch.compiler.cudagraph_mark_step_begin, which "
                           f"torch {torch.__version__} lacks; upgrade torch or use compile_mode='default'")


def run_compiled(fn: Callable, tensors: tuple, on_cuda: bool, mark_steps: bool,
                 **options: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not on_cuda:
        with compile_settings(), frozen_weights():
            return fn(*tensors, **options)
    with COMPILE_LOCK, compile_settings():
        if mark_steps:
            torch.compiler.cudagraph_mark_step_begin()
        logits, act = fn(*tensors, **options)
        return logits.clone(), act.clone()


def inductor_cache_dir() -> str:
    """Where `compile_cache=True` keeps Inductor's cache (XDG_CACHE_HOME/laya/torchinductor)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "laya", "torchinductor")


def load_prebuilt_artifacts(cache_dir: str) -> bool:
    """Load the Inductor mega-cache `laya prebuild --backend compile` wrote into `cache_dir`, if any."""
    from ..prebuild import ARTIFACTS_FILE

    path = os.path.join(cache_dir, ARTIFACTS_FILE)
    if not os.path.isfile(path) or not hasattr(torch.compiler, "load_cache_artifacts"):
        return False
    with open(path, "rb") as f:
        data = f.read()
    try:
        torch.compiler.load_cache_artifacts(data)
    except Exception as e:  # noqa: BLE001 - a stale or foreign file: compile as without it
        warnings.warn(f"laya: could not load the prebuilt compile artifacts {path} ({type(e).__name__}: {e}); "
                      "compiling from scratch (run `laya prebuild --backend compile` again)", RuntimeWarning,
                      stacklevel=2)
        return False
    return True


def _inductor_default_cache_dir() -> str | None:
    """The temporary directory Inductor falls back to (and writes into the environment on import)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return None
    return os.path.abspath(default_cache_dir())


def use_inductor_cache_dir(chosen: str) -> str:
    """setdefault(TORCHINDUCTOR_CACHE_DIR, chosen), where Inductor's own default (which importing
    torch._dynamo writes into the environment) counts as unset. Returns the directory in effect."""
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    if not current or os.path.abspath(current) == _inductor_default_cache_dir():
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = chosen
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]


def configure_inductor_cache() -> str:
    """Persistent FX-graph cache (default ~/.cache/laya/inductor) unless the user chose another directory."""
    cache_dir = use_inductor_cache_dir(os.environ.get(CACHE_DIR_ENV, "").strip()
                                       or os.path.expanduser(DEFAULT_CACHE_DIR))
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    return cache_dir


def warmup_enabled(default: bool | None = True) -> bool:
    """LAYA_COMPILE_WARMUP: 0/false/no/off turn the warm-up off; unset or blank means `default` (None: on)."""
    raw = os.environ.get(WARMUP_ENV, "").strip()
    if not raw:
        return True if default is None else bool(default)
    return raw.strip().lower() not in OFF_VALUES


class CompileBackend(Backend):
    name = "compile"

    def __init__(self, agent: Any, mode: str = "reduce-overhead", warmup: bool | None = None):
        super().__init__(agent)
        check_compile_mode(mode)
        self.mode = mode
        self.do_warmup = warmup_enabled() if warmup is None else bool(warmup)
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
        self.artifacts_loaded = load_prebuilt_artifacts(self.cache_dir)
        self.max_len = config_max_len(self.agent.cfg)
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
        rows, width = tensors[0].shape
        min_width = MIN_BLOCKS * TOKEN_ALIGN if MIN_BLOCKS * TOKEN_ALIGN <= self.max_len else width
        if rows < MIN_ROWS or width < min_width:
            tensors = pad_to(tensors, max(rows, MIN_ROWS), max(width, min_width), tensors[2].shape[1],
                             self.agent.tok.pad_token_id, keep_one_token=True)
        ids, mask, pos, live, types = tensors
        rows = ids.shape[0]
        ids16, mask16 = ids.reshape(rows, -1, TOKEN_ALIGN), mask.reshape(rows, -1, TOKEN_ALIGN)
        with self._lock:
            logits, act = run_compiled(self.compiled, (ids16, mask16, pos, live, types), on_cuda=True,
                                       mark_steps=self.mode == "reduce-overhead")
        return logits[:n], act[:n]

    def call(self, tensors: tuple) -> tuple:
        return self.forward(*tensors)  # (also while installing, before model.forward is ours)

    warmup_shapes = WARMUP_SHAPES

    def warmup(self, shapes: Any = None, repeats: int | None = None) -> float:
        self.warmup_s = super().warmup(shapes, CALLS_PER_SHAPE if repeats is None else repeats)
        return self.warmup_s


class LegacyCompiled(Backend):
    """The forward of `compile=True`: the agent's model is a torch.compile wrapper (spec 5.4); any device."""

    name = "compile"

    def __init__(self, agent: Any, mode: str = "default"):
        super().__init__(agent)
        self.mark_steps = mode == "reduce-overhead"
        self._weights_seen: tuple | None = None  # weights_version when the CPU graphs were last checked
        # CPU graphs run on real tokens only: one graph for every batch (cpu_packed_always_2_amx_2026-12-07.json)
        self.packed = packable(self.model.encoder)

    @property
    def described(self) -> str:
        return "compile=True"

    def inputs(self, batch: Any) -> tuple:
        tensors = super().inputs(batch)
        device = self.agent.device.type
        if device == "cuda":
            align = 8  # some Inductor SDPA versions specialise on L mod 8
        elif self.packed and device == "cpu":
            align = ATTENTION_ALIGN  # padding costs the packed encoder no GEMM rows, only attention slots
        else:
            return tensors
        ids = tensors[0]
        return pad_to(tensors, ids.shape[0], -(-ids.shape[1] // align) * align, tensors[2].shape[1],
                      self.agent.tok.pad_token_id)

    def call(self, tensors: tuple) -> tuple:
        device = self.agent.device.type
        if device == "cuda":
            return run_compiled(self.model, tensors, True, self.mark_steps)
        self._drop_stale_graphs()
        if not (self.packed and device == "cpu") or self.model.training:  # (the packed forward is eval-only)
            return run_compiled(self.model, tensors, False, False)
        mask = tensors[1]
        return run_compiled(self.model, tensors, False, False, token_index=real_tokens(mask),
                            rotary=rotary_tables(self.model.encoder, mask.shape[1], mask.device))

    def _drop_stale_graphs(self) -> None:
        """CPU graphs hold the weights as constants (frozen_weights): after a weight change every compiled
        graph in the process is dropped (torch has no per-model reset) and re-traced on its next call."""
        seen = weights_version(self.model)
        if seen == self._weights_seen:
            return
        with COMPILE_LOCK:
            if self._weights_seen is not None and seen != self._weights_seen:
                drop_compiled_graphs()
            self._weights_seen = seen
