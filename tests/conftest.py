"""Shared fixtures: checkpoints in the published layout, built once per test session."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> str:
    """Tiny ModernBERT-shaped checkpoint, real WordPiece tokenizer (CLS/SEP/PAD/MASK 101/102/0/103);
    std 0.3 weights so answers differ clearly between inputs (0.02 gives near-uniform ones)."""
    from make_checkpoint import make_checkpoint

    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny"), "tiny", "wordpiece", seed=7, std=0.3)


@pytest.fixture(scope="session")
def bpe_checkpoint(tmp_path_factory) -> str:
    from make_checkpoint import make_checkpoint

    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny-bpe"), "tiny", "bpe", seed=3, std=0.3)


@pytest.fixture(scope="session")
def agent(tiny_checkpoint):
    import laya

    return laya.load(tiny_checkpoint, device="cpu")


@pytest.fixture(scope="session")
def tok(agent):
    return agent.tok


@pytest.fixture(scope="session")
def aoti_check(tiny_checkpoint, tmp_path_factory) -> dict:
    """scripts/check_aoti.py on the CPU with `tiny_checkpoint`, run once per session (packaging costs
    ~40 s on 2 cores): {"proc", "out", "package"}. tests/test_aoti_cpu.py judges the run, the aoti
    backend tests (tests/test_aoti_backend.py) serve its decision.pt2. Skips without a C++ compiler."""
    import subprocess

    from laya.export import aoti

    reason = aoti.missing_capability("cpu")
    if reason is not None:
        pytest.skip(f"AOTInductor on the CPU unavailable: {reason}")
    tmp = tmp_path_factory.mktemp("aoti")
    out = tmp / "check"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor-cache"))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_aoti.py"), "--output-dir", str(out),
                           "--model", tiny_checkpoint, "--device", "cpu", "--groups", "2", "--repeats", "3",
                           "--warmup", "1"], capture_output=True, text=True, env=env, timeout=900)
    return {"proc": proc, "out": out, "package": str(out / "decision.pt2")}


@pytest.fixture(scope="session")
def aoti_package(aoti_check) -> str:
    """The tiny checkpoint's CPU package (fp32, rows 1-8, marker slots 2-8, tokens 32-512)."""
    proc = aoti_check["proc"]
    if proc.returncode != 0 or not os.path.isfile(aoti_check["package"]):
        pytest.fail("scripts/check_aoti.py did not produce a package:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    return aoti_check["package"]


@pytest.fixture(scope="session")
def onnx_graph(tiny_checkpoint, agent, tmp_path_factory) -> str:
    """The tiny checkpoint exported once per session with the default (dynamo) exporter."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from laya.export import onnx as export

    path = str(tmp_path_factory.mktemp("onnx") / "laya.onnx")
    return export.export_module(agent.model, path)
