"""Attention fusion of exported ModernBERT graphs (laya.export.onnx_fuse): structure, answers, refusals."""

from __future__ import annotations

import copy

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from laya.export import onnx as export  # noqa: E402
from laya.export.onnx_fuse import FusionError, fuse_attention  # noqa: E402


def ops(path: str) -> dict:
    counts: dict = {}
    for n in onnx.load(path).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def test_default_export_is_fused_and_matches_eager(agent, onnx_graph):
    layers = agent.model.encoder.config.num_hidden_layers
    counts = ops(onnx_graph)
    assert counts.get("MultiHeadAttention") == layers and counts.get("RotaryEmbedding") == 2 * layers
    report = export.verify_batch_dynamic(agent.model, onnx_graph)  # fp32 tolerance, seq 57 > the local window
    assert len(report["shapes"]) == 3


def test_unfused_export_and_a_wrong_rope_is_caught(agent, onnx_graph, tmp_path):
    plain = export.export_module(agent.model, str(tmp_path / "plain.onnx"), fuse=False)
    assert "MultiHeadAttention" not in ops(plain)
    assert sum(ops(plain).values()) > sum(ops(onnx_graph).values()) + 30  # ~45 ops per layer became 4
    cfg = copy.deepcopy(agent.model.encoder.config)
    for entry in cfg.rope_parameters.values():
        entry["rope_theta"] = 500.0  # a rotary that is not the model's
    fuse_attention(plain, str(tmp_path / "wrong.onnx"), cfg)
    assert export._graphs_differ(agent.model, plain, str(tmp_path / "wrong.onnx")) > export.FP32_LOGITS_ATOL
    assert export.fuse_graph(agent.model, plain, str(tmp_path / "right.onnx"), strict=True)
    assert export._graphs_differ(agent.model, plain, str(tmp_path / "right.onnx")) <= export.FP32_LOGITS_ATOL


def test_refuses_other_encoders(onnx_graph, tmp_path):
    class Bert:
        model_type = "bert"

    with pytest.raises(FusionError, match="ModernBERT"):
        fuse_attention(onnx_graph, str(tmp_path / "x.onnx"), Bert())
    with pytest.raises(ValueError, match="fuse="):
        export.export_module(None, str(tmp_path / "y.onnx"), fuse="yes")
