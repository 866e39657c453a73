"""`pip wheel .` builds a wheel that carries laya-mini and declares the extras."""

import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_carries_laya_mini_and_extras(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    with zipfile.ZipFile(tmp_path / wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for rel in ("rl_agent_config.json", "model.safetensors", "tokenizer/tokenizer.json",
                "tokenizer/tokenizer_config.json", "encoder/config.json"):
        assert f"laya/laya_mini/{rel}" in names, rel
    assert not [n for n in names if n.startswith("laya/demo_checkpoint/")]  # the random checkpoint it replaced
    for extra in ("fast", "onnx", "serve", "dev", "mcp", "langchain", "structured", "langgraph", "llamaindex",
                  "crewai", "agno"):
        assert f"Provides-Extra: {extra}" in meta
    assert 'pydantic>=2; extra == "structured"' in meta
    assert 'agno<2; extra == "agno"' in meta
    assert 'tilelang==0.1.15; extra == "fast"' in meta
    assert "Requires-Python: >=3.10" in meta
    assert "laya = laya.cli:main" in entry
    for script in ("laya-train = laya.train.cli:main", "laya-evals = laya.evals_cli:main",
                   "laya-mcp-server = laya.mcp.server:main", "laya-serve = laya.serve:main"):
        assert script in entry, script
