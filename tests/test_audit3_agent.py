"""Audit 3 of the agent surface (reference §1.2-§1.4, §2): behaviours the earlier audits left open."""

from __future__ import annotations

import os

import pytest

MINI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "laya", "laya_mini")


def test_missing_onnx_graph_message_ends_with_the_published_sentence(tmp_path):
    from laya.onnx_agent import ONNXAgent

    missing = str(tmp_path / "nope.onnx")
    with pytest.raises(FileNotFoundError) as err:
        ONNXAgent(MINI, onnx_path=missing)
    assert str(err.value) == f"ONNX model not found at {missing!r}. Please run export_onnx.py first."
