"""Agent: load a laya checkpoint and answer typed questions about states in one forward pass."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
import warnings
from typing import Any

import numpy as np
import torch

from .checkpoint import check_weights_file, load_config, load_tokenizer, load_weights, parse_digest_env, \
    resolve_checkpoint_dir, verify_digests
from .device import MPS_AMP_MIN_ROWS_DEFAULT, Precision, precision_policy, resolve_device  # noqa: F401 (R-P2-2)
from .answers import check_flag, softmax_rows
from .cpu_bf16 import Bf16Weights
from .cpu_malloc import keep_freed_buffers
from .read_write_gate import ReadWriteGate
from . import backends
from .backends.base import is_oom
from .backends.compile import (LegacyCompiled, check_compile_mode, compile_model, inductor_cache_dir,
                               use_inductor_cache_dir)
from .backends.eager import EagerBackend
from .model import build_model
from .parallel_layout import require_modernbert
from .predictor import NO_SCOPE, Predictor, check_batch_invariant
from .registry import BUNDLE_REPO
from .sequence import WARMUP_SHAPES, Batch, encode_many, tokenizer_view

OOM_MESSAGE = "GPU memory exceeded during inference. Retrying this request on CPU..."
# One OOM fallback at a time across agents: each moves a whole model between devices.
_FALLBACK_LOCK = threading.Lock()
# Consecutive autocast failures on MPS/CPU (each retried in fp32) after which AMP is turned off for good.
_AMP_FAIL_LIMIT = 3
_AMP_LOCK = threading.Lock()


def host_fp32(t: torch.Tensor) -> torch.Tensor:
    """`t` as an fp32 host tensor."""
    return t if t.dtype is torch.float32 and t.is_cpu else t.float().cpu()


def act_probabilities(act_logits: torch.Tensor) -> list:
    """Softmax over the act logits [N, n_act], per row in float64 (answers.softmax_rows)."""
    return softmax_rows(host_fp32(act_logits).tolist())


def _backend_arguments(backend: Any, aoti_path: Any, fast: bool, compile: bool) -> tuple:
    """(backend name or None, its options, fast, compile): an explicit backend wins over the legacy flags."""
    options = {}
    if aoti_path is not None:
        if backend is None or backends.normalise(backend) != "aoti":
            raise ValueError(f"aoti_path is for backend='aoti' (got backend={backend!r}); pass "
                             "backend='aoti', aoti_path=... together")
        options["aoti_path"] = aoti_path
    if backend is None:
        return None, options, fast, compile
    backend = backends.normalise(backend)
    if backend == "onnx":
        raise ValueError("backend='onnx' is a separate agent class; use laya.load(..., backend='onnx') "
                         "or ONNXAgent")
    return backend, options, False, False


class Agent(Predictor):
    WARMUP_SHAPES = WARMUP_SHAPES  # (spec 1.3: a class attribute; the backends' default warm-up shapes)
    _amp_failures = 0  # consecutive autocast failures retried in fp32 (MPS/CPU); set per agent

    def __init__(self, model_id_or_path: str = BUNDLE_REPO, device: Any = None, token: str | None = None,
                 subfolder: str | None = None, fast: bool = False, compile: bool = False,
                 revision: str | None = None, expected_sha256: dict | None = None, lang_temperatures: dict | None = None,
                 hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                 hooks_raise: bool = True, hooks_concurrent: bool = True, hooks_timeout: float | None = None,
                 calibration: str | None = None, backend: str | None = None, compile_warmup: bool = True,
                 compile_cache: bool = False, compile_mode: str = "default", aoti_path: str | None = None,
                 batch_invariant: bool = False):
        backend, backend_options, fast, compile = _backend_arguments(backend, aoti_path, fast, compile)
        if compile and not fast and compile_cache:
            os.makedirs(use_inductor_cache_dir(inductor_cache_dir()), exist_ok=True)
        self._setup_hooks(hooks, on_predict_start, on_predict_end, hooks_raise, hooks_concurrent, hooks_timeout)
        self.batch_invariant = check_batch_invariant(batch_invariant)

        self.model_id_or_path = model_id_or_path
        self.model_id = str(model_id_or_path)
        self.subfolder = subfolder
        model_dir, self.revision = resolve_checkpoint_dir(model_id_or_path, subfolder, revision, token)
        self.model_dir = model_dir
        verify_digests(model_dir, expected_sha256 if expected_sha256 is not None else parse_digest_env(model_id_or_path))
        self.cfg = load_config(model_dir, self.model_id)  # the tokenizer fix-up happens on a private copy at tokenizer load
        self.parallel_options = self.cfg.get("option_layout") == "parallel"  # spec 3.9: eager forward only
        check_weights_file(model_dir, self.model_id)
        self.device = resolve_device(device)
        self.tok = load_tokenizer(model_dir, self.cfg["encoder"])
        self.model = self._load_model(model_dir, compile)
        self._compiled = False  # legacy compile=True: self.model is the torch.compile wrapper
        self.compile_mode = compile_mode
        if compile and not fast:
            self._compile_legacy(compile_mode)
        self._setup_calibration(lang_temperatures, calibration)

        self.precision = precision_policy(self.device, self.cfg)
        self.bf16_weights = Bf16Weights()  # CPU bf16 autocast: Linear weights cast once, not per call
        if self.device.type == "cpu":
            keep_freed_buffers()  # activations reuse the heap instead of fresh pages per layer (laya.cpu_malloc)
        self.cpu_fallback_count = 0
        self.last_fallback_reason: str | None = None
        self._amp_failures = 0
        self._gate = ReadWriteGate()
        self._backend: backends.Backend | None = None
        self._backend_request: tuple[str, dict] | None = None  # re-installed after an OOM round trip
        self._place_model()
        if backend is not None:
            self.set_backend(backend, **backend_options)
        elif fast:
            self.accelerate()
        if self._compiled and compile_warmup:
            try:
                self.warmup()
            except Exception as e:  # noqa: BLE001 - the compiled model stays; later calls may still raise
                warnings.warn(f"laya: compile warm-up failed ({type(e).__name__}: {e}); keeping the compiled "
                              "model", RuntimeWarning, stacklevel=2)

    def _load_model(self, model_dir: str, compile: bool) -> torch.nn.Module:
        encoder_dir = os.path.join(model_dir, "encoder")
        model = build_model(self.cfg, encoder_dir if os.path.isdir(encoder_dir) else None, pretrained=False)
        if self.parallel_options:  # refused at load, not on every request
            require_modernbert(model.encoder.config, f" ({model_dir})")
        self._load_weights(model, model_dir)
        model.encoder.config.reference_compile = bool(compile)
        return model

    def _load_weights(self, model: torch.nn.Module, model_dir: str) -> None:
        """Weights read straight onto a CUDA device (not via fp32 CPU copies: RESULTS.md § bench_cold_start.py);
        if that fails (out of memory, a GPU this torch cannot run), read on the CPU: _place_model then tries the
        device again and warns if it still fails."""
        if self.device.type == "cuda":
            try:
                index = self.device.index if self.device.index is not None else torch.cuda.current_device()
                return load_weights(model, model_dir, f"cuda:{index}", assign=True)
            except RuntimeError:  # (torch.cuda.OutOfMemoryError is one)
                pass
            gc.collect()  # outside the except: its traceback no longer holds the GPU tensors
            torch.cuda.empty_cache()
        load_weights(model, model_dir)

    def _compile_legacy(self, compile_mode: str) -> None:
        """compile=True: the model becomes a torch.compile wrapper (spec 5.4), unless the layout forbids it."""
        if self.parallel_options:
            warnings.warn("laya: compile=True is ignored: this checkpoint uses the parallel option layout, which "
                          "only the eager forward runs", RuntimeWarning, stacklevel=3)
            return
        check_compile_mode(compile_mode)
        self.model = compile_model(self.model, **({"mode": compile_mode} if compile_mode != "default" else {}))
        self._compiled = True

    # ---- placement and precision -------------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        return self.precision.dtype

    @property
    def amp_enabled(self) -> bool:
        return self.precision.amp_enabled

    @property
    def mps_amp_min_rows(self) -> int:
        return self.precision.mps_amp_min_rows

    def dtype_for(self, rows: int) -> torch.dtype:
        return self.precision.dtype_for(self.device, rows)

    def _place_model(self) -> None:
        """Move the fp32 model to the device; a GPU that cannot hold it leaves the agent on the CPU."""
        try:
            self.model.to(self.device).eval()
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            if self.device.type == "cpu":
                raise
            wanted = self.device
            self.model.to("cpu").eval()
            self.device, self.precision = torch.device("cpu"), Precision(torch.float32, False)
            warnings.warn(
                f"laya: could not place the model on {wanted} ({type(e).__name__}: {e}).\n"
                "Running on CPU in float32 without mixed precision; expect roughly 10-15x slower inference.\n"
                "On new GPUs (e.g. Blackwell) install torch >= 2.6 built for your CUDA version.",
                RuntimeWarning, stacklevel=3)

    def _relocate(self, device: torch.device, precision: Precision) -> None:
        """Move the model (and its forward) to `device` with `precision` (OOM fallback and its return)."""
        self.model.to(device).eval()
        self.device, self.precision = device, precision

    # ---- backends ----------------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        return self.forward_backend.name

    @property
    def backend_object(self) -> backends.Backend | None:
        return self._backend

    @property
    def forward_backend(self) -> backends.Backend:
        """What runs this agent's forward: the installed backend, else the stock (or compile=True) forward."""
        if self._backend is not None:
            return self._backend
        stock = self.__dict__.get("_stock")
        if stock is None or stock.model is not self.model:  # rebuilt when the model object changes
            stock = LegacyCompiled(self, self.compile_mode) if self._compiled else EagerBackend(self)
            self._stock = stock
        return stock

    @property
    def _fast(self) -> Any:
        """The FastLaya object of the tilelang backend, else None (spec 5.1)."""
        return None if self._backend is None else self._backend.fast

    def set_backend(self, name: str = "auto", strict: bool = False, **options: Any) -> str:
        """Install a backend (waits for inference in flight); unavailable -> warning + eager, or raise if strict."""
        check_flag(strict, "strict")
        name = backends.normalise(name)
        backends.check_options(name, self, options)  # a typo costs nothing: the working backend stays
        with self._gate.writing():
            previous = self._backend_request
            self._detach_backend()
            if self._compiled:  # a legacy torch.compile wrapper gives way to the backend layer
                self.model = self.model._orig_mod
                self.model.encoder.config.reference_compile = False
                self._compiled = False
            try:
                self._backend = backends.install(self, name, strict=strict, **options)
            except Exception as refused:
                self._restore_backend(previous, refused)
                raise
            self._backend_request = (name, options)
            return self._backend.name

    def _restore_backend(self, request: tuple | None, refused: Exception) -> None:
        """After a refused set_backend, the backend that was working (the caller still gets the refusal)."""
        if request is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # its unavailability, if any, was reported when it was asked for
                self._backend = backends.install(self, request[0], **request[1])
        except Exception as e:  # noqa: BLE001 - the caller's error stays the one raised
            warnings.warn(f"laya: set_backend failed ({refused}) and the previous backend {request[0]!r} could not "
                          f"be restored ({e}); the stock forward runs", RuntimeWarning, stacklevel=4)

    def accelerate(self, use_graphs: bool = True, strict: bool = False) -> bool:
        """The TileLang fast path; False (with a warning) when it cannot run here."""
        check_flag(use_graphs, "use_graphs")
        return self.set_backend("tilelang", strict=strict, use_graphs=use_graphs) == "tilelang"

    def deaccelerate(self) -> None:
        with self._gate.writing():
            self._detach_backend()
            self._backend_request = None

    def _detach_backend(self) -> None:
        if self._backend is not None:
            self._backend.uninstall()
            self._backend = None

    # ---- inference -----------------------------------------------------------------------------

    def _max_positions(self) -> int | None:
        limit = getattr(self.model.encoder.config, "max_position_embeddings", None)
        return limit if isinstance(limit, int) else None

    def _chunks_scope(self) -> Any:
        # On CUDA an outer (disabled) autocast scope keeps the inner scopes' cast-weight cache alive
        # across chunks; each chunk would otherwise re-cast every weight to 16 bits.
        if self.device.type == "cuda" and self.amp_enabled:
            return torch.autocast("cuda", enabled=False)
        return contextlib.nullcontext()

    def _run_forward(self, batch: Batch) -> tuple[torch.Tensor, list]:
        """(logits [N, K] as an fp32 host tensor, act probabilities [N, n_act] as lists of floats)."""
        logits, act_logits = self.forward_backend.run(batch)
        return host_fp32(logits), act_probabilities(act_logits)

    def amp_succeeded(self) -> None:
        """A forward under autocast worked: the run of consecutive failures is over."""
        if self._amp_failures:
            self._amp_failures = 0

    def amp_failed(self, error: BaseException) -> None:
        """One more consecutive autocast failure answered in fp32; at _AMP_FAIL_LIMIT, AMP goes off for good."""
        with _AMP_LOCK:
            self._amp_failures += 1
            if self._amp_failures < _AMP_FAIL_LIMIT or not self.precision.amp_enabled:
                return
            self.precision = Precision(torch.float32, False, self.precision.mps_amp_min_rows)
            self.bf16_weights.clear()
        warnings.warn(f"laya: mixed precision failed on {self.device.type} {_AMP_FAIL_LIMIT} times in a row (last: "
                      f"{type(error).__name__}: {error}); those requests ran in float32, and this agent now runs "
                      "in float32 without autocast", RuntimeWarning, stacklevel=6)

    def _infer(self, batch: Batch) -> tuple[torch.Tensor, list]:
        gate = self._gate
        try:
            counted = gate.acquire_read()  # gate.reading() without a generator per request
            try:
                return self._run_forward(batch)
            finally:
                gate.release_read(counted)
        except Exception as e:
            if not is_oom(e, self.device):
                raise
            error = e
        return self._retry_on_cpu(batch, error)

    def _retry_on_cpu(self, batch: Batch, error: BaseException) -> tuple[torch.Tensor, list]:
        warnings.warn(OOM_MESSAGE, RuntimeWarning, stacklevel=3)
        with self._gate.writing(), _FALLBACK_LOCK:
            self.cpu_fallback_count += 1
            self.last_fallback_reason = f"{type(error).__name__}: {error}"
            home, precision, request = self.device, self.precision, self._backend_request
            self._detach_backend()  # device-bound kernels/graphs cannot follow the model to the CPU
            self._relocate(torch.device("cpu"), Precision(torch.float32, False))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            try:
                return self._run_forward(batch)
            finally:
                try:
                    self._relocate(home, precision)
                    if request is not None:
                        self._backend = backends.install(self, request[0], **request[1])
                except Exception as e:  # noqa: BLE001 - the agent keeps working, on the CPU
                    self._detach_backend()
                    self._relocate(torch.device("cpu"), Precision(torch.float32, False))
                    warnings.warn(f"laya: could not move the model back to {home} after the CPU retry "
                                  f"({type(e).__name__}: {e}); this agent stays on the CPU", RuntimeWarning,
                                  stacklevel=3)

    def warmup(self, shapes: Any = None) -> float:
        """Run synthetic (rows, tokens, markers) batches through the request path's forward, each as often as
        the forward needs to be ready (the tilelang path captures a CUDA graph on a plan's third run);
        returns seconds taken."""
        start = time.perf_counter()
        for batch in self.forward_backend.warmup_batches(shapes or self.WARMUP_SHAPES):
            self._infer(batch)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start

    # ---- embeddings ------------------------------------------------------------------------------

    @property
    def decision_model(self) -> torch.nn.Module:
        """The DecisionModel itself (under compile=True, the module inside the torch.compile wrapper)."""
        return self.model._orig_mod if self._compiled else self.model

    def text_limit(self, max_length: int) -> int:
        """Tokens an encoded text keeps: `max_length`, capped by the encoder's position limit."""
        positions = getattr(self.decision_model.encoder.config, "max_position_embeddings", None)
        return min(max_length, positions) if isinstance(positions, int) and positions >= 2 else max_length

    def encode_texts(self, texts: list[str], max_length: int = 512, batch_size: int = 32) -> np.ndarray:
        """Mean-pooled, L2-normalised last hidden states of the encoder, [n, d] float32, one per text.

        Each text is [CLS] text [SEP] (at most `max_length` tokens and the encoder's position limit);
        `batch_size` texts per forward, sorted by length, returned in input order; no_grad and this agent's
        autocast policy, under its read gate (a backend switch or OOM fallback waits)."""
        encoder = self.decision_model.encoder
        out = np.zeros((len(texts), int(encoder.config.hidden_size)), dtype=np.float32)
        if not texts:
            return out
        limit = self.text_limit(max_length)
        view = tokenizer_view(self.tok)
        ids = [[view.cls_id, *row[:limit - 2], view.sep_id] for row in encode_many(self.tok, texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        with self._gate.reading(), torch.no_grad():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                rows = [ids[i] for i in chunk]
                width = max(len(r) for r in rows)
                input_ids = torch.tensor([r + [view.pad_id] * (width - len(r)) for r in rows], device=self.device)
                mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self.device)
                dtype = self.dtype_for(len(chunk))
                with torch.autocast(self.device.type, dtype=dtype) if dtype != torch.float32 else NO_SCOPE, \
                        self.bf16_weights.scope(self.device, dtype):
                    h = encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
                m = mask.unsqueeze(-1).to(torch.float32)
                pooled = (h.float() * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
                out[chunk] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
        return out

    # ---- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Free the model and the accelerator memory it held."""
        if getattr(self, "model", None) is not None:
            del self.model
            self.model = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            torch.xpu.empty_cache()

    def __repr__(self) -> str:
        return f"Agent(model_id={self.model_id!r}, device={self.device.type})"


RLAgent = Agent


from .loading import load  # noqa: E402,F401 (laya.agent.load: the published name; torch-free in laya.loading)
