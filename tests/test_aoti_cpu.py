"""scripts/check_aoti.py on the CPU with the tiny checkpoint: package, fresh-process load, parity.

The run itself is the session fixture `aoti_check` (tests/conftest.py), shared with the aoti backend
tests so the package is built once. Needs a C++ compiler (AOTInductor compiles the package's
kernels); without one the test is skipped, and the script itself must then report an explicit SKIP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from laya.export import aoti

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check_aoti.py")
needs_compiler = pytest.mark.skipif(aoti.missing_capability("cpu") is not None,
                                    reason=f"AOTInductor on the CPU unavailable: {aoti.missing_capability('cpu')}")


@needs_compiler
def test_check_aoti_cpu(aoti_check):
    proc, out = aoti_check["proc"], aoti_check["out"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["decision.pt2", "eager.pt", "inputs.pt", "results.json"]
    r = json.loads((out / "results.json").read_text())
    assert r["status"] == "pass" and r["dtype"] == "fp32" and r["package_bytes"] > 0
    assert r["fresh_process_imported_laya"] is False
    shapes = [(s["rows"], s["padded_tokens"], s["padded_slots"]) for s in r["request_shapes"]]
    assert len(set(shapes)) == 3 and (3, 64, 4) not in shapes  # none is the export example
    assert all(t % 16 == 0 for _, t, _ in shapes)
    assert any(s["padded_tokens"] > s["tokens"] for s in r["request_shapes"])  # one request was padded
    assert any(len(set(s["live_markers_per_row"])) > 1 for s in r["request_shapes"])  # uneven markers
    for which in ("parity_in_process", "parity_fresh_process"):
        assert len(r[which]) == 3 and all(p["ok"] for p in r[which])
        assert all(p["argmax_agree"] == p["rows"] and p["act_argmax_agree"] == p["rows"] for p in r[which])
        assert max(p["max_abs_prob"] for p in r[which]) < 1e-3
    assert set(r["latency_ms"]["ms"]) == {"explicit_fp32_eager", "aoti_package"}
    info = r["package_info"]  # the record the aoti backend reads back from the package
    assert info["ranges"] == {"rows": [1, 8], "markers": [2, 8], "tokens": [32, 512]} and info["device"] == "cpu"
    assert aoti.read_info(str(out / "decision.pt2")) == info
    parity = r["backend_parity"]  # predict through the aoti backend vs eager, fp32: judged
    assert parity["ok"] and parity["judged"] and parity["backend"] == "aoti"
    assert all(p["answers_agree"] == p["answers"] for p in parity["requests"])


def test_skip_is_explicit(tmp_path):
    """A device the machine lacks is a SKIP (exit 0, status 'skip' with the reason), never a crash."""
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the skip path is not reachable with --device cuda")
    proc = subprocess.run([sys.executable, SCRIPT, "--output-dir", str(tmp_path), "--device", "cuda"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("SKIP: CUDA is not available"), proc.stdout + proc.stderr
    assert json.loads((tmp_path / "results.json").read_text())["status"] == "skip"


def test_fit_inputs_pads_and_refuses():
    ranges = aoti.Ranges()
    ids = torch.ones(2, 37, dtype=torch.long)
    batch = (ids, torch.ones_like(ids), torch.ones(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.bool),
             torch.zeros(2, dtype=torch.long))
    padded = aoti.fit_inputs(batch, ranges, pad_id=0)
    assert padded[0].shape == (2, 48) and padded[1][:, 37:].sum() == 0 and padded[0][:, 37:].sum() == 0
    assert padded[2].shape == (2, 2) and padded[3].tolist() == [[True, False], [True, False]]
    big = (torch.ones(9, 600, dtype=torch.long),) * 2 + (torch.ones(9, 9, dtype=torch.long),) * 2 + (torch.zeros(9),)
    with pytest.raises(ValueError, match=r"rows=9 outside \(1, 8\); tokens=600 above 512; marker slots=9 above 8"):
        aoti.fit_inputs(big, ranges, pad_id=0)
    with pytest.raises(ValueError, match="multiples of 16"):
        aoti.Ranges(tokens=(30, 512))
    with pytest.raises(ValueError, match="one-slot branch"):
        aoti.Ranges(markers=(1, 8))
