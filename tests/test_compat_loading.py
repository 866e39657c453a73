"""compat-0.4.15 §16: load-error texts, device warnings, revisions (R-LOAD-1..3) and digests (R-DIG-1)."""

import hashlib
import json
import os
import re
import shutil
import warnings

import pytest

from laya import revisions
from laya.revisions import REVIEWED, resolve_revision, snapshot_revision, verify_digests

SHA = "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851"


def copy_checkpoint(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


# ---- R-LOAD-1 ----------------------------------------------------------------------------------

def test_missing_local_path_text(tmp_path):
    import laya

    for path in ("./nope/dir", "../nope/dir", str(tmp_path / "absent")):
        with pytest.raises(FileNotFoundError) as e:
            laya.load(path)
        assert str(e.value) == (f"Local model path not found: {path!r}. Check that the directory exists and "
                                "that training saved the model successfully.")


def test_subfolder_config_weights_and_temperature_texts(tiny_checkpoint, tmp_path):
    import laya

    with pytest.raises(FileNotFoundError) as e:
        laya.load(tiny_checkpoint, subfolder="x")
    assert str(e.value) == f"Subfolder 'x' not found in {tiny_checkpoint!r}."
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError) as e:
        laya.load(str(empty))
    assert str(e.value) == (
        f"Incompatible model: {str(empty)!r} does not contain 'rl_agent_config.json'. That file ships with the "
        "weights of a Laya checkpoint, so load one of those (e.g. 'convaiinnovations/laya') or a directory your "
        "own training run wrote.")
    no_w = copy_checkpoint(tiny_checkpoint, tmp_path / "no-w")
    os.remove(os.path.join(no_w, "model.safetensors"))
    with pytest.raises(FileNotFoundError) as e:
        laya.load(no_w)
    assert str(e.value) == f"Incompatible model: 'model.safetensors' not found in {no_w!r}."
    bad_t = copy_checkpoint(tiny_checkpoint, tmp_path / "bad-t")
    cfg_path = os.path.join(bad_t, "rl_agent_config.json")
    cfg = json.load(open(cfg_path))
    cfg["temperature"] = [1.0, 1.0]
    json.dump(cfg, open(cfg_path, "w"))
    with pytest.raises(ValueError) as e:
        laya.load(bad_t)
    assert str(e.value) == f"Incompatible model: {bad_t!r} temperature must be a list of 3 floats, got [1.0, 1.0]"
    cfg["temperature"] = None  # present but null: not the default list (reference §1.3 step 16)
    json.dump(cfg, open(cfg_path, "w"))
    with pytest.raises(ValueError) as e:
        laya.load(bad_t)
    assert str(e.value) == f"Incompatible model: {bad_t!r} temperature must be a list of 3 floats, got None"


def test_unusable_temperature_entries_are_clamped_with_the_load_warning(tiny_checkpoint, tmp_path):
    # §3.8: bools and non-numbers -> 1.0, listed in the one load warning; the list shape alone is checked
    import laya

    odd = copy_checkpoint(tiny_checkpoint, tmp_path / "odd-t")
    cfg_path = os.path.join(odd, "rl_agent_config.json")
    cfg = json.load(open(cfg_path))
    cfg["temperature"] = [True, "x", 2.0]
    json.dump(cfg, open(cfg_path, "w"))
    with pytest.warns(RuntimeWarning, match=r"temperature\[0\]=True -> 1, temperature\[1\]='x' -> 1"):
        agent = laya.load(odd, device="cpu")
    assert agent.temperature == [1.0, 1.0, 2.0] and agent.temperature_raw == [True, "x", 2.0]


def test_clamp_temperature_takes_numpy_numbers():
    import numpy as np

    from laya.answers import clamp_temperature, temperature_rejected

    assert clamp_temperature(np.float64(0.7)) == 0.7 and clamp_temperature(np.int64(3)) == 3.0
    assert clamp_temperature(np.float32(9.0)) == 5.0 and clamp_temperature(np.bool_(True)) == 1.0
    assert not temperature_rejected(np.float64(0.7), 0.7) and temperature_rejected(np.bool_(True), 1.0)


# ---- R-LOAD-2 ----------------------------------------------------------------------------------

def test_device_fallback_warnings(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    from laya.device import precision_policy, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(RuntimeWarning) as w:
        assert resolve_device("cuda") == torch.device("cpu")
    assert str(w[0].message) == "Warning: CUDA requested but not available. Falling back to CPU."
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.warns(RuntimeWarning) as w:
        assert resolve_device("cuda:99") == torch.device("cpu")
    assert str(w[0].message) == "Warning: CUDA device cuda:99 not found (1 visible). Falling back to CPU."
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.warns(RuntimeWarning) as w:
        resolve_device("mps")
    assert str(w[0].message) == "Warning: MPS requested but not available. Falling back to CPU."
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
        with pytest.warns(RuntimeWarning) as w:
            resolve_device("xpu")
        assert str(w[0].message) == "Warning: XPU requested but not available. Falling back to CPU."

    def fail(device=None):
        raise RuntimeError("driver")
    monkeypatch.setattr(torch.cuda, "get_device_capability", fail)
    with pytest.warns(RuntimeWarning) as w:
        p = precision_policy(torch.device("cuda"), {})
    assert p.dtype == torch.float16 and p.amp_enabled
    assert str(w[0].message) == "Warning: could not query CUDA capability; assuming fp16 defaults."
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device(" Auto ").type in ("cpu", "mps", "xpu")
    assert capsys.readouterr().out == ""


# ---- R-LOAD-3 ----------------------------------------------------------------------------------

def test_hub_download_passes_revision_only_when_one_applies(tiny_checkpoint, tmp_path, monkeypatch):
    import huggingface_hub

    from laya.checkpoint import resolve_checkpoint_dir

    snap = tmp_path / "models--o--r" / "snapshots" / ("a" * 40)
    copy_checkpoint(tiny_checkpoint, snap)
    calls = []

    def fake(repo_id, **kwargs):
        calls.append(kwargs)
        return str(snap)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.delenv("LAYA_REVISION", raising=False)
    path, rev = resolve_checkpoint_dir("o/r")
    assert "revision" not in calls[-1] and rev == "a" * 40 and path == str(snap)
    resolve_checkpoint_dir("o/r", revision="abc")
    assert calls[-1]["revision"] == "abc"
    monkeypatch.setenv("LAYA_REVISION", "reviewed")
    resolve_checkpoint_dir("convaiinnovations/laya")
    assert calls[-1]["revision"] == SHA
    monkeypatch.delenv("LAYA_REVISION")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: tiny_checkpoint)
    assert resolve_checkpoint_dir("o/r", revision="v1")[1] == "v1"  # no snapshots path: the requested one


def test_local_directory_reports_the_requested_revision(tiny_checkpoint, tmp_path):
    from laya.checkpoint import resolve_checkpoint_dir

    assert resolve_checkpoint_dir(tiny_checkpoint, revision=" v7 ")[1] == "v7"
    assert resolve_checkpoint_dir(tiny_checkpoint)[1] is None
    snap = tmp_path / "snapshots" / ("b" * 40)
    copy_checkpoint(tiny_checkpoint, snap)
    assert resolve_checkpoint_dir(str(snap), revision="v7")[1] == "b" * 40  # the snapshot SHA wins


# ---- R-DIG-1 -----------------------------------------------------------------------------------

def test_resolve_revision_rules(monkeypatch):
    assert REVIEWED == "reviewed"
    monkeypatch.setenv("LAYA_REVISION", " main ")
    assert resolve_revision("x/y") == "main"
    assert resolve_revision("x/y", None) == "main" and resolve_revision("x/y", "") == "main"
    assert resolve_revision("x/y", "   ") is None
    assert resolve_revision("x/y", " v2 ") == "v2"
    assert resolve_revision("ConvAIInnovations/LAYA", "reviewed") == SHA
    assert resolve_revision("convaiinnovations/laya", "Reviewed") == "Reviewed"  # exact spelling only
    with pytest.raises(ValueError, match=r"revision="):
        resolve_revision("x/y", "reviewed")
    monkeypatch.setenv("LAYA_REVISION", "reviewed")
    with pytest.raises(ValueError, match=r"LAYA_REVISION=reviewed"):
        resolve_revision("x/y")


def test_snapshot_revision(tmp_path):
    snap = tmp_path / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    assert snapshot_revision(str(snap)) == "abc123"
    assert snapshot_revision(str(snap) + "/") == "abc123"
    assert snapshot_revision(str(tmp_path)) is None
    link = tmp_path / "link"
    link.symlink_to(snap)
    assert snapshot_revision(str(link)) == "abc123"  # the real path counts


def test_verify_digests(tmp_path, monkeypatch):
    (tmp_path / "a.json").write_bytes(b"{}")
    (tmp_path / "m.onnx").write_bytes(b"graph")
    good = hashlib.sha256(b"{}").hexdigest()
    monkeypatch.delenv("LAYA_SHA256_DIGESTS", raising=False)
    verify_digests(str(tmp_path))  # nothing to check
    verify_digests(str(tmp_path), {"a.json": good.upper()})  # case-insensitive
    verify_digests(str(tmp_path), {"onnx": hashlib.sha256(b"graph").hexdigest()}, onnx_path="m.onnx")
    with pytest.raises(ValueError, match=r"^laya: SHA-256 mismatch for /.*m\.onnx: "):
        verify_digests(str(tmp_path), {"onnx_path": good}, onnx_path=str(tmp_path / "m.onnx"))
    with pytest.raises(ValueError) as e:
        verify_digests(str(tmp_path), {"a.json": "0" * 64})
    assert str(e.value).startswith(f"laya: SHA-256 mismatch for a.json: expected {'0' * 64}, got {good}.")
    with pytest.raises(ValueError, match=r"^expected_sha256 must be a mapping of artifact paths to digests$"):
        verify_digests(str(tmp_path), ["a.json"])
    from types import MappingProxyType

    verify_digests(str(tmp_path), MappingProxyType({"a.json": good}))  # any mapping, not only a dict
    with pytest.raises(ValueError, match=r"^laya: unsafe absolute path in expected digests: '/etc/x'$"):
        verify_digests(str(tmp_path), {"/etc/x": good})
    with pytest.raises(ValueError, match=r"^laya: unsafe path in expected digests: '\.\./x'$"):
        verify_digests(str(tmp_path), {"../x": good})
    with pytest.raises(FileNotFoundError) as e:
        verify_digests(str(tmp_path), {"x": good})
    assert str(e.value) == f"laya: cannot verify 'x': no such file under {tmp_path}"
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", "{not json")
    with pytest.raises(ValueError, match=r"^LAYA_SHA256_DIGESTS must be a JSON object of artifact->sha256$"):
        verify_digests(str(tmp_path))
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"a.json": "f" * 64}))
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        verify_digests(str(tmp_path))
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"english": {"a.json": "f" * 64}}))
    verify_digests(str(tmp_path))  # a model-keyed map is the Router's, not file names


def test_verify_digests_follows_the_links_of_a_hub_cache_snapshot(tmp_path):
    # snapshots/<sha>/ holds links into ../../blobs/: a key is checked against its place in the snapshot, not
    # the blob's, and the bytes behind the link are hashed (R-DIG-1)
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshots" / "0123abcd"
    blobs.mkdir()
    snap.mkdir(parents=True)
    (blobs / "f00d").write_bytes(b"{}")
    (snap / "rl_agent_config.json").symlink_to(os.path.join("..", "..", "blobs", "f00d"))
    good = hashlib.sha256(b"{}").hexdigest()
    verify_digests(str(snap), {"rl_agent_config.json": good})
    with pytest.raises(ValueError, match="SHA-256 mismatch for rl_agent_config.json"):
        verify_digests(str(snap), {"rl_agent_config.json": "0" * 64})
    with pytest.raises(ValueError, match=r"^laya: unsafe path in expected digests: '\.\./\.\./blobs/f00d'$"):
        verify_digests(str(snap), {"../../blobs/f00d": good})


def test_revisions_module_is_torch_free():
    import subprocess
    import sys

    probe = "import sys, laya.revisions; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert set(revisions.PINNED_REVISIONS) >= {"convaiinnovations/laya"}
    assert re.fullmatch(r"[0-9a-f]{40}", revisions.PINNED_REVISIONS["convaiinnovations/laya"])


def test_load_forwards_backend_and_aoti_path_only_when_given(monkeypatch):
    import laya.agent

    seen = []

    class Recorder:
        def __init__(self, model_id_or_path, **kwargs):
            seen.append(kwargs)
    monkeypatch.setattr(laya.agent, "Agent", Recorder)
    laya.agent.load("./some/dir")
    assert "backend" not in seen[-1] and "aoti_path" not in seen[-1]
    laya.agent.load("./some/dir", backend="eager")
    assert seen[-1]["backend"] == "eager" and "aoti_path" not in seen[-1]


# ---- R-DIG-2 -----------------------------------------------------------------------------------

def test_router_reads_bad_digest_env_with_the_published_text(monkeypatch):
    from laya.router import Router

    monkeypatch.setenv("LAYA_SHA256_DIGESTS", "{not json")
    with pytest.raises(ValueError, match=r"^LAYA_SHA256_DIGESTS must be a JSON object of artifact->sha256$"):
        Router()
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"english": {"a": "f" * 64}, "b": "f" * 64}))
    with pytest.raises(ValueError):
        Router()  # a mixed map
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"a": "f" * 64}))
    r = Router(sha256_digests={"ml": {}, "english": None})
    assert r._load_arguments("english")["expected_sha256"] == {}  # masks the flat env
    assert "expected_sha256" not in r._load_arguments("typed-decisions")
