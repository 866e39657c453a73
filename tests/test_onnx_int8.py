"""INT8 graphs: per-channel weight scales by default, the settings recorded in the graph, and answers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from laya.export import onnx as export  # noqa: E402


def weight_scales(path: str) -> list[tuple[int, int]]:
    """(scale size, output columns) per quantised weight (initializer W_quantized, its scale W_scale)."""
    inits = {t.name: t for t in onnx.load(path).graph.initializer}
    return [(int(np.prod(inits[n[:-len("_quantized")] + "_scale"].dims) or 1), int(inits[n].dims[-1]))
            for n in inits if n.endswith("_quantized") and n[:-len("_quantized")] + "_scale" in inits]


@pytest.fixture(scope="module")
def int8_graphs(onnx_graph, tmp_path_factory):
    out = tmp_path_factory.mktemp("int8")
    return {"pc": export.quantize_model(onnx_graph, str(out / "pc.onnx")),
            "pt": export.quantize_model(onnx_graph, str(out / "pt.onnx"), per_channel=False, reduce_range=True)}


def test_per_channel_is_default_and_recorded(int8_graphs):
    pc, pt = weight_scales(int8_graphs["pc"]), weight_scales(int8_graphs["pt"])
    assert pc and pt and len(pc) == len(pt)
    assert all(size == cols for size, cols in pc) and any(cols > 1 for _, cols in pc)  # one per column
    assert all(size == 1 for size, _ in pt)  # one per matrix
    meta = export.int8_settings(int8_graphs["pc"])
    assert meta["per_channel"] == "True" and meta["quantized_on"]
    assert export.int8_settings(int8_graphs["pt"]) == {**meta, "per_channel": "False", "reduce_range": "True"}


def test_int8_runs_through_the_agent(tiny_checkpoint, int8_graphs, agent):
    from laya.onnx_agent import ONNXAgent

    questions = {"q": {"type": "choice", "instructions": "Which?", "criteria": {"a": None, "b": None, "c": None}}}
    graph = ONNXAgent(tiny_checkpoint, onnx_path=int8_graphs["pc"], threads=1)
    got = graph.predict("the parcel never arrived", questions)["answers"]["q"]["probabilities"]
    ref = agent.predict("the parcel never arrived", questions)["answers"]["q"]["probabilities"]
    assert set(got) == set(ref) and abs(sum(got.values()) - 1.0) < 1e-3  # (rounded to 4 places)
    assert got != ref  # quantised weights do move the answer a little (a fp32 graph by mistake would not)


def test_close_releases_the_session(tiny_checkpoint, int8_graphs):
    import gc
    import weakref

    from laya.onnx_agent import ONNXAgent

    agent = ONNXAgent(tiny_checkpoint, onnx_path=int8_graphs["pc"], threads=1)
    ref = weakref.ref(agent.session)
    agent.close()
    gc.collect()
    assert ref() is None  # a second reference kept every closed graph's weights and arena alive
    with pytest.raises(RuntimeError, match="closed"):
        agent.predict("hello", {"q": {"type": "noul", "instructions": "Is it?"}})
