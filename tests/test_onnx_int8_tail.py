"""INT8 in the last encoder layer only (quantize_model(last_layers=1)): the one recipe that kept
laya-mini within issue 30's parity gate (max |dp| <= 0.03, no flips of decided answers)."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from laya.export import int8_nodes  # noqa: E402
from laya.export import onnx as export  # noqa: E402

MINI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "laya", "laya_mini")
LAYER5 = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
          "intermediate.dense", "output.dense"]


def scoped(name: str, scopes: list[str]):
    node = onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name)
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", *scopes, "linear"]))
    return node


def test_layer_is_read_from_bert_and_modernbert_scopes():
    assert int8_nodes.encoder_layer(scoped("a", ["encoder.encoder.layer.5.output.dense"])) == 5
    assert int8_nodes.encoder_layer(scoped("b", ["encoder.layers.21", "encoder.layers.21.mlp.Wo"])) == 21
    assert int8_nodes.encoder_layer(scoped("c", ["scorer", "scorer.1"])) is None
    assert int8_nodes.encoder_layer(onnx.helper.make_node("MatMul", ["x", "w"], ["y"])) is None


@pytest.fixture(scope="module")
def mini_graphs(tmp_path_factory):
    import laya

    out = tmp_path_factory.mktemp("mini_int8")
    fp32 = export.export_module(laya.load(MINI, device="cpu").model, str(out / "laya.onnx"))
    return fp32, export.quantize_model(fp32, str(out / "laya.int8last1.onnx"), last_layers=1)


def test_only_the_last_layer_matmuls_are_quantised(mini_graphs):
    fp32, tail = mini_graphs
    scopes = {n.name: int8_nodes.name_scopes(n) for n in onnx.load(fp32, load_external_data=False).graph.node}
    graph = onnx.load(tail).graph
    quantised = [n.name[:-len("_quant")] for n in graph.node if n.op_type == "MatMulInteger"]
    assert sorted(scopes[name][-2] for name in quantised) == sorted(f"encoder.encoder.layer.5.{m}" for m in LAYER5)
    # layers 0-4 (six products each) and the two heads' four stay fp32
    assert len(int8_nodes.weight_matmuls(graph)) == 5 * 6 + 4
    assert export.int8_settings(tail)["last_layers"] == "1"


def test_last_layer_int8_answers_within_the_gate(mini_graphs):
    import laya
    from laya import presets
    from laya.onnx_agent import ONNXAgent

    states = ["Hi team, I was charged twice for my March invoice and nobody has answered my last two emails.",
              "URGENT: verify your account within 24 hours at http://secure-login.example.com or lose access.",
              "The nightly ETL job failed again with a permissions error on the warehouse bucket; logs attached."]
    questions = presets.PRESETS["email"]()
    ref = laya.load(MINI, device="cpu").predict_batch(states, questions)
    with ONNXAgent(MINI, onnx_path=mini_graphs[1], threads=1) as agent:
        got = agent.predict_batch(states, questions)
    for r, g in zip(ref, got):
        for qid, a in r["answers"].items():
            pr = np.array([1 - a["noul"], a["noul"]] if a["type"] == "noul" else list(a["probabilities"].values()))
            b = g["answers"][qid]
            pg = np.array([1 - b["noul"], b["noul"]] if b["type"] == "noul" else list(b["probabilities"].values()))
            assert np.abs(pr - pg).max() <= 0.03, (qid, pr, pg)
            top = np.sort(pr)[::-1]
            if top[0] - top[1] > 0.05:
                assert np.argmax(pg) == np.argmax(pr), qid
