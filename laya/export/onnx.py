"""Export a DecisionModel to ONNX, check the graph against the eager model, optionally quantise to INT8.

The graph has five inputs and two outputs, named below; laya.onnx_agent feeds and reads them by name.
Batch, sequence and marker axes are dynamic. Two lessons from earlier exports shape this module:

* tracing at batch 1 silently bakes batch=1 into the head, so the trace uses TRACE_BATCH > 1 rows and
  every export is verified at batches 1, 2 and 3 with other widths and marker counts than the trace;
* the model's one-marker-column branch (`confidence_features`) cannot live in the same graph as the
  `topk(2)` branch, so the graph is traced with >= 2 marker columns and callers pad to MIN_MARKERS.
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from typing import Any, Sequence

import numpy as np
import torch

from ..answers import softmax_rows
from ..backends.base import INPUT_NAMES
from ..backends.onnx import OUTPUT_NAMES
from ..parallel_layout import eager_only
from .examples import example_inputs

TRACE_BATCH = 3
TRACE_SEQ = 40
TRACE_MARKERS = 4
MIN_MARKERS = 2
# (batch, seq, markers): batches 1-3, none equal to the trace shape, one row shorter than a tiny
# local-attention window and one longer than it.
VERIFY_SHAPES = ((1, 12, 2), (2, 57, 5), (3, 33, 3))
EXPORTERS = ("dynamo", "legacy")
MAX_BATCH = 4096

# fp32 graph vs eager: logits within atol + rtol * |eager| (random-weight act logits reach the hundreds,
# so a pure atol would test float rounding of large numbers), probabilities within 1e-3.
FP32_LOGITS_ATOL = 1e-3
FP32_LOGITS_RTOL = 1e-4
FP32_PROB_ATOL = 1e-3
# INT8 dynamic quantisation rounds every weight matrix: only probabilities are compared, much looser.
# Measured on random checkpoints at realistic weight scales: tiny std 0.1 <= 6e-3, base std 0.02 2.6e-3.
# (The std 0.3 test checkpoint blows activations up until INT8 rounding moves probabilities by 0.2+.)
INT8_PROB_ATOL = 5e-2


class ExportMismatch(AssertionError):
    """The exported graph disagrees with the eager model beyond the stated tolerance."""


def _axes() -> dict:
    """ONNX axis names per input/output (the legacy exporter's `dynamic_axes`, and what the check expects)."""
    rows = {0: "batch"}
    return {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "marker_pos": {0: "batch", 1: "markers"}, "marker_mask": {0: "batch", 1: "markers"}, "qtype": rows,
            "logits": {0: "batch", 1: "markers"}, "act_logits": dict(rows)}


def _max_seq(model: torch.nn.Module) -> int:
    limit = getattr(getattr(model.encoder, "config", None), "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) and limit > 2 else 8192


def _dynamic_shapes(model: torch.nn.Module) -> dict:
    from torch.export import Dim

    batch = Dim("batch", min=1, max=MAX_BATCH)
    seq = Dim("seq", min=MIN_MARKERS + 2, max=_max_seq(model))
    markers = Dim("markers", min=MIN_MARKERS, max=256)
    return {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq},
            "marker_pos": {0: batch, 1: markers}, "marker_mask": {0: batch, 1: markers}, "qtype": {0: batch}}


def cpu_fp32(model: torch.nn.Module) -> torch.nn.Module:
    """The model itself when it is already fp32 on the CPU, else a CPU fp32 copy (the caller's model,
    perhaps serving on a GPU, is never moved or cast). Switched to eval mode either way."""
    params = list(model.parameters())
    if all(p.dtype == torch.float32 and p.device.type == "cpu" for p in params):
        return model.eval()
    return copy.deepcopy(model).to(device="cpu", dtype=torch.float32).eval()


def trace_inputs(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    vocab = int(getattr(model.encoder.config, "vocab_size", 1000))
    pad = getattr(model.encoder.config, "pad_token_id", 0) or 0
    return example_inputs(TRACE_BATCH, TRACE_SEQ, TRACE_MARKERS, vocab, seed=0, pad_id=pad)


DYNAMO_MIN_OPSET = 18


def export_module(model: torch.nn.Module, path: str, opset: int | None = None, exporter: str = "dynamo",
                  fuse: bool | str = "auto") -> str:
    """Write `model` (fp32, CPU, eval) as an ONNX graph at `path`; returns the path.

    exporter "dynamo" (torch.export based, default) or "legacy" (TorchScript tracing, deprecated but
    much faster to run). Both give symbolic batch/seq/markers axes; `check_dynamic_axes` proves it.
    fuse: ModernBERT attention into ORT's RotaryEmbedding + MultiHeadAttention (laya.export.onnx_fuse;
    base shape INT8 1x3 193 -> 157 ms). "auto" fuses where the pattern is found and the fused graph
    matches the unfused one, else keeps the unfused graph with a warning (dynamo graphs only: the legacy
    exporter's pattern differs); True tries either and raises instead; False never.
    """
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter {exporter!r} is not known; use one of {', '.join(EXPORTERS)}")
    if fuse not in (True, False, "auto"):
        raise ValueError(f"fuse={fuse!r}; use True, False or 'auto'")
    if exporter == "dynamo" and opset is not None and int(opset) < DYNAMO_MIN_OPSET:
        # below it the dynamo exporter's down-conversion keeps newer attributes (Split's num_outputs at 17)
        raise ValueError(f"opset {opset} is below the dynamo exporter's {DYNAMO_MIN_OPSET}: its graph would not load "
                         f"in ONNX Runtime; use opset >= {DYNAMO_MIN_OPSET}, or exporter='legacy' for opset {opset}")
    eager_only(getattr(model, "option_layout", None), "an ONNX export")
    if TRACE_BATCH < 2 or TRACE_MARKERS < MIN_MARKERS:
        raise ValueError(f"TRACE_BATCH={TRACE_BATCH} must be > 1 and TRACE_MARKERS={TRACE_MARKERS} >= "
                         f"{MIN_MARKERS}: smaller traces bake those sizes into the graph")
    model = cpu_fp32(model)
    args = trace_inputs(model)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    kwargs: dict[str, Any] = {"input_names": list(INPUT_NAMES), "output_names": list(OUTPUT_NAMES)}
    if opset is not None:
        kwargs["opset_version"] = int(opset)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer chatter about Python branches; the verify step is the judge
        if exporter == "dynamo":
            program = torch.onnx.export(model, args, dynamo=True, dynamic_shapes=_dynamic_shapes(model),
                                        optimize=True, verbose=False, **kwargs)
            program.save(path)
        else:
            kwargs.setdefault("opset_version", 17)
            torch.onnx.export(model, args, path, dynamo=False, dynamic_axes=_axes(), do_constant_folding=True,
                              **kwargs)
    check_dynamic_axes(path)
    modernbert = getattr(getattr(model.encoder, "config", None), "model_type", None) == "modernbert"
    if (fuse is True or (fuse == "auto" and exporter == "dynamo")) and modernbert:  # (legacy graphs differ)
        _fuse_in_place(model, path, strict=fuse is True)
    return path


def _fuse_in_place(model: torch.nn.Module, path: str, strict: bool) -> None:
    """Replace the graph at `path` by its attention-fused form when both agree on example inputs."""
    fused = f"{path}.fused.tmp"
    try:
        if fuse_graph(model, path, fused, strict=strict):
            os.replace(fused, path)
    finally:
        if os.path.exists(fused):
            os.remove(fused)


def fuse_graph(model: torch.nn.Module, src: str, dst: str, strict: bool = False) -> bool:
    """Write the attention-fused form of the graph `src` (of `model`) to `dst`; True when it was written
    and matches `src` at the fp32 tolerance. strict: raise ExportMismatch instead of warning."""
    from .onnx_fuse import fuse_attention

    try:
        fuse_attention(src, dst, model.encoder.config)
        worst = _graphs_differ(model, src, dst)
        if worst > FP32_LOGITS_ATOL:
            raise ExportMismatch(f"the fused graph differs from the unfused one by {worst:.3g} > {FP32_LOGITS_ATOL:g}")
        return True
    except Exception as e:  # noqa: BLE001 - a pattern this rewrite does not know, or ORT refusing the result
        if os.path.exists(dst):
            os.remove(dst)
        if strict:
            raise ExportMismatch(f"{src}: attention fusion failed: {e}") from e
        warnings.warn(f"laya ONNX: kept the unfused graph ({e})", RuntimeWarning, stacklevel=3)
        return False


def _graphs_differ(model: torch.nn.Module, a: str, b: str) -> float:
    """Max |logit difference| between two graphs of `model` over VERIFY_SHAPES."""
    from ..onnx_agent import create_session

    sa, sb = create_session(a, providers=["CPUExecutionProvider"]), create_session(b, providers=["CPUExecutionProvider"])
    vocab = int(getattr(model.encoder.config, "vocab_size", 1000))
    worst = 0.0
    for i, (batch, seq, markers) in enumerate(VERIFY_SHAPES):
        feed = {n: t.numpy() for n, t in zip(INPUT_NAMES, example_inputs(batch, seq, markers, vocab, seed=200 + i))}
        live = feed["marker_mask"].astype(bool)
        (la, aa), (lb, ab) = sa.run(list(OUTPUT_NAMES), feed), sb.run(list(OUTPUT_NAMES), feed)
        excess = np.abs(la - lb) - FP32_LOGITS_RTOL * np.abs(la)
        act = np.abs(aa - ab) - FP32_LOGITS_RTOL * np.abs(aa)
        worst = max(worst, float(excess[live].max()), float(act.max()))
    return worst


def graph_signature(path: str) -> dict:
    """{"inputs": [(name, dims)], "outputs": [(name, dims)]}; a dim is an int or a symbol name."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph

    def dims(value: Any) -> list:
        return [d.dim_param if d.dim_param else d.dim_value for d in value.type.tensor_type.shape.dim]

    return {"inputs": [(v.name, dims(v)) for v in graph.input],
            "outputs": [(v.name, dims(v)) for v in graph.output]}


def check_dynamic_axes(path: str) -> None:
    """Raise unless the graph has the pinned names and symbolic batch/seq/markers axes."""
    sig = graph_signature(path)
    names = (tuple(n for n, _ in sig["inputs"]), tuple(n for n, _ in sig["outputs"]))
    if names != (INPUT_NAMES, OUTPUT_NAMES):
        raise ExportMismatch(f"{path}: graph names {names} differ from the contract {(INPUT_NAMES, OUTPUT_NAMES)}")
    axes = _axes()
    for name, dims in sig["inputs"] + sig["outputs"]:
        for axis in axes[name]:
            if isinstance(dims[axis], int):
                raise ExportMismatch(f"{path}: axis {axis} of {name!r} is fixed at {dims[axis]}, not dynamic; "
                                     "re-export with a batch > 1 and >= 2 marker columns")


# ---- checking a graph against eager ----------------------------------------------------------------


def compare(eager: tuple[np.ndarray, np.ndarray], graph: tuple[np.ndarray, np.ndarray],
            marker_mask: np.ndarray) -> dict:
    """Max deltas of both heads; decision logits only at live marker slots (masked ones are -1e4)."""
    (el, ea), (gl, ga) = eager, graph
    live = marker_mask.astype(bool)
    if el.shape != gl.shape or ea.shape != ga.shape:
        raise ExportMismatch(f"output shapes differ: eager {el.shape}/{ea.shape}, graph {gl.shape}/{ga.shape}")
    logit_excess = np.abs(gl - el) - FP32_LOGITS_RTOL * np.abs(el)
    act_excess = np.abs(ga - ea) - FP32_LOGITS_RTOL * np.abs(ea)
    return {
        "max_abs_logits": float(np.abs(gl - el)[live].max()),
        "max_abs_act_logits": float(np.abs(ga - ea).max()),
        "max_rel_excess_logits": float(max(logit_excess[live].max(), act_excess.max())),
        "max_abs_prob": float(np.abs(np.asarray(softmax_rows(gl.tolist())) - np.asarray(softmax_rows(el.tolist()))).max()),
        "max_abs_act_prob": float(np.abs(np.asarray(softmax_rows(ga.tolist())) - np.asarray(softmax_rows(ea.tolist()))).max()),
        "argmax_agree": int((gl.argmax(-1) == el.argmax(-1)).sum()),
        "act_argmax_agree": int((ga.argmax(-1) == ea.argmax(-1)).sum()),
        "rows": int(el.shape[0]),
    }


def verify_batch_dynamic(model: torch.nn.Module, path: str, shapes: Sequence[tuple[int, int, int]] = VERIFY_SHAPES,
                         prob_atol: float = FP32_PROB_ATOL, logits_atol: float | None = FP32_LOGITS_ATOL,
                         providers: Any = None, threads: int | None = None) -> dict:
    """Run the graph and the eager fp32 model on each (batch, seq, markers) shape and compare.

    Raises ExportMismatch naming the shape when probabilities differ by more than `prob_atol` or (when
    `logits_atol` is not None) logits by more than logits_atol + 1e-4 * |eager|. Returns the report.
    """
    from ..onnx_agent import create_session

    model = cpu_fp32(model)
    session = create_session(path, providers=providers, threads=threads)
    vocab = int(getattr(model.encoder.config, "vocab_size", 1000))
    report: dict[str, Any] = {"path": path, "prob_atol": prob_atol, "logits_atol": logits_atol,
                              "logits_rtol": FP32_LOGITS_RTOL, "shapes": []}
    for i, (batch, seq, markers) in enumerate(shapes):
        args = example_inputs(batch, seq, markers, vocab, seed=100 + i)
        with torch.no_grad():
            logits, act = model(*args)
        started = time.perf_counter()
        out = session.run(list(OUTPUT_NAMES), {n: t.numpy() for n, t in zip(INPUT_NAMES, args)})
        entry = {"shape": [batch, seq, markers], "graph_ms": (time.perf_counter() - started) * 1e3,
                 **compare((logits.numpy(), act.numpy()), (out[0], out[1]), args[3].numpy())}
        report["shapes"].append(entry)
        worst_prob = max(entry["max_abs_prob"], entry["max_abs_act_prob"])
        if worst_prob > prob_atol:
            raise ExportMismatch(f"{path}: at (batch, seq, markers)={(batch, seq, markers)} probabilities differ "
                                 f"from eager by {worst_prob:.3g} > {prob_atol:g}")
        if logits_atol is not None and entry["max_rel_excess_logits"] > logits_atol:
            raise ExportMismatch(f"{path}: at (batch, seq, markers)={(batch, seq, markers)} logits differ from "
                                 f"eager by {entry['max_abs_logits']:.3g} (act {entry['max_abs_act_logits']:.3g}), "
                                 f"over {logits_atol:g} + {FP32_LOGITS_RTOL:g} * |eager|")
    return report


# ---- INT8 ------------------------------------------------------------------------------------------


def int8_output_path(path: str) -> str:
    """laya.onnx -> laya.int8.onnx (next to the fp32 graph)."""
    root, ext = os.path.splitext(path)
    return f"{root}.int8{ext or '.onnx'}"


def quantize_model(src: str, dst: str | None = None, per_channel: bool = True,
                   reduce_range: bool | None = None, last_layers: int | None = None) -> str:
    """Dynamic INT8 quantisation of the graph's MatMul/Gemm weights (activations stay fp32 and are
    quantised per call, u8 x s8 products: ORT's VNNI/AMX kernels); returns the output path. Check it
    with verify_batch_dynamic(..., prob_atol=INT8_PROB_ATOL, logits_atol=None).

    per_channel: one scale per output column (default; same speed as one per matrix, less rounding
    where columns differ in range). reduce_range: 7-bit weights, for CPUs without VNNI/AMX whose u8 x s8
    path (AVX2 vpmaddubsw) can saturate; None decides from this machine (laya.cpu_features).
    last_layers: quantise only the weight MatMuls of the last N encoder layers, the rest (heads
    included) stays fp32 (None: every MatMul/Gemm, the default). On laya-mini only N=1 of 6 keeps
    the parity gate (benchmarks/RESULTS.md, issue 30). The choices are written into the graph's
    metadata (laya.int8.*)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ..cpu_features import features
    from .int8_nodes import last_layer_matmuls

    dst = dst or int8_output_path(src)
    if os.path.abspath(dst) == os.path.abspath(src):
        raise ValueError(f"quantize_model would overwrite its input {src!r}; give another output path")
    if reduce_range is None:
        reduce_range = not features().int8_dot
    # Only the matrix products: quantising Gather (the embedding table) or attention ops adds error for
    # no speed, and the graph's LayerNorm/Softmax stay fp32 either way.
    nodes = None if last_layers is None else last_layer_matmuls(src, int(last_layers))
    scope = "all" if last_layers is None else str(int(last_layers))
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gemm"],
                     nodes_to_quantize=nodes, per_channel=bool(per_channel), reduce_range=bool(reduce_range))
    model = onnx.load(dst, load_external_data=False)
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props},
                                        "laya.int8.per_channel": str(bool(per_channel)),
                                        "laya.int8.reduce_range": str(bool(reduce_range)),
                                        "laya.int8.last_layers": scope,
                                        "laya.int8.quantized_on": features().best_isa})
    onnx.save(model, dst)
    return dst


def int8_settings(path: str) -> dict:
    """The laya.int8.* metadata quantize_model wrote ({} for a graph it did not write)."""
    import onnx

    props = onnx.load(path, load_external_data=False).metadata_props
    return {p.key[len("laya.int8."):]: p.value for p in props if p.key.startswith("laya.int8.")}
