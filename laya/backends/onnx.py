"""ONNX Runtime as a backend: an exported graph runs the forward (the ONNXAgent's, laya.onnx_agent)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..cpu_features import physical_cores
from ..export.onnx_link import check_linked
from ..sequence import Batch
from .base import INPUT_NAMES, Backend, pad_to

OUTPUT_NAMES = ("logits", "act_logits")
MIN_MARKERS = 2  # the graph holds only the topk(2) branch of the confidence features
# Rows x width^2 per session run: ORT's attention holds every row's scores, so one 60 x 1024 batch of
# mmBERT-base peaked at 20.6 GB; 2-row runs: 2.2 GB and 1.55x faster (onnx_row_chunks_cpu_2026-12-06.json).
ATTENTION_CELLS = 2 ** 21
CPU_EP = "CPUExecutionProvider"
CUDA_EP = "CUDAExecutionProvider"
PREFIX = "laya ONNX"


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as e:
        raise ImportError("ONNXAgent needs onnxruntime: pip install onnxruntime (or onnxruntime-gpu)") from e
    return onnxruntime


def default_threads() -> int:
    """Physical cores this process may use: SMT siblings share one core's matrix units, so a second
    thread per core only adds contention (and a container's CPU set can be smaller than the machine)."""
    return physical_cores()


def check_providers(providers: Any) -> list | None:
    """None (choose automatically) or a list of provider names / (name, options) pairs ORT offers."""
    if providers is None:
        return None
    if isinstance(providers, str):
        providers = [providers]
    available = _ort().get_available_providers()
    out = []
    for p in providers:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if not isinstance(name, str) or name not in available:
            raise ValueError(f"ONNX Runtime provider {name!r} is not available here; available: {available}")
        out.append(tuple(p) if isinstance(p, (tuple, list)) else p)
    return out


def create_session(path: str, providers: Any = None, threads: int | None = None) -> Any:
    """An InferenceSession with full graph optimisation, `threads` intra-op threads and no spinning.

    Spinning worker threads would keep burning the cores between calls and slow any PyTorch (or other
    ORT) work sharing the process. CUDA is used when ORT offers it; if it fails to start, CPU with a
    warning.
    """
    ort = _ort()
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    chosen = check_providers(providers)
    if chosen is None:
        chosen = [CUDA_EP, CPU_EP] if CUDA_EP in ort.get_available_providers() else [CPU_EP]
    try:
        return ort.InferenceSession(path, sess_options=opts, providers=chosen)
    except Exception as e:  # noqa: BLE001 - a broken CUDA install must not stop a CPU run
        if chosen == [CPU_EP] or providers is not None:
            raise _unloadable(path, e) from None
        warnings.warn(f"{PREFIX}: the CUDA provider failed to start ({type(e).__name__}: {e}); using the CPU",
                      RuntimeWarning, stacklevel=3)
    try:
        return ort.InferenceSession(path, sess_options=opts, providers=[CPU_EP])
    except Exception as e:  # noqa: BLE001 - ORT's own classes: named as what the caller can fix
        raise _unloadable(path, e) from None


def _unloadable(path: str, error: Exception) -> ValueError:
    return ValueError(f"ONNX Runtime cannot load {path!r} ({type(error).__name__}: {str(error)[:300]}); point it at "
                      "a graph written by scripts/export_onnx.py")


class OnnxBackend(Backend):
    """`run(batch)` through an InferenceSession; the outputs come back as numpy arrays."""

    name = "onnx"

    def __init__(self, agent: Any, path: str, providers: Any = None, threads: int | None = None):
        self.agent = agent
        self.model = None
        self.max_len = None
        self.installed = True
        self.path = path
        self.session = create_session(path, providers=providers, threads=threads)
        check_linked(path, self.session.get_modelmeta().custom_metadata_map)
        names = (tuple(i.name for i in self.session.get_inputs()), tuple(o.name for o in self.session.get_outputs()))
        if names != (INPUT_NAMES, OUTPUT_NAMES):
            raise ValueError(f"{path!r} has inputs/outputs {names}, expected {(INPUT_NAMES, OUTPUT_NAMES)}; "
                             "re-export it with scripts/export_onnx.py")

    def run(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        self.check_batch(batch)
        ids = batch.input_ids
        k = batch.marker_pos.shape[1]
        # a masked extra slot gets probability 0 and leaves the act features unchanged
        tensors = pad_to(batch.tensors(), ids.shape[0], ids.shape[1], max(k, MIN_MARKERS), self.agent.tok.pad_token_id)
        feed = {n: np.asarray(t) for n, t in zip(INPUT_NAMES, tensors)}  # (numpy, or host torch tensors)
        rows, width = ids.shape
        step = max(1, ATTENTION_CELLS // (width * width))
        if rows <= step:
            logits, act_logits = self.session.run(list(OUTPUT_NAMES), feed)
        else:  # runs of `step` rows at the batch's width: fp32 graphs give the same bits (INT8 graphs' dynamic
            # activation scales span the rows of one run, as they spanned the whole batch before)
            parts = [self.session.run(list(OUTPUT_NAMES), {n: t[i:i + step] for n, t in feed.items()})
                     for i in range(0, rows, step)]
            logits, act_logits = (np.concatenate(out) for out in zip(*parts))
        return np.ascontiguousarray(logits[:, :k], dtype=np.float32), act_logits
