"""laya-mini ships an ONNX graph whose weights are read from its own model.safetensors (laya.export.onnx_link):
`laya demo` and `laya TEXT --preset ... --model <laya-mini>` answer through it without importing torch, and
its answers equal the eager fp32 agent's (issue 24, CPU start)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from laya.export import onnx_link  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "laya", "laya_mini")
GRAPH = os.path.join(MINI, "laya.onnx")
STATES = [{"message": "I was charged twice for March, refund me today or I cancel.", "tier": "gold"},
          "The app crashes every time I open settings.", "Thanks, all good now!", "",
          {"message": "Wo ist meine Bestellung? " * 30, "tier": "free"}]


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    code = ("import sys, json\n"
            f"sys.argv = ['laya', *{args!r}]\n"
            "import laya.cli\n"
            "code = laya.cli.main()\n"
            "print(json.dumps(sorted(m for m in ('torch', 'transformers') if m in sys.modules)), file=sys.stderr)\n"
            "raise SystemExit(code)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


def assert_close(got, want, where="answers"):
    """Same keys, labels and choices; numbers (rounded to 4 places by the result builder) within 2e-4."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for key in want:
            assert_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, (int, float)) and not isinstance(want, bool):
        assert abs(got - want) <= 2e-4, (where, got, want)
    else:
        assert got == want, where


def imported(out: subprocess.CompletedProcess) -> list:
    return json.loads(out.stderr.strip().splitlines()[-1])


def test_the_shipped_graph_is_linked_to_the_shipped_weights():
    import onnx

    props = {p.key: p.value for p in onnx.load(GRAPH, load_external_data=False).metadata_props}
    assert props[onnx_link.FILE_KEY] == "model.safetensors"
    assert props[onnx_link.HEADER_KEY] == onnx_link.header_sha256(os.path.join(MINI, "model.safetensors")), (
        "laya-mini's weights changed layout: python scripts/export_onnx.py --model laya/laya_mini --link")
    assert os.path.getsize(GRAPH) < 2_000_000  # a graph, not a second copy of the weights (46 MB)


def test_demo_answers_without_torch_and_as_eager():
    onnx_run, eager_run = run_cli(["demo", "--json"]), run_cli(["demo", "--json", "--backend", "eager"])
    assert onnx_run.returncode == 0 and eager_run.returncode == 0, onnx_run.stderr[-2000:] + eager_run.stderr[-2000:]
    assert imported(onnx_run) == [] and "torch" in imported(eager_run)
    body = lambda text: json.loads(text[text.index("{"):])  # noqa: E731 - after the demo's banner lines
    assert_close(body(onnx_run.stdout)["answers"], body(eager_run.stdout)["answers"])
    # each result names the agent that answered (the published MODEL_NAMEs)
    assert (body(onnx_run.stdout)["model"], body(eager_run.stdout)["model"]) == ("laya-rl-agent-onnx", "laya-rl-agent")


def test_preset_on_the_bundled_path_uses_the_graph_unless_told_otherwise():
    out = run_cli(["refund me", "--preset", "triage", "--model", MINI, "--json"])
    assert out.returncode == 0 and imported(out) == [], out.stderr[-2000:]
    out = run_cli(["refund me", "--preset", "triage", "--model", MINI, "--json", "--backend", "eager"])
    assert out.returncode == 0 and "torch" in imported(out), out.stderr[-2000:]


def test_graph_answers_equal_eager_fp32():
    import laya

    questions = laya.triage_questions()
    graph = laya.load(MINI, backend="onnx", onnx_path="laya.onnx")
    eager = laya.load(MINI, device="cpu")
    got, want = graph.predict_batch(STATES, questions), eager.predict_batch(STATES, questions)
    assert len(got) == len(want) == len(STATES)
    for g, w in zip(got, want):
        assert g["answers"].keys() == questions.keys()
        assert_close(g["answers"], w["answers"])
        assert g["usage"] == w["usage"]


def test_a_relinked_checkpoint_of_another_layout_is_refused(tmp_path):
    import laya

    for name in os.listdir(MINI):
        src = os.path.join(MINI, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, tmp_path / name)
    header, start, _ = onnx_link.read_header(str(tmp_path / "model.safetensors"))
    # same bytes, one tensor renamed: a header of another layout
    raw = (tmp_path / "model.safetensors").read_bytes()
    first = next(iter(header))
    text = raw[8:start].decode().replace(f'"{first}"', f'"{first[:-1]}X"', 1).encode()
    (tmp_path / "model.safetensors").write_bytes(raw[:8] + text + raw[start:])
    with pytest.raises(ValueError, match="another layout"):
        laya.load(str(tmp_path), backend="onnx", onnx_path="laya.onnx")


def test_link_weights_reads_equal_values_and_keeps_the_rest(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float16)
    from safetensors.numpy import save_file

    save_file({"w": w, "b": np.ones(4, np.float16)}, str(tmp_path / "model.safetensors"))
    # the exporter's forms: W^T as a MatMul operand, a copy of b, and an unrelated constant
    inits = [numpy_helper.from_array(w.astype(np.float32).T.copy(), "wt"),
             numpy_helper.from_array(np.ones(4, np.float32), "b"),
             numpy_helper.from_array(np.full(4, 0.5, np.float32), "half")]
    nodes = [helper.make_node("MatMul", ["x", "wt"], ["y0"]), helper.make_node("Add", ["y0", "b"], ["y1"]),
             helper.make_node("Mul", ["y1", "half"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "g.onnx"))
    stats = onnx_link.link_weights(str(tmp_path / "g.onnx"), str(tmp_path / "model.safetensors"))
    assert (stats["linked"], stats["embedded"]) == (2, 1)
    import onnxruntime as ort

    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = ort.InferenceSession(str(tmp_path / "g.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, (x @ w.astype(np.float32).T + 1) * 0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="share a directory"):
        onnx_link.link_weights(str(tmp_path / "g.onnx"), str(tmp_path / "model.safetensors"),
                               str(tmp_path / "sub.onnx").replace("sub.onnx", "x/sub.onnx"))
