"""ONNXAgent: the laya request path (laya.pipeline.Predictor) over an exported ONNX graph.

Same predict / predict_batch contract and result shape as the torch Agent; only the forward differs:
ONNX Runtime runs the graph written by `scripts/export_onnx.py` (laya.export.onnx). No model weights
are read from the checkpoint: it supplies the config, tokenizer and encoder config only.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .answers import softmax_rows_fp32
from .backends.base import INPUT_NAMES  # noqa: F401 - published names of this module
from .backends.onnx import (CPU_EP, CUDA_EP, MIN_MARKERS, OUTPUT_NAMES, PREFIX, OnnxBackend,  # noqa: F401
                            check_providers, create_session, default_threads)
from .checkpoint import load_config, load_tokenizer, parse_digest_env, resolve_checkpoint_dir, \
    verify_digests
from .parallel_layout import eager_only
from .predictor import Predictor, check_batch_invariant
from .registry import BUNDLE_REPO
from .rust_tokenizer import load_rust_tokenizer
from .sequence import Batch

GRAPH_DIGEST_KEYS = ("onnx", "onnx_path")


def find_graph(onnx_path: str, model_dir: str) -> str:
    """The graph file: `onnx_path` as given, else inside the checkpoint directory."""
    path = os.path.expanduser(str(onnx_path))
    tried = [path]
    if os.path.isfile(path):
        return path
    if not os.path.isabs(path):
        inside = os.path.join(model_dir, path)
        tried.append(inside)
        if os.path.isfile(inside):
            return inside
    raise FileNotFoundError(f"ONNX model not found at {' or '.join(repr(t) for t in tried)}. "
                            "Please run export_onnx.py first.")


def split_digests(expected: dict | None) -> tuple[dict | None, str | None]:
    """(digests of checkpoint files, digest of the graph): the graph may be named 'onnx' or 'onnx_path'."""
    if not expected:
        return expected, None
    rest = {k: v for k, v in expected.items() if k not in GRAPH_DIGEST_KEYS}
    graph = [expected[k] for k in GRAPH_DIGEST_KEYS if k in expected]
    if len(graph) == 2 and graph[0] != graph[1]:
        raise ValueError("expected_sha256 names the graph twice ('onnx' and 'onnx_path') with different digests; "
                         "keep one")
    return rest, (graph[0] if graph else None)


class ONNXAgent(Predictor):
    MODEL_NAME = "laya-rl-agent-onnx"
    collate_arrays = True  # ONNX Runtime takes numpy: the request path never imports torch

    def __init__(self, model_id_or_path: str = BUNDLE_REPO, onnx_path: str = "laya.onnx", token: str | None = None,
                 subfolder: str | None = None, revision: str | None = None, expected_sha256: dict | None = None,
                 hooks: Any = None, on_predict_start: Any = None, on_predict_end: Any = None,
                 hooks_raise: bool = True, hooks_concurrent: bool = True, hooks_timeout: float | None = None,
                 lang_temperatures: dict | None = None, calibration: str | None = None, providers: Any = None,
                 threads: int | None = None, batch_invariant: bool = False):
        self._setup_hooks(hooks, on_predict_start, on_predict_end, hooks_raise, hooks_concurrent, hooks_timeout)
        self.batch_invariant = check_batch_invariant(batch_invariant)
        self.model_id_or_path = model_id_or_path
        self.model_id = str(model_id_or_path)
        self.subfolder = subfolder
        # weights=False: the graph carries the weights; never download model.safetensors for it.
        model_dir, self.revision = resolve_checkpoint_dir(model_id_or_path, subfolder, revision, token, weights=False)
        self.model_dir = model_dir
        digests, graph_digest = split_digests(expected_sha256 if expected_sha256 is not None else parse_digest_env(model_id_or_path))
        verify_digests(model_dir, digests)
        self.cfg = load_config(model_dir, self.model_id)
        eager_only(self.cfg.get("option_layout"), "the ONNX agent")
        self.onnx_path = find_graph("laya.onnx" if onnx_path is None else onnx_path, model_dir)
        if graph_digest is not None:  # the published check and texts (R-DIG-1), for the graph found
            root, graph = os.path.abspath(model_dir), os.path.abspath(self.onnx_path)
            named = os.path.relpath(graph, root) if os.path.commonpath([root, graph]) == root else graph
            verify_digests(model_dir, {"onnx": graph_digest}, onnx_path=named)
        # tokenizers alone when the checkpoint has a tokenizer.json: no transformers (nor torch) to import
        self.tok = load_rust_tokenizer(model_dir) or load_tokenizer(model_dir, self.cfg["encoder"])
        self._positions = self._read_max_positions(model_dir)

        self._setup_calibration(lang_temperatures, calibration, prefix=PREFIX)

        self.threads = threads
        self.forward_backend = OnnxBackend(self, self.onnx_path, providers=providers, threads=threads)
        self.session = self.forward_backend.session
        self.providers = list(self.session.get_providers())

    # ---- setup helpers -----------------------------------------------------------------------

    @staticmethod
    def _read_max_positions(model_dir: str) -> int | None:
        path = os.path.join(model_dir, "encoder", "config.json")
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            limit = json.load(f).get("max_position_embeddings")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None

    @property
    def backend(self) -> str:
        return "onnx"

    @property
    def device(self) -> str:
        return "cuda" if CUDA_EP in self.providers else "cpu"

    # ---- inference ---------------------------------------------------------------------------

    def _max_positions(self) -> int | None:
        return self._positions

    def _infer(self, batch: Batch) -> tuple[np.ndarray, list]:
        if self.session is None:
            raise RuntimeError(f"{self!r} is closed; create a new ONNXAgent to predict again")
        logits, act_logits = self.forward_backend.run(batch)
        return logits, softmax_rows_fp32(act_logits)

    # ---- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "ONNXAgent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Drop the ONNX Runtime session (its memory goes with it: the backend held a second reference)."""
        self.session = None
        self.forward_backend.session = None

    def __repr__(self) -> str:
        return f"ONNXAgent(model_id={self.model_id!r}, onnx_path={self.onnx_path!r}, providers={self.providers})"
